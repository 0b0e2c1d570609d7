#pragma once
// The SQLite store (WAL): experiments, runs, attempts, metric points, events, snapshots and
// environments. The schema is versioned with PRAGMA user_version and upgraded by migrations in
// order; a store newer than this binary is refused untouched. Writers group calls between Begin()
// and Commit() so a loop iteration's changes land in one transaction.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/run.h"

struct sqlite3;

namespace drover {

struct RunFilter {
  int64_t experiment_id = 0;      // 0 = any
  std::optional<RunState> state;  // nothing = any
  int limit = 0;                  // 0 = no limit
  int offset = 0;
  bool newest_first = false;  // default: by id ascending
};

class Store {
 public:
  // Opens (creating and migrating as needed) the database at `path`; ":memory:" for tests.
  // Creates missing parent folders.
  static Result<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  static int LatestSchemaVersion();
  Result<int> SchemaVersion();

  Status Begin();
  Status Commit();
  Status Rollback();

  Status InsertExperiment(Experiment& e);  // sets e.id
  Status UpdateExperimentStatus(int64_t id, const std::string& status);
  Result<std::optional<Experiment>> GetExperiment(int64_t id);
  // By numeric id, or the newest experiment with that name.
  Result<std::optional<Experiment>> FindExperiment(const std::string& id_or_name);
  Result<std::vector<Experiment>> ListExperiments(int limit = 0);

  Status InsertRun(Run& r);  // sets r.id
  Status UpdateRun(const Run& r);
  Result<std::optional<Run>> GetRun(int64_t id);
  Result<std::vector<Run>> ListRuns(const RunFilter& filter);
  // How many runs of the experiment are in each state (states with none are absent).
  Result<std::map<std::string, int64_t>> CountRuns(int64_t experiment_id);

  Status InsertAttempt(Attempt& a);  // sets a.id
  Status UpdateAttempt(const Attempt& a);
  Result<std::vector<Attempt>> ListAttempts(int64_t run_id);

  Status InsertMetrics(const std::vector<MetricPoint>& points);  // one prepared statement, reused
  // All points of a run (every attempt), ordered by attempt then step; name "" = every metric.
  Result<std::vector<MetricPoint>> GetMetrics(int64_t run_id, const std::string& name = "");

  Status InsertEvent(Event& e);  // sets e.id
  Result<std::vector<Event>> ListEvents(int64_t after_id, int limit = 0);

  Status PutSnapshot(const Snapshot& s);  // idempotent by hash
  Result<std::optional<Snapshot>> GetSnapshot(const std::string& hash);

  Status PutEnvironment(const Environment& env);  // one per (experiment, interpreter)
  Result<std::vector<Environment>> ListEnvironments(int64_t experiment_id);

  // PRAGMA integrity_check == "ok".
  Result<bool> IntegrityOk();

 private:
  explicit Store(sqlite3* db);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace drover
