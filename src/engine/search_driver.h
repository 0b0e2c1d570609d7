#pragma once
// The search driver, a component of the engine (docs/search.md, docs/architecture.md): each
// search's state (the trials made so far, what the ended ones gave, results told through
// ask/tell), each experiment's pruner, and the proposer whose thread proposes the next trials
// off the loop.
//
// A search's trials are its experiment's runs, made one at a time as the sampler proposes them,
// at most search.parallel unfinished at once: the first ones with the submit, each next one when
// a trial ends, in the same transaction as that end. So a restarted engine finds every trial
// made so far in the store, none twice, and goes on until search.trials. Rungs of the prune rule
// are stored with the metric points that reached them.
//
// The driver decides what to propose and when, and what a trial's end teaches the sampler; the
// engine makes a trial's run (SearchHost::MakeTrial), counts an experiment's unfinished runs
// and stops a pruned run.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/commands.h"
#include "engine/engine_context.h"
#include "engine/proposals.h"
#include "model/run.h"
#include "model/run_lifecycle.h"
#include "model/spec.h"
#include "search/pruner.h"
#include "search/sampler.h"

namespace drover {

// A search's state: what proposes its trials, and what they gave. Rebuilt from the store by a
// restarted engine: trials are the experiment's runs.
struct SearchState {
  search::Space space;
  search::SamplerOptions options;
  uint64_t seed = 0;
  int64_t trials = 0;          // the budget (search.trials)
  int parallel = 1;            // unfinished trials at most (search.parallel)
  std::vector<Json> contexts;  // grid cells and fixed values: trial i takes i mod size
  int64_t created = 0;         // trials made so far (the experiment's runs)
  bool stopped = false;        // cancelled: no more trials
  bool proposing = false;      // a ProposalJob for it is with the proposer
  std::map<int64_t, search::Observation> history;  // by run id
  bool WantsMore() const { return !stopped && created < trials; }
};

// The seed of trial `index` of a search seeded `seed` (the same trial, the same proposal).
uint64_t TrialSeed(uint64_t seed, int64_t index);
// The search of a spec, with no trial made yet.
Result<SearchState> NewSearchState(const Spec& spec);
// A trial made and not ended: a constant liar for the sampler, never an observation.
search::Observation RunningTrial(const Json& params, int64_t number);
// What proposing the next `count` trials takes (trial numbers search.created on), copied.
ProposalJob JobFor(const SearchState& search, int64_t experiment_id, int count);
// A result told to the search (ask/tell) joins its history.
void AddObservation(SearchState& search, const Objective& objective, const Observation& o);

// What the driver asks of the engine about runs.
class SearchHost {
 public:
  virtual ~SearchHost() = default;
  // The experiment's runs not final yet (its trials among them).
  virtual int Unfinished(int64_t experiment_id) const = 0;
  // Records and queues the experiment's trial number `index` with these params (in the loop's
  // transaction); an error is logged by the engine and ends the search.
  virtual Result<Run> MakeTrial(int64_t experiment_id, Json params, int index,
                                TrialOrigin origin) = 0;
};

class SearchDriver : public RunLifecycle {
 public:
  // `off_loop`: proposals on the proposer's thread (else at once: the engine tests' stand-in).
  SearchDriver(EngineContext& ctx, SearchHost& host, bool off_loop);
  ~SearchDriver() override;

  // The experiment's search and prune state from its spec and what the store holds of it (its
  // runs, rungs and told results); nothing for an experiment with neither.
  Status Load(const Experiment& e, const Spec& spec, const std::vector<Run>& runs);
  // Its state goes (the experiment was removed).
  void Forget(int64_t experiment_id);
  // A search whose trials are proposed (spec.search with a sampler other than grid).
  bool Searches(int64_t experiment_id) const;

  // Asks the proposer for trials while the search wants more and has fewer than `parallel`
  // unfinished (one job in flight per search); TakeProposals makes them when they are back.
  void TopUp(int64_t experiment_id);
  // The proposals that came back, made into trials while they are wanted (then topped up again).
  // Returns the experiments whose search may have finished (MaybeDone).
  std::vector<int64_t> TakeProposals();
  // Proposals with the proposer: the loop stays for them.
  bool busy() const { return in_flight_ > 0; }
  // The search is still going though no run of it is unfinished: its next trials are being
  // proposed, or (`paused`: the engine drains or stalls, not cancelling) it is short of them and
  // the next engine or pass makes them.
  bool KeepsOpen(int64_t experiment_id, bool paused) const;
  bool Proposing(int64_t experiment_id) const;
  // Cancelled: no more trials.
  void Stop(int64_t experiment_id);

  // What an ended trial gave joins its search's history (a cancelled one leaves it).
  void OnFinal(const Run& run) override;

  // New points of a running run: rungs recorded in the loop's transaction. True when the run is
  // behind at a rung and is to be stopped (logged here). `ended`: the points are the last of a
  // run that has exited: their rungs are recorded, nobody is stopped.
  bool OnPoints(const Run& run, const std::vector<MetricPoint>& points, bool ended = false);
  // Why the pruner stopped the run, for its attempt's record; empty when it did not.
  std::string PrunedWhy(int64_t experiment_id, int64_t run_id) const;

  // Ask/tell (docs/search.md). The experiment must be one the driver searches (Load).
  // The next configs, honouring its running trials (a copy to propose from; nothing is kept).
  ProposalJob SuggestJob(int64_t experiment_id, int count) const;
  // A told result's checks (before anything is stored).
  Status CheckTell(const cmd::Tell& c) const;
  // A told result, stored in the loop's transaction and added to the search's history.
  Status Told(const cmd::Tell& c, Millis now_wall);
  // A trial of the caller's choosing, its grid cell's values filled in: checked, then made
  // (SearchHost::MakeTrial). `active`: the experiment may still make trials.
  Result<Run> AddTrial(const cmd::AddTrial& c, bool active);

 private:
  struct Search {
    int64_t experiment_id = 0;
    std::string name;  // the experiment's, for messages
    std::string user;  // whose turn it is on the proposer's thread
    Spec spec;
    std::optional<SearchState> state;      // spec.search with a sampler
    std::optional<search::Pruner> pruner;  // spec.prune
    std::optional<search::ReportPlacer> placer;  // where the pruner's reports fall (epochs, steps)
  };
  Search* Find(int64_t experiment_id);
  const Search* Find(int64_t experiment_id) const;
  // Records and queues trial `state.created` with these params.
  Result<Run> Make(Search& s, Json params, TrialOrigin origin);
  void Observe(Search& s, const Run& run);

  EngineContext& ctx_;
  SearchHost& host_;
  bool off_loop_;
  std::map<int64_t, Search> searches_;  // experiments with a search or a prune rule
  std::unique_ptr<Proposer> proposer_;  // made at the first proposal
  int in_flight_ = 0;
};

}  // namespace drover
