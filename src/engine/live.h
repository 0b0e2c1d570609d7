#pragma once
// Inside the engine only: what it keeps about each experiment and each unfinished run. Shared by
// engine.cc (the loop) and engine_watch.cc (detectors, alerts, telemetry).
#include <memory>
#include <optional>

#include "engine/engine.h"

namespace drover {

struct Engine::ExperimentEntry {
  Experiment experiment;
  Spec spec;
  Snapshot snapshot;
  int unfinished = 0;
};

struct Engine::Live {
  Run run;
  ExperimentEntry* exp = nullptr;
  std::optional<Attempt> attempt;  // the running attempt
  sched::StartAction placement;
  Millis deadline_ms = 0;  // timeout of the running attempt (0 = none)
  Millis kill_at_ms = 0;   // SIGKILL the group at this time (0 = not stopping)
  bool timed_out = false;
  bool cancelling = false;
  bool drain_stop = false;    // stopped because the daemon is shutting down: requeue, not cancel
  bool diverged = false;      // a watched metric went NaN/Inf: being stopped
  bool stalled = false;       // no output for monitor.stall: being stopped
  Millis last_output_ms = 0;  // when stdout or stderr last grew
  int64_t output_bytes = 0;   // stdout + stderr size at that time
  int64_t metric_lines = 0;   // fallback step for lines without step/epoch
  std::unique_ptr<watch::RunWatch> watch;  // this attempt's detectors
};

}  // namespace drover
