#pragma once
// What the read commands (ls, show, compare) need, from the daemon's API when a daemon serves the
// store, else from the store itself: one interface, so each command is written once.
#include <memory>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/common.h"
#include "protocol/api.h"
#include "report/series.h"
#include "store/store.h"

namespace drover::cli {

struct SeriesQuery {
  std::string name;  // only this metric ("": every metric)
  int attempt = 0;   // only this attempt number (0: every attempt)
  int points = 0;    // at most this many points per series (0: all; else at least 2)
};

class Catalog {
 public:
  virtual ~Catalog() = default;
  // Newest first, each with its runs counted by state (never the runs themselves).
  virtual Result<std::vector<protocol::ExperimentListing>> ListExperiments(int limit) = 0;
  // By id or newest of that name; NotFound says how to list them.
  virtual Result<Experiment> FindExperiment(const std::string& id_or_name) = 0;
  virtual Result<std::vector<Run>> ListRuns(const RunFilter& filter) = 0;
  virtual Result<protocol::RunDetail> GetRunDetail(int64_t run_id) = 0;
  virtual Result<std::vector<Alert>> ListAlerts(const AlertFilter& filter) = 0;
  // A run's attempts by number; NotFound for an unknown run.
  virtual Result<std::vector<Attempt>> ListAttempts(int64_t run_id) = 0;
  // A run's stored outputs (a pipeline stage's; a cached run: its source's).
  virtual Result<RunArtifacts> RunOutputs(int64_t run_id) = 0;
  // The attempts of each of these runs, by run id (a run with none: absent). Runs of one
  // experiment take one look at a store, and more than a few of them one request to a daemon
  // (GET /experiments/{id}/attempts); otherwise one look (or request) per run with attempts.
  virtual Result<std::map<int64_t, std::vector<Attempt>>> ListAttemptsOfRuns(
      const std::vector<Run>& runs);
  // A run's metric series, one per name (sorted by name), as GET /runs/{id}/metrics answers:
  // points in attempt-then-step order, downsampled to `query.points` per series (0: all).
  virtual Result<std::vector<report::MetricSeries>> GetMetricSeries(int64_t run_id,
                                                                    const SeriesQuery& query) = 0;
  // Each run's curve of `metric` summed up (Store::MetricSummaries, GET .../summaries), what
  // ranking the runs needs (report/comparison.h).
  virtual Result<std::map<int64_t, CurveSummary>> MetricSummaries(int64_t experiment_id,
                                                                  const std::string& metric,
                                                                  int last_k) = 0;
};

// The daemon's catalog when one serves the store, else the store's (which must exist).
Result<std::unique_ptr<Catalog>> OpenCatalog(const Globals& g);
// A catalog over a store this process has open (not owned), or over a daemon's API.
std::unique_ptr<Catalog> CatalogOf(Store& store);
std::unique_ptr<Catalog> CatalogOf(const DaemonInfo& daemon);

}  // namespace drover::cli
