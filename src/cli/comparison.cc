#include "cli/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "cli/common.h"
#include "common/strings.h"
#include "common/terminal.h"
#include "protocol/json_codec.h"
#include "report/groups.h"
#include "report/search_view.h"

namespace drover::cli {

namespace {

std::string ConfigText(const Json& params, const std::vector<std::string>& varying,
                       int64_t experiment_id = 0) {
  std::string out = experiment_id > 0 ? fmt::format("exp {}", experiment_id) : "";
  for (const std::string& p : varying) {
    if (report::IsSeedParam(p) || !params.contains(p)) continue;
    out += (out.empty() ? "" : " ") + p + "=" + FormatValue(params[p]);
  }
  return out.empty() ? "(all)" : out;
}

// A search's (or a pruned sweep's, or a big sweep's) trials by state, how the search spent them,
// the best so far and parameter importance.
std::string RenderSearch(const Comparison& c) {
  const bool search_like = std::any_of(c.runs.begin(), c.runs.end(), [](const Run& r) {
    return r.state == RunState::kPruned || r.origin != TrialOrigin::kNone;
  }) || c.runs.size() >= 8;
  // A pipeline's runs are stages, not trials.
  const bool stages = std::any_of(c.runs.begin(), c.runs.end(),
                                  [](const Run& r) { return !r.stage.empty(); });
  if (!search_like || c.metric.empty() || stages) return "";
  const report::SearchView v = report::SearchViewOf(c);
  std::string out = "trials:";
  for (const auto& [state, n] : v.states) out += fmt::format(" {} {},", n, state);
  out.back() = '\n';
  if (std::string budget = report::BudgetLine(v); !budget.empty()) {
    out += "how the budget went: " + budget + "\n";
  }
  if (!v.history.empty()) {
    std::string steps;
    double last = std::nan("");
    for (const auto& p : v.history) {
      if (p.best == last) continue;
      last = p.best;
      steps += fmt::format("{}{}: {}", steps.empty() ? "" : ", ", p.trial, report::FormatScore(p.best));
    }
    out += fmt::format("best {} so far, by trial: {}\n", c.metric, steps);
  }
  if (!v.importance.empty()) {
    std::string parts;
    for (const auto& [p, share] : v.importance) {
      parts += fmt::format("{}{} {:.0f}%", parts.empty() ? "" : ", ", p, 100 * share);
    }
    out += fmt::format("parameter importance (share of the variance of {} by value, over the "
                       "finished trials; seeds left out): {}\n",
                       c.metric, parts);
  } else if (!v.importance_note.empty()) {
    out += v.importance_note + "\n";
  }
  return out;
}

// Seeds pooled: each config's mean, spread and count, and whether the top two can be told apart.
std::string RenderGroups(const Comparison& c) {
  const report::Grouping g = report::GroupBySeed(c);
  if (g.groups.empty() || c.metric.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < g.groups.size(); ++i) {
    const report::RunGroup& r = g.groups[i];
    rows.push_back({i == 0 && r.complete ? "*" : "", ConfigText(r.params, c.varying, r.experiment_id),
                    std::to_string(r.n) + "/" + std::to_string(g.seeds_per_config) +
                        (r.complete ? "" : " (incomplete)"),
                    r.n > 0 ? fmt::format("{:.4g} \u00b1 {:.2g}", r.mean, r.stddev) : "-",
                    r.n > 0 ? report::FormatScore(r.min) : "-",
                    r.n > 0 ? report::FormatScore(r.max) : "-"});
  }
  std::string out = fmt::format("\nby config, {} pooled (each run's score: {}):\n",
                                Join(g.seeds, ", "), c.rule.Describe());
  out += RenderTable({"", "config", "n", "mean \u00b1 std", "min", "max"}, rows);
  if (g.top_two) {
    const report::Welch& w = *g.top_two;
    out += w.p < 0.05
               ? fmt::format("the top two configs differ: Welch's t-test p = {:.2g} (t = {:.3g}, "
                             "df = {:.3g})\n",
                             w.p, w.t, w.df)
               : fmt::format("the top two configs overlap: Welch's t-test p = {:.2g} (t = {:.3g}, "
                             "df = {:.3g}); more seeds would tell them apart\n",
                             w.p, w.t, w.df);
  } else if (g.groups.size() >= 2) {
    out += "the top two configs cannot be compared: each needs 2 or more succeeded seeds\n";
  }
  return out;
}

}  // namespace

std::string FailureLine(const Attempt& a) {
  if (!a.ended || a.error.empty()) return "";
  std::string last = LastLines(a.error, 1, 200);
  if (last.size() > 60) last = last.substr(0, 57) + "...";
  return last;
}

std::map<int64_t, std::string> FailureLines(Catalog& catalog, const std::vector<Run>& runs) {
  std::map<int64_t, std::string> out;
  std::vector<Run> failed;
  for (const Run& r : runs) {
    if (r.state == RunState::kFailed) failed.push_back(r);
  }
  if (failed.empty()) return out;
  auto attempts = catalog.ListAttemptsOfRuns(failed);
  if (!attempts.ok()) return out;
  for (const auto& [id, list] : *attempts) {
    if (list.empty()) continue;
    if (std::string line = FailureLine(list.back()); !line.empty()) out[id] = line;
  }
  return out;
}

std::string RenderComparison(const Comparison& c, const std::map<int64_t, std::string>& failures) {
  // Runs of several experiments (compare EXP1 EXP2): say which each is from.
  const bool several = std::any_of(c.runs.begin(), c.runs.end(), [&](const Run& r) {
    return r.experiment_id != c.runs.front().experiment_id;
  });
  std::vector<std::string> header = {"", "run"};
  if (several) header.push_back("experiment");
  bool stages = false;
  for (const Run& r : c.runs) stages = stages || !r.stage.empty();
  if (stages) header.push_back("stage");
  for (const auto& p : c.varying) header.push_back(p);
  header.push_back("state");
  header.push_back("attempts");
  for (const auto& m : c.metrics) {
    const std::string label = report::MetricLabel(c, m);
    header.push_back(m == c.metric ? fmt::format("{} ({}, {})", label, c.maximize ? "max" : "min",
                                                 ScoreSummaryText(c.rule.summary, c.rule.last_k))
                                   : label);
  }
  header.push_back("time");
  std::vector<std::vector<std::string>> rows;
  for (const Run& r : c.runs) {
    std::vector<std::string> row = {r.id == c.best_run ? "*" : "", std::to_string(r.id)};
    if (several) row.push_back(std::to_string(r.experiment_id));
    if (stages) row.push_back(r.stage);
    for (const auto& p : c.varying) {
      std::string v = r.current_params.contains(p) ? FormatValue(r.current_params[p]) : "";
      if (r.params.contains(p) && r.current_params.contains(p) &&
          r.params[p] != r.current_params[p]) {
        v += " (was " + FormatValue(r.params[p]) + ")";
      }
      row.push_back(v);
    }
    std::string state(ToString(r.state));
    if (auto why = failures.find(r.id); r.state == RunState::kFailed && why != failures.end()) {
      state += ": " + why->second;  // the exception, not the outcome's code
    } else if (r.state != RunState::kSucceeded && !r.reason.empty() && r.reason != state) {
      state += " (" + r.reason + ")";
    }
    if (r.cached_from != 0) state += fmt::format(" (cached from run {})", r.cached_from);
    row.push_back(state);
    row.push_back(std::to_string(r.attempts));
    for (const auto& m : c.metrics) {
      if (m == c.metric) {  // the score the runs are ranked by
        auto score = report::SortValue(c, r);
        row.push_back(score ? report::FormatScore(*score) : "-");
        continue;
      }
      row.push_back(r.final_metrics.contains(m) ? FormatValue(r.final_metrics[m]) : "-");
    }
    row.push_back(r.started_ms > 0 && r.ended_ms > 0 ? FormatDuration(r.ended_ms - r.started_ms)
                                                     : "-");
    rows.push_back(std::move(row));
  }
  std::string out = RenderTable(header, rows);
  if (c.best_run != 0) {
    out += fmt::format("* best: run {} by {}\n", c.best_run, c.rule.Describe());
  } else if (!c.metric.empty()) {
    bool any_ok = std::any_of(c.runs.begin(), c.runs.end(),
                              [](const Run& r) { return r.state == RunState::kSucceeded; });
    const bool reported = std::any_of(c.runs.begin(), c.runs.end(), [&](const Run& r) {
      return r.final_metrics.is_object() && r.final_metrics.contains(c.metric);
    });
    std::set<std::string> stages;
    for (const Run& r : c.runs) {
      if (!r.stage.empty()) stages.insert(r.stage);
    }
    if (!any_ok) {
      out += "no run succeeded\n";
    } else if (!reported && !stages.empty()) {
      // A pipeline's objective comes from its last stage: a run of earlier stages (a reproduce
      // of its train stage) has nothing to rank by, and that is not a failure.
      out += fmt::format("no run here reports {} (the objective): the stages run here ({}) do "
                         "not report it\n",
                         c.metric, Join(std::vector<std::string>(stages.begin(), stages.end()), ", "));
    } else if (!reported) {
      out += fmt::format("no run reported {} (the objective)\n", c.metric);
    } else {
      out += fmt::format("no succeeded run has a finite {}\n", c.metric);
    }
  }
  out += RenderGroups(c);
  out += RenderSearch(c);
  // How the rule was guessed, or why there is none (when some metric was reported).
  if (!c.rule.Note().empty() && !c.metrics.empty()) out += "(" + c.rule.Note() + ")\n";
  return out;
}

Result<Comparison> CompareRuns(Catalog& catalog, const Experiment& exp, std::vector<Run> runs,
                               const report::RankOptions& options) {
  DROVER_ASSIGN_OR_RETURN(report::RankRule rule,
                          report::RuleFor(exp, report::ReportedMetrics(runs), options));
  std::map<int64_t, CurveSummary> curves;
  if (!rule.metric.empty()) {
    DROVER_ASSIGN_OR_RETURN(curves, catalog.MetricSummaries(exp.id, rule.metric, rule.last_k));
  }
  return report::Rank(std::move(runs), rule, curves);
}

Result<Comparison> CompareAcross(Catalog& catalog, const std::vector<Experiment>& exps,
                                 std::vector<Run> runs, const report::RankOptions& options) {
  if (exps.size() == 1) return CompareRuns(catalog, exps[0], std::move(runs), options);
  const std::set<std::string> reported = report::ReportedMetrics(runs);
  std::optional<report::RankRule> rule;
  for (const Experiment& e : exps) {
    DROVER_ASSIGN_OR_RETURN(report::RankRule r, report::RuleFor(e, reported, options));
    if (rule && (r.metric != rule->metric || r.maximize != rule->maximize ||
                 r.summary != rule->summary || r.last_k != rule->last_k)) {
      return InvalidArgument(fmt::format(
          "experiments {} and {} rank their runs differently ({} and {}); pass --metric, --mode "
          "and --summary to rank them all one way",
          exps.front().name, e.name, rule->Describe(), r.Describe()));
    }
    rule = r;
  }
  std::map<int64_t, CurveSummary> curves;
  if (!rule->metric.empty()) {
    for (const Experiment& e : exps) {
      DROVER_ASSIGN_OR_RETURN(auto some, catalog.MetricSummaries(e.id, rule->metric, rule->last_k));
      curves.insert(some.begin(), some.end());
    }
  }
  return report::Rank(std::move(runs), *rule, curves);
}

int PrintResults(Catalog& catalog, const Experiment& exp, const std::vector<Run>& runs, bool json,
                 bool quiet) {
  Result<Comparison> ranked = CompareRuns(catalog, exp, runs, {});
  if (!ranked.ok()) {
    ReportError(ranked.status());
    return kExitRunsFailed;
  }
  const Comparison& c = *ranked;
  if (json) {
    std::printf("%s\n", ComparisonJson(exp, c).dump(2).c_str());
  } else if (!quiet) {
    PrintText("\n" + RenderComparison(c, FailureLines(catalog, runs)));
  }
  // A run the prune rule stopped did what was asked of it: not a failure.
  for (const Run& r : runs) {
    if (r.state != RunState::kSucceeded && r.state != RunState::kPruned) return kExitRunsFailed;
  }
  return kExitOk;
}

void PrintStopped(Catalog& catalog, const Experiment& exp, const std::vector<Run>& runs) {
  // Only an experiment with a failed run can have stopped so: no look otherwise.
  if (std::none_of(runs.begin(), runs.end(),
                   [](const Run& r) { return r.state == RunState::kFailed; })) {
    return;
  }
  AlertFilter stopped;
  stopped.experiment_id = exp.id;
  stopped.kind = "experiment_stopped";
  stopped.limit = 1;
  if (Result<std::vector<Alert>> alerts = catalog.ListAlerts(stopped); alerts.ok()) {
    // The error is the run's own text: shown, never obeyed.
    for (const Alert& a : *alerts) {
      std::fprintf(stderr, "drover: %s\n", TerminalLine(a.message).c_str());
    }
  }
}

Json ComparisonJson(const Experiment& exp, const Comparison& c) {
  Json runs = Json::array();
  for (const Run& r : c.runs) {
    Json j = protocol::ToJson(r);
    auto score = report::SortValue(c, r);
    j["score"] = score ? report::ScoreJson(*score) : Json();
    runs.push_back(std::move(j));
  }
  return {{"experiment", {{"id", exp.id}, {"name", exp.name}, {"status", exp.status}}},
          {"metric", c.metric},
          {"mode", c.maximize ? "max" : "min"},
          {"summary", ScoreSummaryText(c.rule.summary, c.rule.last_k)},
          {"ranking", report::RankRuleJson(c.rule)},
          {"groups", report::GroupsJson(c)},
          {"best_run", c.best_run == 0 ? Json() : Json(c.best_run)},
          {"varying_params", c.varying},
          {"search", report::SearchViewJson(report::SearchViewOf(c))},
          {"runs", runs}};
}

}  // namespace drover::cli
