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

// Fills `details[run.id]` for each run the report shows attempts of: its attempts, and the
// curves of `metrics` from its latest attempt that reported any (downsampled as the daemon's API
// does). A run that succeeded at its first attempt and has none of `metrics` has nothing to show
// there (no failed attempt, no curve): its attempts are not asked for.
Status LoadCurves(Catalog& catalog, const std::vector<Run>& runs,
                  const std::vector<std::string>& metrics,
                  std::map<int64_t, report::RunDetails>* details);

// Everything the report of `exp` shows, its runs ranked as compare ranks them (`options` over
// the objective). `runs`, when given, are its runs as just read (all of them): not read again.
Result<report::ReportData> LoadReportData(Catalog& catalog, const Experiment& exp,
                                          const report::RankOptions& options,
                                          const std::vector<Run>* runs = nullptr);

// <store>/reports/<experiment-name>-<id>.html (the name made safe for a file name).
std::string DefaultReportPath(const Globals& g, const Experiment& exp);

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
// report; `make_dirs` creates the missing folders first.
Status WriteTextFile(const std::string& path, const std::string& text, bool make_dirs);

// Writes the report of `exp` to `path` (default: DefaultReportPath) and returns where; `runs` as
// LoadReportData takes them.
Result<std::string> WriteExperimentReport(const Globals& g, Catalog& catalog, const Experiment& exp,
                                          const std::string& path = "",
                                          const std::vector<Run>* runs = nullptr);

}  // namespace drover::cli
