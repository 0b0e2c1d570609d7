#pragma once
// Ranking runs in tests that have only the runs' last values at hand (no store): each run's curve
// of the metric is its last value alone, then the views' own ranking (report/comparison.h).
#include "report/comparison.h"

namespace drover::testing {

inline report::Comparison RankByLastValues(const Experiment& exp, std::vector<Run> runs,
                                           const report::RankOptions& options = {}) {
  Result<report::RankRule> rule = report::RuleFor(exp, report::ReportedMetrics(runs), options);
  if (!rule.ok()) return report::Comparison{};
  report::CurveSummaries curves;
  for (const Run& r : runs) {
    if (rule->metric.empty() || !r.final_metrics.contains(rule->metric)) continue;
    const Json& v = r.final_metrics[rule->metric];
    CurveSummary c;
    c.points = 1;
    c.last = v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
    if (v.is_number()) c.lowest = c.highest = c.mean_last = c.last;
    curves[r.id] = c;
  }
  return report::Rank(std::move(runs), *rule, curves);
}

}  // namespace drover::testing
