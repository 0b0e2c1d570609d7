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
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
};

struct ProposalDone {
  int64_t experiment_id = 0;
  int64_t first_index = 0;
  std::vector<Json> params;
};

// Jobs done on a thread of their own (`wake` called after each, to wake the loop), or at once in
// Start when not off the loop (the engine tests' deterministic stand-in). A job whose sampler
// throws comes back with no proposals: the loop stops that search.
class Proposer {
 public:
  // What a job computes: ProposalJob::Propose, or a test's stand-in.
  using Work = std::function<std::vector<Json>(const ProposalJob&)>;
  Proposer(std::function<void()> wake, bool off_loop, Work work = {});
  // Jobs not begun are dropped; the one in progress is waited for.
  ~Proposer();
  Proposer(const Proposer&) = delete;
  Proposer& operator=(const Proposer&) = delete;

  void Start(ProposalJob job);
  // The jobs done since the last call, in the order they were done.
  std::vector<ProposalDone> TakeFinished();
  // Blocks until every started job is done (for tests).
  void WaitIdle();

 private:
  void Loop();
  // The next job: the first waiting user after the one served last (wrapping), FIFO within.
  // Called with mu_ held and a job waiting.
  ProposalJob Next();
  ProposalDone Do(const ProposalJob& job) const;

  std::function<void()> wake_;
  bool off_loop_;
  Work work_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_;
  std::map<std::string, std::deque<ProposalJob>> waiting_;  // by user
  std::string last_user_;
  bool served_any_ = false;
  bool working_ = false;
  bool stop_ = false;
  std::vector<ProposalDone> finished_;
  std::thread thread_;  // started at the first job
};

std::unique_ptr<Proposer> MakeProposer(std::function<void()> wake, bool off_loop);

}  // namespace drover
