#pragma once
// The engine's watching as components (docs/metrics.md, docs/architecture.md): the detectors of
// each running attempt (RunWatchers), and the per-GPU detectors and telemetry rows
// (GpuTelemetry). Each keeps its own state and returns findings; the engine raises them as
// alerts and stores the rows.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "model/gpu.h"
#include "model/run.h"
#include "model/run_lifecycle.h"
#include "model/spec.h"
#include "watch/detectors.h"
#include "watch/run_watch.h"

namespace drover::watch {

// The detectors of every running attempt: a fresh set for each attempt, fed its metric points and
// its GPU memory, dropped when the run is final.
class RunWatchers : public RunLifecycle {
 public:
  explicit RunWatchers(const DetectorConfig& config) : config_(config) {}
  // An attempt of the run starts (or is taken over) under `spec`, which must outlive it.
  void Start(int64_t run_id, const Spec& spec);
  // The attempt did not start after all.
  void Stop(int64_t run_id) {
    runs_.erase(run_id);
    output_.erase(run_id);
  }
  // The output stall (the spec's monitor.stall): when the attempt last printed, judged by the
  // size of its logs (stderr counts: progress bars, warnings). Its clock starts when the attempt
  // starts, or begins running where an executor placed it.
  void OutputClockStarts(int64_t run_id, Millis now_mono) { output_[run_id] = {now_mono, 0}; }
  // Its logs' size now: any change is output.
  void OnOutputSize(int64_t run_id, int64_t bytes, Millis now_mono) {
    OutputClock& c = output_[run_id];
    if (bytes != c.bytes) c = {now_mono, bytes};
  }
  // When it last printed (or its clock started); 0 when it is not watched.
  Millis LastOutput(int64_t run_id) const {
    auto it = output_.find(run_id);
    return it == output_.end() ? 0 : it->second.last_mono;
  }
  std::vector<RunFinding> OnPoints(int64_t run_id, const std::vector<MetricPoint>& points);
  // The run's GPU memory as the driver reports it (over its processes), at time t.
  std::optional<RunFinding> OnGpuMemory(int64_t run_id, Millis t_ms, int64_t bytes);
  void OnFinal(const Run& run) override {
    runs_.erase(run.id);
    output_.erase(run.id);
  }
  size_t watched() const { return runs_.size(); }

 private:
  struct OutputClock {
    Millis last_mono = 0;
    int64_t bytes = 0;
  };
  DetectorConfig config_;
  std::map<int64_t, std::unique_ptr<RunWatch>> runs_;
  std::map<int64_t, OutputClock> output_;
};

// The GPUs' own watch: an idle-GPU and an input-stall detector per GPU over the runs holding it
// (a new set of holders starts them afresh), and the telemetry rows to store, one averaged row
// per GPU per `store_every_ms`.
class GpuTelemetry {
 public:
  GpuTelemetry(const DetectorConfig& config, Millis store_every_ms)
      : config_(config), every_ms_(store_every_ms) {}

  struct GpuFinding {
    int gpu = 0;
    bool idle = false;  // the idle-GPU detector's (else the input stall's)
    std::vector<int64_t> runs;  // the runs holding the GPU: what the finding is about
    Finding finding;
  };
  // One reading of every GPU; `holders`: the runs holding each GPU now, by index.
  std::vector<GpuFinding> Observe(const std::vector<GpuSample>& samples,
                                  const std::map<int, std::vector<int64_t>>& holders, Millis now);

  struct Rows {
    std::vector<GpuSample> rows;
    std::vector<int> counts;  // the samples each row averages
  };
  // The rows whose bucket a reading closed (every bucket when `flush_all`: the engine ends).
  Rows Bucket(const std::vector<GpuSample>& samples, bool flush_all);

 private:
  struct SampleBucket {
    GpuSample sum;
    int count = 0;
  };
  DetectorConfig config_;
  Millis every_ms_;
  std::map<int, IdleGpuDetector> idle_;
  std::map<int, InputStallDetector> input_;
  std::map<int, std::vector<int64_t>> holders_;  // the runs each GPU's detectors are about
  std::map<int, SampleBucket> buckets_;
};

}  // namespace drover::watch
