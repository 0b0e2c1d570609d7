#pragma once
// The results table of an experiment: runs sorted by a metric (the objective by default), the
// best run marked. Shown at the end of `drover run` and by `drover compare`.
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"
#include "report/comparison.h"

namespace drover::cli {

// The ranking itself lives in report/ (the HTML report shares it); these names keep the CLI's
// callers unchanged.
using report::Compare;
using report::Comparison;

std::string RenderComparison(const Comparison& c);
// How `drover run` ends, embedded or following a daemon: the table (or JSON) of the experiment's
// runs by its objective; returns 0 when every run succeeded, else 1.
int PrintResults(const Experiment& exp, const std::vector<Run>& runs, bool json, bool quiet);
Json ComparisonJson(const Experiment& exp, const Comparison& c);

}  // namespace drover::cli
