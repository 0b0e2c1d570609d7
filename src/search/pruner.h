#pragma once
// Early stopping (prune:, docs/search.md): which runs to stop because their curve is behind.
// Pure: the engine feeds it each reported value of the metric and stores what it returns, so a
// restarted engine loads the same records and takes the same decisions.
//
// Runs are compared at rungs, the points min_steps * reduction^k (rung k) of what rungs count
// (the resource: epochs when runs report `epoch`, or steps; the caller says where each report
// is). The first time a run reports at or past a rung, its value there is recorded, and the
// decision is taken. A report judges one rung at most, the last it reached: rungs it passed
// over are skipped, so no two rungs are judged on one value.
// - asha: the run goes on when it is among the best ceil(n / reduction) of the n values recorded
//   at that rung so far, itself included (asynchronous successive halving); the first
//   reduction - 1 runs at a rung go on (no run there could be promoted past another yet);
// - hyperband: the same in brackets: trial i is in bracket i mod (s + 1), s = the number of rungs
//   between min_steps and max_steps; bracket b starts at rung b, so it runs its trials longer
//   before it compares them;
// - median: the run stops when its value is worse than the median of the other runs' values at
//   that rung, once startup_trials other runs have a value there.
// A NaN ranks below every number.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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
  // Where a report is: `at` in the resource's units (`unit`: "step", "epoch"), made at `step`.
  struct Place {
    double at = 0;
    std::string unit = "step";
    int64_t step = 0;
    double end = 0;  // where this run ends, in the same units, when known (0: max_steps only)
  };
  // The run (trial number `index` of its experiment) reported `value` at `place`: the rung it
  // reached for the first time (the last of those it passed), with its decision; none after a
  // run was pruned. `ended`: the run had already finished when this was read (its last
  // report): the value is recorded and compared, but it is not stopped.
  std::optional<RungRecord> Report(int64_t run_id, int64_t index, const Place& place,
                                   double value, bool ended = false);

  // Whether a rung at `at` judges runs that end at `end` (in the resource's units; 0 = unknown)
  // and at max_steps: only where the runs it keeps reach the next rung (at * reduction) by then,
  // as ASHA places its rungs below its maximum resource, whose own rung is the end. A rung at 9 of
  // a 10-epoch run would stop runs that are 90% done and save a tenth of them.
  bool Judges(int64_t at, double end = 0) const;

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

// Where a run's reports of the pruned metric fall, in the resource's units (docs/search.md,
// "Early stopping"): steps when the spec says `resource: step`; else the resource metric (epoch
// unless named) that the run reported at or before the report's step, the resource first at one
// step (a line's epoch places the values beside it); a run that never reported `epoch` is placed
// by its steps, one that never reported a named resource not at all. The engine's prune checks
// and the dry run's preview place reports with this one placer.
class ReportPlacer {
 public:
  explicit ReportPlacer(const PruneSpec& spec) : spec_(spec) {}
  // Calls `each` for every report of the metric among `points` (one run's, as read) that has a
  // place, in step order, until it returns false. `end`: where the run ends in the resource's
  // units (its `epochs` parameter), 0 when unknown.
  void Place(int64_t run_id, const std::vector<MetricPoint>& points, double end,
             const std::function<bool(const MetricPoint&, const Pruner::Place&)>& each);
  void Forget(int64_t run_id) { resource_.erase(run_id); }

 private:
  PruneSpec spec_;
  std::map<int64_t, double> resource_;  // run -> its last report of the resource
};

}  // namespace drover::search
