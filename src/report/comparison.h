#pragma once
// The ranking of an experiment's runs: sorted by a metric (the objective by default), the best run
// marked. One definition shared by `drover compare`, the end of `drover run`, the MCP compare tool
// and the HTML report, so they never disagree about which run won.
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"

namespace drover::report {

struct Comparison {
  std::string metric;  // what the table is sorted by ("" when no run reported a metric)
  bool maximize = true;
  bool guessed = false;   // no objective and no --metric: the first metric name was taken
  std::vector<Run> runs;  // sorted: runs with the metric best first, then the rest by id
  int64_t best_run = 0;   // 0 when no succeeded run has the metric
  std::vector<std::string> varying;  // parameters that differ between runs
  std::vector<std::string> metrics;  // every metric name reported, the sort metric first
};

// `metric` / `mode` ("min", "max" or "") override the experiment's objective. Without an
// objective the first metric alphabetically is used; names with "loss" or "err" sort ascending.
Comparison Compare(const Experiment& exp, std::vector<Run> runs, const std::string& metric,
                   const std::string& mode);
// The run's value of the comparison's metric, when it reported a number.
std::optional<double> SortValue(const Comparison& c, const Run& r);

// The parameters that differ between runs of one set (for compact listings).
std::vector<std::string> VaryingParams(const std::vector<Run>& runs);
// One value as a table cell: 0.9611 / 64 / mlp / nan (a NaN or infinite metric is stored as null).
std::string FormatValue(const Json& v);

}  // namespace drover::report
