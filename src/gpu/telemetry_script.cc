// Telemetry scripts for fake GPUs: one JSON object per line, read into sorted steps.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "common/strings.h"
#include "gpu/gpu_probe.h"
#include "gpu/health_json.h"

namespace drover {
namespace {

using Json = nlohmann::json;

const std::vector<std::string>& FieldNames() {
  static const std::vector<std::string> kFields = {
      "at",           "gpu",           "utilization",      "memory_used",
      "temperature",  "power",         "pcie_tx",          "pcie_rx",
      "xid",          "ecc_corrected", "ecc_uncorrected",  "retired_pages",
      "retired_pages_pending",         "remap_failed",     "throttle",
      "sm_clock_mhz", "sm_clock_max_mhz",                  "mem_clock_mhz"};
  return kFields;
}

constexpr char kExample[] = R"({"at": "30s", "gpu": 0, "utilization": 95})";

Status LineError(int line, std::string_view why) {
  return InvalidArgument(fmt::format("telemetry script line {}: {}", line, why));
}

// A bare number inside a string is ambiguous (ParseDurationMs reads seconds, the script's plain
// numbers are milliseconds), so it has to carry a unit.
bool IsBareNumber(std::string_view text) {
  std::string t(Trim(text));
  if (t.empty()) return false;
  char* end = nullptr;
  std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

Result<Millis> ReadDuration(const Json& v, std::string_view field, int line) {
  std::string form = fmt::format(
      "'{}' must be a duration such as \"500ms\", \"30s\" or \"5m\", or a number of "
      "milliseconds",
      field);
  if (v.is_number()) {
    double ms = v.get<double>();
    // A year, like ParseDurationMs, keeps the cast well defined.
    if (!(ms >= 0) || ms > 365.0 * 86'400'000) return LineError(line, form);
    return static_cast<Millis>(ms);
  }
  if (!v.is_string()) return LineError(line, form);
  std::string text = v.get<std::string>();
  if (IsBareNumber(text)) {
    return LineError(line, fmt::format("'{}': \"{}\" has no unit; write \"{}s\" or \"{}ms\", or "
                                       "the number {} (milliseconds) without quotes",
                                       field, text, Trim(text), Trim(text), Trim(text)));
  }
  auto ms = ParseDurationMs(text);
  if (!ms.ok()) return LineError(line, fmt::format("{} (got \"{}\")", form, text));
  return *ms;
}

// Sizes: a number of bytes or a size string; `per_second` also takes a "/s" suffix ("12GB/s").
Result<int64_t> ReadBytes(const Json& v, std::string_view field, bool per_second, int line) {
  std::string form =
      per_second
          ? fmt::format(
                "'{}' must be a rate such as \"12GB/s\" or \"512MiB\", or a number of "
                "bytes per second",
                field)
          : fmt::format("'{}' must be a size such as \"10GiB\" or \"512MiB\", or a number of bytes",
                        field);
  if (v.is_number()) {
    double b = v.get<double>();
    // 2^62 bytes is far beyond any GPU and keeps the cast well defined.
    if (!(b >= 0) || b > 4.6e18) return LineError(line, form);
    return static_cast<int64_t>(std::llround(b));
  }
  if (!v.is_string()) return LineError(line, form);
  std::string text = v.get<std::string>();
  std::string_view t = Trim(text);
  if (per_second && t.size() > 2 && t.substr(t.size() - 2) == "/s") t = t.substr(0, t.size() - 2);
  auto bytes = ParseBytes(t);
  if (!bytes.ok()) return LineError(line, fmt::format("{} (got \"{}\")", form, text));
  return *bytes;
}

Result<double> ReadNumber(const Json& v, std::string_view field, double lo, double hi,
                          std::string_view form, int line) {
  if (!v.is_number()) return LineError(line, fmt::format("'{}' must be {}", field, form));
  double x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    return LineError(line, fmt::format("'{}' must be {} (got {})", field, form, v.dump()));
  }
  return x;
}

Result<int64_t> ReadCount(const Json& v, std::string_view field, int line) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return LineError(line, fmt::format("'{}' must be a count, a whole number from 0 (got {})",
                                       field, v.dump()));
  }
  return v.get<int64_t>();
}

Result<bool> ReadFlag(const Json& v, std::string_view field, int line) {
  if (!v.is_boolean()) {
    return LineError(line, fmt::format("'{}' must be true or false (got {})", field, v.dump()));
  }
  return v.get<bool>();
}

Result<ThrottleReasons> ReadThrottle(const Json& v, int line) {
  std::vector<std::string> names;
  for (const auto& [name, member] : ThrottleReasonTable()) names.emplace_back(name);
  const std::string form = fmt::format(
      "'throttle' must be a list of reasons from {} (e.g. [\"thermal\", \"power\"]; [] for none)",
      Join(names, ", "));
  const Json list = v.is_string() ? Json::array({v}) : v;
  if (!list.is_array()) return LineError(line, form);
  ThrottleReasons t;
  t.known = true;
  for (const Json& item : list) {
    if (!item.is_string()) return LineError(line, fmt::format("{} (got {})", form, v.dump()));
    const std::string name = item.get<std::string>();
    auto it = std::find_if(ThrottleReasonTable().begin(), ThrottleReasonTable().end(),
                           [&](const auto& n) { return name == n.first; });
    if (it == ThrottleReasonTable().end()) {
      auto guess = ClosestMatch(name, names);
      return LineError(line, fmt::format("'throttle': \"{}\" is not a reason{}; {}", name,
                                         guess ? fmt::format(" (did you mean \"{}\"?)", *guess)
                                               : std::string(),
                                         form));
    }
    t.*(it->second) = true;
  }
  return t;
}

Status ReadField(const std::string& key, const Json& v, int line, TelemetryStep& step) {
  if (key == "at") {
    DROVER_ASSIGN_OR_RETURN(step.at_ms, ReadDuration(v, key, line));
  } else if (key == "gpu") {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT_MAX) {
      return LineError(line, fmt::format("'gpu' must be a GPU index, a whole number from 0 "
                                         "(got {})",
                                         v.dump()));
    }
    step.gpu = static_cast<int>(v.get<int64_t>());
  } else if (key == "utilization") {
    DROVER_ASSIGN_OR_RETURN(step.utilization,
                            ReadNumber(v, key, 0, 100, "a percentage from 0 to 100", line));
  } else if (key == "memory_used") {
    DROVER_ASSIGN_OR_RETURN(step.memory_used, ReadBytes(v, key, false, line));
  } else if (key == "temperature") {
    DROVER_ASSIGN_OR_RETURN(
        step.temperature_c,
        ReadNumber(v, key, 0, 200, "degrees Celsius, a number from 0 to 200", line));
  } else if (key == "power") {
    DROVER_ASSIGN_OR_RETURN(step.power_w,
                            ReadNumber(v, key, 0, 1e6, "watts, a number from 0", line));
  } else if (key == "pcie_tx" || key == "pcie_rx") {
    DROVER_ASSIGN_OR_RETURN(int64_t rate, ReadBytes(v, key, true, line));
    (key == "pcie_tx" ? step.pcie_tx_bytes_per_s : step.pcie_rx_bytes_per_s) =
        static_cast<double>(rate);
  } else if (key == "xid") {
    const Json list = v.is_array() ? v : Json::array({v});
    if (list.empty()) return LineError(line, "'xid' lists no XID code; write e.g. 79 or [48, 63]");
    for (const Json& x : list) {
      if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > 999) {
        return LineError(line, fmt::format("'xid' must be an XID code from 1 to 999, or a list "
                                           "of them, e.g. 79 or [48, 63] (got {})",
                                           v.dump()));
      }
      step.xids.push_back(static_cast<int>(x.get<int64_t>()));
    }
  } else if (key == "ecc_corrected") {
    DROVER_ASSIGN_OR_RETURN(step.ecc_corrected, ReadCount(v, key, line));
  } else if (key == "ecc_uncorrected") {
    DROVER_ASSIGN_OR_RETURN(step.ecc_uncorrected, ReadCount(v, key, line));
  } else if (key == "retired_pages") {
    DROVER_ASSIGN_OR_RETURN(step.retired_pages, ReadCount(v, key, line));
  } else if (key == "retired_pages_pending") {
    DROVER_ASSIGN_OR_RETURN(step.pages_pending, ReadFlag(v, key, line));
  } else if (key == "remap_failed") {
    DROVER_ASSIGN_OR_RETURN(step.remap_failed, ReadFlag(v, key, line));
  } else if (key == "throttle") {
    DROVER_ASSIGN_OR_RETURN(step.throttle, ReadThrottle(v, line));
  } else if (key == "sm_clock_mhz" || key == "sm_clock_max_mhz" || key == "mem_clock_mhz") {
    DROVER_ASSIGN_OR_RETURN(double mhz,
                            ReadNumber(v, key, 0, 100'000, "megahertz, a number from 0", line));
    (key == "sm_clock_mhz" ? step.sm_clock_mhz
                           : key == "sm_clock_max_mhz" ? step.sm_clock_max_mhz
                                                       : step.mem_clock_mhz) = mhz;
  } else {
    std::string fields = Join(FieldNames(), ", ");
    if (key == "repeat") {
      return LineError(line, fmt::format("'repeat' goes on a line of its own, e.g. "
                                         "{{\"repeat\": \"60s\"}}"));
    }
    auto guess = ClosestMatch(key, FieldNames());
    if (guess) {
      return LineError(line, fmt::format("'{}' is not a field; did you mean '{}'? The fields are "
                                         "{} (and \"repeat\" on a line of its own)",
                                         key, *guess, fields));
    }
    return LineError(line, fmt::format("'{}' is not a field; the fields are {} (and \"repeat\" "
                                       "on a line of its own)",
                                       key, fields));
  }
  return Status::Ok();
}

bool SetsAValue(const TelemetryStep& s) {
  return s.utilization || s.memory_used || s.temperature_c || s.power_w || s.pcie_tx_bytes_per_s ||
         s.pcie_rx_bytes_per_s || s.ecc_corrected || s.ecc_uncorrected || s.retired_pages ||
         s.pages_pending || s.remap_failed || s.throttle || s.sm_clock_mhz || s.sm_clock_max_mhz ||
         s.mem_clock_mhz || !s.xids.empty();
}

}  // namespace

Result<TelemetryScript> ParseTelemetryScript(const std::string& text) {
  TelemetryScript script;
  std::vector<std::pair<TelemetryStep, int>> steps;  // with their line numbers, for errors
  int repeat_line = 0;
  std::vector<std::string> lines = Split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    int line = static_cast<int>(i) + 1;
    std::string_view content = Trim(lines[i]);
    if (content.empty() || content.front() == '#') continue;
    Json obj = Json::parse(std::string(content), nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded() || !obj.is_object()) {
      return LineError(
          line, fmt::format("not a JSON object; write one object per line, e.g. {}", kExample));
    }
    if (obj.contains("repeat")) {
      if (obj.size() != 1) {
        return LineError(line, "'repeat' goes on a line of its own, e.g. {\"repeat\": \"60s\"}");
      }
      if (repeat_line != 0) {
        return LineError(line,
                         fmt::format("a second 'repeat' (the first is on line {})", repeat_line));
      }
      DROVER_ASSIGN_OR_RETURN(script.repeat_ms, ReadDuration(obj["repeat"], "repeat", line));
      if (script.repeat_ms <= 0) {
        return LineError(line, "'repeat' must be longer than 0, e.g. \"60s\"");
      }
      repeat_line = line;
      continue;
    }
    if (!obj.contains("at")) {
      return LineError(
          line, fmt::format("'at' is missing; say when the step applies, e.g. {}", kExample));
    }
    TelemetryStep step;
    for (const auto& [key, value] : obj.items()) {
      DROVER_RETURN_IF_ERROR(ReadField(key, value, line, step));
    }
    if (!SetsAValue(step)) {
      return LineError(line,
                       "the step sets no value; give at least one of utilization, "
                       "memory_used, temperature, power, pcie_tx, pcie_rx, or a health field "
                       "(xid, ecc_uncorrected, throttle, ...)");
    }
    steps.emplace_back(std::move(step), line);
  }
  if (steps.empty()) {
    return InvalidArgument(fmt::format(
        "telemetry script has no steps; write one JSON object per line, e.g. {}", kExample));
  }
  if (script.repeat_ms > 0) {
    for (const auto& [step, line] : steps) {
      if (step.at_ms >= script.repeat_ms) {
        return LineError(line, fmt::format("the step at {} never applies: the script starts over "
                                           "every {} (line {}); move it before that",
                                           FormatDuration(step.at_ms),
                                           FormatDuration(script.repeat_ms), repeat_line));
      }
    }
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const auto& a, const auto& b) { return a.first.at_ms < b.first.at_ms; });
  script.steps.reserve(steps.size());
  for (auto& [step, line] : steps) script.steps.push_back(std::move(step));
  return script;
}

Result<TelemetryScript> LoadTelemetryScript(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    Status st = ErrnoStatus(fmt::format("cannot read telemetry script {}", path), err);
    return err == ENOENT ? NotFound(st.message()) : st;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return ErrnoStatus(fmt::format("cannot read telemetry script {}", path));
  auto script = ParseTelemetryScript(buf.str());
  if (!script.ok()) return script.status().WithContext(path);
  return script;
}

}  // namespace drover
