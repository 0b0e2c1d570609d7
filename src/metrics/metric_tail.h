#pragma once
// Metric tailing, a component of the engine (docs/architecture.md): at each look at a running
// attempt every registered MetricSource is read, and what they give becomes the run's metric
// points: each name admitted under the run's limits, fed to the spec's derived metrics, and
// recorded as the run's last value. The engine stores the points with the offsets they reach in
// one transaction; it never sees a source.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "metrics/metric_source.h"
#include "model/run.h"
#include "model/run_lifecycle.h"
#include "model/spec.h"
#include "spec/derived_metrics.h"
#include "watch/detectors.h"

namespace drover {

struct RunFiles;

// What the tail needs of its host (the engine) for the run it is reading.
class TailHost {
 public:
  virtual ~TailHost() = default;
  // A stdout line that is not a metric (the run's own alerts are read from them).
  virtual void Line(std::string_view line) = 0;
  // Something the user should know about the run's metrics: raised as the run's alert.
  virtual void Warn(const watch::Finding& finding, const std::string& key) = 0;
  // The run's attempts as stored.
  virtual Result<std::vector<Attempt>> Attempts() = 0;
  // A watched metric became NaN or infinite and the spec says stop_on_nan: the host stops the
  // run as diverged (once: it is told at every such point).
  virtual void Diverged(const std::string& name, double value, int64_t step) = 0;
};

// One look at a run's running attempt.
struct TailLook {
  Run* run = nullptr;          // its last values (final_metrics) are kept up to date
  Attempt* attempt = nullptr;  // offsets and what the run reported change here
  const Spec* spec = nullptr;
  const RunFiles* files = nullptr;
  bool final = false;          // the attempt has ended: every source is read to its end
  Instant now;
};

struct Tailed {
  std::vector<MetricPoint> points;
  bool changed = false;  // the attempt's record changed: store it (with the points)
};

class MetricTail : public RunLifecycle {
 public:
  Tailed Read(const TailLook& look, TailHost& host);
  void OnFinal(const Run& run) override { runs_.erase(run.id); }
  size_t runs() const { return runs_.size(); }

 private:
  struct RunTail {
    std::vector<std::unique_ptr<MetricSource>> sources;  // one of each registered
    bool names_capped = false;     // said once: it logs more metric names than it may keep
    size_t new_names_in_line = 0;  // names the current line (or event-file step) added
    // The spec's derived metrics for this run (spec.metrics), seeded with its last values.
    std::unique_ptr<DerivedMetrics> derived;
  };
  class Sink;
  std::map<int64_t, RunTail> runs_;
};

}  // namespace drover
