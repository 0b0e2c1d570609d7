// drover why: what only the engine knows of why a queued run waits (a stage waiting for the runs
// it needs, a twin, a run in an executor's queue with Slurm's own reason, a run starting, starts
// held back), and for the rest the scheduler's own reason (Scheduling::Explain, a pass of
// Decide() with explain on). Published for the API's threads every Scheduling::kExplainEveryMs.
#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/live.h"

namespace drover {

void Engine::ExplainWaiting(Instant now) {
  if (!scheduling_.ExplainDue(now)) return;
  std::map<int64_t, protocol::WaitInfo> out;
  std::vector<const Live*> ask;  // the scheduler's to explain
  // Nothing starts while the engine stops, or while it holds starts back (a full disk): that is
  // the reason, whatever the scheduler would say.
  std::optional<protocol::WaitInfo> held;
  if (draining_) held = protocol::WaitInfo{"draining", "the daemon is stopping: nothing new starts"};
  if (!held && start_hold_ && now.mono < start_hold_->retry_mono) {
    held = protocol::WaitInfo{"start_held", "starts are held back: " + start_hold_->why.message()};
  }
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
    ask.push_back(&l);
  }
  scheduling_.Explain(std::move(out), ask, now);
}

}  // namespace drover
