#pragma once
// The Gittins index of a run whose size is unknown, from the sizes of runs that finished (issue 7;
// Tiresias' answer to unknown durations). A run's size is the GPU time it needs (GPUs x run
// time); having attained `a` of it, its index is
//
//   G(a) = max over quanta d of  P(S <= a + d | S > a) / E[min(S - a, d) | S > a],
//
// the best rate at which serving it a while longer finishes runs. Serving the highest index first
// minimises mean completion time among policies that do not know sizes (it becomes LAS when the
// sizes are heavy-tailed and FIFO when they are not). Pure: built from a list of sizes, read in
// steps of attained service (so a run's place moves at step edges, not at every second).
#include <cstddef>
#include <vector>

#include "common/clock.h"

namespace drover::sched {

class GittinsIndex {
 public:
  // `sizes_gpu_ms`: GPU time of finished runs. Fewer than `min_samples` of them: not ready
  // (callers fall back to another ranking).
  explicit GittinsIndex(std::vector<Millis> sizes_gpu_ms, size_t min_samples = 50);
  bool ready() const { return !index_.empty(); }
  // The index of a run that attained this much GPU time (larger first). Beyond the largest size
  // seen: the index of the last step.
  double Index(Millis attained_gpu_ms) const;
  // Which step of attained service a run is in (steps double from one GPU-minute).
  static int Step(Millis attained_gpu_ms);

 private:
  std::vector<double> index_;  // per step
};

}  // namespace drover::sched
