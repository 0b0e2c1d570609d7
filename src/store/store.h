#pragma once
// The SQLite store (WAL): experiments, runs, attempts, metric points, events, snapshots and
// environments. The schema is versioned with PRAGMA user_version and upgraded by migrations in
// order; a store newer than this binary is refused untouched. Writers group calls between Begin()
// and Commit() so a loop iteration's changes land in one transaction.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gpu.h"
#include "model/run.h"

struct sqlite3;

namespace drover {

struct RunFilter {
  int64_t experiment_id = 0;      // 0 = any
  std::optional<RunState> state;  // nothing = any
  int limit = 0;                  // 0 = no limit
  int offset = 0;
  bool newest_first = false;  // default: by id ascending
  std::string user;           // "" = any; else runs of experiments this user submitted
};

struct AlertFilter {
  int64_t experiment_id = 0;  // 0 = any
  int64_t run_id = 0;         // 0 = any
  std::string kind;           // "" = any
  int64_t after_id = 0;       // only alerts with a larger id
  int limit = 0;              // 0 = no limit
  bool newest_first = true;
};

// One submitter's use of one fair-share group's GPUs over a window.
struct UsageRow {
  std::string user;
  std::string group;
  double gpu_ms = 0;  // GPUs held x time (a run sharing a GPU by memory counts the GPU whole)
  int64_t runs = 0;   // runs that held GPUs in the window
};

// What Prometheus is told about the whole store (GET /metrics).
struct StoreTotals {
  std::map<std::string, int64_t> runs_by_state;
  std::map<std::string, int64_t> alerts_by_kind;
  std::map<std::string, int64_t> attempt_failures_by_reason;  // ended attempts but succeeded
  // Time from submit to a run's first start, for runs that started: count per bucket (upper
  // bounds in `wait_bounds_s`, cumulative as Prometheus wants), total count and sum.
  std::vector<double> wait_bounds_s;
  std::vector<int64_t> wait_cumulative;
  int64_t wait_count = 0;
  double wait_sum_s = 0;
};

struct StoreOpenOptions {
  // A SQLite VFS by name; empty: the default. Tests pass store::FaultVfsName() (fault_vfs.h).
  std::string vfs;
};

class Store {
 public:
  // Opens (creating and migrating as needed) the database at `path`; ":memory:" for tests.
  // Creates missing parent folders.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOpenOptions& options = {});
  ~Store();

  static int LatestSchemaVersion();
  Result<int> SchemaVersion();

  // A transaction. The store keeps what each write statement between Begin() and Commit() did
  // (the statement and its values, in order), so a commit that fails for want of room (SQLITE_FULL,
  // SQLITE_IOERR, SQLITE_BUSY: SQLite has rolled the transaction back) loses nothing: Commit()
  // returns Unavailable and CommitPending() is true until a later Begin() replays those writes
  // (same order, same base, so the same row ids) and Commit() lands them. Rollback() drops them.
  // Dirty pages never spill to disk before the commit (cache_spill off), so a full disk shows
  // at the commit, not halfway through a transaction's writes.
  Status Begin();
  Status Commit();
  Status Rollback();
  bool CommitPending() const;

  Status InsertExperiment(Experiment& e);  // sets e.id
  Status UpdateExperimentStatus(int64_t id, ExperimentStatus status);
  Result<std::optional<Experiment>> GetExperiment(int64_t id);
  // By numeric id, or the newest experiment with that name.
  Result<std::optional<Experiment>> FindExperiment(const std::string& id_or_name);
  // Newest first; limit 0: all; `offset` skips that many of the newest.
  Result<std::vector<Experiment>> ListExperiments(int limit = 0, int64_t offset = 0);

  // Deletes the experiment and everything recorded about it: its runs, their attempts, metric
  // points, alerts and events, and its environments (drover rm). Inside the caller's transaction.
  Status DeleteExperiment(int64_t id);
  // Snapshots no experiment or run refers to (after drover rm), by hash.
  Result<std::vector<std::string>> UnreferencedSnapshots();
  Status DeleteSnapshot(const std::string& hash);

  Status InsertRun(Run& r);  // sets r.id
  Status UpdateRun(const Run& r);
  Result<std::optional<Run>> GetRun(int64_t id);
  Result<std::vector<Run>> ListRuns(const RunFilter& filter);
  // How many runs of the experiment are in each state.
  Result<RunCounts> CountRuns(int64_t experiment_id);
  // The same for each of these experiments, in one query (an id with no runs: absent).
  Result<std::map<int64_t, RunCounts>> CountRunsOf(const std::vector<int64_t>& experiment_ids);

  Status InsertAttempt(Attempt& a);  // sets a.id
  Status UpdateAttempt(const Attempt& a);
  Result<std::vector<Attempt>> ListAttempts(int64_t run_id);
  // The attempts of every run of an experiment in one query, by run id, each run's by number;
  // only those of runs with ids in [first_run, last_run] (a page of its runs) when given.
  Result<std::map<int64_t, std::vector<Attempt>>> ListExperimentAttempts(
      int64_t experiment_id, int64_t first_run = 0, int64_t last_run = INT64_MAX);

  Status InsertMetrics(const std::vector<MetricPoint>& points);  // one prepared statement, reused
  // All points of a run (every attempt), ordered by attempt then step; name "" = every metric.
  Result<std::vector<MetricPoint>> GetMetrics(int64_t run_id, const std::string& name = "");
  // One series of a run (attempt_id 0 = every attempt; after_step: only steps above it), for
  // reading a long series without holding it all: CountMetrics, then ScanMetrics calls `fn` for
  // each point in (attempt, step, insertion) order. The point's `name` is left empty.
  struct SeriesQuery {
    int64_t run_id = 0;
    std::string name;
    int64_t attempt_id = 0;
    std::optional<int64_t> after_step;
  };
  Result<int64_t> CountMetrics(const SeriesQuery& q);
  Status ScanMetrics(const SeriesQuery& q, const std::function<void(const MetricPoint&)>& fn);
  // The names of a run's metrics, sorted.
  Result<std::vector<std::string>> MetricNames(int64_t run_id);
  // For each run of an experiment whose latest attempt reported `name`: that curve summed up
  // (model/run.h, CurveSummary), the mean over its last `last_k` values (1 when 0), for ranking
  // runs without reading every point (report/comparison.h).
  // `run_id` (not 0): that run's only.
  Result<std::map<int64_t, CurveSummary>> MetricSummaries(int64_t experiment_id,
                                                          const std::string& name, int last_k,
                                                          int64_t run_id = 0);
  // Results told to a search for configs run outside it (docs/search.md, "Ask/tell").
  Status InsertObservation(Observation& o);  // sets o.id
  Result<std::vector<Observation>> ListObservations(int64_t experiment_id);
  // The rungs of an experiment's prune rule (model/run.h, RungRecord), in the order recorded.
  Status InsertRung(int64_t experiment_id, const RungRecord& r);
  // `run_id` (not 0): that run's only.
  Result<std::vector<RungRecord>> ListRungs(int64_t experiment_id, int64_t run_id = 0);
  // For each run of an experiment that reported `name`: its lowest and highest value (NaN and
  // Inf left out), for ranking runs by their best without reading every point.
  Result<std::map<int64_t, std::pair<double, double>>> MetricRanges(int64_t experiment_id,
                                                                     const std::string& name);

  Status InsertEvent(Event& e);  // sets e.id
  Result<std::vector<Event>> ListEvents(int64_t after_id, int limit = 0);

  Status PutSnapshot(const Snapshot& s);  // idempotent by hash
  Result<std::optional<Snapshot>> GetSnapshot(const std::string& hash);

  Status PutEnvironment(const Environment& env);  // one per (experiment, interpreter)
  Result<std::vector<Environment>> ListEnvironments(int64_t experiment_id);

  // Alerts (watch_store.cc).
  Status InsertAlert(Alert& a);  // sets a.id
  Status UpdateAlert(const Alert& a);
  // The newest alert with this dedup key.
  Result<std::optional<Alert>> LatestAlert(const std::string& key);
  Result<std::vector<Alert>> ListAlerts(const AlertFilter& filter);

  // GPU telemetry, one averaged row per GPU and period (watch_store.cc). Negative (unknown)
  // values are stored as NULL and read back as -1; processes are not stored.
  Status InsertGpuSamples(const std::vector<GpuSample>& rows, const std::vector<int>& counts);
  // gpu < 0: every GPU; rows with t_ms >= since_ms, oldest first, at most `limit` (0: all).
  Result<std::vector<GpuSample>> ListGpuSamples(int gpu, Millis since_ms, int limit = 0);

  // Fingerprint's attempts, newest first, at most `limit`: their reasons ("" while running).
  Result<std::vector<std::string>> RecentOutcomes(const std::string& fingerprint, int limit);

  // Pipelines (artifact_store.cc). A run's stored outputs, by path.
  Status PutArtifacts(const std::vector<Artifact>& artifacts);
  Result<std::vector<Artifact>> ListArtifacts(int64_t run_id);
  // A run's outputs as `drover artifacts` shows them (a cached run: its source's), in the store
  // at `store_dir`; NotFound for an unknown run.
  Result<RunArtifacts> RunOutputs(int64_t run_id, const std::string& store_dir);
  // The folder drover.db is in ("" for a store in memory).
  std::string Dir() const;
  // The newest succeeded run with this fingerprint that is not `except` and whose outputs are
  // where it stored them (a run cached from another names it: cached_from), if any.
  // Only runs of experiments `user` submitted count.
  Result<std::optional<Run>> LatestSuccess(const std::string& fingerprint, int64_t except = 0,
                                           const std::string& user = "");

  // GPU time by submitter and fair-share group between since_ms and until_ms (attempts still
  // running count up to until_ms): `drover usage` (docs/lab-server.md).
  Result<std::vector<UsageRow>> Usage(Millis since_ms, Millis until_ms);

  // Totals over the whole store for /metrics; `wait_bounds_s` are the histogram's buckets.
  Result<StoreTotals> Totals(const std::vector<double>& wait_bounds_s);

  // PRAGMA integrity_check == "ok".
  Result<bool> IntegrityOk();

 private:
  explicit Store(sqlite3* db);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace drover
