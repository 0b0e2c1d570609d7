// drover why: the scheduler's own reason a queued run waits (sched::WaitReason from a pass of
// Decide() with explain on, over every waiting run), and what only the engine knows: a stage
// waiting for the runs it needs, a run in an executor's queue (Slurm's own reason), a run
// starting. Published for the API's threads every kExplainEveryMs while runs wait.
#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/live.h"

namespace drover {

// drover why (engine_why.cc): every kExplainEveryMs, a pass of Decide() over every waiting run
// with explain on, and what the engine itself knows (needs, an executor's queue), published for
// the API's threads.
void Engine::ExplainWaiting(Instant now) {
  if (now.mono < explain_at_mono_) return;
  explain_at_mono_ = now.mono + kExplainEveryMs;
  std::map<int64_t, protocol::WaitInfo> out;
  std::vector<sched::PendingRun> queue;
  // Nothing starts while the engine stops, or while it holds starts back (a full disk): that is
  // the reason, whatever the scheduler would say.
  std::optional<protocol::WaitInfo> held;
  if (draining_) held = protocol::WaitInfo{"draining", "the daemon is stopping: nothing new starts"};
  if (!held && start_hold_ && now.mono < start_hold_->retry_mono) {
    held = protocol::WaitInfo{"start_held", "starts are held back: " + start_hold_->why.message()};
  }
  PredictCache predicted;
  bool stop_in_flight = false;
  for (const auto& [id, live] : live_) {
    const Live& l = *live;
    if (l.cancel_requested) continue;
    if (pipelines_.gate().WaitOf(id) == PipelineGate::Wait::kTwin) {
      const int64_t twin = pipelines_.gate().TwinOf(PipelineGate::TwinKey(l.run));
      out[id] = {"twin", fmt::format("waiting for run {}, which has the same fingerprint: cached "
                                     "from it when it succeeds, else run",
                                     twin)};
      continue;
    }
    if (pipelines_.Holds(id)) {
      std::vector<std::string> stages;
      for (int64_t need : l.run.needs) {
        auto it = live_.find(need);
        if (it == live_.end()) continue;  // ended
        std::string stage = it->second->run.stage.empty() ? fmt::format("run {}", need)
                                                          : it->second->run.stage;
        if (std::find(stages.begin(), stages.end(), stage) == stages.end()) stages.push_back(stage);
      }
      out[id] = {"needs", stages.empty()
                              ? std::string("waiting for the runs it needs to end")
                              : fmt::format("waiting for stage {} to succeed", Join(stages, ", "))};
      continue;
    }
    if (l.attempt && l.clock.placed_pending) {
      std::string why = l.attempt->executor.value("reason", std::string());
      std::string state = l.attempt->executor.value("state", std::string("PENDING"));
      out[id] = {"executor", why.empty() ? fmt::format("in the executor's queue ({})", state)
                                         : fmt::format("in the executor's queue ({}: {})", state,
                                                       why)};
      continue;
    }
    if (l.clock.starting) {
      out[id] = {"starting", "starting: its working copy and process are being prepared"};
      continue;
    }
    if (l.attempt) continue;  // running
    if (pipelines_.Collecting(id)) continue;
    if (held) {
      out[id] = *held;
      continue;
    }
    queue.push_back(PendingOf(l, now, predicted));
  }
  if (!queue.empty()) {
    sched::ClusterView view = SchedulerView(now, predicted, &stop_in_flight);
    view.first = preempt_for_;
    view.explain = true;
    sched::Decision d = sched::Decide(queue, view, now.wall, policy_);
    std::set<int64_t> would_start;
    for (const auto& a : d.starts) would_start.insert(a.run_id);
    for (const auto& w : d.waiting) {
      out[w.run_id] = {std::string(sched::ToString(w.kind)), sched::WaitText(w, now.wall)};
    }
    for (int64_t id : would_start) {
      out[id] = {"not_scheduled", "it can start now: the next scheduling pass starts it"};
    }
  }
  waiting_.Publish(std::move(out));
}

}  // namespace drover
