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
constexpr int kDefaultPlannedTrials = 20;  // a search whose instruction gives no number of trials
constexpr int kMaxPlannedTrials = 10'000;

// Kinds that, left unused, are reported as ignored; the rest are filler or glue.
bool Reportable(Tok k) {
  switch (k) {
    case Tok::kNumber: case Tok::kParam: case Tok::kChoice: case Tok::kMetric:
    case Tok::kUnknown: case Tok::kValues: case Tok::kLog: case Tok::kLinear: case Tok::kStep:
    case Tok::kRepeat: case Tok::kTimes: case Tok::kGpu: case Tok::kPriority:
    case Tok::kLevel: case Tok::kExcept: case Tok::kExceptAfter: case Tok::kMul: case Tok::kDiv:
    case Tok::kFold: case Tok::kTrials: case Tok::kSearch:
      return true;
    default:
      return false;
  }
}

std::string ValueText(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string JoinValues(const std::vector<Json>& values, std::string_view sep = ", ") {
  std::vector<std::string> parts;
  for (const Json& v : values) parts.push_back(ValueText(v));
  return Join(parts, sep);
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
  std::vector<Json> values;  // a search's range: its two ends (and `dist` says how to sample)
  std::vector<size_t> from;  // the tokens it was read from
  std::string note;          // "log-spaced", "3 repeats"
  Json dist;                 // a search's range: {"log_uniform": [lo, hi]} ...; null for values
};

// A sequence of values as an instruction describes it: a start, and an end, a step, a factor
// and/or a count, with words around them ("from 1e-4 to 1e-2, 3 values", "start at 0.1 and divide
// by 10, 3 values", "从32开始每次乘以2，直到256").
struct Seq {
  size_t begin = kNone, end = kNone;  // the tokens read: [begin, end)
  size_t x = kNone;                   // the start's token
  size_t y = kNone;                   // the end's token
  std::vector<std::pair<int64_t, size_t>> counts;  // each count said, with its token
  bool prefix_count = false;          // a count came before the start ("取三档：0.1、...")
  double step = 0;
  double factor = 0;                  // > 0: each value is the last times (or divided by) it
  bool divide = false;
  bool factor_conflict = false;       // two different factors
  bool log = false, linear = false;
  bool IsSequence() const { return x != kNone && (y != kNone || step > 0 || factor > 0); }
};

// The words right before a parameter that make the number before them a count ("三档学习率",
// "3 levels of lr", "3个不同的学习率", "3 learning rates").
struct CountWords {
  size_t number = kNone;  // the number's token
  bool strong = false;    // a level/values/adjective word: a count, never a value
  bool measure = false;   // 个 张 ...: a count or a value, as the rest of the instruction decides
  bool glue = false;      // "of"/"的"/"for" right before the parameter
};

class Planner {
 public:
  Planner(const Recipe& recipe, std::string_view instruction)
      : r_(recipe), instruction_(instruction), n_(plan::Normalize(instruction)) {
    toks_ = plan::Lex(recipe, n_);
    params_.resize(recipe.params.size());
    counts_.resize(recipe.params.size());
    excluded_.resize(recipe.params.size());
    excluded_from_.resize(recipe.params.size());
    all_from_.resize(recipe.params.size());
    for (size_t p = 0; p < recipe.params.size(); ++p) {
      const RecipeParam& param = recipe.params[p];
      // Repeats vary the seed: the first int parameter called seed (or with such an alias).
      bool seedish = param.name == "seed" || param.name == "seeds" ||
                     HasAlias(param, "seed") || HasAlias(param, "random seed") ||
                     HasAlias(param, "随机种子") || HasAlias(param, "种子");
      if (seedish && seed_ < 0 && param.type == "int") seed_ = static_cast<int>(p);
    }
    // "search"/"tune"/"调参": ranges are sampled, not spaced. Without such a word, "3 trials"
    // are repeats, as "3 times".
    search_ = std::any_of(toks_.begin(), toks_.end(),
                          [](const plan::Token& t) { return t.kind == Tok::kSearch; });
    if (!search_) {
      for (plan::Token& t : toks_) {
        if (t.kind == Tok::kTrials) t.kind = Tok::kTimes;
      }
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
  // A sequence before the parameter that has no values yet: "在1e-4到1e-2之间取3个学习率",
  // "3 values from 1e-4 to 1e-2 for lr".
  Status ReadBackward(size_t at);
  Status ReadBefore(size_t at);  // the values before it ("10 epochs", "3 seeds")
  // Sequences: what a sequence starting at toks_[j] says, reading no further than `limit`;
  // false when there is no free number to start from.
  bool ParseSeq(size_t j, size_t limit, Seq& q) const;
  size_t CountPhraseAt(size_t k, size_t limit, Seq& q) const;  // "3 values", "取3个值", "三档"
  size_t OpAt(size_t k, size_t limit, Seq& q) const;           // "divide by 10", "翻倍"
  bool IsTimesFactor(size_t i) const;  // "×2" after "each time"/"每次": a factor, not repeats
  bool SeqWord(size_t i) const;
  Status MakeSeq(int p, const Seq& q, Setting& s) const;
  CountWords CountBefore(size_t at) const;
  // A count of values for parameter p, from the tokens [b, e): checked once all values are read.
  Status RecordCount(int p, size_t number, size_t b, size_t e);
  Status CheckCounts() const;
  void FixTypos();
  // The choice list at toks_[k] (one parameter's choices, separated by commas and "and"): its
  // last token, and the parameter; kNone when there is none.
  size_t ChoiceListEnd(size_t k, int* param) const;
  void Exclude(int p, size_t first, size_t last);
  void ReadNegations();
  Status ReadChoices();
  Status ApplyExclusions();
  Status Settle(std::optional<int>& setting, std::vector<size_t>& from, int value, size_t b,
                size_t e, std::string_view what);
  Status ReadPriority();
  Status ReadGpus();
  Status ReadTrials();  // a search's "for 20 trials", "trials=20", "20次试验"
  // The runs the settings make (a search: its trials).
  int64_t PlannedCount() const;
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
  struct Count {
    int64_t n = 0;
    size_t b = 0, e = 0;  // the tokens it was said in
  };
  std::vector<std::optional<Count>> counts_;      // per parameter: "三档学习率"
  std::vector<std::vector<Json>> excluded_;       // per parameter: "except mlp", "除了mlp"
  std::vector<std::vector<size_t>> excluded_from_;
  std::vector<std::vector<size_t>> all_from_;     // per parameter: "all models", "所有模型"
  int seed_ = -1;
  std::optional<int> metric_;
  std::vector<size_t> metric_from_;
  std::optional<int> gpus_;
  std::vector<size_t> gpus_from_;
  bool gpus_in_all_ = false;  // "on 2 GPUs": the GPUs the runs share, when there are several
  bool search_ = false;       // a search word: ranges without a count are sampled
  std::optional<int> trials_;
  std::vector<size_t> trials_from_;
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
    case Tok::kLinear: case Tok::kLevel: case Tok::kRuns: case Tok::kFold: case Tok::kTrials:
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

// "repeat 3 times", "3 times", "twice", "5 runs", "5 repeats", "重复3次", "跑五次", "3次重复".
Status Planner::ReadRepeats() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (toks_[i].used || IsTimesFactor(i)) continue;
    if (Is(i, Tok::kTimes) || Is(i, Tok::kRuns)) {
      size_t b = i;
      int64_t count = 0;
      if (toks_[i].num > 0) {
        count = CountOf(toks_[i].num);
      } else {
        size_t k = SkipBack(i - 1, {Tok::kMeasure, Tok::kAdj});
        if (k == kNone || !IsFree(k, Tok::kNumber) || !toks_[k].integral) continue;
        count = CountOf(toks_[k].num);
        b = k;
      }
      size_t r = SkipBack(b - 1, {Tok::kFiller, Tok::kEach});
      if (r != kNone && IsFree(r, Tok::kRepeat)) b = r;
      size_t e = i + 1;
      if (size_t after = Skip(i + 1, {Tok::kFiller}); IsFree(after, Tok::kRepeat)) e = after + 1;
      DROVER_RETURN_IF_ERROR(SetCount(seed_, count, b, e, fmt::format("{} repeats", count)));
    } else if (Is(i, Tok::kRepeat)) {
      size_t k = Skip(i + 1, {Tok::kFiller, Tok::kEach, Tok::kAssign});
      if (IsFree(k, Tok::kNumber) && toks_[k].integral) {
        size_t e = k + 1;
        if (IsFree(e, Tok::kTimes) && toks_[e].num == 0) ++e;
        auto count = CountOf(toks_[k].num);
        DROVER_RETURN_IF_ERROR(SetCount(seed_, count, i, e, fmt::format("{} repeats", count)));
        continue;
      }
      // "5 repeats", "5个重复"
      size_t b = SkipBack(i - 1, {Tok::kMeasure, Tok::kAdj});
      if (b == kNone || !IsFree(b, Tok::kNumber) || !toks_[b].integral) continue;
      auto count = CountOf(toks_[b].num);
      DROVER_RETURN_IF_ERROR(SetCount(seed_, count, b, i + 1, fmt::format("{} repeats", count)));
    }
  }
  return Status::Ok();
}

CountWords Planner::CountBefore(size_t at) const {
  CountWords c;
  size_t k = at == 0 ? kNone : at - 1;
  if (k != kNone && (Is(k, Tok::kAssign) || Is(k, Tok::kFiller))) {  // "of", "的", "for"
    c.glue = true;
    k = k == 0 ? kNone : k - 1;
  }
  for (; k != kNone; k = k == 0 ? kNone : k - 1) {
    Tok kind = toks_[k].kind;
    if (kind == Tok::kLevel || kind == Tok::kValues || kind == Tok::kAdj) {
      c.strong = true;
    } else if (kind == Tok::kLog || kind == Tok::kLinear) {  // "3 log-spaced values of lr"
      continue;
    } else if (kind == Tok::kMeasure) {
      c.measure = true;
    } else if (kind == Tok::kFiller && c.strong) {  // "3个不同的"
      continue;
    } else {
      break;
    }
  }
  if (k == kNone || !IsFree(k, Tok::kNumber)) return {};
  if (c.glue && !c.strong) return {};  // "32 for lr" says nothing about a count
  c.number = k;
  return c;
}

Status Planner::RecordCount(int p, size_t number, size_t b, size_t e) {
  const Token& t = toks_[number];
  std::string said = Quote(toks_[b].begin, toks_[e - 1].end);
  if (!t.integral || t.num < 1 || t.num > static_cast<double>(kMaxValues)) {
    return InvalidArgument(fmt::format("'{}': a number of values must be a whole number from 1 "
                                       "to {}",
                                       said, kMaxValues));
  }
  auto n = static_cast<int64_t>(t.num);
  if (counts_[p] && counts_[p]->n != n) {
    return InvalidArgument(fmt::format(
        "the instruction asks for {} values of {} ('{}') and for {} ('{}'); keep one",
        counts_[p]->n, r_.params[p].name, Quote(toks_[counts_[p]->b].begin,
                                                toks_[counts_[p]->e - 1].end),
        n, said));
  }
  counts_[p] = Count{n, b, e};
  Use(b, e, &params_[p].from);
  return Status::Ok();
}

Status Planner::CheckCounts() const {
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!counts_[p]) continue;
    const Count& c = *counts_[p];
    const std::vector<Json>& values = params_[p].values;
    if (static_cast<int64_t>(values.size()) == c.n) continue;
    std::string said = Quote(toks_[c.b].begin, toks_[c.e - 1].end);
    const RecipeParam& param = r_.params[p];
    if (values.empty()) {
      if (param.type == "choice") {
        return InvalidArgument(fmt::format(
            "'{}' asks for {} values of {}, but the instruction names none; {} is one of {}", said,
            c.n, param.name, param.name, JoinValues(param.choices)));
      }
      std::vector<Json> example = SuggestedValues(param);
      if (example.size() > static_cast<size_t>(c.n)) example.resize(c.n);
      return InvalidArgument(fmt::format(
          "'{}' asks for {} values of {}, but the instruction gives none; list them ('{} {}') or "
          "give a range ('{} from A to B')",
          said, c.n, param.name, param.name, JoinValues(example), param.name));
    }
    return InvalidArgument(fmt::format(
        "'{}' asks for {} values of {}, but the instruction gives {} ({})", said, c.n, param.name,
        values.size(), JoinValues(values)));
  }
  return Status::Ok();
}

bool Planner::SeqWord(size_t i) const {
  if (toks_[i].used) return false;
  switch (toks_[i].kind) {
    case Tok::kNumber: case Tok::kTo: case Tok::kFrom: case Tok::kBetween: case Tok::kStart:
    case Tok::kMul: case Tok::kDiv: case Tok::kFold: case Tok::kEach: case Tok::kValues:
    case Tok::kLevel: case Tok::kMeasure: case Tok::kLog: case Tok::kLinear: case Tok::kStep:
    case Tok::kSep: case Tok::kAssign: case Tok::kFiller: case Tok::kOpen: case Tok::kClose:
      return true;
    default:
      return false;
  }
}

size_t Planner::CountPhraseAt(size_t k, size_t limit, Seq& q) const {
  if (k >= limit || !IsFree(k, Tok::kNumber) || !toks_[k].integral) return kNone;
  bool log = false, linear = false, measure = false;
  size_t v = k + 1;
  for (; v < limit && !toks_[v].used; ++v) {
    Tok kind = toks_[v].kind;
    if (kind == Tok::kLog) log = true;
    if (kind == Tok::kLinear) linear = true;
    if (kind == Tok::kMeasure) measure = true;
    if (kind != Tok::kMeasure && kind != Tok::kLog && kind != Tok::kLinear &&
        kind != Tok::kFiller && kind != Tok::kAdj) {
      break;
    }
  }
  size_t end = v + 1;
  if (v < limit && !toks_[v].used &&
      (Is(v, Tok::kValues) || Is(v, Tok::kLevel) || Is(v, Tok::kStep))) {
    // "3 values", "三档", "3 steps"
  } else if (measure && toks_[v - 1].kind == Tok::kMeasure &&
             (v >= toks_.size() || Is(v, Tok::kSep) || Is(v, Tok::kBreak) ||
              Is(v, Tok::kClose) || Is(v, Tok::kPunct))) {
    end = v;  // "取3个" with nothing after the measure word
  } else {
    return kNone;
  }
  q.counts.emplace_back(CountOf(toks_[k].num), k);
  q.log = q.log || log;
  q.linear = q.linear || linear;
  return end;
}

bool Planner::IsTimesFactor(size_t i) const {
  return IsFree(i, Tok::kTimes) && toks_[i].num > 0 && toks_[i].text[0] == 'x' && i > 0 &&
         Is(i - 1, Tok::kEach);
}

size_t Planner::OpAt(size_t k, size_t limit, Seq& q) const {
  if (k < limit && IsTimesFactor(k)) {  // "每次×2", "each time x2"
    if (q.factor > 0 && (q.factor != toks_[k].num || q.divide)) q.factor_conflict = true;
    q.factor = toks_[k].num;
    q.divide = false;
    return k + 1;
  }
  if (k >= limit || !(IsFree(k, Tok::kMul) || IsFree(k, Tok::kDiv))) return kNone;
  bool divide = Is(k, Tok::kDiv);
  double f = toks_[k].num;  // "double", "halve", "翻倍": the factor is in the word
  size_t e = k + 1;
  if (f <= 0) {  // "divide by 10", "乘以2", "扩大10倍"
    size_t v = Skip(k + 1, {Tok::kAssign, Tok::kFiller});
    if (v >= limit || !IsFree(v, Tok::kNumber) || !(toks_[v].num > 0)) return kNone;
    f = toks_[v].num;
    e = v + 1;
    if (e < limit && IsFree(e, Tok::kFold)) ++e;
  }
  if (q.factor > 0 && (q.factor != f || q.divide != divide)) q.factor_conflict = true;
  q.factor = f;
  q.divide = divide;
  return e;
}

bool Planner::ParseSeq(size_t j, size_t limit, Seq& q) const {
  q.begin = j;
  size_t k = j;
  bool after_count = false;
  // Before the start: "from", "between", "start at", "取3个值，", "divide by 10 from", "=".
  while (k < limit && !toks_[k].used) {
    if (size_t e = CountPhraseAt(k, limit, q); e != kNone) {
      k = e;
      after_count = q.prefix_count = true;
      continue;
    }
    if (size_t e = OpAt(k, limit, q); e != kNone) {
      k = e;
      continue;
    }
    Tok kind = toks_[k].kind;
    bool starts_next = k + 1 < limit && (Is(k + 1, Tok::kFrom) || Is(k + 1, Tok::kBetween) ||
                                         Is(k + 1, Tok::kStart));
    if (kind == Tok::kLog || kind == Tok::kLinear) {
      (kind == Tok::kLog ? q.log : q.linear) = true;
    } else if (kind != Tok::kFrom && kind != Tok::kBetween && kind != Tok::kStart &&
               kind != Tok::kAssign && kind != Tok::kOpen && kind != Tok::kEach &&
               kind != Tok::kFiller && kind != Tok::kValues && kind != Tok::kLevel &&
               !(kind == Tok::kSep && (after_count || starts_next))) {
      break;
    }
    ++k;
  }
  if (k >= limit || !IsFree(k, Tok::kNumber)) return false;
  q.x = k;
  const bool between = k > 0 && Is(k - 1, Tok::kBetween);
  size_t confirmed = ++k;
  if (k < limit && IsFree(k, Tok::kStart)) confirmed = ++k;  // "从0.1开始"
  for (; k < limit && !toks_[k].used; ++k) {
    Tok kind = toks_[k].kind;
    if (kind == Tok::kLog || kind == Tok::kLinear) {
      (kind == Tok::kLog ? q.log : q.linear) = true;
      confirmed = k + 1;
    } else if (kind == Tok::kTo && q.y == kNone && k + 1 < limit && IsFree(k + 1, Tok::kNumber)) {
      q.y = ++k;  // "to 256", "到256", "直到256"
      confirmed = k + 1;
    } else if (kind == Tok::kSep && k == q.x + 1 && q.y == kNone && k + 1 < limit &&
               IsFree(k + 1, Tok::kNumber) &&
               (between || (k + 2 < limit && Is(k + 2, Tok::kBetween)))) {
      q.y = ++k;  // "between 16 and 128", "在16和128之间"
      confirmed = k + 1;
    } else if (size_t e = CountPhraseAt(k, limit, q); e != kNone) {
      k = e - 1;  // ", 3 values", "取3个值", "(3 log-spaced values)"
      confirmed = e;
    } else if (IsFree(k, Tok::kNumber) && k + 1 < limit && IsFree(k + 1, Tok::kFold) &&
               toks_[k].num > 0) {
      if (q.factor > 0 && (q.factor != toks_[k].num || q.divide)) q.factor_conflict = true;
      q.factor = toks_[k].num;  // "每次2倍"
      q.divide = false;
      confirmed = ++k + 1;
    } else if (kind == Tok::kStep || kind == Tok::kAll) {  // "step 10", "every 10", "每次加10"
      size_t v = Skip(k + 1, {Tok::kAssign, Tok::kFiller});
      if (v >= limit || !IsFree(v, Tok::kNumber) || !(toks_[v].num > 0)) break;
      q.step = toks_[v].num;
      k = v;
      confirmed = v + 1;
    } else if (size_t e = OpAt(k, limit, q); e != kNone) {
      k = e - 1;  // "and divide by 10", "每次乘以2", "doubling"
      confirmed = e;
    } else if (kind == Tok::kSep || kind == Tok::kFiller || kind == Tok::kOpen ||
               kind == Tok::kClose || kind == Tok::kAssign || kind == Tok::kEach ||
               kind == Tok::kValues || kind == Tok::kStart || kind == Tok::kBetween) {
      // Glue: read only if a modifier follows it, except what closes the sequence.
      if (kind == Tok::kClose || kind == Tok::kValues || kind == Tok::kBetween) {
        confirmed = std::max(confirmed, k + 1);
      }
    } else {
      break;
    }
  }
  q.end = confirmed;
  return true;
}

Status Planner::MakeSeq(int p, const Seq& q, Setting& s) const {
  const RecipeParam& param = r_.params[p];
  const Token& a = toks_[q.x];
  size_t first = q.x;  // quoted from "from"/"between"/"start at" when they lead to the start
  while (first > 0 && (Is(first - 1, Tok::kFrom) || Is(first - 1, Tok::kBetween) ||
                             Is(first - 1, Tok::kStart))) {
    --first;
  }
  std::string text = Quote(toks_[first].begin, toks_[q.end - 1].end);
  if (param.type != "int" && param.type != "float") {
    return InvalidArgument(fmt::format("'{}' is a range, but {} is not a number parameter",
                                       text, param.name));
  }
  int64_t count = 0;
  for (auto [n, at] : q.counts) {
    if (count != 0 && n != count) {
      return InvalidArgument(fmt::format("'{}' asks for {} values and for {}; keep one", text,
                                         count, n));
    }
    count = n;
  }
  if (count != 0 && (count < 2 || count > static_cast<int64_t>(kMaxValues))) {
    return InvalidArgument(fmt::format("'{}': ask for 2 to {} values", text, kMaxValues));
  }
  if (q.factor_conflict) {
    return InvalidArgument(fmt::format("'{}' gives two different factors; keep one", text));
  }
  if (q.step > 0 && q.factor > 0) {
    return InvalidArgument(fmt::format("'{}' gives both a step and a factor; keep one", text));
  }
  const double x = a.num;
  std::vector<double> values;
  auto too_many = [&] {
    return InvalidArgument(fmt::format("'{}' gives more than {} values; stop it sooner", text,
                                       kMaxValues));
  };
  if (q.factor > 0) {
    // A geometric sequence: x, x*f, x*f^2, ... (or x/f, x/f^2, ...), up to an end or a count.
    if (q.factor == 1) {
      return InvalidArgument(fmt::format("'{}': a factor of 1 repeats one value", text));
    }
    if (x == 0) {
      return InvalidArgument(fmt::format("'{}': a sequence that multiplies cannot start at 0",
                                         text));
    }
    auto at = [&](int64_t i) {
      double f = std::pow(q.factor, static_cast<double>(i));
      return q.divide ? x / f : x * f;
    };
    const bool grows = (q.factor > 1) != q.divide;  // in magnitude
    if (q.y != kNone) {
      const double y = toks_[q.y].num;
      if (y == 0 || (y > 0) != (x > 0) || (grows ? std::fabs(y) < std::fabs(x)
                                                 : std::fabs(y) > std::fabs(x))) {
        return InvalidArgument(fmt::format("'{}' never reaches {} from {}", text,
                                           Quote(toks_[q.y].begin, toks_[q.y].end),
                                           Quote(a.begin, a.end)));
      }
      const double slack = 1e-9 * std::fabs(y);
      for (int64_t i = 0;; ++i) {
        double v = at(i);
        if (grows ? std::fabs(v) > std::fabs(y) + slack : std::fabs(v) < std::fabs(y) - slack) {
          break;
        }
        values.push_back(v);
        if (values.size() > kMaxValues) return too_many();
      }
      if (count != 0 && static_cast<int64_t>(values.size()) != count) {
        return InvalidArgument(fmt::format("'{}' gives {} values, not {}", text, values.size(),
                                           count));
      }
    } else if (count != 0) {
      for (int64_t i = 0; i < count; ++i) values.push_back(at(i));
    } else {
      return InvalidArgument(fmt::format(
          "'{}': say how many values ('3 values', '取3个值') or where to stop ('to 256', '到256')",
          text));
    }
    s.note = fmt::format("{} by {} each time", q.divide ? "divided" : "multiplied", q.factor);
  } else if (q.y != kNone && search_ && count == 0 && q.step == 0) {
    // A search samples the range: log-uniform where spacing would be logarithmic (a float range
    // spanning 10x or more, the recipe's scale: log, or "log"), else uniform; ints alike.
    double lo = std::min(x, toks_[q.y].num), hi = std::max(x, toks_[q.y].num);
    if (lo == hi) {
      return InvalidArgument(fmt::format("'{}': a range to search needs two different ends", text));
    }
    const bool log = q.log || (!q.linear && lo > 0 &&
                               (param.scale == "log" ||
                                (param.scale.empty() && hi / lo >= (param.type == "int" ? 16 : 10))));
    if (q.log && lo <= 0) {
      return InvalidArgument(fmt::format("'{}': a log scale needs both ends above 0", text));
    }
    const char* kind = param.type == "int" ? (log ? "int_log" : "int") : (log ? "log_uniform" : "uniform");
    for (double v : {lo, hi}) {
      Token t;
      t.num = v;
      t.begin = a.begin;
      t.end = toks_[q.end - 1].end;
      DROVER_ASSIGN_OR_RETURN(Json j, ValueFor(p, t));
      s.values.push_back(j);
    }
    s.dist = Json{{kind, s.values}};
    s.note = fmt::format("searched {}", log ? "on a log scale" : "uniformly");
    return Status::Ok();
  } else if (q.y != kNone) {
    const double y = toks_[q.y].num;
    if (count > 0) {
      const bool spans_decades = x > 0 && y > 0 && std::max(x, y) / std::min(x, y) >= 10;
      bool geometric = q.log || (!q.linear && x > 0 && y > 0 &&
                                 (param.scale == "log" ||
                                  (param.scale.empty() && param.type == "float" && spans_decades)));
      if (geometric && (x <= 0 || y <= 0)) {
        return InvalidArgument(fmt::format("'{}': log spacing needs both ends above 0", text));
      }
      for (int64_t i = 0; i < count; ++i) {
        double f = static_cast<double>(i) / static_cast<double>(count - 1);
        values.push_back(geometric ? x * std::pow(y / x, f) : x + (y - x) * f);
      }
      s.note = geometric ? "log-spaced" : "evenly spaced";
    } else if (q.step > 0) {
      double dir = y >= x ? 1 : -1;
      for (double v = x; dir * (y - v) >= -1e-9 * std::max(1.0, std::fabs(y)); v += dir * q.step) {
        values.push_back(v);
        if (values.size() > kMaxValues) {
          return InvalidArgument(fmt::format("'{}': that step gives more than {} values; use a "
                                             "larger step",
                                             text, kMaxValues));
        }
      }
      s.note = fmt::format("step {}", q.step);
    } else if (param.type == "int" && !q.linear && IsPowerOfTwo(x) && IsPowerOfTwo(y) &&
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
          "('step 10'), or search it ('search {} between ... for 20 trials')",
          text, param.name, text, param.name));
    }
  } else if (q.step > 0) {
    if (count == 0) {
      return InvalidArgument(fmt::format(
          "'{}': say how many values ('3 values', '取3个值') or where to stop ('to 100', '到100')",
          text));
    }
    for (int64_t i = 0; i < count; ++i) values.push_back(x + static_cast<double>(i) * q.step);
    s.note = fmt::format("step {}", q.step);
  }
  for (double v : values) {
    Token t;
    t.num = param.type == "int" ? std::round(v) : Round10(v);
    t.text = fmt::format("{}", t.num);
    t.begin = a.begin;
    t.end = toks_[q.end - 1].end;
    DROVER_ASSIGN_OR_RETURN(Json j, ValueFor(p, t));
    if (std::find(s.values.begin(), s.values.end(), j) == s.values.end()) s.values.push_back(j);
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
    // Loosely, also a comma right after the name: "two groups of batch sizes, 64 and 512".
    bool skip_loose = loose && !toks_[j].used &&
                      (k == Tok::kFiller || k == Tok::kUnknown || k == Tok::kAdj ||
                       k == Tok::kEach || k == Tok::kPunct || (k == Tok::kSep && j == at + 1));
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

  Seq q;
  const bool parsed = TakesNumbers(p) && ParseSeq(j, toks_.size(), q);
  size_t list_at = kNone;  // where a list of values starts
  if (IsFree(j, Tok::kNumber) && !BoundForward(j)) {
    list_at = j;
  } else if (parsed && q.prefix_count && !BoundForward(q.x)) {
    list_at = q.x;  // "学习率取三档：0.1、0.01、0.001"
  }
  if (parsed && q.IsSequence()) {
    // A count right before the parameter counts the sequence's values ("3 learning rates from
    // 1e-4 to 1e-2", "三档学习率，从..."), and "double"/"halve" before it is its factor ("double
    // the batch size from 32 to 256").
    CountWords c = CountBefore(at);
    size_t first = at;
    const bool counted = Is(at + 1, Tok::kValues) || Is(at + 1, Tok::kLevel);  // "4 epoch settings"
    if (c.number != kNone && toks_[c.number].integral &&
        (c.strong || c.measure || toks_[at].plural || counted)) {
      q.counts.emplace_back(CountOf(toks_[c.number].num), c.number);
      for (size_t k = c.number; k < at; ++k) {
        q.log = q.log || Is(k, Tok::kLog);
        q.linear = q.linear || Is(k, Tok::kLinear);
      }
      first = c.number;
    }
    size_t op = SkipBack(first - 1, {Tok::kFiller});
    if (op != kNone && (IsFree(op, Tok::kMul) || IsFree(op, Tok::kDiv)) && toks_[op].num > 0) {
      if (q.factor > 0 && (q.factor != toks_[op].num || q.divide != Is(op, Tok::kDiv))) {
        q.factor_conflict = true;
      }
      q.factor = toks_[op].num;
      q.divide = Is(op, Tok::kDiv);
      first = op;
    }
    Use(at + 1, j, &found.from);
    DROVER_RETURN_IF_ERROR(MakeSeq(p, q, found));
    Use(q.begin, q.end, &found.from);
    Use(first, at, &found.from);
  } else if (list_at != kNone && TakesNumbers(p)) {
    // A list: 32, 64 / 32 and 64 / 32 64 / [32, 64].
    size_t last = list_at;
    for (size_t k = list_at; k < toks_.size();) {
      if (!IsFree(k, Tok::kNumber) || (k != list_at && BoundForward(k))) break;
      DROVER_ASSIGN_OR_RETURN(Json v, ValueFor(p, toks_[k]));
      if (std::find(found.values.begin(), found.values.end(), v) == found.values.end()) {
        found.values.push_back(v);
      }
      last = k;
      k = Skip(k + 1, {Tok::kSep, Tok::kOpen});
    }
    if (Is(last + 1, Tok::kClose)) ++last;
    if (list_at != j) {  // the count before the list, checked against it once all is read
      DROVER_RETURN_IF_ERROR(RecordCount(p, q.counts.front().second, j, list_at));
    } else if (Seq after; CountPhraseAt(Skip(last + 1, {Tok::kSep, Tok::kOpen}), toks_.size(),
                                        after) != kNone) {
      // "0.1, 0.01, 0.001 (3 values)"
      size_t k = Skip(last + 1, {Tok::kSep, Tok::kOpen});
      size_t e = CountPhraseAt(k, toks_.size(), after);
      DROVER_RETURN_IF_ERROR(RecordCount(p, k, k, e));
      if (Is(e, Tok::kClose)) Use(e, e + 1, &found.from);
    }
    Use(at + 1, last + 1, &found.from);
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
  if (!found.dist.is_null()) {  // a range to search replaces values read before
    s.values.clear();
    s.dist = found.dist;
  } else if (!s.dist.is_null()) {
    return InvalidArgument(fmt::format("{} is given a range to search and values ({}); keep one",
                                       param.name, JoinValues(found.values)));
  }
  for (Json& v : found.values) {
    if (std::find(s.values.begin(), s.values.end(), v) == s.values.end()) s.values.push_back(v);
  }
  s.from.insert(s.from.end(), found.from.begin(), found.from.end());
  if (!found.note.empty()) s.note = found.note;
  return Status::Ok();
}

Status Planner::ReadBackward(size_t at) {
  const int p = toks_[at].index;
  if (at == 0 || has_after_[at] || toks_[at].used || !params_[p].values.empty() ||
      !TakesNumbers(p)) {
    return Status::Ok();
  }
  size_t b = at;  // the words from here to the parameter: "取3个"
  CountWords c = CountBefore(at);
  if (c.number != kNone && (c.strong || c.measure)) {  // a bare number there ends the sequence
    if (!toks_[c.number].integral) return Status::Ok();
    b = c.number;
  } else {
    c.number = kNone;
  }
  size_t k = SkipBack(b - 1, {Tok::kFiller, Tok::kAssign, Tok::kSep, Tok::kEach, Tok::kBetween});
  if (k == kNone || !IsFree(k, Tok::kNumber)) return Status::Ok();
  size_t w = k;
  while (w > 0 && SeqWord(w - 1)) --w;
  for (size_t start = w; start <= k; ++start) {
    Seq q;
    if (!ParseSeq(start, b, q) || !q.IsSequence() || q.end <= k) continue;
    if (c.number != kNone) {
      q.counts.emplace_back(CountOf(toks_[c.number].num), c.number);
      for (size_t m = c.number; m < at; ++m) {
        q.log = q.log || Is(m, Tok::kLog);
        q.linear = q.linear || Is(m, Tok::kLinear);
      }
    }
    Setting& s = params_[p];
    DROVER_RETURN_IF_ERROR(MakeSeq(p, q, s));
    Use(q.begin, q.end, &s.from);
    Use(b, at + 1, &s.from);
    has_after_[at] = true;  // its values are read; nothing before it is a value of it
    return Status::Ok();
  }
  return Status::Ok();
}

Status Planner::ReadBefore(size_t at) {
  const int p = toks_[at].index;
  if (p == seed_ && !params_[p].values.empty()) return Status::Ok();
  CountWords c = CountBefore(at);
  if (c.number == kNone) return Status::Ok();
  const size_t k = c.number;
  if (p == seed_) {  // "3 seeds" is a count, "seed 3" a value
    if (!toks_[k].integral) return Status::Ok();
    // Past kMaxValues SetCount refuses it; past int64 the cast itself would be undefined.
    auto count = CountOf(toks_[k].num);
    DROVER_RETURN_IF_ERROR(SetCount(p, count, k, at + 1, fmt::format("{} seeds", count)));
    return Status::Ok();
  }
  // A count, never a value: "三档学习率", "3 levels of lr", "3 different learning rates", "四种模型"
  // (a choice parameter takes no numbers); and "3个学习率：...", "2 batch sizes: 32 and 64" when
  // the values are given elsewhere.
  const bool elsewhere = has_after_[at] || !params_[p].values.empty();
  if (c.strong || !TakesNumbers(p) || (elsewhere && (c.measure || toks_[at].plural))) {
    return RecordCount(p, k, k, at + 1);
  }
  if (elsewhere || c.glue) return Status::Ok();
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

// A near miss of a choice ("efficentnet") is read as that choice, and said so.
void Planner::FixTypos() {
  for (Token& t : toks_) {
    if (t.used || t.kind != Tok::kUnknown || t.text.size() < 5 ||
        static_cast<unsigned char>(t.text[0]) >= 0x80) {
      continue;
    }
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
}

size_t Planner::ChoiceListEnd(size_t k, int* param) const {
  if (!IsFree(k, Tok::kChoice)) return kNone;
  const int p = toks_[k].index;
  size_t last = k;
  for (size_t m = Skip(k + 1, {Tok::kSep}); IsFree(m, Tok::kChoice) && toks_[m].index == p;
       m = Skip(m + 1, {Tok::kSep})) {
    last = m;
  }
  *param = p;
  return last;
}

void Planner::Exclude(int p, size_t first, size_t last) {
  for (size_t i = first; i <= last; ++i) {
    if (!Is(i, Tok::kChoice)) continue;
    const Json& v = r_.params[p].choices[toks_[i].choice];
    if (std::find(excluded_[p].begin(), excluded_[p].end(), v) == excluded_[p].end()) {
      excluded_[p].push_back(v);
    }
  }
}

// "every model except mlp", "all models but mlp and cnn", "cnn but not mlp", "除了mlp以外的所有
// 模型", "除mlp外所有模型", "不要mlp", "mlp除外": the choices named are left out. "all models",
// "所有模型" name every choice of the parameter.
void Planner::ReadNegations() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (!IsFree(i, Tok::kExcept)) continue;
    int p = -1;
    size_t first = Skip(i + 1, {Tok::kFiller, Tok::kAll});  // "except for the", "不要跑"
    size_t last = ChoiceListEnd(first, &p);
    if (last == kNone) continue;  // "but faster": left as ignored
    size_t end = last + 1;
    if (IsFree(end, Tok::kExceptAfter)) ++end;  // 除了mlp以外, 除mlp外
    bool besides = false;  // "除了cnn以外，还要跑mlp": cnn and mlp
    for (size_t k = end; toks_[i].num == 1 && k < toks_.size() && !Is(k, Tok::kBreak); ++k) {
      besides = besides || Is(k, Tok::kAlso);
    }
    if (besides) {
      Use(i, i + 1, nullptr);
      if (end > last + 1) Use(last + 1, end, nullptr);
      continue;  // the choices are read as named
    }
    Exclude(p, first, last);
    Use(i, end, &excluded_from_[p]);
  }
  for (size_t i = 1; i < toks_.size(); ++i) {  // "mlp除外", "mlp以外的模型", "mlp excluded"
    if (!IsFree(i, Tok::kExceptAfter) || toks_[i].num == 0 || !IsFree(i - 1, Tok::kChoice)) {
      continue;
    }
    const int p = toks_[i - 1].index;
    size_t first = i - 1;
    for (size_t m = SkipBack(first - 1, {Tok::kSep});
         m != kNone && IsFree(m, Tok::kChoice) && toks_[m].index == p;
         m = SkipBack(m - 1, {Tok::kSep})) {
      first = m;
    }
    Exclude(p, first, i - 1);
    Use(first, i + 1, &excluded_from_[p]);
  }
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (!IsFree(i, Tok::kAll) && !IsFree(i, Tok::kEach)) continue;  // also "each model", "每个模型"
    size_t k = Skip(i + 1, {Tok::kFiller, Tok::kAssign});  // "all the models", "所有的模型"
    if (!Is(k, Tok::kParam) || r_.params[toks_[k].index].type != "choice") continue;
    Use(i, i + 1, &all_from_[toks_[k].index]);
  }
}

Status Planner::ReadChoices() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    Token& t = toks_[i];
    if (t.used || t.kind != Tok::kChoice) continue;
    Setting& s = params_[t.index];
    const Json& v = r_.params[t.index].choices[t.choice];
    if (std::find(s.values.begin(), s.values.end(), v) == s.values.end()) s.values.push_back(v);
    t.used = true;
    s.from.push_back(i);
  }
  return Status::Ok();
}

// What is left out, out of the choices named (or all of them when none are): "cnn but not mlp",
// "every model except mlp".
Status Planner::ApplyExclusions() {
  for (size_t p = 0; p < params_.size(); ++p) {
    if (excluded_[p].empty() && all_from_[p].empty()) continue;
    Setting& s = params_[p];
    // "cnn and the other models", "除了cnn，其他模型也跑": the others and the named are all.
    const bool others = std::any_of(all_from_[p].begin(), all_from_[p].end(),
                                    [&](size_t i) { return toks_[i].num == 1; });
    const bool named = !s.values.empty() && !others;
    std::vector<Json> kept;
    for (const Json& v : named ? s.values : r_.params[p].choices) {
      if (std::find(excluded_[p].begin(), excluded_[p].end(), v) == excluded_[p].end()) {
        kept.push_back(v);
      }
    }
    std::vector<size_t> from = excluded_from_[p];
    from.insert(from.end(), all_from_[p].begin(), all_from_[p].end());
    if (kept.empty()) {
      return InvalidArgument(fmt::format(
          "{} leaves no {} to run: it leaves out {}, and the recipe {} has {}", QuoteTokens(from),
          r_.params[p].name, JoinValues(excluded_[p]), r_.source,
          JoinValues(r_.params[p].choices)));
    }
    s.values = std::move(kept);
    s.from.insert(s.from.end(), from.begin(), from.end());
    if (!excluded_[p].empty()) {
      s.note = fmt::format("{} {}", named ? "but not" : "all but", JoinValues(excluded_[p]));
    } else if (!named) {
      s.note = "all";
    }
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
        // "on 2 GPUs", "across 4 GPUs", "用2张卡" (no "each"): the GPUs the runs share when
        // there are several (Build decides), else the one run's.
        const size_t marker = back == 0 ? kNone : back - 1;
        static constexpr std::string_view kInAll[] = {"on", "across", "over", "using", "use", "用",
                                                      "在"};
        const bool in_all =
            marker != kNone &&
            std::find(std::begin(kInAll), std::end(kInAll), toks_[marker].text) != std::end(kInAll);
        const bool each = Is(Skip(i + 1, {Tok::kFiller}), Tok::kEach) ||
                          (marker != kNone && marker > 0 && Is(marker - 1, Tok::kEach));
        DROVER_RETURN_IF_ERROR(Settle(gpus_, gpus_from_, static_cast<int>(toks_[back].num), back,
                                      i + 1, "the GPUs per run"));
        if (in_all && !each) {
          gpus_in_all_ = true;
          Use(marker, marker + 1, &gpus_from_);
        }
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

// A search's trials: "for 20 trials", "20 trials", "trials=20", "20次试验", "试验20次".
Status Planner::ReadTrials() {
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (!IsFree(i, Tok::kTrials)) continue;
    auto count_at = [&](size_t k) {
      return k != kNone && IsFree(k, Tok::kNumber) && toks_[k].integral && toks_[k].num >= 1;
    };
    const size_t back = i == 0 ? kNone : SkipBack(i - 1, {Tok::kMeasure, Tok::kAdj});
    const size_t fwd = Skip(i + 1, {Tok::kAssign});
    size_t k = kNone, b = 0, e = 0;
    if (count_at(back)) {
      k = back, b = back, e = i + 1;
    } else if (count_at(fwd)) {
      k = fwd, b = i, e = fwd + 1;
      if (IsFree(e, Tok::kTimes) && toks_[e].num == 0) ++e;  // "试验20次"
    } else {
      continue;  // left for `ignored`
    }
    if (toks_[k].num > static_cast<double>(kMaxPlannedTrials)) {
      return InvalidArgument(fmt::format("'{}': a planned search makes at most {} trials",
                                         Quote(toks_[b].begin, toks_[e - 1].end),
                                         kMaxPlannedTrials));
    }
    DROVER_RETURN_IF_ERROR(Settle(trials_, trials_from_, static_cast<int>(toks_[k].num), b, e,
                                  "the number of trials"));
  }
  return Status::Ok();
}

int64_t Planner::PlannedCount() const {
  const bool sampled = std::any_of(params_.begin(), params_.end(),
                                   [](const Setting& s) { return !s.dist.is_null(); });
  if (sampled) return trials_.value_or(kDefaultPlannedTrials);
  int64_t n = 1;
  for (const Setting& s : params_) n *= std::max<int64_t>(1, static_cast<int64_t>(s.values.size()));
  return n;
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

// What an instruction adds to a plan beyond values: ranges to search (per parameter, null for
// values), the search's trials, and how many runs may run at once.
struct PlanExtras {
  std::vector<Json> dists;
  std::optional<int> trials;    // set: a search
  std::optional<int> parallel;  // search.parallel, or max_parallel for a grid
};

// The spec of a recipe with these values per parameter (empty: the default), the objective,
// GPUs per run and priority; `understood` and `ignored` are left to the caller.
Result<Plan> BuildPlan(const Recipe& r, const std::vector<std::vector<Json>>& chosen,
                       std::optional<int> metric, std::optional<int> gpus_set,
                       std::optional<int> priority_set, std::string_view giver,
                       const PlanExtras& extra = {}) {
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
    const Json* dist =
        p < extra.dists.size() && !extra.dists[p].is_null() ? &extra.dists[p] : nullptr;
    params[param.name] = dist ? *dist : Json(values);
    out << YAML::Key << param.name << YAML::Value;
    if (dist) {  // {log_uniform: [1e-4, 0.1]}
      out << YAML::Flow << YAML::BeginMap << YAML::Key << dist->begin().key() << YAML::Value
          << YAML::Flow << YAML::BeginSeq;
      for (const Json& v : dist->begin().value()) EmitValue(out, v);
      out << YAML::EndSeq << YAML::EndMap;
    } else if (values.size() == 1) {
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
    } else if (key == "env" && value.is_object()) {
      // Environment values are strings ("2", not 2): the recipe's quotes do not survive its
      // re-emitted text, so they are put back here, in the JSON and in the YAML below.
      for (auto& [name, v] : value.items()) {
        if (!v.is_string()) v = v.is_null() ? std::string() : v.dump();
      }
      defaults[key] = value;
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
    if (key == "max_parallel" && extra.parallel) continue;  // the instruction's "on 2 GPUs" wins
    if (key == "env" && defaults.contains("env") && defaults["env"].is_object()) {
      out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [name, v] : defaults["env"].items()) {
        out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << v.get<std::string>();
      }
      out << YAML::EndMap;
      continue;
    }
    out << YAML::Key << key << YAML::Value << YAML::Load(text);
  }
  plan.spec = {{"name", name},     {"command", r.command},  {"workdir", r.dir},
               {"params", params}, {"resources", resources}, {"priority", priority}};
  if (extra.parallel) defaults.erase("max_parallel");
  for (auto it = defaults.begin(); it != defaults.end(); ++it) plan.spec[it.key()] = it.value();
  if (metric) {
    const RecipeMetric& m = r.metrics[*metric];
    std::string mode = m.maximize ? "max" : "min";
    plan.spec["objective"] = {{"metric", m.name}, {"mode", mode}};
    out << YAML::Key << "objective" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
        << "metric" << YAML::Value << m.name << YAML::Key << "mode" << YAML::Value << mode
        << YAML::EndMap;
  }
  if (extra.trials) {
    Json search = {{"trials", *extra.trials}};
    out << YAML::Key << "search" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
        << "trials" << YAML::Value << *extra.trials;
    if (extra.parallel) {
      search["parallel"] = *extra.parallel;
      out << YAML::Key << "parallel" << YAML::Value << *extra.parallel;
    }
    out << YAML::EndMap;
    plan.spec["search"] = search;
  } else if (extra.parallel) {
    plan.spec["max_parallel"] = *extra.parallel;
    out << YAML::Key << "max_parallel" << YAML::Value << *extra.parallel;
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
  PlanExtras extra;
  bool sampled = false;
  for (const Setting& s : params_) {
    extra.dists.push_back(s.dist);
    sampled = sampled || !s.dist.is_null();
  }
  if (trials_ && !sampled) {
    return InvalidArgument(fmt::format(
        "{} asks for a search, but nothing in the instruction is a range to search; give one, "
        "such as 'search {} between A and B for {} trials'",
        QuoteTokens(trials_from_), r_.params.empty() ? "lr" : r_.params[0].name, *trials_));
  }
  if (sampled) {
    for (size_t i = 0; i < toks_.size(); ++i) {
      if (Is(i, Tok::kSearch)) toks_[i].used = true;  // read: a search word with no range is not
    }
    if (!objective) {
      return InvalidArgument(fmt::format(
          "a search needs a metric to optimise, and the recipe {} names none; add 'metrics:' "
          "to it",
          r_.source));
    }
    extra.trials = trials_.value_or(kDefaultPlannedTrials);
  }
  // "on 2 GPUs" with several runs: the GPUs they share, one each (or the recipe's count), as
  // many at once as fit.
  std::optional<int> gpus = gpus_;
  std::string gpus_note;
  if (gpus_in_all_ && gpus_ && *gpus_ > 0 && PlannedCount() > 1) {
    const int per = std::clamp(r_.gpus, 1, *gpus_);
    gpus = per;
    extra.parallel = *gpus_ / per;
    gpus_note = fmt::format(
        "GPUs: {} in all, {} per run, up to {} runs at once (from {}; '{} GPUs each' gives every "
        "run {})",
        *gpus_, per, *extra.parallel, QuoteTokens(gpus_from_), *gpus_, *gpus_);
  }
  DROVER_ASSIGN_OR_RETURN(
      Plan plan, BuildPlan(r_, chosen, objective, gpus, priority_, "the instruction gives", extra));

  for (size_t p = 0; p < r_.params.size(); ++p) {
    const Setting& s = params_[p];
    if (s.values.empty()) continue;
    std::string note = s.note.empty() ? "" : s.note + ", ";
    plan.understood.push_back(fmt::format("{}: {} ({}from {})", r_.params[p].name,
                                          s.dist.is_null() ? JoinValues(s.values)
                                                           : JoinValues(s.values, " to "),
                                          note, QuoteTokens(s.from)));
  }
  if (metric_) {
    const RecipeMetric& m = r_.metrics[*metric_];
    plan.understood.push_back(fmt::format("objective: {} {} (from {})", m.name,
                                          m.maximize ? "max" : "min", QuoteTokens(metric_from_)));
  } else if (objective) {
    const RecipeMetric& m = r_.metrics[*objective];
    plan.understood.push_back(
        r_.metrics.size() > 1
            ? fmt::format("objective: {} {} (the recipe's first metric; name another, such as "
                          "\"by {}\", to rank by it)",
                          m.name, m.maximize ? "max" : "min", r_.metrics[1].name)
            : fmt::format("objective: {} {} (the recipe's metric)", m.name,
                          m.maximize ? "max" : "min"));
  }
  if (extra.trials) {
    plan.understood.push_back(
        trials_ ? fmt::format("search: {} trials (from {})", *extra.trials, QuoteTokens(trials_from_))
                : fmt::format("search: {} trials (the default; say 'for N trials' for another "
                              "number)",
                              *extra.trials));
  }
  if (!gpus_note.empty()) {
    plan.understood.push_back(gpus_note);
  } else if (gpus_) {
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
  if (search_) DROVER_RETURN_IF_ERROR(ReadTrials());
  DROVER_RETURN_IF_ERROR(ReadRepeats());
  DROVER_RETURN_IF_ERROR(ReadPriority());
  DROVER_RETURN_IF_ERROR(ReadGpus());
  FixTypos();
  ReadNegations();
  // Right to left, so whether a later parameter took the values after it is known when an
  // earlier list decides where it stops ("lr 0.1 0.01 batch size 32" vs "bs 32 10 epochs").
  for (size_t i = toks_.size(); i-- > 0;) {
    if (Is(i, Tok::kParam) && toks_[i].index != seed_) DROVER_RETURN_IF_ERROR(ReadAfter(i));
    if (Is(i, Tok::kParam) && toks_[i].index == seed_) {
      // "seeds 0,1,2" are values, but "3 seeds" (a number before) is a count: read it first.
      if (CountBefore(i).number == kNone) DROVER_RETURN_IF_ERROR(ReadAfter(i));
    }
  }
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (Is(i, Tok::kParam)) DROVER_RETURN_IF_ERROR(ReadBackward(i));
  }
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (Is(i, Tok::kParam)) DROVER_RETURN_IF_ERROR(ReadBefore(i));
  }
  DROVER_RETURN_IF_ERROR(ReadChoices());
  DROVER_RETURN_IF_ERROR(ApplyExclusions());
  for (size_t i = 0; i < toks_.size(); ++i) {
    if (Is(i, Tok::kParam) && params_[toks_[i].index].values.empty()) {
      DROVER_RETURN_IF_ERROR(ReadAfter(i, /*loose=*/true));
    }
  }
  DROVER_RETURN_IF_ERROR(CheckCounts());
  ReadMetric();
  bool any = metric_ || gpus_ || priority_ || trials_;
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
  if (spec.search && spec.search->sampler != SamplerKind::kGrid) {
    return static_cast<int>(spec.search->trials);
  }
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
