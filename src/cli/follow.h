#pragma once
// Following an experiment that a daemon runs: progress lines (or the live view) while its runs
// go, the comparison table at the end. Ctrl-C cancels the experiment (as an engine in the
// foreground does); a second Ctrl-C leaves without waiting for the runs to stop.
#include <cstdint>

#include "cli/client.h"
#include "common/clock.h"
#include "store/store.h"

namespace drover::cli {

struct FollowOptions {
  bool cancel_on_exit = true;
  bool json = false;
  bool quiet = false;
  // Where the runs, as they ended, are left for the caller (the report `drover run` writes
  // next lists them without asking the daemon again); nullptr: nowhere.
  std::vector<Run>* ended_runs = nullptr;
  // The command that follows the experiment again (`drover run --resume SPEC`), said when the
  // daemon stops answering midway; empty: `drover ls -e N` alone is said.
  std::string again;
};

// Looks at the experiment's run counts (GET /experiments/{id}: one small answer however many runs
// it has) until none is queued, running or retrying, spaced by FollowPace; the runs themselves
// are fetched once at the end, and while it goes only where they are shown (at most every
// kShowEveryMs, each state change printed or drawn).
int FollowExperiment(ApiClient& api, int64_t experiment_id, const FollowOptions& options);

// How long a follower waits before its next look at an experiment: half the time its unfinished
// runs should take at the pace its runs ended between the last two looks (so the looks close in
// on the end, and the last lands within min_ms of it); doubling from min_ms while no run has
// ended yet; never below min_ms nor above max_ms. The pace of the harness's daemon side
// (bench/launch_throughput.sh), where a fixed 300 ms sleep had the follower learn of the end
// 150 ms late on average.
class FollowPace {
 public:
  FollowPace(Millis min_ms = 10, Millis max_ms = 300) : min_ms_(min_ms), max_ms_(max_ms) {}
  // After a look at now_ms that saw `ended` runs finished and `left` not yet.
  Millis Next(Millis now_ms, int64_t ended, int64_t left);

 private:
  Millis min_ms_, max_ms_;
  Millis last_ms_ = -1;
  int64_t last_ended_ = 0;
  Millis last_wait_ = 0;
};

// A run's progress shown to a person is refreshed at most this often (its live view redraws at
// 200 ms): each refresh fetches every run of the experiment.
inline constexpr Millis kShowEveryMs = 300;
// From here on Ctrl-C is noted for FollowExperiment instead of ending the process (call it before
// telling the user what Ctrl-C does).
void CatchInterruptsForFollow();

// The experiment and its runs as the daemon reports them.
Result<Experiment> FetchExperiment(ApiClient& api, const std::string& id_or_name);
// Its runs counted by state (GET /experiments/{id}, which never lists them).
Result<protocol::ExperimentListing> FetchExperimentCounts(ApiClient& api, int64_t experiment_id);
Result<std::vector<Run>> FetchRuns(ApiClient& api, int64_t experiment_id);
// GET /runs with the filter, page by page (the server answers at most 1,000 a page).
Result<std::vector<Run>> FetchRuns(ApiClient& api, const RunFilter& filter);
// Each run's curve of `metric` summed up (GET /experiments/{id}/summaries).
Result<std::map<int64_t, CurveSummary>> FetchCurveSummaries(ApiClient& api, int64_t experiment_id,
                                                            const std::string& metric,
                                                            int last_k);

}  // namespace drover::cli
