#pragma once
// Following an experiment that a daemon runs: progress lines (or the live view) while its runs
// go, the comparison table at the end. Ctrl-C cancels the experiment (as an engine in the
// foreground does); a second Ctrl-C leaves without waiting for the runs to stop.
#include <cstdint>

#include "cli/client.h"
#include "store/store.h"

namespace drover::cli {

struct FollowOptions {
  bool cancel_on_exit = true;
  bool json = false;
  bool quiet = false;
};

int FollowExperiment(ApiClient& api, int64_t experiment_id, const FollowOptions& options);
// From here on Ctrl-C is noted for FollowExperiment instead of ending the process (call it before
// telling the user what Ctrl-C does).
void CatchInterruptsForFollow();

// The experiment and its runs as the daemon reports them.
Result<Experiment> FetchExperiment(ApiClient& api, const std::string& id_or_name);
Result<std::vector<Run>> FetchRuns(ApiClient& api, int64_t experiment_id);
// GET /runs with the filter, page by page (the server answers at most 1,000 a page).
Result<std::vector<Run>> FetchRuns(ApiClient& api, const RunFilter& filter);
// Each run's curve of `metric` summed up (GET /experiments/{id}/summaries).
Result<std::map<int64_t, CurveSummary>> FetchCurveSummaries(ApiClient& api, int64_t experiment_id,
                                                            const std::string& metric,
                                                            int last_k);

}  // namespace drover::cli
