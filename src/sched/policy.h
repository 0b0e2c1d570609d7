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
//   default   drover's, a first version: multi-level LAS with queues at 1/4, 1, 4 and 16
//             GPU-hours attained, FIFO within each; preempts like las (using predictions, packing
//             and fairness is still to come).
#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace drover::sched {

enum class PolicyKind { kFifo, kPriority, kLas, kSrtf, kDefault };

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kFifo;
  Millis las_threshold_gpu_ms = 16LL * 3600 * 1000;  // 2D-LAS queue switch: 16 GPU-hours
  double aging_per_hour = 0.1;                        // priority policy: score per hour waited
  Millis min_runtime_ms = 10LL * 60 * 1000;           // a run this young is never preempted
  // Preempt only while at least this share of the pool's GPUs is allocated.
  double preempt_above_allocated = 0.8;
};

std::string_view ToString(PolicyKind k);
// "fifo", "priority", "las", "srtf", "default"; InvalidArgument lists them.
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
