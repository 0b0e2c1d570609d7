#include "search/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "search/numeric.h"

namespace drover::search {

size_t CountFinished(const std::vector<Observation>& history) {
  size_t n = 0;
  for (const Observation& o : history) {
    if (o.state == TrialState::kComplete || o.state == TrialState::kPruned) ++n;
  }
  return n;
}

std::vector<size_t> GpFitSet(const std::vector<Observation>& history, size_t limit) {
  std::vector<size_t> finished, rest;
  for (size_t i = 0; i < history.size(); ++i) {
    const TrialState st = history[i].state;
    if (st == TrialState::kComplete || st == TrialState::kPruned) {
      finished.push_back(i);
    } else if (st == TrialState::kFailed) {
      rest.push_back(i);
    }
  }
  if (finished.size() + rest.size() <= limit) {
    finished.insert(finished.end(), rest.begin(), rest.end());
    std::sort(finished.begin(), finished.end());
    return finished;
  }
  // The best half: where the optimum is. Ties (and NaN, last) by index, so it is deterministic.
  auto loss = [&](size_t i) {
    const double l = history[i].loss;
    return std::isnan(l) ? std::numeric_limits<double>::infinity() : l;
  };
  const size_t best = std::min(finished.size(), limit / 2);
  std::partial_sort(finished.begin(), finished.begin() + static_cast<ptrdiff_t>(best),
                    finished.end(), [&](size_t a, size_t b) {
                      return loss(a) < loss(b) || (loss(a) == loss(b) && a < b);
                    });
  std::vector<size_t> out(finished.begin(), finished.begin() + static_cast<ptrdiff_t>(best));
  // The newest of the rest: what the search is exploring now.
  rest.insert(rest.end(), finished.begin() + static_cast<ptrdiff_t>(best), finished.end());
  const size_t newest = std::min(rest.size(), limit - best);
  std::partial_sort(rest.begin(), rest.begin() + static_cast<ptrdiff_t>(newest), rest.end(),
                    [&](size_t a, size_t b) {
                      return history[a].number > history[b].number ||
                             (history[a].number == history[b].number && a > b);
                    });
  out.insert(out.end(), rest.begin(), rest.begin() + static_cast<ptrdiff_t>(newest));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> RobustLosses(std::vector<double> losses) {
  std::vector<double> finite;
  for (double l : losses) {
    if (std::isfinite(l)) finite.push_back(l);
  }
  if (finite.empty()) return std::vector<double>(losses.size(), 0.0);
  auto quantile = [&](double q) {
    const size_t k = static_cast<size_t>(q * static_cast<double>(finite.size() - 1));
    std::nth_element(finite.begin(), finite.begin() + static_cast<ptrdiff_t>(k), finite.end());
    return finite[k];
  };
  const double q1 = quantile(0.25), median = quantile(0.5), q3 = quantile(0.75);
  double width = 3 * (q3 - q1);
  if (!(width > 0)) width = std::max(0.1 * std::abs(median), 0.1);
  const double lo = q1 - width, hi = q3 + width;
  double sum = 0;
  for (double& l : losses) {
    l = std::isnan(l) ? hi : std::clamp(l, lo, hi);
    sum += l;
  }
  double sq = 0;
  const double mean = sum / static_cast<double>(losses.size());
  for (double l : losses) sq += (l - mean) * (l - mean);
  if (std::isfinite(lo) && std::isfinite(hi) && std::isfinite(mean) && std::isfinite(sq)) {
    return losses;
  }
  // So many extreme values that even the fences overflow: their order is what is left.
  std::vector<size_t> order(losses.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return losses[a] < losses[b]; });
  std::vector<double> ranks(losses.size());
  for (size_t r = 0; r < order.size(); ++r) ranks[order[r]] = static_cast<double>(r);
  return ranks;
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

int StartupTrials(const SamplerOptions& options, const Space& space) {
  if (options.startup_trials > 0) return options.startup_trials;
  if (options.budget <= 0) return kStartupTrials;
  const auto quarter = static_cast<int>(std::min<int64_t>((options.budget + 3) / 4, kStartupTrials));
  const int floor = std::min(static_cast<int>(space.dims.size()) + 1, kStartupTrials);
  return std::max(quarter, floor);
}

SamplerKind Choose(const SamplerOptions& options, const Space& space, size_t finished) {
  if (options.kind != SamplerKind::kAuto) return options.kind;
  // With pruning, the GP reads a pruned trial's value at its rung as if final (pessimistic: the
  // pruner judged it behind); worth it for small budgets, where sample efficiency decides.
  const bool pruned_ok = !options.pruning || (options.budget > 0 && options.budget <= kGpMaxPrunedBudget);
  bool flat = !space.HasConditions() && !options.grid_axes && pruned_ok;
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

TrialOrigin ProposalOrigin(const SamplerOptions& options, const Space& space, size_t finished) {
  const SamplerKind kind = Choose(options, space, finished);
  if (kind == SamplerKind::kRandom || kind == SamplerKind::kGrid) return TrialOrigin::kRandom;
  if (finished < static_cast<size_t>(StartupTrials(options, space))) {
    return TrialOrigin::kRandomStart;
  }
  if (kind == SamplerKind::kGp && !space.HasConditions()) return TrialOrigin::kGp;
  return TrialOrigin::kTpe;
}

Json Propose(const SamplerOptions& options, const Space& space, const Json& context,
             const std::vector<Observation>& history, uint64_t seed) {
  std::mt19937_64 rng(seed);
  switch (ProposalOrigin(options, space, CountFinished(history))) {
    case TrialOrigin::kGp: return ProposeGp(options, space, context, history, rng);
    case TrialOrigin::kTpe: return ProposeTpe(options, space, context, history, rng);
    default: return ProposeRandom(space, context, rng);
  }
}

std::vector<Json> ProposeEach(const SamplerOptions& options, const Space& space,
                              const std::vector<Ask>& asks, std::vector<Observation> history) {
  // Running trials join the history as the batch goes, finished ones do not: one origin for all.
  if (ProposalOrigin(options, space, CountFinished(history)) == TrialOrigin::kGp) {
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
