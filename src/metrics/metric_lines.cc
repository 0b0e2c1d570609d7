#include "metrics/metric_lines.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace drover {

namespace {

// Python's json.dumps writes NaN, Infinity and -Infinity, which JSON does not have. A diverged run
// prints exactly these, so they must not make the line unreadable: outside strings they become
// marker strings that ParseMetricLine turns back into doubles.
constexpr std::string_view kNanMark = "@drover:nan";
constexpr std::string_view kInfMark = "@drover:inf";
constexpr std::string_view kNegInfMark = "@drover:-inf";

std::string MarkNonFinite(std::string_view t) {
  std::string out;
  out.reserve(t.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < t.size())
        out += t[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    auto take = [&](std::string_view word, std::string_view mark) {
      if (t.substr(i, word.size()) != word) return false;
      out += '"';
      out += mark;
      out += '"';
      i += word.size() - 1;
      return true;
    };
    if (take("NaN", kNanMark) || take("-Infinity", kNegInfMark) || take("Infinity", kInfMark)) {
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::optional<AlertLine> ParseAlertLine(std::string_view line) {
  // Most lines are metrics or plain output: skip the parse unless the marker is there.
  if (line.find("\"drover_alert\"") == std::string_view::npos) return std::nullopt;
  std::string_view t = Trim(line);
  nlohmann::json j = nlohmann::json::parse(t, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) j = nlohmann::json::parse(MarkNonFinite(t), nullptr, false);
  if (!j.is_object() || j.size() != 1 || !j.contains("drover_alert")) return std::nullopt;
  const auto& body = j["drover_alert"];
  if (!body.is_object()) return std::nullopt;
  auto text = [&](const char* key) -> std::optional<std::string> {
    auto it = body.find(key);
    if (it == body.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  AlertLine a;
  auto message = text("message");
  if (!message || Trim(*message).empty()) return std::nullopt;
  a.message = *message;
  if (auto level = text("level")) {
    if (*level != "info" && *level != "warning" && *level != "error") return std::nullopt;
    a.level = *level;
  }
  a.key = text("key").value_or(a.message);
  if (body.contains("details") && body["details"].is_object()) a.details = body["details"];
  return a;
}

namespace {
// At most `max` bytes of `s`, not cutting a UTF-8 character in two.
std::string Utf8Prefix(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}
}  // namespace

std::optional<ReportLine> ParseReportLine(std::string_view line) {
  if (line.find("\"drover_") == std::string_view::npos) return std::nullopt;
  std::string_view t = Trim(line);
  nlohmann::json j = nlohmann::json::parse(t, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) j = nlohmann::json::parse(MarkNonFinite(t), nullptr, false);
  if (!j.is_object() || j.size() != 1) return std::nullopt;
  const auto first = j.begin();  // (items() would give a temporary to bind to)
  const std::string key = first.key();
  const nlohmann::json& body = first.value();
  if (!body.is_object()) return std::nullopt;
  ReportLine r;
  if (key == "drover_checkpoint" || key == "drover_resume") {
    auto step = body.find("step");
    if (step == body.end() || !step->is_number_integer() ||
        (step->is_number_unsigned() && step->get<uint64_t>() > INT64_MAX)) {
      return std::nullopt;
    }
    r.kind = key == "drover_checkpoint" ? ReportLine::Kind::kCheckpoint : ReportLine::Kind::kResume;
    r.step = step->get<int64_t>();
    return r;
  }
  if (key != "drover_hparams") return std::nullopt;
  r.kind = ReportLine::Kind::kHparams;
  for (auto it = body.begin(); it != body.end() && r.hparams.size() < kMaxHparams; ++it) {
    std::string name = Utf8Prefix(it.key(), kMaxHparamBytes);
    const auto& v = it.value();
    if (v.is_number() || v.is_boolean() || v.is_null()) {
      r.hparams[name] = v;
    } else if (v.is_string()) {
      r.hparams[name] = Utf8Prefix(v.get_ref<const std::string&>(), kMaxHparamBytes);
    } else {
      // A list or an object is named, not dumped: its depth is the run's to choose.
      r.hparams[name] = v.is_array() ? "(a list)" : "(an object)";
    }
  }
  return r;
}

namespace {

// The common case, read without building a JSON tree: one flat object whose values are numbers
// (and strings, booleans or null, which are skipped), as drover.log and most scripts print it.
// Returns the numeric fields sorted by name (as the JSON object iterates them), or nothing when
// the line needs the full parser: nested values, escaped keys, duplicate keys, anything unusual.
// ParseMetricLine's answer is the same either way (metric_lines_test compares them).
struct FlatField {
  std::string key;
  double value = 0;
  bool numeric = false;  // strings, booleans and null are kept only to catch duplicate keys
};

std::optional<std::vector<FlatField>> FlatNumbers(std::string_view t) {
  size_t i = 1;  // after '{'
  auto ws = [&] {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n')) ++i;
  };
  // A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  auto number = [&](double* out) -> bool {
    size_t start = i;
    if (i < t.size() && t[i] == '-') ++i;
    if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) return false;
    if (t[i] == '0') {
      ++i;
    } else {
      while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    }
    if (i < t.size() && t[i] == '.') {
      ++i;
      if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) return false;
      while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      ++i;
      if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
      if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) return false;
      while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    }
    auto [p, ec] = std::from_chars(t.data() + start, t.data() + i, *out);
    // Out of range: leave it to the full parser, which has its own idea of it.
    return ec == std::errc() && p == t.data() + i;
  };
  auto word = [&](std::string_view w) {
    if (t.substr(i, w.size()) != w) return false;
    i += w.size();
    return true;
  };
  // Escapes and non-ASCII bytes (UTF-8 to validate) are the full parser's business.
  for (char ch : t) {
    if (ch == '\\' || static_cast<unsigned char>(ch) >= 0x80) return std::nullopt;
  }
  std::vector<FlatField> out;
  ws();
  if (i < t.size() && t[i] == '}') return out;  // {}
  for (;;) {
    ws();
    if (i >= t.size() || t[i] != '"') return std::nullopt;
    size_t key_start = ++i;
    while (i < t.size() && t[i] != '"' && t[i] != '\\' && static_cast<unsigned char>(t[i]) >= 0x20) ++i;
    if (i >= t.size() || t[i] != '"') return std::nullopt;  // escapes, control characters
    std::string_view key = t.substr(key_start, i - key_start);
    ++i;
    ws();
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    ++i;
    ws();
    if (i >= t.size()) return std::nullopt;
    char c = t[i];
    double v = 0;
    bool numeric = true;
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      if (word("-Infinity")) {
        v = -std::numeric_limits<double>::infinity();
      } else if (!number(&v)) {
        return std::nullopt;
      }
    } else if (word("NaN")) {
      v = std::numeric_limits<double>::quiet_NaN();
    } else if (word("Infinity")) {
      v = std::numeric_limits<double>::infinity();
    } else if (word("true") || word("false") || word("null")) {
      numeric = false;
    } else if (c == '"') {
      numeric = false;
      for (++i; i < t.size() && t[i] != '"'; ++i) {
        if (static_cast<unsigned char>(t[i]) < 0x20) return std::nullopt;
        if (t[i] == '\\') ++i;
      }
      if (i >= t.size()) return std::nullopt;
      ++i;
    } else {
      return std::nullopt;  // nested object or list
    }
    out.push_back({std::string(key), v, numeric});
    ws();
    if (i >= t.size()) return std::nullopt;
    if (t[i] == ',') {
      ++i;
      continue;
    }
    if (t[i] == '}' && i + 1 == t.size()) break;
    return std::nullopt;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  for (size_t k = 1; k < out.size(); ++k) {
    if (out[k].key == out[k - 1].key) return std::nullopt;  // the last one wins: full parser
  }
  return out;
}

}  // namespace

namespace {

// Whether a top-level field is a metric. "step" never is, usable or not (a step outside what a
// step can be must not turn into a metric named step); "epoch" is one only beside a usable step
// (it is the step otherwise); drover_* fields are what the run reports about itself
// (drover_alert, drover_checkpoint, ...) whatever their value's type.
bool IsMetricKey(std::string_view key, std::string_view step_key) {
  if (key == "step" || key.starts_with("drover_")) return false;
  return key != "epoch" || step_key == "step";
}

}  // namespace

std::optional<MetricLine> ParseMetricLine(std::string_view line, int64_t fallback_step) {
  std::string_view t = Trim(line);
  if (t.size() < 2 || t.front() != '{' || t.back() != '}') return std::nullopt;
  if (auto flat = FlatNumbers(t)) {
    MetricLine m;
    m.step = fallback_step;
    std::string step_key;
    for (const char* key : {"step", "epoch"}) {
      auto it = std::find_if(flat->begin(), flat->end(),
                             [&](const FlatField& f) { return f.key == key; });
      if (it == flat->end() || !it->numeric) continue;
      if (!std::isfinite(it->value) || std::fabs(it->value) > 9e15) continue;
      m.step = static_cast<int64_t>(it->value);
      step_key = key;
      break;
    }
    for (auto& f : *flat) {
      if (!f.numeric || !IsMetricKey(f.key, step_key)) continue;
      m.values.emplace_back(std::move(f.key), f.value);
    }
    if (m.values.empty()) return std::nullopt;
    return m;
  }
  return ParseMetricLineWithJson(t, fallback_step);
}

// Adds the numbers of `obj` to `m`, nested objects flattened with dots ({"val": {"acc": 0.9}} is
// val.acc, as TensorBoard's tags and W&B's keys name them) down to kMaxMetricDepth levels. At the
// top, the step fields and the run's own reports are not metrics (IsMetricKey). `marked`: NaN and
// infinities stand as marker strings (MarkNonFinite); the top level's were replaced already.
static void Flatten(const nlohmann::json& obj, const std::string& prefix, int depth, bool marked,
                    const std::string& step_key, MetricLine* m) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (depth == 0 && !IsMetricKey(it.key(), step_key)) continue;
    std::string name = prefix + it.key();
    if (v.is_object()) {
      if (depth < kMaxMetricDepth) Flatten(v, name + ".", depth + 1, marked, step_key, m);
    } else if (v.is_number() && !v.is_boolean()) {
      m->values.emplace_back(std::move(name), v.get<double>());
    } else if (marked && depth > 0 && v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      if (s == kNanMark) m->values.emplace_back(std::move(name), std::nan(""));
      else if (s == kInfMark) m->values.emplace_back(std::move(name), HUGE_VAL);
      else if (s == kNegInfMark) m->values.emplace_back(std::move(name), -HUGE_VAL);
    }
  }
}

std::optional<MetricLine> ParseMetricLineWithJson(std::string_view line, int64_t fallback_step) {
  std::string_view t = Trim(line);
  if (t.size() < 2 || t.front() != '{' || t.back() != '}') return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(t, nullptr, /*allow_exceptions=*/false);
  bool marked = false;
  if (j.is_discarded()) {
    j = nlohmann::json::parse(MarkNonFinite(t), nullptr, false);
    marked = true;
  }
  if (!j.is_object()) return std::nullopt;
  // Only markers this reader put in stand for NaN; a run that prints the marker text as a string
  // printed a string.
  for (auto& [key, v] : j.items()) {
    if (!marked) break;
    if (!v.is_string()) continue;
    const auto& s = v.get_ref<const std::string&>();
    if (s == kNanMark)
      v = std::numeric_limits<double>::quiet_NaN();
    else if (s == kInfMark)
      v = std::numeric_limits<double>::infinity();
    else if (s == kNegInfMark)
      v = -std::numeric_limits<double>::infinity();
  }
  auto numeric = [](const nlohmann::json& v) { return v.is_number() && !v.is_boolean(); };
  MetricLine m;
  m.step = fallback_step;
  std::string step_key;
  for (const char* key : {"step", "epoch"}) {
    auto it = j.find(key);
    if (it != j.end() && numeric(*it)) {
      double step = it->get<double>();
      if (!std::isfinite(step) || std::fabs(step) > 9e15) continue;  // not a usable step
      m.step = static_cast<int64_t>(step);
      step_key = key;
      break;
    }
  }
  Flatten(j, "", 0, marked, step_key, &m);
  if (m.values.empty()) return std::nullopt;
  return m;
}

Result<int64_t> ReadNewLines(const std::string& path, int64_t offset, bool final,
                             const std::function<void(std::string_view)>& on_line,
                             const LineLimits& limits) {
  // Nothing new (most looks, and the end of a run that printed nothing): one stat, no open.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return offset;
    return ErrnoStatus("reading " + path);
  }
  if (st.st_size <= offset) return offset;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return offset;
    return ErrnoStatus("reading " + path);
  }
  const size_t max_line =
      limits.max_line > 0 ? static_cast<size_t>(limits.max_line) : std::string::npos;
  std::string carry;      // the start of a line whose newline is not read yet
  bool skipping = false;  // inside an over-long line: dropped up to its newline
  int64_t pos = offset;   // read up to here
  int64_t done = offset;  // after the last line handed over (or skipped)
  std::vector<char> chunk(64 * 1024);
  while (final || limits.max_read <= 0 || pos - offset < limits.max_read) {
    ssize_t n = ::pread(fd, chunk.data(), chunk.size(), pos);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status err = ErrnoStatus("reading " + path);
      ::close(fd);
      return err;
    }
    if (n == 0) break;
    const std::string_view got(chunk.data(), static_cast<size_t>(n));
    const int64_t base = pos;
    pos += n;
    size_t start = 0;
    for (size_t nl = got.find('\n'); nl != std::string_view::npos; nl = got.find('\n', start)) {
      std::string_view piece = got.substr(start, nl - start);
      if (skipping) {
        skipping = false;
      } else if (carry.empty()) {
        on_line(piece);
      } else {
        carry.append(piece);
        on_line(carry);
        carry.clear();
      }
      start = nl + 1;
      done = base + static_cast<int64_t>(start);
    }
    if (skipping) {
      done = pos;  // still inside it: what was read of it is never read again
    } else if (start < got.size()) {
      if (carry.size() + (got.size() - start) > max_line) {
        carry.clear();
        skipping = true;
        done = pos;
      } else {
        carry.append(got.substr(start));
      }
    }
  }
  ::close(fd);
  if (final && !carry.empty()) {
    on_line(carry);
    done = pos;
  }
  return done;
}

std::string ReadTail(const std::string& path, int64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0) {
    int64_t from = st.st_size > max_bytes ? st.st_size - max_bytes : 0;
    out.resize(static_cast<size_t>(st.st_size - from));
    ssize_t n = ::pread(fd, out.data(), out.size(), from);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

}  // namespace drover
