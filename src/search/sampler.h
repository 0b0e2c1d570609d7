#pragma once
// Samplers: given a space and what earlier trials gave, propose the next trial's values
// (docs/search.md). Pure functions of their inputs and a seed: the same history and seed give
// the same proposal.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model/run.h"
#include "search/space.h"

namespace drover::search {

enum class TrialState {
  kRunning,   // proposed and not ended: a constant liar (never an observation)
  kComplete,  // ended with an objective value
  kPruned,    // stopped early by the pruner, at its last reported value
  kFailed,    // ended without a value (a crash, a diverged run): steered away from
};

struct Observation {
  Json params = Json::object();  // every parameter of the trial: fixed, grid and searched
  TrialState state = TrialState::kComplete;
  double loss = 0;      // the objective turned so that lower is better (complete and pruned)
  int64_t step = 0;     // kPruned: the step it was stopped at (later steps rank first)
  int64_t number = 0;   // creation order, oldest first (older observations weigh less in TPE)
};

struct SamplerOptions {
  SamplerKind kind = SamplerKind::kAuto;
  int startup_trials = 0;   // random proposals until this many trials have ended with a value
                            // (0: StartupTrials's default for the budget and space)
  int ei_candidates = 24;   // TPE: candidates drawn from l(x), the best ratio l/g wins
  bool multivariate = true; // TPE: one joint density over the unconditional parameters
  int64_t budget = 0;       // the trials planned (auto's choice); 0 = unknown
  bool grid_axes = false;   // the spec also has list axes (their values come in the context)
  bool pruning = false;     // the spec has a prune rule: trials may stop early
};

// The random start: options.startup_trials when set; else 10 (Optuna's TPE and Hyperopt's
// default), cut to a quarter of a known budget but kept at least one more than the space's
// dimensions (the fewest points a model of every dimension can be fitted to). A 16-trial search
// of 3 parameters starts with 4 random trials and makes 12 with its model, where 10 would leave
// the model 6; searches of 40 trials or more keep 10.
inline constexpr int kStartupTrials = 10;
int StartupTrials(const SamplerOptions& options, const Space& space);

// A spec's sampler options (spec.search set); `grid_axes` when it has list axes too.
SamplerOptions SamplerOptionsOf(const Spec& spec, bool grid_axes);

// Auto's choice for this space, budget and history: GP for spaces without conditions or grid
// axes (numbers and choices) while at most kGpMaxObservations trials have ended and the budget
// is at most kGpMaxBudget (kGpMaxPrunedBudget when trials are pruned); else TPE. TPE ranks a
// pruned trial by the step it reached, as Optuna does, where the GP takes its value at its rung
// for a final one: pessimistic, and at small budgets worth the GP's sample efficiency
// (bench/README.md, "Search against grid": at 16 trials with ASHA the GP beat TPE on init's
// template and the digits example); for larger pruned searches TPE, as Optuna's own advice pairs
// TPE with successive halving and Hyperband.
inline constexpr int kGpMaxObservations = 250;
inline constexpr int64_t kGpMaxBudget = 500;
inline constexpr int64_t kGpMaxPrunedBudget = 64;
SamplerKind Choose(const SamplerOptions& options, const Space& space, size_t finished);

// How the next proposal is made after `finished` trials have ended with a value: the random
// sampler (random, or grid's points in a search), the random start (StartupTrials), the GP
// (spaces without conditions), else TPE. Propose and ProposeEach make it that way; the engine
// records it with the trial.
TrialOrigin ProposalOrigin(const SamplerOptions& options, const Space& space, size_t finished);

// Proposes values for the dimensions of `space` that are active given `context` (the trial's
// fixed and grid values) and returns context with them added. `history` holds every trial of
// the search so far (running ones included).
Json Propose(const SamplerOptions& options, const Space& space, const Json& context,
             const std::vector<Observation>& history, uint64_t seed);

// One proposal to make: the trial's fixed and grid values, its seed, and its number (the
// creation order its running trial takes in the history for the proposals after it).
struct Ask {
  Json context = Json::object();
  uint64_t seed = 0;
  int64_t number = 0;
};

// Proposes each of `asks` in turn: the same proposals as one Propose per ask, each joining the
// history as a running trial before the next, with what they share computed once (the GP's fit
// of the finished trials). For a batch of suggestions, or several trials started at once.
std::vector<Json> ProposeEach(const SamplerOptions& options, const Space& space,
                              const std::vector<Ask>& asks, std::vector<Observation> history);

// The samplers behind Propose, for tests and the benchmark.
Json ProposeRandom(const Space& space, const Json& context, std::mt19937_64& rng);
Json ProposeTpe(const SamplerOptions& options, const Space& space, const Json& context,
                const std::vector<Observation>& history, std::mt19937_64& rng);
// Spaces without conditions (numbers and choices); a space with conditions goes to TPE.
Json ProposeGp(const SamplerOptions& options, const Space& space, const Json& context,
               const std::vector<Observation>& history, std::mt19937_64& rng);

// The points the GP of this history is fitted on (finished and failed trials): for tests.
size_t GpFittedPoints(const Space& space, const std::vector<Observation>& history);

std::vector<Json> ProposeGpEach(const SamplerOptions& options, const Space& space,
                                const std::vector<Ask>& asks, std::vector<Observation> history);

// Finished trials: complete and pruned ones (the observations a model is fitted to).
size_t CountFinished(const std::vector<Observation>& history);

// What one GP proposal may cost, whatever a search was told (docs/search.md, "Bounds"): its fit
// is cubic in the points, so a search told 4,000 results once took 12 s a proposal on the one
// thread every search shares. The GP is fitted on at most kGpMaxFitted of the finished and
// failed trials: the kGpMaxFitted / 2 best, then the newest of the rest. At most kGpMaxPending
// running trials (the newest) join it as believed values.
inline constexpr size_t kGpMaxFitted = 250;
inline constexpr size_t kGpMaxPending = 64;
// The trials the GP is fitted on (indices into `history`, in history order): every finished
// and failed trial when there are at most `limit`, else the limit / 2 with the lowest losses
// (complete and pruned alike) and the newest (by number) of the rest up to `limit`.
std::vector<size_t> GpFitSet(const std::vector<Observation>& history, size_t limit = kGpMaxFitted);

// The losses a model sees, robust to a few extreme ones: each clipped to Tukey's far fences
// (the quartiles -/+ 3 times the interquartile range, or a tenth of the median's size and at
// least 0.1 when half of them are equal), so one told -1e308 or 1e308 among sane results ranks
// first or last and leaves the others apart, instead of squeezing them together. Non-finite
// losses are clipped too (+inf and NaN to the upper fence, -inf to the lower). Where a quarter
// of the losses are so extreme that their spread overflows, the losses are their ranks.
std::vector<double> RobustLosses(std::vector<double> losses);

}  // namespace drover::search
