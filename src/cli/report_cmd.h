#pragma once
// The HTML report and curve plots of an experiment, gathered through a Catalog (the store, or the
// daemon that serves it): `drover report`, the end of `drover run`, `drover compare --plot`.
#include <map>
#include <string>
#include <vector>

#include "cli/catalog.h"
#include "cli/common.h"
#include "report/report.h"

namespace drover::cli {

// Fills `details[run.id]` for each run: its attempts, and the curves of `metrics` from its latest
// attempt that reported any (downsampled as the daemon's API does).
Status LoadCurves(Catalog& catalog, const std::vector<Run>& runs,
                  const std::vector<std::string>& metrics,
                  std::map<int64_t, report::RunDetails>* details);

// Everything the report of `exp` shows, its runs ranked as compare ranks them (`options` over
// the objective).
Result<report::ReportData> LoadReportData(Catalog& catalog, const Experiment& exp,
                                          const report::RankOptions& options);

// <store>/reports/<experiment-name>-<id>.html (the name made safe for a file name).
std::string DefaultReportPath(const Globals& g, const Experiment& exp);

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
// report; `make_dirs` creates the missing folders first.
Status WriteTextFile(const std::string& path, const std::string& text, bool make_dirs);

// Writes the report of `exp` to `path` (default: DefaultReportPath) and returns where.
Result<std::string> WriteExperimentReport(const Globals& g, Catalog& catalog, const Experiment& exp,
                                          const std::string& path = "");

}  // namespace drover::cli
