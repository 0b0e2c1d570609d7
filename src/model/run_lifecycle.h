#pragma once
// How the engine tells its components about a run's life. The engine owns the loop (commands,
// the run table, attempts' launch, exit and deadlines, commits); each feature that keeps state
// per run (metric tailing, the pipeline gate, ...) is a component that implements the calls it
// needs and is told, in the order of Engine::components_, for every run it may hold state for
// (more calls join as components need them; a call no component implements is not kept). Calls
// are made on the loop's thread, inside the loop's open store transaction.
#include "model/run.h"

namespace drover {

class RunLifecycle {
 public:
  virtual ~RunLifecycle() = default;
  // The run is final (succeeded, failed, cancelled, ...) and leaves the engine: what the
  // component kept for it goes.
  virtual void OnFinal(const Run& run) {}
};

}  // namespace drover
