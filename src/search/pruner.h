#pragma once
// Early stopping (prune:, docs/search.md): which runs to stop because their curve is behind.
// Pure: the engine feeds it each reported value of the metric and stores what it returns, so a
// restarted engine loads the same records and takes the same decisions.
//
// Runs are compared at rungs, the steps min_steps * reduction^k (rung k). The first time a run
// reports a step at or past a rung, its value there is recorded, and the decision is taken:
// - asha: the run goes on when it is among the best ceil(n / reduction) of the n values recorded
//   at that rung so far, itself included (asynchronous successive halving);
// - hyperband: the same in brackets: trial i is in bracket i mod (s + 1), s = the number of rungs
//   between min_steps and max_steps; bracket b starts at rung b, so it runs its trials longer
//   before it compares them;
// - median: the run stops when its value is worse than the median of the other runs' values at
//   that rung, once startup_trials other runs have a value there.
// A NaN ranks below every number.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/run.h"
#include "model/spec.h"

namespace drover::search {


class Pruner {
 public:
  explicit Pruner(PruneSpec spec);

  // A record from the store (before any Report).
  void Load(const RungRecord& r);
  // The run (trial number `index` of its experiment) reported `value` at `step`: the rungs it
  // reached for the first time, each with its decision. At most one is pruned (the first), and
  // none after a run was pruned.
  std::vector<RungRecord> Report(int64_t run_id, int64_t index, int64_t step, double value);

  int Brackets() const;
  int BracketOf(int64_t index) const;
  // The step of rung `rung` of bracket `bracket`.
  int64_t RungStep(int bracket, int rung) const;
  // Whether the run was pruned, and where.
  const RungRecord* PrunedAt(int64_t run_id) const;
  const PruneSpec& spec() const { return spec_; }

 private:
  bool Decide(const RungRecord& r) const;
  double Score(double value) const;  // higher is better; NaN lowest

  PruneSpec spec_;
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, double>>> values_;  // (b, k) -> runs
  std::map<int64_t, int> next_rung_;  // run -> the first rung it has not reached
  std::map<int64_t, RungRecord> pruned_;
};

}  // namespace drover::search
