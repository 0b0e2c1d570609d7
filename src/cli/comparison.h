#pragma once
// The results table of an experiment: runs sorted by a metric (the objective by default), the
// best run marked. Shown at the end of `drover run` and by `drover compare`.
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"

namespace drover::cli {

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
std::string RenderComparison(const Comparison& c);
// How `drover run` ends, embedded or following a daemon: the table (or JSON) of the experiment's
// runs by its objective; returns 0 when every run succeeded, else 1.
int PrintResults(const Experiment& exp, const std::vector<Run>& runs, bool json, bool quiet);
Json ComparisonJson(const Experiment& exp, const Comparison& c);

}  // namespace drover::cli
