#pragma once
// Inside the engine only: its unfinished runs indexed by what each pass of its loop asks of them,
// the running ones (deadlines, wake-ups, tailing, what the scheduler sees running) and the waiting
// ones by class, so that a pass costs what runs and what can start, not the length of the queue.
// Without it a sweep of N runs cost N^2 (every start looked at every waiting run: 0.45 ms per run
// at 1,000 runs, 0.66 ms at 5,000). The engine tells it of every change of a run's state; tests
// check it against the runs (Engine::CheckIndex).
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "common/clock.h"

namespace drover {

// Waiting runs that the scheduler can tell apart only by their submit order: one experiment (so
// one spec: resources, group, preemptibility, predicted time), one priority, one submit time and
// the same GPU time attained. Of such runs a pass starts some first ones in id order and none
// after the first that does not fit (a start only uses up room), so a pass that is handed the
// first as many as could start, and one more to show that more wait, decides as one handed all.
struct WaitClass {
  int64_t experiment_id = 0;
  int priority = 0;
  int64_t created_ms = 0;
  int64_t attained_gpu_ms = 0;
  auto operator<=>(const WaitClass&) const = default;
};

class RunQueue {
 public:
  // The run waits (first, again after an attempt, or in another class after a change).
  void Wait(int64_t run_id, const WaitClass& c);
  // It has an attempt (starting or running).
  void Run(int64_t run_id);
  // It is final: gone from the engine.
  void Drop(int64_t run_id);
  // A waiting run's retry backoff ends then (monotonic); cleared when it starts or goes.
  void Backoff(int64_t run_id, Millis at_mono);

  const std::set<int64_t>& running() const { return running_; }
  const std::map<WaitClass, std::set<int64_t>>& waiting() const { return waiting_; }
  size_t waiting_count() const { return class_of_.size(); }
  // The class a waiting run is in; nullptr when it does not wait.
  const WaitClass* ClassOf(int64_t run_id) const;
  // The earliest backoff that ends after now_mono (0: none).
  Millis NextRetry(Millis now_mono) const;

 private:
  void Unwait(int64_t run_id);

  std::map<WaitClass, std::set<int64_t>> waiting_;
  std::unordered_map<int64_t, WaitClass> class_of_;
  std::set<int64_t> running_;
  std::set<std::pair<Millis, int64_t>> retries_;
  std::unordered_map<int64_t, Millis> retry_of_;
};

}  // namespace drover
