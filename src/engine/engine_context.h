#pragma once
// What the engine's loop gives its components (docs/architecture.md, "The engine and its
// components"): the store and the loop's one open transaction, the clock, a way to wake the loop
// from another thread, and whether the loop is winding down. A component holds an
// `EngineContext&` and never includes engine/engine.h; the engine is the only implementation
// (tests may give their own).
#include "common/clock.h"
#include "common/status.h"
#include "model/run.h"
#include "store/store.h"

namespace drover {

class EngineContext {
 public:
  virtual ~EngineContext() = default;
  // The store, to read from at any time on the loop's thread.
  virtual Store& store() = 0;
  // Opens the loop's transaction if none is open: what is written next commits with the rest of
  // this pass (the engine commits once per pass).
  virtual void Tx() = 0;
  // The store failed: the loop ends with this error.
  virtual void Fail(Status st) = 0;
  virtual Instant Now() = 0;
  // From any thread: the loop's wait returns (a worker finished a job for it).
  virtual void Wake() = 0;
  // Nothing new is to be made now: every run is being cancelled, the daemon drains, or the store
  // stalls for want of room.
  virtual bool Winding() const = 0;
  // Raises an alert now (stored in the loop's transaction, sent to the sinks after its commit;
  // one with the key of an alert raised within the silence window is counted on it instead).
  // `now`: the loop pass's wall time (the alert's first and last time, its silence window).
  virtual void Alert(drover::Alert alert, Millis now) = 0;
  // Of Winding: every run is being cancelled (Ctrl-C), so what is not made now never will be.
  virtual bool CancellingAll() const = 0;
};

}  // namespace drover
