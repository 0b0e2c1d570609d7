#pragma once
// What an engine tells whoever hosts it (the progress view of drover run, the daemon's event
// stream), each call made once the change it reports is committed.
#include <string>
#include <vector>
#include "common/clock.h"
#include "common/status.h"
#include "model/gpu.h"
#include "model/run.h"

namespace drover {

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // A run changed state (attempt is the attempt that started or ended, if any). This and
  // OnMetrics are called once the change is committed to the store.
  virtual void OnRunChanged(const Run& run, const Attempt* attempt, const std::string& note) {}
  // An experiment was recorded with its queued runs (before any of them starts).
  virtual void OnExperimentSubmitted(const Experiment& experiment, const std::vector<Run>& runs) {}
  virtual void OnMetrics(const Run& run, const std::vector<MetricPoint>& points) {}
  // An alert was raised, stored and committed (not called for repeats within the silence window).
  virtual void OnAlert(const Alert& alert) {}
  // A telemetry reading of every GPU (every watch.telemetry_period_ms).
  virtual void OnGpuSamples(const std::vector<GpuSample>& samples) {}
  virtual void OnTick() {}  // after each commit of the loop (or idle pass), to redraw a live view
  // An interrupt is stopping `running` runs: SIGTERM now and SIGKILL after `grace_ms`, or SIGKILL
  // at once when `force` (a second interrupt).
  virtual void OnStopping(int running, bool force, Millis grace_ms) {}
  // The store could not commit for want of room (a full disk, a failing one): nothing was lost
  // (the store kept the writes) and running runs keep running; no run starts and nothing new is
  // written until a retry in `retry_in_ms` lands it. Called at the first failure and at each
  // failed retry.
  virtual void OnStoreStalled(const Status& why, Millis retry_in_ms) {}
  // The retry landed everything after `stalled_ms`; the engine carries on.
  virtual void OnStoreRecovered(Millis stalled_ms) {}
  // A run could not be prepared to start (its working copy or log folder: a full or failing
  // disk): it stays queued, charged nothing, and no run starts before a retry in `retry_in_ms`.
  // Called at the first failure and at each failed retry.
  virtual void OnStartsHeld(int64_t run_id, const Status& why, Millis retry_in_ms) {}
  // A working copy could be made again after `held_ms`: runs start again.
  virtual void OnStartsResumed(Millis held_ms) {}
};

}  // namespace drover
