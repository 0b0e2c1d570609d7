#pragma once
// The results table of an experiment: runs sorted by a metric (the objective by default), the
// best run marked. Shown at the end of `drover run` and by `drover compare`.
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"
#include "cli/catalog.h"
#include "report/comparison.h"

namespace drover::cli {

// The ranking itself lives in report/ (the HTML report, the web UI and MCP share it).
using report::Comparison;

// The runs ranked as every view ranks them: the rule (options over the spec's objective), then
// its metric's curves from the catalog (the store's or the daemon's).
Result<Comparison> CompareRuns(Catalog& catalog, const Experiment& exp, std::vector<Run> runs,
                               const report::RankOptions& options);
// The runs of several experiments ranked together by one rule: every experiment's rule must be the
// same (the same objective, or the options' metric and mode), else InvalidArgument says so.
Result<Comparison> CompareAcross(Catalog& catalog, const std::vector<Experiment>& exps,
                                 std::vector<Run> runs, const report::RankOptions& options);

// Why each failed run failed, in its own words: the last line of its last attempt's error (the
// exception), at most 60 characters, by run id. Runs without one are absent; a catalog that
// cannot say leaves them all out (the state's reason is shown instead).
std::map<int64_t, std::string> FailureLines(Catalog& catalog, const std::vector<Run>& runs);
// The last line of an ended attempt's error, shortened to 60 characters ("" when none).
std::string FailureLine(const Attempt& a);

// The runs table; a failed run's state shows `failures`' line for it when there is one.
std::string RenderComparison(const Comparison& c,
                             const std::map<int64_t, std::string>& failures = {});
// How `drover run` ends, embedded or following a daemon: the table (or JSON) of the experiment's
// runs by its objective; returns 0 when every run succeeded, else 1.
// Why the experiment stopped early, when it did (fail fast, engine/fail_fast.h), on stderr: what
// `drover run` following a daemon says at its end (in the foreground the alert was printed as it
// was raised).
void PrintStopped(Catalog& catalog, const Experiment& exp, const std::vector<Run>& runs);
int PrintResults(Catalog& catalog, const Experiment& exp, const std::vector<Run>& runs, bool json,
                 bool quiet);
Json ComparisonJson(const Experiment& exp, const Comparison& c);

}  // namespace drover::cli
