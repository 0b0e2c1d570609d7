#include "report/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace drover::report {

Comparison Compare(const Experiment& exp, std::vector<Run> runs, const std::string& metric,
                   const std::string& mode) {
  Comparison c;
  std::set<std::string> names;
  for (const Run& r : runs) {
    for (auto it = r.final_metrics.begin(); it != r.final_metrics.end(); ++it)
      names.insert(it.key());
  }
  const Json& objective = exp.spec.contains("objective") ? exp.spec["objective"] : Json();
  c.metric = metric;
  if (c.metric.empty() && objective.is_object()) c.metric = objective.value("metric", "");
  if (c.metric.empty() && !names.empty()) {
    c.metric = *names.begin();
    c.guessed = true;
  }
  if (mode == "min" || mode == "max") {
    c.maximize = mode == "max";
  } else if (objective.is_object() && objective.value("metric", "") == c.metric) {
    c.maximize = objective.value("mode", "max") == "max";
  } else {
    c.maximize =
        c.metric.find("loss") == std::string::npos && c.metric.find("err") == std::string::npos;
  }
  c.varying = VaryingParams(runs);
  if (!c.metric.empty()) c.metrics.push_back(c.metric);
  for (const auto& n : names) {
    if (n != c.metric) c.metrics.push_back(n);
  }
  std::stable_sort(runs.begin(), runs.end(), [&](const Run& a, const Run& b) {
    auto va = SortValue(c, a), vb = SortValue(c, b);
    bool sa = a.state == RunState::kSucceeded, sb = b.state == RunState::kSucceeded;
    if (sa != sb) return sa;  // succeeded runs first
    if (va.has_value() != vb.has_value()) return va.has_value();
    if (va && vb && *va != *vb) return c.maximize ? *va > *vb : *va < *vb;
    return a.id < b.id;
  });
  for (const Run& r : runs) {
    if (r.state == RunState::kSucceeded && SortValue(c, r)) {
      c.best_run = r.id;
      break;
    }
  }
  c.runs = std::move(runs);
  return c;
}

std::optional<double> SortValue(const Comparison& c, const Run& r) {
  if (c.metric.empty()) return std::nullopt;
  auto it = r.final_metrics.find(c.metric);
  if (it == r.final_metrics.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::vector<std::string> VaryingParams(const std::vector<Run>& runs) {
  std::vector<std::string> keys;
  if (runs.empty()) return keys;
  for (auto it = runs[0].params.begin(); it != runs[0].params.end(); ++it) {
    for (const Run& r : runs) {
      if (!r.params.contains(it.key()) || r.params[it.key()] != it.value()) {
        keys.push_back(it.key());
        break;
      }
    }
  }
  return keys;
}

std::string FormatValue(const Json& v) {
  if (v.is_string()) {
    // One value, one table cell: control characters would break the row.
    std::string out;
    for (char c : v.get_ref<const std::string&>()) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else
        out += c;
    }
    return out;
  }
  if (v.is_null()) return "nan";  // a metric that was NaN or infinite (JSON has no such numbers)
  if (v.is_number_float()) {
    double d = v.get<double>();
    std::string out = fmt::format("{:.4g}", d);
    // 1.0 stays visibly a float: the command got "1.0", not "1".
    if (out.find_first_of(".eni") == std::string::npos) out += ".0";
    return out;
  }
  return v.dump();
}

}  // namespace drover::report
