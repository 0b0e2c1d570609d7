#pragma once
// The scheduler is a pure function of the queue, the GPU pool and the time: no clock calls, no
// threads, no I/O. The engine applies what it returns; tests and (later) the simulator call it
// directly.
//
// What a pass does (docs/scheduling.md):
//   - ranks waiting runs by the policy (sched/policy.h); with groups, offers GPUs to groups in
//     order of GPUs held / weight (fair share), and inside a group to its users in order of
//     GPUs held (two levels), each user's best-ranked run first;
//   - places each where it fits: a run that declares gpu_memory goes to an idle GPU when one
//     fits, and shares a GPU (several runs on one) when none does or when idle GPUs are worth
//     keeping whole (a whole-GPU run waits): the least busy by telemetry, then the tightest fit;
//     others take whole idle GPUs; a gang of up to a machine's
//     GPUs goes to the machine whose idle GPUs fit it most tightly, larger ones take whole idle
//     machines; max_parallel and CPU slots cap starts;
//   - a quota caps a group's GPUs while another group within its quota waits; idle quota is
//     borrowed, and reclaimed by preemption when its owner needs it;
//   - backfill: a whole-GPU run that cannot start and has waited reserve_after_ms gets the
//     machine closest to fitting it held back; later runs use those GPUs only if predicted to end
//     before it could start;
//   - a preemptive policy stops worse-ranked runs for the best waiting one when the pool is busy.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/spec.h"
#include "sched/policy.h"

namespace drover::sched {

struct PendingRun {
  int64_t run_id = 0;
  int64_t experiment_id = 0;
  int priority = 0;
  int64_t seq = 0;  // submit order (the run id works)
  Resources resources;
  Millis not_before_ms = 0;  // retry backoff: not eligible before this time
  // What ranking policies other than fifo read (sched/policy.h).
  Millis submitted_ms = 0;
  Millis attained_gpu_ms = 0;          // GPU time its earlier attempts had
  std::optional<Millis> predicted_ms;  // predicted run time at its size
  std::string group;                   // fair share and quota (ClusterView::groups); "" = none
  // Its submitter's uid: inside a group, users share the group's GPUs (the run of the user
  // holding the fewest goes first); all alike (one user's daemon): the policy's order. A number,
  // not a name: a pass reads 100,000 of these.
  int64_t user = -1;
  bool preemptible = true;             // false: never borrows GPUs past its group's quota
};

struct GpuState {
  int index = 0;
  int64_t capacity = 0;    // bytes drover may hand out on this GPU
  int64_t reserved = 0;    // bytes held by running runs
  int runs = 0;            // runs on it now
  bool exclusive = false;  // held whole by one run
  int node = 0;            // the machine it is on: a gang of up to a machine's GPUs stays on one
  // Telemetry, where known (-1: not measured): runs that must share a GPU go to the least busy.
  double utilization = -1;   // percent, 0-100
  int64_t memory_used = -1;  // bytes in use as the driver reports, drover's runs' and others'
};

// A run holding GPUs now, as preemption sees it.
struct RunningRun {
  int64_t run_id = 0;
  int priority = 0;
  int64_t seq = 0;
  std::vector<int> gpus;       // GPU indices it holds
  bool exclusive = true;       // holds them whole (only such runs are preempted)
  Millis started_ms = 0;       // this attempt's start
  Millis attained_gpu_ms = 0;  // GPU time so far, this attempt included
  std::optional<Millis> predicted_ms;
  bool preemptible = true;
  std::string group;
  int64_t user = -1;  // PendingRun::user
};

// A group's (a user's or a team's) share of the pool: the scheduler offers GPUs to groups in
// order of GPUs held / weight, and a quota caps the GPUs a group holds while others wait for them.
struct GroupShare {
  double weight = 1;
  int quota_gpus = 0;  // 0: no cap
};

struct ClusterView {
  std::vector<GpuState> gpus;
  int cpu_slots_total = 0;  // <= 0: no CPU limit
  int cpu_slots_used = 0;
  std::map<int64_t, int> max_parallel;       // experiment -> limit (absent or 0 = none)
  std::map<int64_t, int> running;            // experiment -> runs running now
  std::vector<RunningRun> active;            // what runs now (read by preemptive policies)
  std::map<std::string, GroupShare> groups;  // groups with a weight or quota; others weigh 1
  // A waiting run that runs were preempted for: it is offered GPUs before any other, and when it
  // does not fit yet, the machine closest to fitting it is held for it (the caller keeps naming
  // it until it starts: the GPUs its victims free are its, not the next run's in line).
  int64_t first = 0;
  // The caller expects runs that need whole GPUs (a trace that has them): runs that share GPUs by
  // memory then pack onto shared GPUs first instead of spreading over idle ones. Decide() also
  // keeps GPUs whole while such a run waits in the queue or a machine is held for one.
  bool whole_gpu_demand = false;
  // Say why each queued run that does not start in this pass waits (Decision::waiting). Off in
  // the engine's own passes (it asks every few seconds, for drover why): it costs a look per run.
  bool explain = false;
};

// Why a queued run does not start (drover why, in the spirit of Slurm's Reason=): the
// scheduler's own reason, with the numbers that make it concrete. WaitText says it in words.
enum class WaitKind {
  kBackoff,      // a retry's backoff has not ended (until_ms)
  kMaxParallel,  // its experiment runs max_parallel runs (limit)
  kCpuSlots,     // no CPU slot (need, free)
  kGpuMemory,    // no GPU has need_bytes free (free_bytes: the freest), count GPUs needed
  kWholeGpus,    // needs `need` whole GPUs on one machine; `free` are idle on the best one
  kQuota,        // its group holds its quota (group, limit, held)
  kHeldForRun,   // GPUs that would fit it are held for a waiting gang (other_run)
  kPreempting,   // runs are being stopped to make room for it (count)
  kQueued,       // it fits, but better-ranked runs (or groups below their share) go first
};
struct WaitReason {
  int64_t run_id = 0;
  WaitKind kind = WaitKind::kQueued;
  int64_t need = 0, free = 0;  // bytes (gpu memory), GPUs or CPU slots, by kind
  int count = 0;
  int limit = 0;
  int held = 0;
  int64_t other_run = 0;
  Millis until_ms = 0;
  std::string group;
  std::string policy;  // the policy's name (kQueued)
};
std::string_view ToString(WaitKind k);  // "backoff", "max_parallel", "gpu_memory", ...
std::string WaitText(const WaitReason& r, Millis now);

struct StartAction {
  int64_t run_id = 0;
  std::vector<int> gpus;   // GPU indices, ascending
  int64_t gpu_memory = 0;  // bytes reserved on each of them (capacity when exclusive)
  bool exclusive = false;
};

struct Decision {
  std::vector<StartAction> starts;
  // Runs to stop so a better-ranked waiting run can start (SIGTERM, requeue); the GPUs they free
  // are handed out by a later call, once they are free.
  std::vector<int64_t> preempt;
  int64_t preempt_for = 0;  // the waiting run they make room for
  std::string preempt_why;  // for the run's note ("a better-ranked run waits", ...)
  // Backfill: idle GPUs held back this pass for a waiting run (PolicyConfig::reserve_after_ms),
  // those that no shorter run took.
  int64_t reserved_for = 0;
  std::vector<int> reserved_gpus;
  // With ClusterView::explain: why each queued run that does not start waits, in queue order.
  std::vector<WaitReason> waiting;
};

// The policy orders the queue (sched/policy.h); runs are placed in that order, each where it fits
// (a run that does not fit now does not block the ones after it). Whole-GPU gangs of up to a
// machine's GPUs go to the machine whose idle GPUs fit most tightly; larger ones take whole idle
// machines. A preemptive policy, when at least `preempt_above_allocated` of the GPUs are taken,
// stops the worst-ranked runs that are older than `min_runtime_ms` and ranked below the best
// waiting run that does not fit, if that makes it fit.
Decision Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
                const PolicyConfig& policy);
// fifo (priority, then submit order), no preemption: what the engine runs.
std::vector<StartAction> Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster,
                                Millis now);

// Whether a run with these resources could ever start on this pool; an error says why and what to
// do (checked at submit, so a run never waits for a GPU that does not exist).
Status CheckFits(const Resources& resources, const std::vector<GpuState>& gpus,
                 int cpu_slots_total);

}  // namespace drover::sched
