#include "search/sampler.h"

#include <cmath>

#include "search/numeric.h"

namespace drover::search {

size_t CountFinished(const std::vector<Observation>& history) {
  size_t n = 0;
  for (const Observation& o : history) {
    if (o.state == TrialState::kComplete || o.state == TrialState::kPruned) ++n;
  }
  return n;
}

SamplerOptions SamplerOptionsOf(const Spec& spec, bool grid_axes) {
  SamplerOptions o;
  if (spec.search) {
    o.kind = spec.search->sampler;
    o.multivariate = spec.search->multivariate;
    o.budget = spec.search->trials;
  }
  o.grid_axes = grid_axes;
  o.pruning = spec.prune.has_value();
  return o;
}

SamplerKind Choose(const SamplerOptions& options, const Space& space, size_t finished) {
  if (options.kind != SamplerKind::kAuto) return options.kind;
  bool flat = !space.HasConditions() && !options.grid_axes && !options.pruning;
  bool small = options.budget <= kGpMaxBudget && finished <= kGpMaxObservations;
  return flat && small ? SamplerKind::kGp : SamplerKind::kTpe;
}

Json ProposeRandom(const Space& space, const Json& context, std::mt19937_64& rng) {
  Json out = context;
  for (const Dimension& d : space.dims) {
    if (!Active(d, out)) continue;
    out[d.name] = d.External(numeric::Uniform(rng, d.InternalLow(), d.InternalHigh()));
  }
  return out;
}

Json Propose(const SamplerOptions& options, const Space& space, const Json& context,
             const std::vector<Observation>& history, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t finished = CountFinished(history);
  SamplerKind kind = Choose(options, space, finished);
  if (kind == SamplerKind::kRandom || kind == SamplerKind::kGrid ||
      finished < static_cast<size_t>(std::max(options.startup_trials, 1))) {
    return ProposeRandom(space, context, rng);
  }
  if (kind == SamplerKind::kGp && !space.HasConditions()) {
    return ProposeGp(options, space, context, history, rng);
  }
  return ProposeTpe(options, space, context, history, rng);
}

std::vector<Json> ProposeEach(const SamplerOptions& options, const Space& space,
                              const std::vector<Ask>& asks, std::vector<Observation> history) {
  const size_t finished = CountFinished(history);
  const SamplerKind kind = Choose(options, space, finished);
  const bool startup = finished < static_cast<size_t>(std::max(options.startup_trials, 1));
  if (kind == SamplerKind::kGp && !startup && !space.HasConditions()) {
    return ProposeGpEach(options, space, asks, std::move(history));
  }
  std::vector<Json> out;
  out.reserve(asks.size());
  for (const Ask& ask : asks) {
    Json p = Propose(options, space, ask.context, history, ask.seed);
    Observation running;
    running.params = p;
    running.state = TrialState::kRunning;
    running.number = ask.number;
    history.push_back(std::move(running));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace drover::search
