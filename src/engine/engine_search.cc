// Searches and pruning in the engine (docs/search.md). A search's trials are its experiment's
// runs, made one at a time as the sampler proposes them, at most search.parallel unfinished at
// once: the first ones with the submit, each next one when a trial ends, in the same transaction
// as that end. So a restarted engine finds every trial made so far in the store, none twice, and
// goes on until search.trials. Rungs of the prune rule are stored with the metric points that
// reached them.
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

uint64_t TrialSeed(uint64_t seed, int64_t index) {
  // splitmix64 of the pair: neighbouring trials get unrelated streams.
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Result<SearchState> NewSearchState(const Spec& spec) {
  SearchState s;
  DROVER_ASSIGN_OR_RETURN(s.space, search::SpaceOf(spec));
  s.contexts = ExpandGrid(spec);
  s.options = search::SamplerOptionsOf(spec, s.contexts.size() > 1);
  s.seed = spec.search->seed;
  s.trials = spec.search->trials;
  s.parallel = std::max(1, spec.search->parallel);
  return s;
}

search::Observation RunningTrial(const Json& params, int64_t number) {
  search::Observation o;
  o.params = params;
  o.number = number;
  o.state = search::TrialState::kRunning;
  return o;
}

ProposalJob JobFor(const SearchState& s, int64_t experiment_id, int count) {
  ProposalJob job;
  job.experiment_id = experiment_id;
  job.first_index = s.created;
  job.options = s.options;
  job.space = s.space;
  job.history.reserve(s.history.size());
  for (const auto& [id, o] : s.history) job.history.push_back(o);
  for (int64_t i = s.created; i < s.created + count; ++i) {
    search::Ask ask;
    ask.context = s.contexts[static_cast<size_t>(i) % s.contexts.size()];
    ask.seed = TrialSeed(s.seed, i);
    ask.number = i;
    job.asks.push_back(std::move(ask));
  }
  return job;
}

void AddObservation(SearchState& s, const Objective& objective, const Observation& o) {
  search::Observation x;
  x.params = o.params;
  // Before every trial, in the order told: a restarted engine numbers them the same.
  x.number = o.id - (int64_t{1} << 40);
  x.state = o.value ? search::TrialState::kComplete : search::TrialState::kFailed;
  if (o.value) x.loss = objective.maximize ? -*o.value : *o.value;
  s.history[-o.id] = x;  // keyed apart from the runs
}

Status Engine::InitSearch(ExperimentEntry& ep, const std::vector<Run>& runs) {
  const Spec& spec = ep.spec;
  if (spec.prune) {
    ep.pruner.emplace(*spec.prune);
    DROVER_ASSIGN_OR_RETURN(auto rungs, store_.ListRungs(ep.experiment.id));
    for (const RungRecord& r : rungs) ep.pruner->Load(r);
  }
  if (!spec.search || spec.search->sampler == SamplerKind::kGrid) return Status::Ok();
  DROVER_ASSIGN_OR_RETURN(SearchState s, NewSearchState(spec));
  s.stopped = ep.experiment.status != ExperimentStatus::kActive;  // a finished (or cancelled) search makes no more
  for (const Run& r : runs) {
    s.created = std::max<int64_t>(s.created, r.index + 1);
    s.history[r.id] = RunningTrial(r.params, r.index);
  }
  DROVER_ASSIGN_OR_RETURN(auto told, store_.ListObservations(ep.experiment.id));
  for (const Observation& o : told) AddObservation(s, *spec.objective, o);
  ep.search = std::move(s);
  // Ended trials: what they gave.
  for (const Run& r : runs) {
    if (IsFinal(r.state)) {
      Live ended;
      ended.run = r;
      ended.exp = &ep;
      ObserveTrial(ended);
    }
  }
  return Status::Ok();
}

void Engine::ObserveTrial(const Live& live) {
  ExperimentEntry& ep = *live.exp;
  if (!ep.search) return;
  auto it = ep.search->history.find(live.run.id);
  if (it == ep.search->history.end()) return;
  search::Observation& o = it->second;
  const RunState state = live.run.state;
  if (state == RunState::kCancelled) {  // says nothing about the config
    ep.search->history.erase(it);
    return;
  }
  o.state = search::TrialState::kFailed;
  if (state != RunState::kSucceeded && state != RunState::kPruned) return;
  const Objective& obj = *ep.spec.objective;  // a search has one (the spec parser checks)
  auto curves = store_.MetricSummaries(ep.experiment.id, obj.metric, obj.last_k, live.run.id);
  if (!curves.ok()) {
    Fail(curves.status());
    return;
  }
  auto c = curves->find(live.run.id);
  std::optional<double> value =
      c == curves->end() ? std::nullopt : Summarize(c->second, obj.summary, obj.maximize);
  if (!value || !std::isfinite(*value)) return;  // no value: counts as failed
  o.loss = obj.maximize ? -*value : *value;
  o.state = search::TrialState::kComplete;
  if (state == RunState::kPruned) {
    o.state = search::TrialState::kPruned;
    const RungRecord* r = ep.pruner ? ep.pruner->PrunedAt(live.run.id) : nullptr;
    o.step = r ? r->step : 0;
  }
}

void Engine::TopUpSearch(ExperimentEntry& ep, Instant now) {
  (void)now;
  if (!ep.search || cancel_requested_ || draining_ || stall_) return;
  SearchState& s = *ep.search;
  if (s.proposing || !s.WantsMore() || ep.unfinished >= s.parallel) return;
  // At most kMaxAsksPerJob: the proposer's thread is every search's, so no job may be long; the
  // rest are asked for when this one is back (TakeProposals tops up again).
  const int64_t count = std::min<int64_t>(
      {s.trials - s.created, s.parallel - ep.unfinished, int64_t{kMaxAsksPerJob}});
  if (!proposer_) {
    proposer_ = MakeProposer([this] { launcher_.Wake(); }, options_.proposals_off_loop);
  }
  s.proposing = true;
  ++proposals_in_flight_;
  ProposalJob job = JobFor(s, ep.experiment.id, static_cast<int>(count));
  job.user = ep.experiment.user;  // whose turn it is on the proposer's thread
  proposer_->Start(std::move(job));
}

void Engine::TakeProposals(Instant now) {
  if (!proposer_ || proposals_in_flight_ == 0) return;
  for (ProposalDone& done : proposer_->TakeFinished()) {
    --proposals_in_flight_;
    auto it = experiments_.find(done.experiment_id);
    if (it == experiments_.end() || !it->second->search) continue;
    ExperimentEntry& ep = *it->second;
    SearchState& s = *ep.search;
    s.proposing = false;
    if (done.params.empty()) {
      s.stopped = true;  // logged by the proposer: a search that cannot propose ends
    } else if (done.first_index == s.created) {
      // Trial numbers taken meanwhile (an agent's own trial) make the answer stale: asked again.
      for (Json& params : done.params) {
        if (cancel_requested_ || draining_ || stall_) break;
        if (!s.WantsMore() || ep.unfinished >= s.parallel) break;
        if (!MakeTrial(ep, std::move(params), now).ok()) {
          s.stopped = true;  // logged; a search that cannot make its trials ends with what it has
          break;
        }
      }
    }
    TopUpSearch(ep, now);
    MaybeDone(ep);
  }
}

void Engine::MaybeDone(ExperimentEntry& ep) {
  if (ep.unfinished != 0 || (ep.search && ep.search->proposing)) return;
  // A search short of its trials while the engine drains or cannot write: the next engine (or
  // the next pass) makes them, so it is not done.
  if (ep.search && ep.search->WantsMore() && !cancel_requested_ && (draining_ || stall_)) return;
  Tx();
  Status st = store_.UpdateExperimentStatus(ep.experiment.id, ExperimentStatus::kDone);
  if (!st.ok()) Fail(st);
}

Result<Run> Engine::MakeTrial(ExperimentEntry& ep, Json params, Instant now) {
  SearchState& s = *ep.search;
  Result<std::vector<std::string>> argv = RenderCommand(ep.spec, params);
  if (!argv.ok()) {
    // The parser checks every placeholder; a stored spec that fails here cannot go on.
    spdlog::error("experiment {}: trial {} cannot be made: {}", ep.experiment.id, s.created,
                  argv.status().message());
    return argv.status();
  }
  Run r;
  r.experiment_id = ep.experiment.id;
  r.user = ep.experiment.user;
  r.index = static_cast<int>(s.created);
  r.params = params;
  r.current_params = params;
  r.fingerprint = Fingerprint(ep.spec, *argv, params, ep.snapshot.hash);
  r.priority = ep.spec.priority;
  r.resources = ep.spec.resources;
  r.created_ms = now.wall;
  Tx();
  if (Status st = store_.InsertRun(r); !st.ok()) {
    Fail(st);
    return st;
  }
  s.history[r.id] = RunningTrial(params, r.index);
  s.created += 1;
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

Result<Engine::ExperimentEntry*> Engine::SearchOf(int64_t experiment_id) {
  ExperimentEntry* ep = nullptr;
  if (auto it = experiments_.find(experiment_id); it != experiments_.end()) {
    ep = it->second.get();
  } else {
    DROVER_ASSIGN_OR_RETURN(auto e, store_.GetExperiment(experiment_id));
    if (!e) return NotFound(fmt::format("no experiment {}", experiment_id));
    DROVER_ASSIGN_OR_RETURN(ep, EntryFor(*e));
  }
  if (!ep->search) {
    return FailedPrecondition(fmt::format(
        "experiment {} ({}) is not a search: give its spec distributions and search: {{trials: "
        "N}} (docs/search.md)",
        experiment_id, ep->experiment.name));
  }
  return ep;
}

Result<ProposalJob> Engine::SuggestJob(const cmd::Suggest& c) {
  DROVER_ASSIGN_OR_RETURN(ExperimentEntry * ep, SearchOf(c.experiment_id));
  // Each suggestion is a running trial (a constant liar) for the next; nothing is kept.
  ProposalJob job = JobFor(*ep->search, c.experiment_id, std::max(1, c.count));
  job.user = ep->experiment.user;
  return job;
}

Result<std::vector<Json>> Engine::Suggest(const cmd::Suggest& c) {
  DROVER_ASSIGN_OR_RETURN(ProposalJob job, SuggestJob(c));
  return job.Propose();
}

Status Engine::Tell(const cmd::Tell& c) {
  DROVER_ASSIGN_OR_RETURN(ExperimentEntry * ep, SearchOf(c.experiment_id));
  DROVER_RETURN_IF_ERROR(search::CheckConfig(ep->spec, ep->search->space, c.params));
  if (c.value && !std::isfinite(*c.value)) {
    return InvalidArgument(fmt::format(
        "search {}: the value told must be a finite number (got {}); tell a config that failed "
        "with no value",
        c.experiment_id, *c.value));
  }
  // Each result is a row and a place in the sampler's history: bounded like the trials, and
  // told results apart (only they can be sent without running anything).
  const auto told = static_cast<int64_t>(
      std::distance(ep->search->history.begin(), ep->search->history.lower_bound(0)));
  if (told >= kMaxTold) {
    return FailedPrecondition(fmt::format(
        "search {} has been told {} results, the most one search takes; submit a new search "
        "and tell it the results that matter (such as the best {})",
        c.experiment_id, told, kMaxTold / 10));
  }
  if (static_cast<int64_t>(ep->search->history.size()) >= 2 * kMaxTrials) {
    return FailedPrecondition(fmt::format(
        "search {} already holds {} trials and told results, the most one search keeps; submit "
        "a new search and tell it the results that matter",
        c.experiment_id, ep->search->history.size()));
  }
  if (stall_) return StallRefusal("tell");
  Observation o;
  o.experiment_id = c.experiment_id;
  o.params = c.params;
  o.value = c.value;
  o.created_ms = clock_.Now();
  Tx();
  if (Status st = store_.InsertObservation(o); !st.ok()) {
    Fail(st);
    return st;
  }
  AddObservation(*ep->search, *ep->spec.objective, o);
  return Flush();
}

Result<Run> Engine::AddTrial(const cmd::AddTrial& c) {
  DROVER_ASSIGN_OR_RETURN(ExperimentEntry * ep, SearchOf(c.experiment_id));
  SearchState& s = *ep->search;
  if (!experiments_.count(c.experiment_id) || ep->experiment.status != ExperimentStatus::kActive ||
      !s.WantsMore()) {
    return FailedPrecondition(fmt::format(
        "search {} ({}) makes no more trials ({} of {} made{}); tell it a result instead, or "
        "submit a new search",
        c.experiment_id, ep->experiment.name, s.created, s.trials, s.stopped ? ", cancelled" : ""));
  }
  if (stall_) return StallRefusal("add a trial");
  // Fixed and grid values the caller left out come from the trial's grid cell.
  Json params = c.params;
  const Json& cell = s.contexts[static_cast<size_t>(s.created) % s.contexts.size()];
  for (const auto& [k, v] : cell.items()) {
    if (!params.contains(k)) params[k] = v;
  }
  DROVER_RETURN_IF_ERROR(search::CheckConfig(ep->spec, s.space, params));
  DROVER_ASSIGN_OR_RETURN(Run r, MakeTrial(*ep, std::move(params), clock_.At()));
  DROVER_RETURN_IF_ERROR(Flush());
  return r;
}

void Engine::CheckPrune(Live& live, const std::vector<MetricPoint>& points, Instant now) {
  ExperimentEntry& ep = *live.exp;
  if (!ep.pruner || !live.attempt || live.attempt->stopping) return;
  for (const MetricPoint& p : points) {
    if (p.name != ep.pruner->spec().metric) continue;
    for (const RungRecord& r : ep.pruner->Report(live.run.id, live.run.index, p.step, p.value)) {
      Tx();
      if (Status st = store_.InsertRung(ep.experiment.id, r); !st.ok()) {
        Fail(st);
        return;
      }
      if (!r.pruned) continue;
      spdlog::info("run {}: pruned at rung {} (step {}): {} = {}; SIGTERM now", live.run.id,
                   r.rung, r.step, ep.pruner->spec().metric, r.value);
      Stop(live, StopReason::kPrune, now, options_.kill_grace_ms);
      return;
    }
  }
}

}  // namespace drover
