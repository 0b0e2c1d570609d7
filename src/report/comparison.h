#pragma once
// The ranking of an experiment's runs: one rule (which metric, which way, how a curve becomes a
// score), each run's score from a summary of its curve, the runs sorted and the best marked. One
// definition shared by `drover compare`, the end of `drover run`, the HTML report, the web UI's
// runs table and MCP's compare, so they never disagree about which run won.
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/run.h"
#include "model/spec.h"

namespace drover::report {

// What a view asks for over the spec's objective: "" leaves each to the objective.
struct RankOptions {
  std::string metric;
  std::string mode;     // "min", "max" or ""
  std::string summary;  // "last", "best", "mean_last:K" or ""
};

// Which metric ranks the runs, which way, and how each run's curve becomes its score.
struct RankRule {
  std::string metric;  // "": nothing ranks the runs (no objective and no well-known metric)
  bool maximize = true;
  ScoreSummary summary = ScoreSummary::kLast;
  int last_k = 0;
  // Where it came from: the spec's objective, the view's options, or, with neither, a metric
  // with a well-known name (val_loss, loss, val_acc, accuracy...): then every view says so.
  enum class From { kObjective, kOptions, kWellKnownName, kNone };
  From from = From::kNone;
  // "val_acc (max, last value)" and the like.
  std::string Describe() const;
  // Why there is no rule, or how it was guessed, for a view to print ("" for an objective).
  std::string Note() const;
};

// The rule as views show it in JSON: metric (null when none), mode, summary ("last", "best",
// "mean_last:K"), describe (RankRule::Describe) and, when there is one, note (RankRule::Note).
Json RankRuleJson(const RankRule& rule);

// How the rule sums a curve up, in words: "last value", "best value", "mean of the last 5 values".
std::string SummaryWords(const RankRule& rule);

// The rule for an experiment: the options over the spec's objective; without either, a reported
// metric with a well-known name. `reported` is every metric name the runs reported.
// InvalidArgument for a bad mode or summary in the options.
Result<RankRule> RuleFor(const Experiment& exp, const std::set<std::string>& reported,
                         const RankOptions& options);
// Every metric name the runs reported (their last values).
std::set<std::string> ReportedMetrics(const std::vector<Run>& runs);

// One run's curve of one metric, summed up by the store (model/run.h).
using CurveSummaries = std::map<int64_t, CurveSummary>;  // by run id

// The run's score under the rule; nullopt when it reported no value of the metric. A score may be
// NaN or infinite (shown as such); such a score never ranks above a finite one. `best` of a curve
// with no finite value is its last value.
std::optional<double> ScoreOf(const RankRule& rule, const CurveSummary& curve);
// Whether score a ranks before score b under the rule: finite ones by the mode, then the others.
bool RanksBefore(const RankRule& rule, double a, double b);

struct Comparison {
  RankRule rule;
  // Shorthands of the rule, for the views.
  std::string metric;  // what the table is sorted by ("" when nothing ranks the runs)
  bool maximize = true;
  bool guessed = false;  // the rule came from a well-known metric name, not an objective
  std::vector<Run> runs;  // sorted: succeeded runs first, each by score, then the rest by id
  std::map<int64_t, double> scores;  // by run id, runs with a value only
  int64_t best_run = 0;  // 0 when no succeeded run has a finite score
  std::vector<std::string> varying;  // parameters that differ between runs
  std::vector<std::string> metrics;  // every metric name reported, the ranking metric first
};

// The runs ranked by the rule, from their curves' summaries.
Comparison Rank(std::vector<Run> runs, const RankRule& rule, const CurveSummaries& curves);
// The run's score in the comparison, when it has one.
std::optional<double> SortValue(const Comparison& c, const Run& r);

// A score as text: 0.9611, nan, inf, -inf.
std::string FormatScore(double v);
// A score in JSON: a number, or "NaN", "Infinity", "-Infinity" (which JavaScript's Number() and
// Python's float() read back), as JSON has no such numbers.
Json ScoreJson(double v);

// A metric's column name: its name, or "NAME (metric)" when a parameter shown beside it (one of
// c.varying) has the same name, so a script that logs its own `lr` gets two columns told apart.
std::string MetricLabel(const Comparison& c, const std::string& metric);

// Whether an experiment's stored spec searches `param` on a log scale (log_uniform, int_log):
// plots put it on a log axis.
bool SearchedOnLogScale(const Json& spec, const std::string& param);

// The parameters that differ between runs of one set (for compact listings).
std::vector<std::string> VaryingParams(const std::vector<Run>& runs);
// One value as a table cell: 0.9611 / 64 / mlp / nan (a NaN or infinite metric is stored as null).
std::string FormatValue(const Json& v);

}  // namespace drover::report
