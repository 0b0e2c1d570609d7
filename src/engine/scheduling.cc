#include "engine/scheduling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <set>

namespace drover {

namespace {

// At most how many runs with these resources a pass can start (SIZE_MAX: no bound): what their
// experiment's max_parallel, the free CPU slots and the GPUs leave room for. A bound above the
// truth costs only time: it limits how many runs of a class Decide() is shown (Pass).
size_t StartsAtMost(const Resources& res, int max_parallel, int running,
                    const sched::ClusterView& view) {
  size_t n = SIZE_MAX;
  if (max_parallel > 0) n = static_cast<size_t>(std::max(0, max_parallel - running));
  if (res.cpus > 0 && view.cpu_slots_total > 0) {
    const int free = std::max(0, view.cpu_slots_total - view.cpu_slots_used);
    n = std::min(n, static_cast<size_t>(free / res.cpus));
  }
  if (res.gpus > 0) {
    size_t room = 0;  // runs of one GPU each that the GPUs have room for
    for (const sched::GpuState& g : view.gpus) {
      if (res.gpu_memory <= 0) {
        room += g.runs == 0 && !g.exclusive ? 1 : 0;
      } else if (!g.exclusive && g.capacity > g.reserved) {
        room += static_cast<size_t>((g.capacity - g.reserved) / res.gpu_memory);
      }
    }
    n = std::min(n, room / static_cast<size_t>(res.gpus));
  }
  return n;
}

}  // namespace

Scheduling::Scheduling(const EngineOptions& options, bool placed_by_executor,
                       SchedulingInputs in, SchedulingHost& host)
    : options_(options),
      placed_by_executor_(placed_by_executor),
      in_(in),
      host_(host),
      policy_(options.scheduler.Policy()) {}

// Under an executor that places attempts (Slurm) each is one job: one slot, no GPU of drover's.
Resources Scheduling::ResourcesOf(const Resources& asked) const {
  return placed_by_executor_ ? Resources{0, 0, 1} : asked;
}

// Leases are kept only for this machine's launcher (GpuPool::leased: never under an executor that
// places attempts), where an attempt's handle is its process group leader's pid: the one place
// the engine hands a handle on as a pid, for other engines to see whether the holder lives.
std::vector<GpuHold> Scheduling::Holds() const {
  std::vector<GpuHold> holds;
  for (int64_t id : in_.queue.running()) {
    auto found = in_.live.find(id);
    if (found == in_.live.end() || found->second->placement.gpus.empty()) continue;
    const LiveRun& live = *found->second;
    holds.push_back({live.placement.gpus, live.placement.gpu_memory, live.placement.exclusive,
                     live.attempt ? live.attempt->pid : 0});
  }
  return holds;
}

void Scheduling::PublishLeases() { in_.pool.Publish(Holds()); }

sched::ClusterView Scheduling::View(Instant now, PredictCache& predicted, bool* stop_in_flight) {
  const sched::SchedulerConfig& config = options_.scheduler;
  sched::ClusterView view;
  view.gpus = in_.pool.gpus();
  if (!view.gpus.empty()) {  // GPUs drained for their health (health_watch.h)
    const std::set<int> drained = in_.health.Drained(in_.pool.devices(), now);
    std::erase_if(view.gpus, [&](const sched::GpuState& g) { return drained.count(g.index) > 0; });
  }
  // The latest telemetry, so a run that must share a GPU goes to the least busy one.
  for (const GpuSample& sample : in_.sampler.latest()) {
    for (auto& g : view.gpus) {
      if (g.index != sample.index) continue;
      g.utilization = sample.utilization;
      g.memory_used = sample.memory_used;
    }
  }
  view.cpu_slots_total = options_.cpu_slots;
  view.cpu_slots_used = in_.pool.cpu_slots_used();
  view.groups = config.groups;
  // The running runs: what every policy reads (quotas and fair share count what groups hold,
  // backfill waits for GPUs to free, preemptive policies pick what they may stop).
  for (int64_t id : in_.queue.running()) {
    auto found = in_.live.find(id);
    if (found == in_.live.end()) continue;  // the index is checked in tests; never a throw here
    const LiveRun& live = *found->second;
    const Run& r = live.run;
    view.running[r.experiment_id] += 1;
    *stop_in_flight = *stop_in_flight || Stopping(live);
    if (live.placement.gpus.empty()) continue;
    const Attempt& a = *live.attempt;
    sched::RunningRun rr;
    rr.run_id = r.id;
    rr.priority = r.priority;
    rr.seq = r.id;
    rr.gpus = live.placement.gpus;
    rr.exclusive = live.placement.exclusive;
    rr.started_ms = a.started_ms;
    Millis running_ms = std::max<Millis>(0, now.mono - live.clock.started_mono);
    rr.attained_gpu_ms = live.past.attained_gpu_ms + static_cast<Millis>(a.gpus.size()) * running_ms;
    rr.predicted_ms = Predict(live, predicted);
    rr.preemptible = live.exp->spec.preemptible;
    rr.group = live.exp->spec.group;
    rr.user = live.exp->experiment.uid;
    view.active.push_back(std::move(rr));
  }
  for (const auto& [id, exp] : in_.experiments) {
    if (exp->spec.max_parallel > 0) view.max_parallel[id] = exp->spec.max_parallel;
  }
  return view;
}

std::optional<Millis> Scheduling::Predict(const LiveRun& live, PredictCache& predicted) {
  // Runs of one experiment share their prediction (same key, same GPU count): one look-up each.
  auto it = predicted.find(live.run.experiment_id);
  if (it == predicted.end()) {
    it = predicted
             .emplace(live.run.experiment_id,
                      run_times_.Predict(live.exp->predictor_key, live.run.resources.gpus))
             .first;
  }
  return it->second;
}

sched::PendingRun Scheduling::PendingOf(const LiveRun& live, Instant now,
                                        PredictCache& predicted) {
  const Run& r = live.run;
  sched::PendingRun p;
  p.run_id = r.id;
  p.experiment_id = r.experiment_id;
  p.priority = r.priority;
  p.seq = r.id;
  p.resources = ResourcesOf(r.resources);
  // The backoff waits on the monotonic clock; Decide() compares with wall time, so it gets the
  // same moment expressed in wall time now.
  p.not_before_ms = live.retry_at_mono > now.mono ? now.wall + (live.retry_at_mono - now.mono) : 0;
  p.submitted_ms = r.created_ms;
  p.attained_gpu_ms = live.past.attained_gpu_ms;
  p.predicted_ms = Predict(live, predicted);
  p.group = live.exp->spec.group;
  p.user = live.exp->experiment.uid;
  p.preemptible = live.exp->spec.preemptible;
  return p;
}

void Scheduling::Pass(Instant now) {
  const sched::SchedulerConfig& config = options_.scheduler;
  std::vector<sched::PendingRun> queue;
  bool stop_in_flight = false;
  PredictCache predicted;
  sched::ClusterView view = View(now, predicted, &stop_in_flight);
  auto pending = [&](const LiveRun& live) { return PendingOf(live, now, predicted); };
  // The waiting runs, class by class (engine/run_queue.h). A class that cannot start in this pass
  // whatever starts in it is not handed to Decide(), which would skip it anyway: its experiment
  // runs max_parallel runs, or every CPU slot is taken and it needs one. Unless it could still
  // count there: a whole-GPU run (it keeps idle GPUs whole), or any run when groups share the pool
  // (a group waits while it has runs waiting). Of the others, a class hands over only as many
  // runs as could start (StartsAtMost) and one more, in id order, skipping those in backoff: a
  // pass then costs what can start, however long the queue.
  const bool cpu_full = view.cpu_slots_total > 0 && view.cpu_slots_used >= view.cpu_slots_total;
  bool first_handed = false;
  for (const auto& [cls, ids] : in_.queue.waiting()) {
    auto exp_it = in_.experiments.find(cls.experiment_id);
    if (exp_it == in_.experiments.end()) continue;
    const ExperimentEntry& exp = *exp_it->second;
    const Resources res = ResourcesOf(exp.spec.resources);
    const int running = view.running.count(cls.experiment_id) ? view.running.at(cls.experiment_id)
                                                              : 0;
    const bool whole_gpus = res.gpus > 0 && res.gpu_memory == 0;
    if (config.groups.empty() && !whole_gpus &&
        ((cpu_full && res.cpus > 0) ||
         (exp.spec.max_parallel > 0 && running >= exp.spec.max_parallel))) {
      continue;
    }
    const size_t at_most = StartsAtMost(res, exp.spec.max_parallel, running, view);
    size_t handed = 0;
    for (int64_t id : ids) {
      if (at_most != SIZE_MAX && handed > at_most) break;
      auto found = in_.live.find(id);
      if (found == in_.live.end()) continue;
      const LiveRun& live = *found->second;
      if (live.cancel_requested) continue;
      // In backoff: it cannot start, unless groups share the pool (it still counts there).
      if (live.retry_at_mono > now.mono && config.groups.empty() && id != preempt_for_) continue;
      queue.push_back(pending(live));
      first_handed = first_handed || id == preempt_for_;
      ++handed;
    }
  }
  // The run the last preemption was for is handed over whatever its class's turn.
  if (preempt_for_ != 0 && !first_handed) {
    auto it = in_.live.find(preempt_for_);
    if (it != in_.live.end() && !it->second->attempt && !it->second->cancel_requested) {
      queue.push_back(pending(*it->second));
    }
  }
  if (queue.empty()) return;
  if (policy_.kind == sched::PolicyKind::kGittins) {
    if (auto index = run_times_.TakeGittins()) policy_.gittins = std::move(index);
  }
  // The run the last preemption was for is offered the GPUs its victims free, before any other.
  if (preempt_for_ != 0) {
    auto it = in_.live.find(preempt_for_);
    if (now.mono > preempt_for_until_mono_ || it == in_.live.end() || it->second->attempt) {
      preempt_for_ = 0;
    }
  }
  view.first = preempt_for_;
  // Other engines on this machine (another store's daemon, a foreground run) hold GPUs too: what
  // they hold is out of the pool, and what this pass starts is published before the lock goes.
  struct LedgerHold {
    Scheduling* scheduling = nullptr;
    ~LedgerHold() {
      if (scheduling == nullptr) return;
      scheduling->PublishLeases();
      scheduling->in_.pool.Unlock();
    }
  } hold;
  if (in_.pool.TakeForeignLeases(queue, view, now.mono, [this] { return Holds(); })) {
    hold.scheduling = this;
  }
  if (queue.empty()) return;
  sched::Decision decision = sched::Decide(queue, view, now.wall, policy_);
  for (const auto& action : decision.starts) {
    auto it = in_.live.find(action.run_id);
    // Not prepared for the machine's sake: neither it nor the rest of this pass starts.
    if (it != in_.live.end() && !host_.Start(*it->second, action, now)) return;
    if (action.run_id == preempt_for_) preempt_for_ = 0;
  }
  // While a run is being stopped its GPUs are about to be free, and Decide() cannot tell them
  // from busy ones: preempting more now could stop runs that need not stop. Once the stop is
  // over, the next pass sees the freed GPUs and preempts again only if still needed.
  if (decision.preempt.empty() || stop_in_flight) return;
  for (int64_t run_id : decision.preempt) {
    auto it = in_.live.find(run_id);
    if (it == in_.live.end() || !it->second->attempt || Stopping(*it->second)) continue;
    host_.Preempt(*it->second, decision.preempt_why, now);
  }
  // Held for it until its victims are gone (at most the grace and a minute more).
  preempt_for_ = decision.preempt_for;
  preempt_for_until_mono_ = now.mono + config.grace_ms + 60'000;
}

bool Scheduling::ExplainDue(Instant now) {
  if (now.mono < explain_at_mono_) return false;
  explain_at_mono_ = now.mono + kExplainEveryMs;
  return true;
}

void Scheduling::Explain(std::map<int64_t, protocol::WaitInfo> known,
                         const std::vector<const LiveRun*>& ask, Instant now) {
  if (!ask.empty()) {
    PredictCache predicted;
    bool stop_in_flight = false;
    std::vector<sched::PendingRun> queue;
    queue.reserve(ask.size());
    for (const LiveRun* live : ask) queue.push_back(PendingOf(*live, now, predicted));
    sched::ClusterView view = View(now, predicted, &stop_in_flight);
    view.first = preempt_for_;
    view.explain = true;
    sched::Decision d = sched::Decide(queue, view, now.wall, policy_);
    for (const auto& w : d.waiting) {
      known[w.run_id] = {std::string(sched::ToString(w.kind)), sched::WaitText(w, now.wall)};
    }
    for (const auto& a : d.starts) {
      known[a.run_id] = {"not_scheduled", "it can start now: the next scheduling pass starts it"};
    }
  }
  waiting_.Publish(std::move(known));
}

}  // namespace drover
