#pragma once
// The pool's books: what a start of Decide() takes from its GPUs and CPU slots, and what its end
// gives back. Decide() keeps its books within a pass with the same Take(), and the engine and
// the simulator keep theirs between passes with a GpuBook, so a decision is accounted one way
// everywhere.
#include <unordered_map>
#include <vector>

#include "sched/scheduler.h"

namespace drover::sched {

// Takes `a`'s share of one of its GPUs: its memory, one more run, and the whole GPU when the
// start is exclusive.
void Take(GpuState& gpu, const StartAction& a);
// Gives it back; a GPU with no run left is no longer held whole.
void Give(GpuState& gpu, const StartAction& a);

class GpuBook {
 public:
  GpuBook() = default;
  explicit GpuBook(std::vector<GpuState> gpus);

  const std::vector<GpuState>& gpus() const { return gpus_; }
  int cpu_slots_used() const { return cpu_slots_used_; }

  // A start (with the CPU slots its run takes) and, later, its end. GPUs the book does not
  // hold are ignored.
  void Apply(const StartAction& a, int cpus);
  void Release(const StartAction& a, int cpus);

 private:
  std::vector<GpuState> gpus_;
  std::unordered_map<int, size_t> position_;  // GPU index -> position in gpus_
  int cpu_slots_used_ = 0;
};

}  // namespace drover::sched
