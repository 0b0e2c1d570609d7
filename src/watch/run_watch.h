#pragma once
// The detectors of one run, chosen from its spec: a spike detector on every loss-like metric, a
// plateau detector on the objective (or, without one, on "loss"), leak and fragmentation
// detectors on the CUDA allocator numbers the Python client logs (cuda_allocated_bytes,
// cuda_reserved_bytes, cuda_fragmentation), and a leak detector on the driver's view of the
// run's GPU memory (telemetry). Pure: the engine feeds it and turns findings into alerts.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"
#include "model/spec.h"
#include "watch/detectors.h"

namespace drover::watch {

// A finding about one run, with the suffix that makes its alert key unique within the run
// ("loss_spike:loss", "memory_leak:cuda_allocated_bytes").
struct RunFinding {
  Finding finding;
  std::string key_suffix;
};

// Whether `name` is a loss-like metric of `spec`: the monitor.watch list when given, else every
// metric whose name holds "loss". (NaN in such a metric, or in the objective, means divergence.)
bool IsLossLike(const Spec& spec, const std::string& name);

class RunWatch {
 public:
  RunWatch(const Spec& spec, const DetectorConfig& config);

  // One metric point (finite values; NaN/Inf are the engine's divergence check).
  std::vector<RunFinding> OnPoint(const MetricPoint& p);
  // The run's GPU memory as the driver reports it (summed over its processes), at time t.
  std::optional<RunFinding> OnGpuMemory(Millis t_ms, int64_t bytes);

 private:
  const Spec& spec_;
  DetectorConfig config_;
  std::map<std::string, std::unique_ptr<SpikeDetector>> spikes_;
  std::unique_ptr<PlateauDetector> plateau_;
  std::string plateau_metric_;
  LeakDetector allocator_leak_;
  LeakDetector driver_leak_;
  FragmentationDetector fragmentation_;
  int64_t last_reserved_ = -1;
  int64_t last_allocated_ = -1;
  int64_t last_allocator_step_ = -1;
  // cuda_fragmentation waits for the rest of its line: when cuda_reserved_bytes comes with it,
  // the ratio is computed from the sizes instead (and checked against the minimum size).
  std::optional<MetricPoint> pending_fragmentation_;
  void FlushFragmentation(std::vector<RunFinding>& out);
};

}  // namespace drover::watch
