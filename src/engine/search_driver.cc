// The search driver (search_driver.h; docs/search.md).
#include "engine/search_driver.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iterator>

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

SearchDriver::SearchDriver(EngineContext& ctx, SearchHost& host, bool off_loop)
    : ctx_(ctx), host_(host), off_loop_(off_loop) {}

SearchDriver::~SearchDriver() = default;

SearchDriver::Search* SearchDriver::Find(int64_t experiment_id) {
  auto it = searches_.find(experiment_id);
  return it == searches_.end() ? nullptr : &it->second;
}

const SearchDriver::Search* SearchDriver::Find(int64_t experiment_id) const {
  auto it = searches_.find(experiment_id);
  return it == searches_.end() ? nullptr : &it->second;
}

bool SearchDriver::Searches(int64_t experiment_id) const {
  const Search* s = Find(experiment_id);
  return s && s->state;
}

Status SearchDriver::Load(const Experiment& e, const Spec& spec, const std::vector<Run>& runs) {
  const bool samples = spec.search && spec.search->sampler != SamplerKind::kGrid;
  if (!samples && !spec.prune) return Status::Ok();
  Search x;
  x.experiment_id = e.id;
  x.name = e.name;
  x.user = e.user;
  x.spec = spec;
  if (spec.prune) {
    x.pruner.emplace(*spec.prune);
    x.placer.emplace(*spec.prune);
    DROVER_ASSIGN_OR_RETURN(auto rungs, ctx_.store().ListRungs(e.id));
    for (const RungRecord& r : rungs) x.pruner->Load(r);
  }
  if (samples) {
    DROVER_ASSIGN_OR_RETURN(SearchState s, NewSearchState(spec));
    s.stopped =
        e.status != ExperimentStatus::kActive;  // a finished (or cancelled) one makes no more
    for (const Run& r : runs) {
      s.created = std::max<int64_t>(s.created, r.index + 1);
      s.history[r.id] = RunningTrial(r.params, r.index);
    }
    DROVER_ASSIGN_OR_RETURN(auto told, ctx_.store().ListObservations(e.id));
    for (const Observation& o : told) AddObservation(s, *spec.objective, o);
    x.state = std::move(s);
  }
  Search& s = searches_[e.id] = std::move(x);
  // Ended trials: what they gave.
  for (const Run& r : runs) {
    if (IsFinal(r.state)) Observe(s, r);
  }
  return Status::Ok();
}

void SearchDriver::Forget(int64_t experiment_id) { searches_.erase(experiment_id); }

void SearchDriver::OnFinal(const Run& run) {
  if (Search* s = Find(run.experiment_id)) {
    if (s->placer) s->placer->Forget(run.id);
    Observe(*s, run);
  }
}

void SearchDriver::Observe(Search& x, const Run& run) {
  if (!x.state) return;
  auto it = x.state->history.find(run.id);
  if (it == x.state->history.end()) return;
  search::Observation& o = it->second;
  if (run.state == RunState::kCancelled) {  // says nothing about the config
    x.state->history.erase(it);
    return;
  }
  o.state = search::TrialState::kFailed;
  if (run.state != RunState::kSucceeded && run.state != RunState::kPruned) return;
  const Objective& obj = *x.spec.objective;  // a search has one (the spec parser checks)
  auto curves = ctx_.store().MetricSummaries(x.experiment_id, obj.metric, obj.last_k, run.id);
  if (!curves.ok()) {
    ctx_.Fail(curves.status());
    return;
  }
  auto c = curves->find(run.id);
  std::optional<double> value =
      c == curves->end() ? std::nullopt : Summarize(c->second, obj.summary, obj.maximize);
  if (!value || !std::isfinite(*value)) return;  // no value: counts as failed
  o.loss = obj.maximize ? -*value : *value;
  o.state = search::TrialState::kComplete;
  if (run.state == RunState::kPruned) {
    o.state = search::TrialState::kPruned;
    const RungRecord* r = x.pruner ? x.pruner->PrunedAt(run.id) : nullptr;
    o.step = r ? r->step : 0;
  }
}

void SearchDriver::TopUp(int64_t experiment_id) {
  Search* x = Find(experiment_id);
  if (!x || !x->state || ctx_.Winding()) return;
  SearchState& s = *x->state;
  const int unfinished = host_.Unfinished(experiment_id);
  if (s.proposing || !s.WantsMore() || unfinished >= s.parallel) return;
  // At most kMaxAsksPerJob: the proposer's thread is every search's, so no job may be long; the
  // rest are asked for when this one is back (TakeProposals tops up again).
  const int64_t count =
      std::min<int64_t>({s.trials - s.created, s.parallel - unfinished, int64_t{kMaxAsksPerJob}});
  if (!proposer_) proposer_ = MakeProposer([this] { ctx_.Wake(); }, off_loop_);
  s.proposing = true;
  ++in_flight_;
  ProposalJob job = JobFor(s, experiment_id, static_cast<int>(count));
  job.user = x->user;  // whose turn it is on the proposer's thread
  proposer_->Start(std::move(job));
}

std::vector<int64_t> SearchDriver::TakeProposals() {
  std::vector<int64_t> looked;
  if (!proposer_ || in_flight_ == 0) return looked;
  for (ProposalDone& done : proposer_->TakeFinished()) {
    --in_flight_;
    Search* x = Find(done.experiment_id);
    if (!x || !x->state) continue;
    SearchState& s = *x->state;
    s.proposing = false;
    if (done.params.empty()) {
      s.stopped = true;  // logged by the proposer: a search that cannot propose ends
    } else if (done.first_index == s.created) {
      // Trial numbers taken meanwhile (an agent's own trial) make the answer stale: asked again.
      for (Json& params : done.params) {
        if (ctx_.Winding()) break;
        if (!s.WantsMore() || host_.Unfinished(x->experiment_id) >= s.parallel) break;
        if (!Make(*x, std::move(params), done.origin).ok()) {
          s.stopped = true;  // logged; a search that cannot make its trials ends with what it has
          break;
        }
      }
    }
    TopUp(x->experiment_id);
    looked.push_back(x->experiment_id);
  }
  return looked;
}

bool SearchDriver::KeepsOpen(int64_t experiment_id, bool paused) const {
  const Search* x = Find(experiment_id);
  if (!x || !x->state) return false;
  return x->state->proposing || (paused && x->state->WantsMore());
}

bool SearchDriver::Proposing(int64_t experiment_id) const {
  const Search* x = Find(experiment_id);
  return x && x->state && x->state->proposing;
}

void SearchDriver::Stop(int64_t experiment_id) {
  Search* x = Find(experiment_id);
  if (x && x->state) x->state->stopped = true;
}

Result<Run> SearchDriver::Make(Search& x, Json params, TrialOrigin origin) {
  SearchState& s = *x.state;
  const int index = static_cast<int>(s.created);
  Result<Run> r = host_.MakeTrial(x.experiment_id, params, index, origin);
  if (!r.ok()) return r;
  s.history[r->id] = RunningTrial(params, index);
  s.created += 1;
  return r;
}

bool SearchDriver::OnPoints(const Run& run, const std::vector<MetricPoint>& points, bool ended) {
  Search* x = Find(run.experiment_id);
  if (!x || !x->pruner) return false;
  const PruneSpec& spec = x->pruner->spec();
  // A run told how many epochs it runs (an `epochs` parameter) has no rung at its end.
  double end = 0;
  const std::string resource = spec.resource.empty() ? "epoch" : spec.resource;
  if (auto e = run.params.find(resource + "s"); e != run.params.end() && e->is_number()) {
    end = e->get<double>();
  }
  bool stop = false;
  x->placer->Place(run.id, points, end, [&](const MetricPoint& p, const search::Pruner::Place& place) {
    std::optional<RungRecord> r = x->pruner->Report(run.id, run.index, place, p.value, ended);
    if (!r) return true;
    ctx_.Tx();
    if (Status st = ctx_.store().InsertRung(x->experiment_id, *r); !st.ok()) {
      ctx_.Fail(st);
      return false;
    }
    if (!r->pruned) return true;
    spdlog::info("run {}: pruned at rung {} ({} {}, step {}): {} = {}; SIGTERM now", run.id,
                 r->rung, r->unit, r->step, r->report_step, spec.metric, r->value);
    stop = true;
    return false;
  });
  return stop;
}

std::string SearchDriver::PrunedWhy(int64_t experiment_id, int64_t run_id) const {
  const Search* x = Find(experiment_id);
  if (!x || !x->pruner) return {};
  const RungRecord* r = x->pruner->PrunedAt(run_id);
  if (!r) return {};
  return fmt::format("pruned at rung {} ({} {}): {} = {} was behind the other runs there",
                     r->rung, r->unit, r->step, x->pruner->spec().metric, r->value);
}

ProposalJob SearchDriver::SuggestJob(int64_t experiment_id, int count) const {
  const Search& x = *Find(experiment_id);
  // Each suggestion is a running trial (a constant liar) for the next; nothing is kept.
  ProposalJob job = JobFor(*x.state, experiment_id, std::max(1, count));
  job.user = x.user;
  return job;
}

Status SearchDriver::CheckTell(const cmd::Tell& c) const {
  const Search& x = *Find(c.experiment_id);
  const SearchState& s = *x.state;
  DROVER_RETURN_IF_ERROR(search::CheckConfig(x.spec, s.space, c.params));
  if (c.value && !std::isfinite(*c.value)) {
    return InvalidArgument(fmt::format(
        "search {}: the value told must be a finite number (got {}); tell a config that failed "
        "with no value",
        c.experiment_id, *c.value));
  }
  // Each result is a row and a place in the sampler's history: bounded like the trials, and
  // told results apart (only they can be sent without running anything).
  const auto told =
      static_cast<int64_t>(std::distance(s.history.begin(), s.history.lower_bound(0)));
  if (told >= kMaxTold) {
    return FailedPrecondition(fmt::format(
        "search {} has been told {} results, the most one search takes; submit a new search "
        "and tell it the results that matter (such as the best {})",
        c.experiment_id, told, kMaxTold / 10));
  }
  if (static_cast<int64_t>(s.history.size()) >= 2 * kMaxTrials) {
    return FailedPrecondition(fmt::format(
        "search {} already holds {} trials and told results, the most one search keeps; submit "
        "a new search and tell it the results that matter",
        c.experiment_id, s.history.size()));
  }
  return Status::Ok();
}

Status SearchDriver::Told(const cmd::Tell& c, Millis now_wall) {
  Search& x = *Find(c.experiment_id);
  Observation o;
  o.experiment_id = c.experiment_id;
  o.params = c.params;
  o.value = c.value;
  o.created_ms = now_wall;
  ctx_.Tx();
  if (Status st = ctx_.store().InsertObservation(o); !st.ok()) {
    ctx_.Fail(st);
    return st;
  }
  AddObservation(*x.state, *x.spec.objective, o);
  return Status::Ok();
}

Result<Run> SearchDriver::AddTrial(const cmd::AddTrial& c, bool active) {
  Search& x = *Find(c.experiment_id);
  SearchState& s = *x.state;
  if (!active || !s.WantsMore()) {
    return FailedPrecondition(fmt::format(
        "search {} ({}) makes no more trials ({} of {} made{}); tell it a result instead, or "
        "submit a new search",
        c.experiment_id, x.name, s.created, s.trials, s.stopped ? ", cancelled" : ""));
  }
  // Fixed and grid values the caller left out come from the trial's grid cell.
  Json params = c.params;
  const Json& cell = s.contexts[static_cast<size_t>(s.created) % s.contexts.size()];
  for (const auto& [k, v] : cell.items()) {
    if (!params.contains(k)) params[k] = v;
  }
  DROVER_RETURN_IF_ERROR(search::CheckConfig(x.spec, s.space, params));
  return Make(x, std::move(params), TrialOrigin::kAgent);
}

}  // namespace drover
