#pragma once
// The HTML report of one experiment: a single self-contained file (styles and charts inline, no
// external URL, readable without script) to mail or commit. Written by `drover report` and at the
// end of `drover run`; the data is gathered by the CLI from the store or a daemon.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/run.h"
#include "report/comparison.h"
#include "report/series.h"
#include "report/svg.h"

namespace drover::report {

// What the report knows of a run beyond its record.
struct RunDetails {
  std::vector<Attempt> attempts;  // by number
  // Metric name -> the curve drawn: the points of one attempt (the latest that reported any),
  // downsampled; the report's charts downsample again to their pixel width.
  std::map<std::string, MetricSeries> curves;
  int curve_attempt = 0;  // the latest attempt number a curve comes from (0: none)
};

struct ReportData {
  Experiment experiment;
  std::vector<Run> runs;
  std::map<int64_t, RunDetails> details;  // by run id; a run without an entry has no curves
  std::vector<Alert> alerts;              // the experiment's; explain diverged and stalled runs
  Comparison ranking;                     // the runs ranked (report/comparison.h, Rank)
  Millis generated_ms = 0;
  std::string drover_version;
};

// The metrics the report draws curves of: the comparison's metric, then the loss ("loss", else
// the first reported name containing "loss") when that is another metric.
std::vector<std::string> CurveMetrics(const Comparison& c);

// The curves of `metric`, one series per run in the comparison's order (the best run
// emphasised), named "run 12 · model=cnn batch_size=32" by the parameters that vary.
std::vector<LineSeries> CurveSeries(const Comparison& c,
                                    const std::map<int64_t, RunDetails>& details,
                                    const std::string& metric);

// A chart of those curves: `standalone` for an .svg file (`drover compare --plot`).
std::string CurvesSvg(const Experiment& exp, const Comparison& c,
                      const std::map<int64_t, RunDetails>& details, const std::string& metric,
                      bool standalone);

std::string RenderReportHtml(const ReportData& data);

}  // namespace drover::report
