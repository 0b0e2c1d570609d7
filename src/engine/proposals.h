#pragma once
// A search's next trials, proposed off the engine's loop (docs/search.md, "Where proposals are
// made"). A proposal can take a quarter of a second (the GP sampler refits its kernel to every
// finished trial), so the loop hands the sampler a copy of what it needs and goes on running,
// watching and answering; the proposals come back on a later pass, which makes the trials. A
// job is for the trial numbers from first_index on: the loop drops an answer whose numbers
// were taken meanwhile (a trial an agent added) and asks again.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/worker.h"
#include "search/sampler.h"

namespace drover {

struct ProposalJob {
  int64_t experiment_id = 0;
  int64_t first_index = 0;  // the trial number of asks[0]; the rest follow
  search::SamplerOptions options;
  search::Space space;
  std::vector<search::Ask> asks;
  std::vector<search::Observation> history;
  // The proposals, one per ask, in order (search::ProposeEach).
  std::vector<Json> Propose() const;
};

struct ProposalDone {
  int64_t experiment_id = 0;
  int64_t first_index = 0;
  std::vector<Json> params;
};

// Jobs done on a thread of their own (`wake` called after each, to wake the loop), or at once in
// Start when not `off_loop` (the engine tests' deterministic stand-in). A job whose sampler
// throws comes back with no proposals: the loop stops that search.
using Proposer = Worker<ProposalJob, ProposalDone>;
std::unique_ptr<Proposer> MakeProposer(std::function<void()> wake, bool off_loop);

}  // namespace drover
