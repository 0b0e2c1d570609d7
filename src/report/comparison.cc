#include "report/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "protocol/api.h"

namespace drover::report {

namespace {

// Names that mean the same thing in most training scripts, the held-out ones first: what ranks
// runs whose spec has no objective (a labelled guess every view shares).
struct WellKnown {
  const char* name;
  bool maximize;
};
constexpr WellKnown kWellKnown[] = {
    {"val_acc", true},        {"val_accuracy", true},   {"valid_acc", true},
    {"eval_accuracy", true},  {"test_acc", true},       {"test_accuracy", true},
    {"val_loss", false},      {"valid_loss", false},    {"validation_loss", false},
    {"eval_loss", false},     {"test_loss", false},     {"accuracy", true},
    {"acc", true},            {"loss", false},
};

// The mode a metric's name suggests when none is given: loss- and error-like names go down.
bool MaximizeByName(const std::string& metric) {
  for (const WellKnown& w : kWellKnown) {
    if (metric == w.name) return w.maximize;
  }
  return metric.find("loss") == std::string::npos && metric.find("err") == std::string::npos;
}

}  // namespace

std::string SummaryWords(const RankRule& rule) {
  switch (rule.summary) {
    case ScoreSummary::kBest:
      return "best value";
    case ScoreSummary::kMeanLast:
      return fmt::format("mean of the last {} values", rule.last_k);
    case ScoreSummary::kLast:
      break;
  }
  return "last value";
}

std::string RankRule::Describe() const {
  if (metric.empty()) return "nothing";
  return fmt::format("{} ({}, {})", metric, maximize ? "max" : "min", SummaryWords(*this));
}

std::string RankRule::Note() const {
  switch (from) {
    case From::kObjective:
    case From::kOptions:
      return "";
    case From::kWellKnownName:
      return fmt::format("ranked by {}: the spec has no objective (set objective: {{metric, mode, "
                         "summary}}, or choose with --metric, --mode and --summary)",
                         Describe());
    case From::kNone:
      break;
  }
  return "not ranked: the spec has no objective and no metric has a well-known name (val_acc, "
         "val_loss, accuracy, loss...); set objective: {metric: NAME, mode: max|min} in the spec, "
         "or pass --metric";
}

Json RankRuleJson(const RankRule& rule) {
  Json j = {{"metric", rule.metric.empty() ? Json() : Json(rule.metric)}};
  if (!rule.metric.empty()) {
    j["mode"] = rule.maximize ? "max" : "min";
    j["summary"] = ScoreSummaryText(rule.summary, rule.last_k);
    j["describe"] = rule.Describe();
  }
  if (!rule.Note().empty()) j["note"] = rule.Note();
  return j;
}

std::set<std::string> ReportedMetrics(const std::vector<Run>& runs) {
  std::set<std::string> names;
  for (const Run& r : runs) {
    if (!r.final_metrics.is_object()) continue;
    for (auto it = r.final_metrics.begin(); it != r.final_metrics.end(); ++it) {
      names.insert(it.key());
    }
  }
  return names;
}

Result<RankRule> RuleFor(const Experiment& exp, const std::set<std::string>& reported,
                         const RankOptions& options) {
  RankRule rule;
  if (!options.mode.empty() && options.mode != "min" && options.mode != "max") {
    return InvalidArgument("the mode must be min or max, got '" + options.mode + "'");
  }
  std::optional<SummaryRule> asked;
  if (!options.summary.empty()) {
    DROVER_ASSIGN_OR_RETURN(SummaryRule s, ParseScoreSummary(options.summary));
    asked = s;
  }
  std::optional<Objective> objective;
  if (exp.spec.is_object() && exp.spec.contains("objective") &&
      exp.spec["objective"].is_object()) {
    const Json& o = exp.spec["objective"];
    const Json* metric = o.contains("metric") ? &o["metric"] : nullptr;
    if (metric != nullptr && metric->is_string() && !metric->get<std::string>().empty()) {
      Objective obj;
      obj.metric = metric->get<std::string>();
      obj.maximize = !(o.contains("mode") && o["mode"] == "min");
      // A spec stored before objective.summary existed ranks by the last value.
      const Json summary = o.contains("summary") ? o["summary"] : Json("last");
      if (auto s = ParseScoreSummary(summary.is_string() ? summary.get<std::string>() : "");
          s.ok()) {
        obj.summary = s->summary;
        obj.last_k = s->last_k;
      }
      objective = obj;
    }
  }
  if (!options.metric.empty()) {
    rule.metric = options.metric;
    rule.from = RankRule::From::kOptions;
    if (objective && objective->metric == options.metric) {
      rule.maximize = objective->maximize;
      rule.summary = objective->summary;
      rule.last_k = objective->last_k;
    } else {
      rule.maximize = MaximizeByName(options.metric);
    }
  } else if (objective) {
    rule.metric = objective->metric;
    rule.maximize = objective->maximize;
    rule.summary = objective->summary;
    rule.last_k = objective->last_k;
    rule.from = RankRule::From::kObjective;
  } else {
    for (const WellKnown& w : kWellKnown) {
      if (!reported.count(w.name)) continue;
      rule.metric = w.name;
      rule.maximize = w.maximize;
      rule.from = RankRule::From::kWellKnownName;
      break;
    }
  }
  if (rule.metric.empty()) return rule;
  if (!options.mode.empty()) {
    rule.maximize = options.mode == "max";
    if (rule.from == RankRule::From::kObjective) rule.from = RankRule::From::kOptions;
  }
  if (asked) {
    rule.summary = asked->summary;
    rule.last_k = asked->last_k;
    if (rule.from == RankRule::From::kObjective) rule.from = RankRule::From::kOptions;
  }
  return rule;
}

std::optional<double> ScoreOf(const RankRule& rule, const CurveSummary& curve) {
  return Summarize(curve, rule.summary, rule.maximize);
}

bool RanksBefore(const RankRule& rule, double a, double b) {
  const bool fa = std::isfinite(a), fb = std::isfinite(b);
  if (fa != fb) return fa;
  if (!fa) return false;  // NaN and infinities rank as equals, after every finite score
  return rule.maximize ? a > b : a < b;
}

Comparison Rank(std::vector<Run> runs, const RankRule& rule, const CurveSummaries& curves) {
  Comparison c;
  c.rule = rule;
  c.metric = rule.metric;
  c.maximize = rule.maximize;
  c.guessed = rule.from == RankRule::From::kWellKnownName;
  const std::set<std::string> names = ReportedMetrics(runs);
  c.varying = VaryingParams(runs);
  if (!c.metric.empty()) c.metrics.push_back(c.metric);
  for (const auto& n : names) {
    if (n != c.metric) c.metrics.push_back(n);
  }
  if (!c.metric.empty()) {
    for (const auto& [id, curve] : curves) {
      if (auto score = ScoreOf(rule, curve)) c.scores[id] = *score;
    }
  }
  std::stable_sort(runs.begin(), runs.end(), [&](const Run& a, const Run& b) {
    auto va = SortValue(c, a), vb = SortValue(c, b);
    bool sa = a.state == RunState::kSucceeded, sb = b.state == RunState::kSucceeded;
    if (sa != sb) return sa;  // succeeded runs first
    if (va.has_value() != vb.has_value()) return va.has_value();
    if (va && vb && (RanksBefore(rule, *va, *vb) || RanksBefore(rule, *vb, *va))) {
      return RanksBefore(rule, *va, *vb);
    }
    return a.id < b.id;
  });
  for (const Run& r : runs) {
    auto v = SortValue(c, r);
    if (r.state == RunState::kSucceeded && v && std::isfinite(*v)) {
      c.best_run = r.id;
      break;
    }
  }
  c.runs = std::move(runs);
  return c;
}

std::optional<double> SortValue(const Comparison& c, const Run& r) {
  auto it = c.scores.find(r.id);
  if (it == c.scores.end()) return std::nullopt;
  return it->second;
}

std::string FormatScore(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}

Json ScoreJson(double v) { return protocol::NumberJson(v); }

std::vector<std::string> VaryingParams(const std::vector<Run>& runs) {
  std::vector<std::string> keys;
  if (runs.empty()) return keys;
  // Every run's keys (a pipeline's stages hold different ones), in order of first appearance;
  // one a run lacks varies too.
  std::vector<std::string> all;
  for (const Run& r : runs) {
    for (auto it = r.params.begin(); it != r.params.end(); ++it) {
      if (std::find(all.begin(), all.end(), it.key()) == all.end()) all.push_back(it.key());
    }
  }
  for (const std::string& key : all) {
    const Json* first = runs[0].params.contains(key) ? &runs[0].params[key] : nullptr;
    for (const Run& r : runs) {
      if (!first || !r.params.contains(key) || r.params[key] != *first) {
        keys.push_back(key);
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

std::string MetricLabel(const Comparison& c, const std::string& metric) {
  const bool clash = std::find(c.varying.begin(), c.varying.end(), metric) != c.varying.end();
  return clash ? metric + " (metric)" : metric;
}

bool SearchedOnLogScale(const Json& spec, const std::string& param) {
  if (!spec.is_object()) return false;
  auto params = spec.find("params");
  if (params == spec.end() || !params->is_object()) return false;
  auto p = params->find(param);
  return p != params->end() && p->is_object() &&
         (p->contains("log_uniform") || p->contains("int_log"));
}

}  // namespace drover::report
