#pragma once
// The engine's run table as a component that acts on runs sees it (docs/architecture.md, "The
// engine and its components"): the unfinished runs, and the few things only the loop may do to
// one (queue it for a start, change its state, retire it once final). The engine is the only
// implementation; a component holds a `RunTable&` beside its `EngineContext&` and never
// includes engine/engine.h.
#include <cstdint>
#include <string>

#include "common/clock.h"
#include "engine/live.h"
#include "model/run_state.h"

namespace drover {

class RunTable {
 public:
  virtual ~RunTable() = default;
  // An unfinished run of the table (null: final, or never known).
  virtual LiveRun* Find(int64_t run_id) = 0;
  // The run waits for a start now, in the scheduler's queue.
  virtual void Queue(LiveRun& live) = 0;
  // The run's state moves by `event` (stored in the loop's transaction, with `note` as its
  // event's text).
  virtual void SetState(LiveRun& live, RunEvent event, const std::string& note, Instant now) = 0;
  // A final run leaves the table (its components are told, RunLifecycle::OnFinal).
  virtual void Retire(int64_t run_id) = 0;
  // Where the run's files go (its log folder, working copy, changes).
  virtual const RunFiles& FilesOf(LiveRun& live) = 0;
};

}  // namespace drover
