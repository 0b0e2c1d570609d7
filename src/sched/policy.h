#pragma once
// Scheduling policies (issue 7): in which order waiting runs are offered GPUs, and which running
// runs a waiting one may preempt. Pure: a policy ranks runs from what the scheduler is told about
// them (priority, submit order, time waited, GPU time attained, predicted duration); it never
// reads a clock or a store.
//
//   fifo      priority first (what users set), then submit order; never preempts. The engine's
//             policy so far.
//   priority  a bid: priority x 0.6 + (1 - predicted / 1 h) x 0.4, plus aging (every hour waited
//             adds `aging_per_hour`), so short and long-waiting runs rise and nothing starves.
//   las       Tiresias' 2D-LAS: least attained GPU time first, in two queues switching at
//             16 GPU-hours, FIFO within each; a run of the first queue may preempt one of the
//             second.
//   srtf      shortest predicted remaining time first (runs without a prediction after those
//             with one, in submit order); preempts a run with a longer remaining time.
//   gittins   Tiresias' 2D-Gittins: the highest Gittins index of attained GPU time first, over
//             the sizes of runs that finished (sched/gittins.h); like las until enough finished.
//   default   drover's: the user's priority, then the estimated remaining run time (the
//             prediction minus what it ran; past its prediction, twice what it ran) in classes
//             1.41x wide, FIFO within a class; preempts a run of a longer class once half the
//             pool is allocated. Groups' fair share and quotas apply to every policy
//             (sched/scheduler.h). docs/scheduling.md says what else was tried and why this won.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace drover::sched {

class GittinsIndex;

enum class PolicyKind { kFifo, kPriority, kLas, kSrtf, kGittins, kDefault };

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kFifo;
  Millis las_threshold_gpu_ms = 16LL * 3600 * 1000;  // 2D-LAS queue switch: 16 GPU-hours
  double aging_per_hour = 0.1;                        // priority policy: score per hour waited
  Millis min_runtime_ms = 10LL * 60 * 1000;           // a run this young is never preempted
  // Preempt only while at least this share of the pool's GPUs is allocated.
  double preempt_above_allocated = 0.8;
  // Backfill: a whole-GPU run that cannot start and has waited this long gets the machine(s)
  // closest to fitting it held back; other runs use those GPUs only when predicted to end before
  // it could start. Keeps a stream of small runs from starving a big gang.
  Millis reserve_after_ms = 60LL * 60 * 1000;
  // gittins: the Gittins index over the sizes of finished runs (sched/gittins.h), refreshed by
  // the caller as runs finish; without one (or before enough runs finished), 2D-LAS.
  std::shared_ptr<const GittinsIndex> gittins;
};

// A policy's own defaults: `default` preempts once half the pool is allocated (it measured best
// on the traces: docs/scheduling.md), the others at 80%.
PolicyConfig ForPolicy(PolicyKind k);

std::string_view ToString(PolicyKind k);
// "fifo", "priority", "las", "srtf", "gittins", "default"; InvalidArgument lists them and
// suggests the closest ("did you mean 'srtf'?").
const std::vector<std::string>& PolicyNames();
Result<PolicyKind> ParsePolicy(std::string_view name);
bool Preemptive(PolicyKind k);

// What a policy needs to know of a run, waiting or running.
struct RankInput {
  int priority = 0;
  int64_t seq = 0;               // submit order
  int gpus = 1;
  Millis waited_ms = 0;          // time since submit (waiting runs)
  Millis attained_gpu_ms = 0;    // GPU time it has had so far (gpus x time run, all attempts)
  std::optional<Millis> predicted_ms;  // predicted total run time at its size
};

// A run's place in line: smaller runs first. Ties are broken by the caller (submit order).
struct Rank {
  double primary = 0;
  double secondary = 0;
  bool operator<(const Rank& o) const {
    if (primary != o.primary) return primary < o.primary;
    return secondary < o.secondary;
  }
};
Rank RankOf(const PolicyConfig& policy, const RankInput& run);

}  // namespace drover::sched
