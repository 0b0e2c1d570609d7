#pragma once
// A stand-in for the engine's loop as its components see it (engine/engine_context.h), for
// testing a component with a real store and no engine: the store as given, the transaction left
// to the test, a fixed clock, and what the component reported (a store failure, its alerts).
#include <vector>

#include "engine/engine_context.h"

namespace drover::testing {

class LoopContext : public EngineContext {
 public:
  explicit LoopContext(Store& store) : store_(store) {}
  Store& store() override { return store_; }
  void Tx() override {}
  void Fail(Status st) override { failed = st; }
  Instant Now() override { return {1000, 1000}; }
  void Wake() override {}
  bool Winding() const override { return winding; }
  bool CancellingAll() const override { return false; }
  void Alert(drover::Alert a, Millis) override { alerts.push_back(std::move(a)); }

  Store& store_;
  Status failed;
  bool winding = false;
  std::vector<drover::Alert> alerts;
};

}  // namespace drover::testing
