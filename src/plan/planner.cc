#include "plan/planner.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/strings.h"
#include "plan/lexer.h"
#include "spec/expand.h"
#include "spec/spec_parser.h"
#include "spec/yaml_fields.h"

namespace drover {
namespace {

using plan::Tok;
using plan::Token;

constexpr size_t kNone = static_cast<size_t>(-1);
constexpr int kUrgentPriority = 10;
constexpr int kLowPriority = -10;
constexpr int kMaxPriority = 1'000'000;  // the planner's bound on "priority N"
constexpr size_t kMaxValues = 100;  // more values than this in one sweep is surely a slip

// Kinds that, left unused, are reported as ignored; the rest are filler or glue.
bool Reportable(Tok k) {
  switch (k) {
    case Tok::kNumber: case Tok::kParam: case Tok::kChoice: case Tok::kMetric:
    case Tok::kUnknown: case Tok::kValues: case Tok::kLog: case Tok::kLinear: case Tok::kStep:
    case Tok::kRepeat: case Tok::kTimes: case Tok::kGpu: case Tok::kPriority:
      return true;
    default:
      return false;
  }
}

std::string ValueText(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string JoinValues(const std::vector<Json>& values) {
  std::vector<std::string> parts;
  for (const Json& v : values) parts.push_back(ValueText(v));
  return Join(parts, ", ");
}

// A float rounded to 10 significant digits, so 10^-3 computed as a power reads 0.001.
// A count read from the instruction as an integer, saturated: a cast of a double past int64 (or
// of NaN) is undefined behaviour, and whoever takes the count refuses a saturated one as too big.
int64_t CountOf(double v) {
  if (!(std::fabs(v) <= 1e15)) return v < 0 ? std::numeric_limits<int64_t>::min()
                                            : std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

double Round10(double v) { return std::strtod(fmt::format("{:.10g}", v).c_str(), nullptr); }

bool IsPowerOfTwo(double v) {
  // Past 2^63 the cast would be undefined; no batch size is that big.
  if (!(v >= 1 && v <= 9.2e18) || v != std::floor(v)) return false;
  auto u = static_cast<uint64_t>(v);
  return (u & (u - 1)) == 0;
}

struct Setting {
  std::vector<Json> values;
  std::vector<size_t> from;  // the tokens it was read from
  std::string note;          // "log-spaced", "3 repeats"
};

class Planner {
 public:
  Planner(const Recipe& recipe, std::string_view instruction)
      : r_(recipe), instruction_(instruction), n_(plan::Normalize(instruction)) {
    toks_ = plan::Lex(recipe, n_);
    params_.resize(recipe.params.size());
    for (size_t p = 0; p < recipe.params.size(); ++p) {
      const RecipeParam& param = recipe.params[p];
      // Repeats vary the seed: the first int parameter called seed (or with such an alias).
      bool seedish = param.name == "seed" || param.name == "seeds" ||
                     HasAlias(param, "seed") || HasAlias(param, "random seed") ||
                     HasAlias(param, "随机种子") || HasAlias(param, "种子");
      if (seedish && seed_ < 0 && param.type == "int") seed_ = static_cast<int>(p);
    }
  }

  Result<Plan> Run();

 private:
  static bool HasAlias(const RecipeParam& p, std::string_view alias) {
    return std::find(p.aliases.begin(), p.aliases.end(), alias) != p.aliases.end();
  }

  bool Is(size_t i, Tok k) const { return i < toks_.size() && toks_[i].kind == k; }
  bool IsFree(size_t i, Tok k) const { return Is(i, k) && !toks_[i].used; }
  // The first index from i whose kind is not in `skip`.
  size_t Skip(size_t i, std::initializer_list<Tok> skip) const {
    while (i < toks_.size() &&
           std::find(skip.begin(), skip.end(), toks_[i].kind) != skip.end()) {
      ++i;
    }
    return i;
  }
  size_t SkipBack(size_t i, std::initializer_list<Tok> skip) const {  // i may be kNone
    while (i != kNone && std::find(skip.begin(), skip.end(), toks_[i].kind) != skip.end()) --i;
    return i;
  }
  // Marks [from, to) as read, except words nobody knows: those are always reported.
  void Use(size_t from, size_t to, std::vector<size_t>* into) {
    for (size_t i = from; i < to && i < toks_.size(); ++i) {
      if (toks_[i].kind == Tok::kUnknown) continue;
      toks_[i].used = true;
      if (into) into->push_back(i);
    }
  }

  // A number that belongs to what follows it ("10 epochs", "2 GPUs", "3 times"), so a list
  // before it stops there.
  bool BoundForward(size_t i) const;

  Result<Json> ValueFor(int p, const Token& t) const;
  // Whether a number can be a value of parameter p (a choice only if it has numeric choices).
  bool TakesNumbers(int p) const {
    const RecipeParam& param = r_.params[p];
    if (param.type != "choice") return true;
    return std::any_of(param.choices.begin(), param.choices.end(),
                       [](const Json& c) { return c.is_number(); });
  }
  Status SetCount(int p, int64_t count, size_t b, size_t e, std::string note);

  Status ReadRepeats();
  // The values after the parameter named at toks_[at]. `loose` also steps over words it does
  // not know ("学习率下的表现：0.1，0.01"); those stay reported as ignored.
  Status ReadAfter(size_t at, bool loose = false);
  Status ReadRange(int p, size_t lo, size_t at, Setting& s);
  Status ReadBefore(size_t at);  // the values before it ("10 epochs", "3 seeds")
  Status ReadChoices();
  Status Settle(std::optional<int>& setting, std::vector<size_t>& from, int value, size_t b,
                size_t e, std::string_view what);
  Status ReadPriority();
  Status ReadGpus();
  void ReadMetric();

  std::string Quote(size_t b, size_t e) const {
    return std::string(instruction_.substr(n_.orig[b], n_.orig[e] - n_.orig[b]));
  }
  std::string QuoteTokens(std::vector<size_t> idx) const;
  std::vector<std::string> Ignored() const;
  std::string Knows() const;
  Result<Plan> Build();

  const Recipe& r_;
  std::string_view instruction_;
  plan::Normalized n_;
  std::vector<Token> toks_;
  std::vector<Setting> params_;
  std::vector<bool> has_after_;  // per token: a parameter that read values after itself
  int seed_ = -1;
  std::optional<int> metric_;
  std::vector<size_t> metric_from_;
  std::optional<int> gpus_;
  std::vector<size_t> gpus_from_;
  std::optional<int> priority_;
  std::vector<size_t> priority_from_;
  std::vector<std::string> notes_;  // understood phrases that are not settings (typo fixes)
};

bool Planner::BoundForward(size_t i) const {
  size_t j = Skip(i + 1, {Tok::kMeasure, Tok::kAdj});
  if (j >= toks_.size()) return false;
  switch (toks_[j].kind) {
    case Tok::kParam:
      return !has_after_[j];
    case Tok::kGpu: case Tok::kTimes: case Tok::kValues: case Tok::kStep: case Tok::kLog:
    case Tok::kLinear:
      return true;
    default:
      return false;
  }
}

Result<Json> Planner::ValueFor(int p, const Token& t) const {
  const RecipeParam& param = r_.params[p];
  std::string text = Quote(t.begin, t.end);
  if (param.type == "int") {
    if (t.num != std::floor(t.num) || std::fabs(t.num) > 9e15) {
      return InvalidArgument(fmt::format("{} takes whole numbers, but the instruction gives '{}'",
                                         param.name, text));
    }
    return Json(static_cast<int64_t>(std::llround(t.num)));
  }
  if (param.type == "float") return Json(t.num);
  if (param.type == "string") return Json(t.text);
  for (const Json& c : param.choices) {
    if (c.is_number() && c.get<double>() == t.num) return c;
  }
  return InvalidArgument(fmt::format("{} is one of {}; '{}' is not", param.name,
                                     JoinValues(param.choices), text));
}

Status Planner::SetCount(int p, int64_t count, size_t b, size_t e, std::string note) {
  if (p < 0) {
    return InvalidArgument(fmt::format(
        "'{}' asks for repeats, but the recipe {} has no seed parameter to vary; add one such "
        "as 'seed: {{type: int, default: 0}}' and pass it to the command",
        Quote(toks_[b].begin, toks_[e - 1].end), r_.source));
  }
  if (count < 1 || count > static_cast<int64_t>(kMaxValues)) {
    return InvalidArgument(fmt::format("'{}': the number of repeats must be 1 to {}",
                                       Quote(toks_[b].begin, toks_[e - 1].end), kMaxValues));
  }
  Setting& s = params_[p];
  s.values.clear();
  for (int64_t k = 0; k < count; ++k) s.values.push_back(Json(k));
  s.note = std::move(note);
  Use(b, e, &s.from);
  return Status::Ok();
}

// "repeat 3 times", "3 times", "twice", "重复3次".
Status Planner::ReadRepeats() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (toks_[i].used) continue;
    if (Is(i, Tok::kTimes)) {
      size_t b = i;
      int64_t count = 0;
      if (toks_[i].num > 0) {
        count = CountOf(toks_[i].num);
      } else {
        size_t k = SkipBack(i - 1, {Tok::kMeasure});
        if (k == kNone || !IsFree(k, Tok::kNumber) || !toks_[k].integral) continue;
        count = CountOf(toks_[k].num);
        b = k;
      }
      size_t r = SkipBack(b - 1, {Tok::kFiller, Tok::kEach});
      if (r != kNone && IsFree(r, Tok::kRepeat)) b = r;
      DROVER_RETURN_IF_ERROR(SetCount(seed_, count, b, i + 1, fmt::format("{} repeats", count)));
    } else if (Is(i, Tok::kRepeat)) {
      size_t k = Skip(i + 1, {Tok::kFiller, Tok::kEach, Tok::kAssign});
      if (!IsFree(k, Tok::kNumber) || !toks_[k].integral) continue;
      size_t e = k + 1;
      if (IsFree(e, Tok::kTimes) && toks_[e].num == 0) ++e;
      auto count = CountOf(toks_[k].num);
      DROVER_RETURN_IF_ERROR(SetCount(seed_, count, i, e, fmt::format("{} repeats", count)));
    }
  }
  return Status::Ok();
}

Status Planner::ReadAfter(size_t at, bool loose) {
  const int p = toks_[at].index;
  const RecipeParam& param = r_.params[p];
  bool assigned = false;
  size_t j = at + 1;
  for (; j < toks_.size(); ++j) {
    Tok k = toks_[j].kind;
    bool skip_loose = loose && !toks_[j].used &&
                      (k == Tok::kFiller || k == Tok::kUnknown || k == Tok::kAdj ||
                       k == Tok::kEach || k == Tok::kPunct);
    if (k == Tok::kAssign) {
      assigned = true;
    } else if (k != Tok::kOpen && k != Tok::kFrom && k != Tok::kBetween && !skip_loose) {
      break;
    }
  }
  if (loose && !Is(j, Tok::kNumber)) return Status::Ok();
  if (j >= toks_.size()) return Status::Ok();
  Setting found;
  found.from.push_back(at);

  if (IsFree(j, Tok::kNumber) && !BoundForward(j) && TakesNumbers(p)) {
    // A range: 1e-4 to 1e-2, 10-30, between 16 and 128.
    bool between = j > 0 && Is(j - 1, Tok::kBetween);
    if ((Is(j + 1, Tok::kTo) || (between && Is(j + 1, Tok::kSep))) &&
        IsFree(j + 2, Tok::kNumber)) {
      Use(at + 1, j, &found.from);
      DROVER_RETURN_IF_ERROR(ReadRange(p, j, j + 3, found));
    } else {
      // A list: 32, 64 / 32 and 64 / 32 64 / [32, 64].
      size_t last = j;
      for (size_t k = j; k < toks_.size();) {
        if (!IsFree(k, Tok::kNumber) || (k != j && BoundForward(k))) break;
        DROVER_ASSIGN_OR_RETURN(Json v, ValueFor(p, toks_[k]));
        if (std::find(found.values.begin(), found.values.end(), v) == found.values.end()) {
          found.values.push_back(v);
        }
        last = k;
        k = Skip(k + 1, {Tok::kSep, Tok::kOpen});
      }
      if (Is(last + 1, Tok::kClose)) ++last;
      Use(at + 1, last + 1, &found.from);
    }
  } else if (Is(j, Tok::kUnknown) && assigned && (param.type == "string" || param.type == "choice")) {
    if (param.type == "choice") {
      std::vector<std::string> names;
      for (const Json& c : param.choices) names.push_back(ValueText(c));
      std::string word = toks_[j].text;
      std::optional<std::string> close = ClosestMatch(word, names);
      return InvalidArgument(fmt::format(
          "{} '{}' is not in the recipe; {}{} is one of {}", param.name,
          Quote(toks_[j].begin, toks_[j].end),
          close ? fmt::format("did you mean '{}'? ", *close) : "", param.name, Join(names, ", ")));
    }
    size_t last = j;
    for (size_t k = j; IsFree(k, Tok::kUnknown);) {
      found.values.push_back(Json(Quote(toks_[k].begin, toks_[k].end)));
      last = k;
      k = Skip(k + 1, {Tok::kSep});
    }
    Use(at + 1, last + 1, &found.from);
  }
  if (found.values.empty()) return Status::Ok();
  has_after_[at] = true;
  toks_[at].used = true;
  Setting& s = params_[p];
  for (Json& v : found.values) {
    if (std::find(s.values.begin(), s.values.end(), v) == s.values.end()) s.values.push_back(v);
  }
  s.from.insert(s.from.end(), found.from.begin(), found.from.end());
  if (!found.note.empty()) s.note = found.note;
  return Status::Ok();
}

// toks_[lo] and toks_[lo + 2] are the ends; `at` is where modifiers may start: ", 3 log-spaced
// values", "取3个值", "step 10", "(3 values, log scale)".
Status Planner::ReadRange(int p, size_t lo, size_t at, Setting& s) {
  const RecipeParam& param = r_.params[p];
  const Token& a = toks_[lo];
  const Token& b = toks_[lo + 2];
  std::string text = Quote(a.begin, b.end);
  if (param.type != "int" && param.type != "float") {
    return InvalidArgument(fmt::format("'{}' is a range, but {} is not a number parameter",
                                       text, param.name));
  }
  int64_t count = 0;
  double step = 0;
  bool log = false, linear = false;
  size_t confirmed = at;  // modifiers read up to here
  for (size_t k = at; k < toks_.size(); ++k) {
    Tok kind = toks_[k].kind;
    if (kind == Tok::kLog || kind == Tok::kLinear) {
      (kind == Tok::kLog ? log : linear) = true;
      confirmed = k + 1;
    } else if (kind == Tok::kNumber && !toks_[k].used && count == 0) {
      size_t v = Skip(k + 1, {Tok::kMeasure, Tok::kLog, Tok::kLinear, Tok::kFiller});
      if (!Is(v, Tok::kValues) && !Is(v, Tok::kStep)) break;
      if (!toks_[k].integral) break;
      count = CountOf(toks_[k].num);
      for (size_t m = k + 1; m < v; ++m) {
        if (toks_[m].kind == Tok::kLog) log = true;
        if (toks_[m].kind == Tok::kLinear) linear = true;
      }
      k = v;
      confirmed = v + 1;
    } else if (kind == Tok::kStep) {
      size_t v = Skip(k + 1, {Tok::kAssign, Tok::kFiller});
      if (!IsFree(v, Tok::kNumber) || toks_[v].num <= 0) break;
      step = toks_[v].num;
      k = v;
      confirmed = v + 1;
    } else if (kind == Tok::kSep || kind == Tok::kFiller || kind == Tok::kOpen ||
               kind == Tok::kClose || kind == Tok::kAssign || kind == Tok::kEach ||
               kind == Tok::kValues) {
      if (kind == Tok::kClose || kind == Tok::kValues) confirmed = std::max(confirmed, k + 1);
      continue;
    } else {
      break;
    }
  }
  // Trailing glue that led to nothing stays unused (a filler word is never reported anyway).
  Use(lo, lo + 3, &s.from);
  Use(at, confirmed, &s.from);

  double x = a.num, y = b.num;
  std::vector<double> values;
  if (count > 0) {
    if (count < 2 || count > static_cast<int64_t>(kMaxValues)) {
      return InvalidArgument(fmt::format("'{}': ask for 2 to {} values", text, kMaxValues));
    }
    bool geometric = log || (!linear && param.type == "float" && x > 0 && y > 0 &&
                             std::max(x, y) / std::min(x, y) >= 10);
    if (geometric && (x <= 0 || y <= 0)) {
      return InvalidArgument(fmt::format("'{}': log spacing needs both ends above 0", text));
    }
    for (int64_t i = 0; i < count; ++i) {
      double f = static_cast<double>(i) / static_cast<double>(count - 1);
      values.push_back(geometric ? x * std::pow(y / x, f) : x + (y - x) * f);
    }
    s.note = geometric ? "log-spaced" : "evenly spaced";
  } else if (step > 0) {
    double dir = y >= x ? 1 : -1;
    for (double v = x; dir * (y - v) >= -1e-9 * std::max(1.0, std::fabs(y)); v += dir * step) {
      values.push_back(v);
      if (values.size() > kMaxValues) {
        return InvalidArgument(fmt::format("'{}': that step gives more than {} values; use a "
                                           "larger step",
                                           text, kMaxValues));
      }
    }
    s.note = fmt::format("step {}", step);
  } else if (param.type == "int" && !linear && IsPowerOfTwo(x) && IsPowerOfTwo(y) &&
             std::max(x, y) / std::min(x, y) >= 4) {
    for (double v = std::min(x, y); v <= std::max(x, y); v *= 2) values.push_back(v);
    if (y < x) std::reverse(values.begin(), values.end());
    s.note = "powers of two";
  } else if (param.type == "int" && std::fabs(y - x) < 10 && x == std::floor(x) &&
             y == std::floor(y)) {
    double dir = y >= x ? 1 : -1;
    for (double v = x; dir * (y - v) >= 0; v += dir) values.push_back(v);
  } else {
    return InvalidArgument(fmt::format(
        "'{}' is a range for {}; say how many values ('{}, 3 values', '取3个值') or the step "
        "('step 10')",
        text, param.name, text));
  }
  for (double v : values) {
    Token t;
    t.num = param.type == "int" ? std::round(v) : Round10(v);
    t.text = fmt::format("{}", t.num);
    t.begin = a.begin;
    t.end = b.end;
    DROVER_ASSIGN_OR_RETURN(Json j, ValueFor(p, t));
    if (std::find(s.values.begin(), s.values.end(), j) == s.values.end()) s.values.push_back(j);
  }
  return Status::Ok();
}

Status Planner::ReadBefore(size_t at) {
  const int p = toks_[at].index;
  if (has_after_[at] || (p == seed_ && !params_[p].values.empty())) return Status::Ok();
  if (!TakesNumbers(p)) return Status::Ok();  // "四种模型" counts models, it names none
  size_t k = SkipBack(at - 1, {Tok::kMeasure, Tok::kAdj});
  if (k == kNone || !IsFree(k, Tok::kNumber)) return Status::Ok();
  if (p == seed_) {  // "3 seeds" is a count, "seed 3" a value
    if (!toks_[k].integral) return Status::Ok();
    // Past kMaxValues SetCount refuses it; past int64 the cast itself would be undefined.
    auto count = CountOf(toks_[k].num);
    DROVER_RETURN_IF_ERROR(SetCount(p, count, k, at + 1, fmt::format("{} seeds", count)));
    return Status::Ok();
  }
  // Walk back over a list: "32 and 64 batch sizes".
  size_t first = k;
  for (size_t m = SkipBack(k - 1, {Tok::kSep}); m != kNone && IsFree(m, Tok::kNumber);
       m = SkipBack(m - 1, {Tok::kSep})) {
    first = m;
  }
  Setting& s = params_[p];
  for (size_t m = first; m <= k; ++m) {
    if (!Is(m, Tok::kNumber)) continue;
    DROVER_ASSIGN_OR_RETURN(Json v, ValueFor(p, toks_[m]));
    if (std::find(s.values.begin(), s.values.end(), v) == s.values.end()) s.values.push_back(v);
  }
  Use(first, at + 1, &s.from);
  return Status::Ok();
}

Status Planner::ReadChoices() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    Token& t = toks_[i];
    if (t.used) continue;
    if (t.kind == Tok::kUnknown && t.text.size() >= 5 &&
        static_cast<unsigned char>(t.text[0]) < 0x80) {
      // A near miss of a choice ("efficentnet") is read as that choice, and said so.
      for (size_t p = 0; p < r_.params.size() && t.kind == Tok::kUnknown; ++p) {
        for (size_t c = 0; c < r_.params[p].choices.size(); ++c) {
          std::string choice = plan::Squash(ValueText(r_.params[p].choices[c]));
          size_t limit = choice.size() >= 9 ? 2 : 1;
          if (choice.size() >= 5 && EditDistance(plan::Squash(t.text), choice) <= limit) {
            t.kind = Tok::kChoice;
            t.index = static_cast<int>(p);
            t.choice = static_cast<int>(c);
            notes_.push_back(fmt::format("read '{}' as {}", Quote(t.begin, t.end),
                                         ValueText(r_.params[p].choices[c])));
            break;
          }
        }
      }
    }
    if (t.kind != Tok::kChoice) continue;
    Setting& s = params_[t.index];
    const Json& v = r_.params[t.index].choices[t.choice];
    if (std::find(s.values.begin(), s.values.end(), v) == s.values.end()) s.values.push_back(v);
    t.used = true;
    s.from.push_back(i);
  }
  return Status::Ok();
}

// One priority (and below, one GPU count) per instruction: a second that differs ("urgent, low
// priority", "on cpu with 2 GPUs") is a contradiction for the user to settle, never a silent pick.
Status Planner::Settle(std::optional<int>& setting, std::vector<size_t>& from, int value,
                       size_t b, size_t e, std::string_view what) {
  if (setting && *setting != value) {
    return InvalidArgument(fmt::format(
        "the instruction sets {} twice: {} (from {}) and {} (from '{}'); keep one", what,
        *setting, QuoteTokens(from), value, Quote(toks_[b].begin, toks_[e - 1].end)));
  }
  setting = value;
  Use(b, e, &from);
  return Status::Ok();
}

Status Planner::ReadPriority() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (toks_[i].used) continue;
    if (Is(i, Tok::kUrgent) || Is(i, Tok::kLow)) {
      DROVER_RETURN_IF_ERROR(Settle(priority_, priority_from_,
                                    Is(i, Tok::kUrgent) ? kUrgentPriority : kLowPriority, i,
                                    i + 1, "the priority"));
    } else if (Is(i, Tok::kPriority)) {
      size_t k = Skip(i + 1, {Tok::kAssign});
      if (!IsFree(k, Tok::kNumber)) continue;
      if (!toks_[k].integral || !(std::fabs(toks_[k].num) <= kMaxPriority)) {
        return InvalidArgument(fmt::format(
            "'{}': a priority is a whole number from {} to {} (higher runs first)",
            Quote(toks_[i].begin, toks_[k].end), -kMaxPriority, kMaxPriority));
      }
      DROVER_RETURN_IF_ERROR(Settle(priority_, priority_from_, static_cast<int>(toks_[k].num), i,
                                    k + 1, "the priority"));
    }
  }
  return Status::Ok();
}

// "2 GPUs", "gpus=2", "2张卡", "单卡", "on cpu".
Status Planner::ReadGpus() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (toks_[i].used) continue;
    if (Is(i, Tok::kGpuCount) || Is(i, Tok::kCpu)) {
      DROVER_RETURN_IF_ERROR(Settle(gpus_, gpus_from_,
                                    Is(i, Tok::kCpu) ? 0 : static_cast<int>(toks_[i].num), i,
                                    i + 1, "the GPUs per run"));
    } else if (Is(i, Tok::kGpu)) {
      size_t back = SkipBack(i - 1, {Tok::kMeasure});
      size_t fwd = Skip(i + 1, {Tok::kAssign});
      auto count_at = [&](size_t k) {
        return k != kNone && IsFree(k, Tok::kNumber) && toks_[k].integral && toks_[k].num >= 0 &&
               toks_[k].num <= 1024;
      };
      if (count_at(back)) {
        DROVER_RETURN_IF_ERROR(Settle(gpus_, gpus_from_, static_cast<int>(toks_[back].num), back,
                                      i + 1, "the GPUs per run"));
      } else if (count_at(fwd)) {
        DROVER_RETURN_IF_ERROR(Settle(gpus_, gpus_from_, static_cast<int>(toks_[fwd].num), i,
                                      fwd + 1, "the GPUs per run"));
      } else if (gpus_ && *gpus_ > 0) {
        Use(i, i + 1, &gpus_from_);  // "2 GPUs each ... on the GPU"
      } else {
        // "on the GPU": the recipe's count (a contradiction after "on cpu")
        DROVER_RETURN_IF_ERROR(Settle(gpus_, gpus_from_, std::max(1, r_.gpus), i, i + 1,
                                      "the GPUs per run"));
      }
    }
  }
  return Status::Ok();
}

// The first metric named is the objective, in the recipe's direction.
void Planner::ReadMetric() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (!Is(i, Tok::kMetric)) continue;
    if (!metric_) metric_ = toks_[i].index;
    if (toks_[i].index == *metric_) Use(i, i + 1, &metric_from_);
  }
}

std::string Planner::QuoteTokens(std::vector<size_t> idx) const {
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::string span = Quote(toks_[idx.front()].begin, toks_[idx.back()].end);
  if (span.size() <= 60) return fmt::format("'{}'", span);
  std::vector<std::string> parts;  // far apart: each piece on its own
  for (size_t i : idx) {
    if (Reportable(toks_[i].kind)) parts.push_back(fmt::format("'{}'", Quote(toks_[i].begin, toks_[i].end)));
  }
  return Join(parts, ", ");
}

// Unused words, adjacent ones together ("on the cluster quickly" -> "cluster quickly"), also
// across punctuation and "and" ("32, 64 and 128").
std::vector<std::string> Planner::Ignored() const {
  auto bad = [&](size_t i) { return !toks_[i].used && Reportable(toks_[i].kind); };
  auto glue = [&](size_t i) {
    Tok k = toks_[i].kind;
    return k == Tok::kSep || k == Tok::kOpen || k == Tok::kClose || k == Tok::kTo ||
           k == Tok::kPunct;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < toks_.size();) {
    if (!bad(i)) {
      ++i;
      continue;
    }
    size_t last = i;
    for (size_t k = i + 1; k < toks_.size() && (bad(k) || glue(k)); ++k) {
      if (bad(k)) last = k;
    }
    out.push_back(Quote(toks_[i].begin, toks_[last].end));
    i = last + 1;
  }
  return out;
}

// What the recipe knows, for the error about an instruction that names none of it.
std::string Planner::Knows() const {
  std::vector<std::string> params;
  for (const RecipeParam& p : r_.params) {
    std::string what = p.type == "choice" ? JoinValues(p.choices) : p.type;
    if (!p.default_value.is_null() && p.type != "choice") {
      what += fmt::format(", default {}", ValueText(p.default_value));
    }
    std::string aka = p.aliases.empty() ? "" : fmt::format("; also {}", Join(p.aliases, ", "));
    params.push_back(fmt::format("{} ({}{})", p.name, what, aka));
  }
  std::vector<std::string> metrics;
  for (const RecipeMetric& m : r_.metrics) {
    std::string aka = m.aliases.empty() ? "" : fmt::format(", also {}", Join(m.aliases, ", "));
    metrics.push_back(fmt::format("{} ({}{})", m.name, m.maximize ? "max" : "min", aka));
  }
  return fmt::format("the recipe {} knows the parameters {}{}", r_.source, Join(params, "; "),
                     metrics.empty() ? "" : fmt::format(" and the metrics {}", Join(metrics, "; ")));
}

std::string SafeName(std::string s) {
  for (char& c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      c = '-';
    }
  }
  return s;
}

// What varies ("model-resnet50-efficientnet-x-batch_size-32-64"); else what the instruction set;
// else the project folder's name. Long names keep a hash of the whole, so they stay distinct.
std::string PlanName(const Recipe& r, const std::vector<Setting>& params) {
  std::vector<std::string> varying, set;
  for (size_t p = 0; p < r.params.size(); ++p) {
    const Setting& s = params[p];
    if (s.values.empty()) continue;
    std::vector<std::string> parts = {r.params[p].name};
    for (const Json& v : s.values) parts.push_back(ValueText(v));
    (s.values.size() > 1 ? varying : set).push_back(Join(parts, "-"));
  }
  std::string name = SafeName(Join(!varying.empty() ? varying : set, "-x-"));
  if (name.empty()) name = SafeName(std::filesystem::path(r.dir).filename().string());
  if (name.empty() || name == "-") name = "experiment";
  return CapName(name);
}

}  // namespace

std::string CapName(std::string name) {
  if (name.size() > 80) {
    uint32_t h = 2166136261u;  // FNV-1a: deterministic across builds
    for (unsigned char c : name) h = (h ^ c) * 16777619u;
    name = fmt::format("{}-{:08x}", name.substr(0, 70), h);
  }
  return name;
}

std::optional<std::string> NameWithOverrides(const std::string& name,
                                             const std::vector<std::string>& overrides) {
  std::vector<std::string> parts;
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (key == "name") return std::nullopt;  // named by the caller
    // What says whether runs are cached, not what they run: not part of the name.
    if (key == "rerun" || key == "force") continue;
    parts.push_back(o);
  }
  if (parts.empty()) return std::nullopt;
  std::string suffix = SafeName(Join(parts, "-"));
  // "lr=[0.1,0.01]" reads as lr--0.1-0.01-: one dash between words is enough.
  std::string squeezed;
  for (char c : suffix) {
    if (c == '-' && !squeezed.empty() && squeezed.back() == '-') continue;
    squeezed += c;
  }
  while (!squeezed.empty() && squeezed.back() == '-') squeezed.pop_back();
  return CapName(name + "-" + squeezed);
}

namespace {

void EmitValue(YAML::Emitter& out, const Json& v) {
  if (v.is_string()) {
    out << YAML::DoubleQuoted << v.get<std::string>();
  } else {
    out << v.dump();  // 32, 0.001, 1e-05, true: plain, so they read back as numbers
  }
}

// A planned value of a number parameter: finite ("1e999" is no learning rate) and inside the
// recipe's range; without a declared min, not negative unless the default is.
Status CheckValue(const Recipe& r, const RecipeParam& p, const Json& v, std::string_view giver) {
  if (!v.is_number() || (p.type != "int" && p.type != "float")) return Status::Ok();
  double d = v.get<double>();
  if (!std::isfinite(d)) {
    return InvalidArgument(fmt::format("{} {} = {}, which is not a finite number; give a value "
                                       "such as {}",
                                       giver, p.name, d, ValueText(p.default_value.is_null()
                                                                       ? Json(1)
                                                                       : p.default_value)));
  }
  auto range = [&] {
    return fmt::format("{} to {}", p.min ? fmt::format("{}", *p.min) : "-inf",
                       p.max ? fmt::format("{}", *p.max) : "inf");
  };
  if (p.min && d < *p.min) {
    return InvalidArgument(fmt::format("{} {} = {}, below its min {} in {} (it takes {})", giver,
                                       p.name, ValueText(v), *p.min, r.source, range()));
  }
  if (p.max && d > *p.max) {
    return InvalidArgument(fmt::format("{} {} = {}, above its max {} in {} (it takes {})", giver,
                                       p.name, ValueText(v), *p.max, r.source, range()));
  }
  bool negatives = p.min || (p.default_value.is_number() && p.default_value.get<double>() < 0);
  if (d < 0 && !negatives) {
    return InvalidArgument(fmt::format(
        "{} {} = {}, a negative value; the recipe {} gives {} no min, so it takes 0 or more "
        "(add 'min: {}' to it there if negative values are meant)",
        giver, p.name, ValueText(v), r.source, p.name, ValueText(v)));
  }
  return Status::Ok();
}

// A YAML value as JSON, scalars typed as YAML 1.2's core schema reads them.
Json NodeToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    Json o = Json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = NodeToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    Json a = Json::array();
    for (const auto& x : n) a.push_back(NodeToJson(x));
    return a;
  }
  if (!n.IsScalar()) return nullptr;
  const yaml::Scalar s = yaml::Resolve(n);
  switch (s.kind) {
    case yaml::ScalarKind::kNull:
      return nullptr;
    case yaml::ScalarKind::kBool:
      return s.b;
    case yaml::ScalarKind::kInt:
      return s.i;
    case yaml::ScalarKind::kFloat:
      return s.d;
    case yaml::ScalarKind::kString:
      break;
  }
  return n.Scalar();
}

// The spec of a recipe with these values per parameter (empty: the default), the objective,
// GPUs per run and priority; `understood` and `ignored` are left to the caller.
Result<Plan> BuildPlan(const Recipe& r, const std::vector<std::vector<Json>>& chosen,
                       std::optional<int> metric, std::optional<int> gpus_set,
                       std::optional<int> priority_set, std::string_view giver) {
  Plan plan;
  Json params = Json::object();
  YAML::Emitter out;
  std::vector<Setting> settings(r.params.size());
  for (size_t p = 0; p < r.params.size() && p < chosen.size(); ++p) {
    for (const Json& v : chosen[p]) DROVER_RETURN_IF_ERROR(CheckValue(r, r.params[p], v, giver));
    settings[p].values = chosen[p];
  }
  const std::string name = PlanName(r, settings);
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << name;
  out << YAML::Key << "workdir" << YAML::Value << YAML::DoubleQuoted << r.dir;
  out << YAML::Key << "command" << YAML::Value << YAML::DoubleQuoted << r.command;
  out << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
  for (size_t p = 0; p < r.params.size(); ++p) {
    const RecipeParam& param = r.params[p];
    std::vector<Json> values = settings[p].values;
    if (values.empty()) {
      Json d = param.default_value;
      if (d.is_null() && param.type == "choice") d = param.choices.front();
      if (d.is_null()) {
        return InvalidArgument(fmt::format(
            "{} no value for {}, and the recipe {} has no default for it; "
            "name one ('{}=...') or add 'default:' to the recipe",
            giver, param.name, r.source, param.name));
      }
      values.push_back(d);
    }
    params[param.name] = values;
    out << YAML::Key << param.name << YAML::Value;
    if (values.size() == 1) {
      EmitValue(out, values[0]);
    } else {
      out << YAML::Flow << YAML::BeginSeq;
      for (const Json& v : values) EmitValue(out, v);
      out << YAML::EndSeq;
    }
  }
  out << YAML::EndMap;
  int gpus = gpus_set.value_or(r.gpus);
  // The recipe's defaults of spec keys (recipe.h); the instruction's GPUs and priority win.
  Json resources = Json::object();
  Json defaults = Json::object();
  for (const auto& [key, text] : r.spec_defaults) {
    Json value = NodeToJson(YAML::Load(text));
    if (key == "resources") {
      resources = value;
    } else {
      defaults[key] = value;
    }
  }
  resources["gpus"] = gpus;
  int priority = priority_set.value_or(
      defaults.contains("priority") && defaults["priority"].is_number_integer()
          ? defaults["priority"].get<int>()
          : 0);
  defaults.erase("priority");
  out << YAML::Key << "resources" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (auto it = resources.begin(); it != resources.end(); ++it) {
    out << YAML::Key << it.key() << YAML::Value;
    EmitValue(out, it.value());
  }
  out << YAML::EndMap;
  out << YAML::Key << "priority" << YAML::Value << priority;
  for (const auto& [key, text] : r.spec_defaults) {
    if (key == "resources" || key == "priority") continue;
    out << YAML::Key << key << YAML::Value << YAML::Load(text);
  }
  plan.spec = {{"name", name},     {"command", r.command},  {"workdir", r.dir},
               {"params", params}, {"resources", resources}, {"priority", priority}};
  for (auto it = defaults.begin(); it != defaults.end(); ++it) plan.spec[it.key()] = it.value();
  if (metric) {
    const RecipeMetric& m = r.metrics[*metric];
    std::string mode = m.maximize ? "max" : "min";
    plan.spec["objective"] = {{"metric", m.name}, {"mode", mode}};
    out << YAML::Key << "objective" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
        << "metric" << YAML::Value << m.name << YAML::Key << "mode" << YAML::Value << mode
        << YAML::EndMap;
  }
  out << YAML::EndMap;
  plan.spec_yaml = std::string(out.c_str()) + "\n";
  return plan;
}

Result<Plan> Planner::Build() {
  std::vector<std::vector<Json>> chosen;
  for (const Setting& s : params_) chosen.push_back(s.values);
  // The runs are always ranked by something the recipe says: the metric the instruction names,
  // else the recipe's first metric, each in the recipe's direction.
  const std::optional<int> objective =
      metric_ ? metric_ : r_.metrics.empty() ? std::nullopt : std::optional<int>(0);
  DROVER_ASSIGN_OR_RETURN(
      Plan plan, BuildPlan(r_, chosen, objective, gpus_, priority_, "the instruction gives"));

  for (size_t p = 0; p < r_.params.size(); ++p) {
    const Setting& s = params_[p];
    if (s.values.empty()) continue;
    std::string note = s.note.empty() ? "" : s.note + ", ";
    plan.understood.push_back(fmt::format("{}: {} ({}from {})", r_.params[p].name,
                                          JoinValues(s.values), note, QuoteTokens(s.from)));
  }
  if (metric_) {
    const RecipeMetric& m = r_.metrics[*metric_];
    plan.understood.push_back(fmt::format("objective: {} {} (from {})", m.name,
                                          m.maximize ? "max" : "min", QuoteTokens(metric_from_)));
  } else if (objective) {
    const RecipeMetric& m = r_.metrics[*objective];
    plan.understood.push_back(fmt::format(
        "objective: {} {} (the recipe's first metric; name another, such as \"by {}\", to rank "
        "by it)",
        m.name, m.maximize ? "max" : "min",
        r_.metrics.size() > 1 ? r_.metrics[1].name : m.name));
  }
  if (gpus_) {
    plan.understood.push_back(
        fmt::format("gpus per run: {} (from {})", *gpus_, QuoteTokens(gpus_from_)));
  }
  if (priority_) {
    plan.understood.push_back(
        fmt::format("priority: {} (from {})", *priority_, QuoteTokens(priority_from_)));
  }
  plan.understood.insert(plan.understood.end(), notes_.begin(), notes_.end());
  plan.ignored = Ignored();
  return plan;
}

Result<Plan> Planner::Run() {
  has_after_.assign(toks_.size(), false);
  // Settings with their own keywords first, so their numbers are taken ("gpus=2, 5 epochs").
  DROVER_RETURN_IF_ERROR(ReadRepeats());
  DROVER_RETURN_IF_ERROR(ReadPriority());
  DROVER_RETURN_IF_ERROR(ReadGpus());
  // Right to left, so whether a later parameter took the values after it is known when an
  // earlier list decides where it stops ("lr 0.1 0.01 batch size 32" vs "bs 32 10 epochs").
  for (size_t i = toks_.size(); i-- > 0;) {
    if (Is(i, Tok::kParam) && toks_[i].index != seed_) DROVER_RETURN_IF_ERROR(ReadAfter(i));
    if (Is(i, Tok::kParam) && toks_[i].index == seed_) {
      // "seeds 0,1,2" are values, but "3 seeds" (a number before) is a count: read it first.
      size_t k = SkipBack(i - 1, {Tok::kMeasure, Tok::kAdj});
      if (k == kNone || !IsFree(k, Tok::kNumber)) DROVER_RETURN_IF_ERROR(ReadAfter(i));
    }
  }
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (Is(i, Tok::kParam)) DROVER_RETURN_IF_ERROR(ReadBefore(i));
  }
  DROVER_RETURN_IF_ERROR(ReadChoices());
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (Is(i, Tok::kParam) && params_[toks_[i].index].values.empty()) {
      DROVER_RETURN_IF_ERROR(ReadAfter(i, /*loose=*/true));
    }
  }
  ReadMetric();
  bool any = metric_ || gpus_ || priority_;
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (Is(i, Tok::kParam) && !params_[toks_[i].index].values.empty()) {
      toks_[i].used = true;  // "the models": the parameter it names got values elsewhere
      params_[toks_[i].index].from.push_back(i);
    }
  }
  for (const Setting& s : params_) any = any || !s.values.empty();
  if (!any) {
    std::string said = std::string(Trim(instruction_));
    return InvalidArgument(fmt::format(
        "nothing in '{}' names a setting drover can use; {}. Try, e.g., 'compare {} and {} with "
        "{}=32,64'",
        said, Knows(),
        r_.params.empty() || r_.params[0].choices.empty() ? "a" : ValueText(r_.params[0].choices[0]),
        r_.params.empty() || r_.params[0].choices.size() < 2 ? "b"
                                                             : ValueText(r_.params[0].choices[1]),
        r_.params.size() > 1 ? r_.params[1].name : "param"));
  }
  return Build();
}

}  // namespace

Result<Plan> PlanInstruction(const Recipe& recipe, std::string_view instruction) {
  return Planner(recipe, instruction).Run();
}

namespace {

std::string LowerAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One ticked or typed value as its parameter's type.
Result<Json> Coerce(const RecipeParam& p, const Json& v) {
  std::string text = v.is_string() ? std::string(Trim(v.get<std::string>())) : v.dump();
  if (p.type == "choice") {
    for (const Json& c : p.choices) {
      if (LowerAscii(ValueText(c)) == LowerAscii(text)) return c;
    }
    return InvalidArgument(fmt::format("{} is one of {}; '{}' is not", p.name,
                                       JoinValues(p.choices), text));
  }
  if (p.type == "int") {
    if (v.is_number_integer()) return v;
    char* end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(d) &&
        d == std::floor(d) && std::fabs(d) < 9e15) {
      return Json(static_cast<int64_t>(d));
    }
    return InvalidArgument(fmt::format("{} takes whole numbers; '{}' is not one", p.name, text));
  }
  if (p.type == "float") {
    if (v.is_number()) return Json(v.get<double>());
    char* end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(d)) return Json(d);
    return InvalidArgument(fmt::format("{} takes numbers; '{}' is not one", p.name, text));
  }
  if (text.empty()) return InvalidArgument(fmt::format("{} was given an empty value", p.name));
  return v.is_string() ? Json(text) : v;
}

}  // namespace

Result<Plan> PlanSelection(const Recipe& recipe, const Selection& selection) {
  std::vector<std::string> names;
  for (const RecipeParam& p : recipe.params) names.push_back(p.name);
  for (const auto& [name, values] : selection.params) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      auto close = ClosestMatch(name, names);
      return InvalidArgument(fmt::format("the recipe {} has no parameter '{}'{}; it has {}",
                                         recipe.source, name,
                                         close ? " (did you mean '" + *close + "'?)" : "",
                                         Join(names, ", ")));
    }
  }
  std::vector<std::vector<Json>> chosen(recipe.params.size());
  std::vector<std::string> understood;
  for (size_t p = 0; p < recipe.params.size(); ++p) {
    auto it = selection.params.find(recipe.params[p].name);
    if (it == selection.params.end()) continue;
    for (const Json& v : it->second) {
      DROVER_ASSIGN_OR_RETURN(Json value, Coerce(recipe.params[p], v));
      if (std::find(chosen[p].begin(), chosen[p].end(), value) == chosen[p].end()) {
        chosen[p].push_back(std::move(value));
      }
    }
    if (!chosen[p].empty()) {
      understood.push_back(fmt::format("{}: {}", recipe.params[p].name, JoinValues(chosen[p])));
    }
  }
  std::optional<int> metric;
  if (!selection.objective.empty()) {
    std::string want = LowerAscii(std::string(Trim(selection.objective)));
    for (size_t m = 0; m < recipe.metrics.size() && !metric; ++m) {
      if (LowerAscii(recipe.metrics[m].name) == want) metric = static_cast<int>(m);
      for (const std::string& a : recipe.metrics[m].aliases) {
        if (LowerAscii(a) == want) metric = static_cast<int>(m);
      }
    }
    if (!metric) {
      std::vector<std::string> known;
      for (const RecipeMetric& m : recipe.metrics) known.push_back(m.name);
      return InvalidArgument(fmt::format("the recipe {} has no metric '{}'; it has {}",
                                         recipe.source, selection.objective,
                                         known.empty() ? "none" : Join(known, ", ")));
    }
    understood.push_back(fmt::format("objective: {} {}", recipe.metrics[*metric].name,
                                     recipe.metrics[*metric].maximize ? "max" : "min"));
  }
  if (selection.gpus && (*selection.gpus < 0 || *selection.gpus > 64)) {
    return InvalidArgument(fmt::format("gpus per run must be 0..64, got {}", *selection.gpus));
  }
  DROVER_ASSIGN_OR_RETURN(Plan plan, BuildPlan(recipe, chosen, metric, selection.gpus,
                                               selection.priority, "the form gives"));
  plan.understood = std::move(understood);
  return plan;
}

Result<int> PlannedRuns(const Plan& plan, const Recipe& recipe) {
  DROVER_ASSIGN_OR_RETURN(Spec spec, ParseSpecString(plan.spec_yaml, "the plan", recipe.dir));
  return static_cast<int>(ExpandGrid(spec).size());
}

std::vector<Json> SuggestedValues(const RecipeParam& p) {
  if (p.type == "choice") return p.choices;
  std::vector<Json> out;
  auto add = [&](Json v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
  };
  const Json& d = p.default_value;
  bool seedish = p.name.find("seed") != std::string::npos;
  if (p.type == "int" && seedish) {
    for (int64_t s = 0; s < 4; ++s) add(Json(s));
    if (d.is_number_integer()) add(d);
    std::sort(out.begin(), out.end());
    return out;
  }
  if (p.type == "int" && d.is_number_integer()) {
    int64_t v = d.get<int64_t>();
    if (v > 0 && IsPowerOfTwo(static_cast<double>(v)) && v >= 4) {
      for (int64_t x : {v / 4, v / 2, v, v * 2, v * 4}) add(Json(x));
    } else if (v > 0) {
      for (int64_t x : {std::max<int64_t>(1, v / 2), v, v * 2}) add(Json(x));
    } else {
      add(d);
    }
    return out;
  }
  if (p.type == "float" && d.is_number()) {
    double v = d.get<double>();
    if (v > 0) {
      for (double f : {0.1, 0.3, 1.0, 3.0, 10.0}) {
        add(Json(f == 1.0 ? v : Round10(std::stod(fmt::format("{:.2g}", v * f)))));
      }
    } else {
      add(d);
    }
    return out;
  }
  if (!d.is_null()) add(d);
  return out;
}

}  // namespace drover
