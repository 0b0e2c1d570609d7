#pragma once
// A search's next trials, proposed off the engine's loop (docs/search.md, "Where proposals are
// made"). A proposal can take a quarter of a second (the GP sampler refits its kernel to the
// finished trials), so the loop hands the sampler a copy of what it needs and goes on running,
// watching and answering; the proposals come back on a later pass, which makes the trials. A
// job is for the trial numbers from first_index on: the loop drops an answer whose numbers
// were taken meanwhile (a trial an agent added) and asks again.
//
// Every search of every user shares the proposer's one thread, so no job may hold it long and
// no user may hold it long: a job's cost is bounded (the GP fits at most search::kGpMaxFitted
// trials; a job asks for at most kMaxAsksPerJob trials), and jobs are served one user after the
// other (round robin over the users with jobs waiting, each user's in the order they came), so a
// search waits for at most one job of each other user with work queued.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/worker.h"
#include "search/sampler.h"

namespace drover {

// The most trials one job proposes; a search that wants more asks again when it is back.
inline constexpr int kMaxAsksPerJob = 32;
// The most results one search may be told (ask/tell): each is a row, and a place in every
// proposal's history (the GP fits a bounded share of them, TPE all).
inline constexpr int64_t kMaxTold = 10'000;

struct ProposalJob {
  int64_t experiment_id = 0;
  std::string user;         // the experiment's submitter: whose turn it is
  int64_t first_index = 0;  // the trial number of asks[0]; the rest follow
  search::SamplerOptions options;
  search::Space space;
  std::vector<search::Ask> asks;
  std::vector<search::Observation> history;
  // The proposals, one per ask, in order (search::ProposeEach).
  std::vector<Json> Propose() const;
  // How they are made (the random start, a model...): one way for the whole job.
  TrialOrigin Origin() const;
};

struct ProposalDone {
  int64_t experiment_id = 0;
  int64_t first_index = 0;
  std::vector<Json> params;
  TrialOrigin origin = TrialOrigin::kNone;
};

// Jobs done on a thread of their own (`wake` called after each, to wake the loop), or at once in
// Start when not off the loop (the engine tests' deterministic stand-in). A job whose sampler
// throws comes back with no proposals: the loop stops that search.
class Proposer {
 public:
  // What a job computes: ProposalJob::Propose, or a test's stand-in.
  using Work = std::function<std::vector<Json>(const ProposalJob&)>;
  Proposer(std::function<void()> wake, bool off_loop, Work work = {});
  Proposer(const Proposer&) = delete;
  Proposer& operator=(const Proposer&) = delete;

  // Queued in its submitter's turn: users are served one after the other (FIFO within a user).
  // Jobs not begun when the proposer goes are dropped; the one in progress is waited for.
  void Start(ProposalJob job) { worker_.Start(std::move(job)); }
  // The jobs done since the last call, in the order they were done.
  std::vector<ProposalDone> TakeFinished() { return worker_.TakeFinished(); }
  // Blocks until every started job is done (for tests).
  void WaitIdle() { worker_.WaitIdle(); }

 private:
  ProposalDone Do(const ProposalJob& job) const;

  Work work_;
  Worker<ProposalJob, ProposalDone> worker_;  // last: it stops (and joins) before work_ goes
};

std::unique_ptr<Proposer> MakeProposer(std::function<void()> wake, bool off_loop);

}  // namespace drover
