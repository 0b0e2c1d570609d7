#pragma once
// What the engine keeps about each experiment and each unfinished run (its run table), shared by
// its files (engine.cc: the loop, scheduling, deadlines; engine_submit.cc, engine_attempt.cc: an
// attempt's lifecycle; engine_adopt.cc: Recover; ...) and by the components that act on runs
// through the RunTable (engine/run_table.h), such as the pipelines (engine/pipelines.h). It does
// not include engine/engine.h.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/strings.h"
#include "common/users.h"
#include "exec/child.h"
#include "exec/working_copy.h"
#include "model/run.h"
#include "model/spec.h"
#include "sched/scheduler.h"

namespace drover {

// A SIGKILL already scheduled is never pushed later by a second reason to stop (cancel, timeout).
inline Millis KillTime(Millis scheduled, Millis proposed) {
  return scheduled > 0 ? std::min(scheduled, proposed) : proposed;
}

struct ExperimentEntry {
  Experiment experiment;
  Spec spec;
  Snapshot snapshot;
  int unfinished = 0;
  std::string predictor_key;  // its runs' key in the duration predictor (PredictorKey)
  bool logs_ready = false;    // its log folder exists
  // The environment its runs share (the engine's, PYTHONUNBUFFERED, the spec's env, PYTHONPATH
  // with the client), by name; made at its first launch (Engine::RunEnv).
  std::map<std::string, std::string> base_env;
  bool base_env_ready = false;
  // Whose rights its runs have (EngineOptions::runs_as_submitter), looked up at each launch;
  // unset: the engine's own.
  std::optional<RunAs> run_as;
  std::optional<UnixUser> submitter;
  // A pipeline's stages: the spec each stage's runs run under (StageView), by stage name.
  std::map<std::string, Spec> stages;
};

// The clocks of a run's attempt in this engine: reset when the attempt ends. Deadlines are
// monotonic (Instant::mono): a step of the wall clock moves none of them.
struct AttemptClock {
  // Its start was handed to the launcher (BeginStart) and has not been reported yet: the attempt
  // holds its resources but has no handle and no row in the store.
  bool starting = false;
  // Submitted to an executor that places it (Slurm) and not running there yet: its timeout and
  // stall clocks start when the executor says it runs (Engine::HandlePlacement).
  bool placed_pending = false;
  Millis started_mono = 0;   // when the running attempt started (its run time)
  Millis deadline_mono = 0;  // timeout of the running attempt (0 = none)
  Millis kill_at_mono = 0;   // SIGKILL the group at this time (0 = not stopping)
};

// What a run's ended attempts count for.
struct AttemptsPast {
  Millis attained_gpu_ms = 0;  // GPU time of its ended attempts (GPUs x run time, each attempt)
  Millis preempted_ms = 0;     // run time of its preempted attempts (work a checkpoint keeps)
  int failures_in_a_row = 0;   // its own failed attempts since its last success, in this engine
};

struct LiveRun {
  Run run;
  ExperimentEntry* exp = nullptr;
  std::optional<Attempt> attempt;  // the running attempt
  AttemptClock clock;
  AttemptsPast past;
  // Taken over from the store by Recover: the last engine may have started its next attempt
  // without recording it (Launch looks for that attempt's exit file once, before its first start
  // here; runs this engine submitted or started cannot have one).
  bool from_last_engine = false;
  std::optional<RunFiles> files;  // where its files go (RunFiles::In, looked up once)
  sched::StartAction placement;
  Millis retry_at_mono = 0;  // retry backoff: not started before (run.not_before_ms records it)
  // Why the running attempt is being stopped is attempt->stopping (one reason, the first).
  bool cancel_requested = false;  // the user cancelled the run: it ends cancelled, not retried
  std::string preempt_why;        // the scheduler's reason for a preemption, for the note
  // Its own code (run.snapshot_hash: a retry on the workdir as it was then); else its experiment's.
  std::optional<Snapshot> code;
};

// The code the run's next attempt runs.
inline const Snapshot& CodeOf(const LiveRun& live) {
  return live.code ? *live.code : live.exp->snapshot;
}

// Whether the run's attempt is being stopped (cancel, timeout, preemption, ...): its one reason
// is attempt->stopping.
inline bool Stopping(const LiveRun& live) {
  return live.attempt && live.attempt->stopping.has_value();
}

// The number of the run's running attempt (0: none).
inline int AttemptNumber(const LiveRun& live) { return live.attempt ? live.attempt->number : 0; }

// The spec a run runs under: its stage's view of the pipeline (ExperimentEntry::stages), or the
// experiment's.
inline const Spec& SpecOf(const LiveRun& live) {
  if (!live.run.stage.empty()) {
    auto it = live.exp->stages.find(live.run.stage);
    if (it != live.exp->stages.end()) return it->second;
  }
  return live.exp->spec;
}

}  // namespace drover
