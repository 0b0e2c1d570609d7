// The engine's side of searches (docs/search.md): a trial's run made when the search driver
// (search_driver.h) asks for one, an experiment done when neither its runs nor its search keep
// it open, and ask/tell commands handed to the driver once the experiment is found.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>

#include "engine/engine.h"
#include "engine/live.h"
#include "spec/expand.h"

namespace drover {

void Engine::MaybeDone(ExperimentEntry& ep) {
  if (ep.unfinished != 0) return;
  // A search whose next trials are being proposed, or that is short of them while the engine
  // drains or cannot write (the next engine, or the next pass, makes them), is not done.
  if (search_.KeepsOpen(ep.experiment.id, !cancel_requested_ && (draining_ || stall_))) return;
  Tx();
  Status st = store_.UpdateExperimentStatus(ep.experiment.id, ExperimentStatus::kDone);
  if (!st.ok()) Fail(st);
}

// Searches (engine_search.cc): the search driver (search_driver.h) asks for trials
// (SearchHost::MakeTrial); the experiment is done when neither its runs nor its search keep
// it open.
void Engine::TopUpSearch(ExperimentEntry& ep) {
  search_.TopUp(ep.experiment.id);  // the next trials, asked for (TakeProposals makes them)
  MaybeDone(ep);
}

void Engine::TakeProposals() {
  for (int64_t id : search_.TakeProposals()) {
    if (auto it = experiments_.find(id); it != experiments_.end()) MaybeDone(*it->second);
  }
}

Result<Run> Engine::MakeTrial(ExperimentEntry& ep, Json params, int index, TrialOrigin origin) {
  const Instant now = clock_.At();
  Result<std::vector<std::string>> argv = RenderCommand(ep.spec, params);
  if (!argv.ok()) {
    // The parser checks every placeholder; a stored spec that fails here cannot go on.
    spdlog::error("experiment {}: trial {} cannot be made: {}", ep.experiment.id, index,
                  argv.status().message());
    return argv.status();
  }
  Run r;
  r.experiment_id = ep.experiment.id;
  r.user = ep.experiment.user;
  r.index = index;
  r.params = params;
  r.current_params = params;
  r.fingerprint = Fingerprint(ep.spec, *argv, params, ep.snapshot.hash);
  r.priority = ep.spec.priority;
  r.resources = ep.spec.resources;
  r.created_ms = now.wall;
  r.origin = origin;
  Tx();
  if (Status st = store_.InsertRun(r); !st.ok()) {
    Fail(st);
    return st;
  }
  ep.unfinished += 1;
  auto live = std::make_unique<Live>();
  live->run = r;
  live->exp = &ep;
  Queue(*live);
  Notify([this, r] {
    observer_->OnRunChanged(r, nullptr, fmt::format("trial {} proposed", r.index + 1));
  });
  live_[r.id] = std::move(live);
  return r;
}

// The search an ask/tell command is about: the experiment's entry (loaded from the store when
// the engine does not hold it), which must be a search.
Result<ExperimentEntry*> Engine::SearchOf(int64_t experiment_id) {
  ExperimentEntry* ep = nullptr;
  if (auto it = experiments_.find(experiment_id); it != experiments_.end()) {
    ep = it->second.get();
  } else {
    DROVER_ASSIGN_OR_RETURN(auto e, store_.GetExperiment(experiment_id));
    if (!e) return NotFound(fmt::format("no experiment {}", experiment_id));
    DROVER_ASSIGN_OR_RETURN(ep, EntryFor(*e));
  }
  if (!search_.Searches(experiment_id)) {
    return FailedPrecondition(fmt::format(
        "experiment {} ({}) is not a search: give its spec distributions and search: {{trials: "
        "N}} (docs/search.md)",
        experiment_id, ep->experiment.name));
  }
  return ep;
}

// Ask/tell on a search (docs/search.md), commands like the others (Dispatch): its next configs,
// honouring its running trials (nothing recorded; the job is copied out of the engine, so the
// daemon proposes on its HTTP worker and a hundred suggestions from a GP do not hold the loop); a
// result for a config the caller ran itself (stored); a config of the caller's choosing run as
// its next trial. What they write is committed before the caller hears back (RunCommands).
Result<CommandReply> Engine::AskTell(Command& command) {
  if (auto* c = std::get_if<cmd::Suggest>(&command)) {
    DROVER_RETURN_IF_ERROR(SearchOf(c->experiment_id).status());
    return CommandReply{
        std::make_shared<const ProposalJob>(search_.SuggestJob(c->experiment_id, c->count))};
  }
  if (auto* c = std::get_if<cmd::Tell>(&command)) {
    DROVER_RETURN_IF_ERROR(SearchOf(c->experiment_id).status());
    DROVER_RETURN_IF_ERROR(search_.CheckTell(*c));
    if (stall_) return StallRefusal("tell");
    DROVER_RETURN_IF_ERROR(search_.Told(*c, clock_.Now()));
    DROVER_RETURN_IF_ERROR(Flush());
    return CommandReply{};
  }
  if (auto* c = std::get_if<cmd::AddTrial>(&command)) {
    DROVER_ASSIGN_OR_RETURN(ExperimentEntry * ep, SearchOf(c->experiment_id));
    if (stall_) return StallRefusal("add a trial");
    DROVER_ASSIGN_OR_RETURN(
        Run r, search_.AddTrial(*c, ep->experiment.status == ExperimentStatus::kActive));
    DROVER_RETURN_IF_ERROR(Flush());
    return CommandReply{std::vector<Run>{std::move(r)}};
  }
  return Internal("not an ask/tell command");
}

}  // namespace drover
