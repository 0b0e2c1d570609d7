#pragma once
// Where a running attempt's metric points come from: its stdout's JSON lines, the TensorBoard
// event files it writes, and whatever else is registered in metric_sources.cc. A source is one
// file: a class implementing MetricSource and one line in MetricSources(). The engine never
// knows which sources there are: MetricTail (metric_tail.h) makes one of each per run and reads
// them in turn at every look.
//
// A source keeps where it is in the attempt's own record (Attempt::stdout_offset,
// Attempt::event_files): those are stored with the points they reach in one transaction, so a
// restarted engine goes on where the last one stopped and no point is lost or stored twice.
// What it keeps in memory (a walk's position, a line counter) is only for speed or for the
// attempt at hand.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/run.h"
#include "model/spec.h"
#include "watch/detectors.h"

namespace drover {

struct RunFiles;

// What a source reads for one look at one running attempt.
struct SourceLook {
  Attempt* attempt = nullptr;      // its record: offsets, checkpoint, hyper-parameters may change
  const Spec* spec = nullptr;      // the spec the run runs under (its stage's, for a pipeline)
  const RunFiles* files = nullptr; // where the run's files are
  bool final = false;              // the attempt has ended: read to the end of what it wrote
  Instant now;
};

// What a source hands what it reads to (MetricTail, for the engine).
class PointSink {
 public:
  virtual ~PointSink() = default;
  // The points that follow are one line's (or one step's of one file): the unit a run's new
  // metric names are counted in (kMaxNewMetricNamesPerLine).
  virtual void BeginLine() = 0;
  // One metric point; `t` the wall time it was written (or read) at.
  virtual void Point(int64_t step, std::string name, double value, Millis t) = 0;
  // A line of the run's stdout that is not a metric (the run's own alerts are read from them).
  virtual void Line(std::string_view line) = 0;
  // Something the user should know about the run's metrics (raised as the run's alert, keyed by
  // `key`, and logged).
  virtual void Warn(const watch::Finding& finding, const std::string& key) = 0;
  // The run's earlier attempts, as stored (a later attempt reads on from where they stopped).
  virtual Result<std::vector<Attempt>> EarlierAttempts() = 0;
};

class MetricSource {
 public:
  virtual ~MetricSource() = default;
  // Reads what is new since the last look and hands it to `sink`. Returns whether the attempt's
  // record changed (an offset moved, a checkpoint or hyper-parameters were reported), so it is
  // stored with the points; an error is logged and the look goes on with the next source.
  virtual Result<bool> Read(const SourceLook& look, PointSink& sink) = 0;
};

struct MetricSourceRegistration {
  const char* name;  // for logs and docs: "stdout", "tensorboard"
  std::unique_ptr<MetricSource> (*make)();
};

// Every source, in the order a look reads them (metric_sources.cc). One per run is made when its
// first attempt is first looked at.
std::span<const MetricSourceRegistration> MetricSources();

// The sources this file set registers (each defined in its own file).
std::unique_ptr<MetricSource> MakeStdoutSource();       // stdout_source.cc
std::unique_ptr<MetricSource> MakeTensorBoardSource();  // tensorboard_source.cc

}  // namespace drover
