#pragma once
// The scheduler is a pure function of the queue, the GPU pool and the time: no clock calls, no
// threads, no I/O. The engine applies what it returns; tests and (later) the simulator call it
// directly.
//
// Policy (v1): runs in order of priority (higher first), then submit order. A run that declares
// gpu_memory shares GPUs: it goes to the GPU whose free memory fits it most tightly (best fit), so
// large holes stay open for large runs. A run without gpu_memory takes whole idle GPUs. A
// multi-GPU run gets all its GPUs at once or waits (gang). max_parallel caps an experiment's
// running runs, and CPU slots cap everything. A run that cannot be placed now does not block
// lower-priority runs that can (no reservation yet, so a big gang run can wait behind a stream
// of small ones).
#include <cstdint>
#include <map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/spec.h"

namespace drover::sched {

struct PendingRun {
  int64_t run_id = 0;
  int64_t experiment_id = 0;
  int priority = 0;
  int64_t seq = 0;  // submit order (the run id works)
  Resources resources;
  Millis not_before_ms = 0;  // retry backoff: not eligible before this time
};

struct GpuState {
  int index = 0;
  int64_t capacity = 0;    // bytes drover may hand out on this GPU
  int64_t reserved = 0;    // bytes held by running runs
  int runs = 0;            // runs on it now
  bool exclusive = false;  // held whole by one run
};

struct ClusterView {
  std::vector<GpuState> gpus;
  int cpu_slots_total = 0;  // <= 0: no CPU limit
  int cpu_slots_used = 0;
  std::map<int64_t, int> max_parallel;  // experiment -> limit (absent or 0 = none)
  std::map<int64_t, int> running;       // experiment -> runs running now
};

struct StartAction {
  int64_t run_id = 0;
  std::vector<int> gpus;   // GPU indices, ascending
  int64_t gpu_memory = 0;  // bytes reserved on each of them (capacity when exclusive)
  bool exclusive = false;
};

std::vector<StartAction> Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster,
                                Millis now);

// Whether a run with these resources could ever start on this pool; an error says why and what to
// do (checked at submit, so a run never waits for a GPU that does not exist).
Status CheckFits(const Resources& resources, const std::vector<GpuState>& gpus,
                 int cpu_slots_total);

}  // namespace drover::sched
