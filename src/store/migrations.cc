#include "store/migrations.h"

#include <fmt/format.h>

namespace drover::store {

namespace {

// Version 1: the records of a run. tests/data/store_v1.sql holds this schema verbatim; keep them
// the same (migrations_test checks).
constexpr const char* kV1 = R"sql(
CREATE TABLE experiments (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  name          TEXT    NOT NULL,
  spec_yaml     TEXT    NOT NULL DEFAULT '',
  spec          TEXT    NOT NULL DEFAULT '{}',
  snapshot_hash TEXT    NOT NULL DEFAULT '',
  status        TEXT    NOT NULL DEFAULT 'active',
  created_ms    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX experiments_by_name ON experiments(name, id);
CREATE TABLE runs (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id  INTEGER NOT NULL REFERENCES experiments(id),
  grid_index     INTEGER NOT NULL DEFAULT 0,
  params         TEXT    NOT NULL DEFAULT '{}',
  current_params TEXT    NOT NULL DEFAULT '{}',
  fingerprint    TEXT    NOT NULL DEFAULT '',
  state          TEXT    NOT NULL DEFAULT 'queued',
  priority       INTEGER NOT NULL DEFAULT 0,
  gpus           INTEGER NOT NULL DEFAULT 0,
  gpu_memory     INTEGER NOT NULL DEFAULT 0,
  cpus           INTEGER NOT NULL DEFAULT 1,
  attempts       INTEGER NOT NULL DEFAULT 0,
  retries_used   INTEGER NOT NULL DEFAULT 0,
  not_before_ms  INTEGER NOT NULL DEFAULT 0,
  created_ms     INTEGER NOT NULL DEFAULT 0,
  started_ms     INTEGER NOT NULL DEFAULT 0,
  ended_ms       INTEGER NOT NULL DEFAULT 0,
  reason         TEXT    NOT NULL DEFAULT '',
  final_metrics  TEXT    NOT NULL DEFAULT '{}'
);
CREATE TABLE attempts (
  id                   INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id               INTEGER NOT NULL REFERENCES runs(id),
  number               INTEGER NOT NULL DEFAULT 0,
  ended                INTEGER NOT NULL DEFAULT 0,
  reason               TEXT    NOT NULL DEFAULT '',
  exit_code            INTEGER NOT NULL DEFAULT -1,
  signal               INTEGER NOT NULL DEFAULT 0,
  pid                  INTEGER NOT NULL DEFAULT 0,
  gpus                 TEXT    NOT NULL DEFAULT '[]',
  cuda_visible_devices TEXT    NOT NULL DEFAULT '',
  params               TEXT    NOT NULL DEFAULT '{}',
  argv                 TEXT    NOT NULL DEFAULT '[]',
  started_ms           INTEGER NOT NULL DEFAULT 0,
  ended_ms             INTEGER NOT NULL DEFAULT 0,
  stdout_path          TEXT    NOT NULL DEFAULT '',
  stderr_path          TEXT    NOT NULL DEFAULT '',
  stdout_offset        INTEGER NOT NULL DEFAULT 0,
  hostname             TEXT    NOT NULL DEFAULT '',
  drover_version       TEXT    NOT NULL DEFAULT '',
  workdir              TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX attempts_by_run ON attempts(run_id, number);
CREATE TABLE metrics (
  run_id     INTEGER NOT NULL REFERENCES runs(id),
  attempt_id INTEGER NOT NULL DEFAULT 0,
  step       INTEGER NOT NULL DEFAULT 0,
  name       TEXT    NOT NULL,
  value      REAL,
  t_ms       INTEGER NOT NULL DEFAULT 0
);
)sql";

// Version 2: the event log (cursor for SSE and `drover watch`), code snapshots, per-experiment
// environments, and the indexes the curve and queue queries need.
constexpr const char* kV2 = R"sql(
CREATE TABLE events (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  t_ms          INTEGER NOT NULL DEFAULT 0,
  kind          TEXT    NOT NULL,
  experiment_id INTEGER NOT NULL DEFAULT 0,
  run_id        INTEGER NOT NULL DEFAULT 0,
  data          TEXT    NOT NULL DEFAULT '{}'
);
CREATE TABLE snapshots (
  hash       TEXT    PRIMARY KEY,
  path       TEXT    NOT NULL DEFAULT '',
  git        INTEGER NOT NULL DEFAULT 0,
  git_commit TEXT    NOT NULL DEFAULT '',
  git_diff   TEXT    NOT NULL DEFAULT '',
  bytes      INTEGER NOT NULL DEFAULT 0,
  files      INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE environments (
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  interpreter   TEXT    NOT NULL,
  packages      TEXT    NOT NULL DEFAULT '',
  hostname      TEXT    NOT NULL DEFAULT '',
  gpu_info      TEXT    NOT NULL DEFAULT '',
  PRIMARY KEY (experiment_id, interpreter)
);
CREATE INDEX metrics_by_run_name_step ON metrics(run_id, name, step);
CREATE INDEX runs_by_experiment_state ON runs(experiment_id, state);
)sql";

// Version 3: the commit and diff an experiment was submitted from. A snapshot is shared by every
// experiment whose files are the same, so its git fields tell only who made it first; the
// experiment keeps its own. Older experiments take them from their snapshot.
constexpr const char* kV3 = R"sql(
ALTER TABLE experiments ADD COLUMN git_commit TEXT NOT NULL DEFAULT '';
ALTER TABLE experiments ADD COLUMN git_diff   TEXT NOT NULL DEFAULT '';
UPDATE experiments SET
  git_commit = COALESCE((SELECT s.git_commit FROM snapshots s WHERE s.hash = experiments.snapshot_hash), ''),
  git_diff   = COALESCE((SELECT s.git_diff   FROM snapshots s WHERE s.hash = experiments.snapshot_hash), '');
)sql";

// Version 4: what a restarted engine needs to adopt a run it did not start: the shim's start time
// (with its pid it tells the shim from a later process that reused the pid) and the file where
// the shim records how the run ended.
constexpr const char* kV4 = R"sql(
ALTER TABLE attempts ADD COLUMN pid_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN exit_path TEXT    NOT NULL DEFAULT '';
)sql";

// Version 5: what the watchers found (alerts, deduplicated by key) and GPU telemetry, averaged
// into one row per GPU per period. Unknown telemetry values are NULL.
constexpr const char* kV5 = R"sql(
CREATE TABLE alerts (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  kind          TEXT    NOT NULL,
  severity      TEXT    NOT NULL DEFAULT 'warning',
  key           TEXT    NOT NULL,
  message       TEXT    NOT NULL DEFAULT '',
  experiment_id INTEGER NOT NULL DEFAULT 0,
  run_id        INTEGER NOT NULL DEFAULT 0,
  gpu           INTEGER NOT NULL DEFAULT -1,
  data          TEXT    NOT NULL DEFAULT '{}',
  first_ms      INTEGER NOT NULL DEFAULT 0,
  last_ms       INTEGER NOT NULL DEFAULT 0,
  count         INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX alerts_by_key ON alerts(key, id);
CREATE INDEX alerts_by_run ON alerts(run_id, id);
CREATE TABLE gpu_samples (
  gpu           INTEGER NOT NULL,
  t_ms          INTEGER NOT NULL,
  samples       INTEGER NOT NULL DEFAULT 1,
  utilization   REAL,
  memory_used   INTEGER,
  memory_total  INTEGER,
  temperature_c REAL,
  power_w       REAL,
  pcie_tx       REAL,
  pcie_rx       REAL,
  PRIMARY KEY (gpu, t_ms)
);
)sql";

// Version 6: a run's series is read in (attempt, step) order; with the attempt in the index the
// read walks the index instead of sorting every point (a 1,000,000-point curve: 0.43 s -> 0.15 s
// in SQLite alone). The old index's (run, name, step) lookups are served by the new one's prefix.
constexpr const char* kV6 = R"sql(
CREATE INDEX metrics_by_run_name_attempt_step ON metrics(run_id, name, attempt_id, step);
DROP INDEX metrics_by_run_name_step;
)sql";

// Version 7: why an attempt failed, in its own words: the last lines of its stderr (the
// exception), kept with the attempt so every view can show it after the logs are gone.
constexpr const char* kV7 = R"sql(
ALTER TABLE attempts ADD COLUMN error TEXT NOT NULL DEFAULT '';
)sql";

// Version 8: the rungs of searches' prune rules (search/pruner.h): each run's value at each rung
// it reached and the decision taken there; and the results an agent told a search for configs
// it ran itself (value NULL: the config failed).
constexpr const char* kV8 = R"sql(
CREATE TABLE rungs (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  bracket INTEGER NOT NULL,
  rung INTEGER NOT NULL,
  step INTEGER NOT NULL,
  value REAL,
  pruned INTEGER NOT NULL,
  PRIMARY KEY (run_id, bracket, rung)
);
CREATE INDEX rungs_by_experiment ON rungs(experiment_id);
CREATE TABLE observations (
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  params TEXT NOT NULL,
  value REAL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX observations_by_experiment ON observations(experiment_id);
)sql";

// Version 9: pipelines (docs/pipelines.md). A run's stage, the runs it needs, the run whose
// outputs it reuses when its fingerprint had succeeded before; the outputs runs stored, content
// addressed (artifacts/ in the store), and an index to find a fingerprint's earlier success.
constexpr const char* kV9 = R"sql(
ALTER TABLE runs ADD COLUMN stage       TEXT    NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN needs       TEXT    NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN cached_from INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_by_fingerprint ON runs(fingerprint, state);
CREATE TABLE artifacts (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  path   TEXT    NOT NULL,
  hash   TEXT    NOT NULL,
  bytes  INTEGER NOT NULL,
  mode   INTEGER NOT NULL,
  PRIMARY KEY (run_id, path)
);
)sql";

// Version 10: where an attempt ran when an executor other than this machine placed it (a Slurm
// job: its id, partition, node, state and pending reason; docs/slurm.md), as JSON.
constexpr const char* kV10 = R"sql(
ALTER TABLE attempts ADD COLUMN executor TEXT NOT NULL DEFAULT '{}';
)sql";

// Version 11: who submitted an experiment (docs/lab-server.md): the Unix user and their ids.
constexpr const char* kV11 = R"sql(
ALTER TABLE experiments ADD COLUMN user TEXT    NOT NULL DEFAULT '';
ALTER TABLE experiments ADD COLUMN uid  INTEGER NOT NULL DEFAULT -1;
ALTER TABLE experiments ADD COLUMN gid  INTEGER NOT NULL DEFAULT -1;
CREATE INDEX experiments_by_user ON experiments(user);
)sql";

// Version 12: what an attempt reported about itself beside metric lines (docs/metrics.md): how
// far each TensorBoard event file it writes has been read, its logged hyper-parameters and its
// last checkpoint, as JSON.
constexpr const char* kV12 = R"sql(
ALTER TABLE attempts ADD COLUMN reported TEXT NOT NULL DEFAULT '{}';
)sql";

// Version 13: what a rung counts (steps, or the resource metric such as epoch) and the step of
// the report it judged, so `drover show` can say which value each rung compared.
constexpr const char* kV13 = R"sql(
ALTER TABLE rungs ADD COLUMN unit TEXT NOT NULL DEFAULT 'step';
ALTER TABLE rungs ADD COLUMN report_step INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 14: a run retried on the workdir as it is now (drover retry --code current) runs a
// snapshot of its own from that attempt on.
constexpr const char* kV14 = R"sql(
ALTER TABLE runs ADD COLUMN snapshot_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN snapshot_from INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 15: how a search's trial got its parameters (random start, a model, an agent).
constexpr const char* kV15 = R"sql(
ALTER TABLE runs ADD COLUMN origin TEXT NOT NULL DEFAULT '';
)sql";

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kAll = {
      {1, "experiments, runs, attempts, metrics", kV1},
      {2, "events, snapshots, environments; metric and run-queue indexes", kV2},
      {3, "experiments remember their own git commit and diff", kV3},
      {4, "attempts record the shim's start time and exit file", kV4},
      {5, "alerts and GPU telemetry samples", kV5},
      {6, "metrics indexed by run, name, attempt and step", kV6},
      {7, "attempts keep the last lines of a failure's stderr", kV7},
      {8, "the rungs of prune rules and the observations told to searches", kV8},
      {9, "pipelines: stages, needs, cached runs and their artifacts", kV9},
      {10, "attempts record their executor's job (Slurm's id, partition, node)", kV10},
      {11, "experiments record their submitter", kV11},
      {12, "attempts record event file offsets, logged hyper-parameters, checkpoints", kV12},
      {13, "rungs record what they count and the report they judged", kV13},
      {14, "runs retried on the current code record its snapshot", kV14},
      {15, "a search's trials record how their parameters were chosen", kV15},
  };
  return kAll;
}

int LatestVersion() { return Migrations().back().version; }

Status SqliteStatus(sqlite3* db, int rc, std::string_view context) {
  std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  // sqlite3_errmsg describes the last call on `db`; when that is not `rc`'s call, use the
  // generic text for the code instead of a misleading one.
  if (db != nullptr && sqlite3_errcode(db) != rc && (sqlite3_extended_errcode(db) != rc)) {
    detail = sqlite3_errstr(rc);
  }
  Code code = Code::kInternal;
  std::string hint;
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      code = Code::kFailedPrecondition;
      detail = "file is not a database";
      hint = "point --store at a drover store folder or remove the file";
      break;
    case SQLITE_CORRUPT:
      code = Code::kFailedPrecondition;
      hint =
          "the store file is damaged; move it aside and restore a backup (`sqlite3 FILE "
          "'PRAGMA integrity_check'` shows what is wrong)";
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      code = Code::kUnavailable;
      hint =
          "another process is writing to the store; wait for it or stop it (one drover "
          "writes to a store at a time)";
      break;
    case SQLITE_CANTOPEN:
      code = Code::kIo;
      hint = "check that the folder exists and that you may write to it";
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      code = Code::kIo;
      hint = "check the permissions of the store folder and its files";
      break;
    case SQLITE_FULL:
      code = Code::kIo;
      hint = "free some disk space and try again";
      break;
    case SQLITE_IOERR:
      code = Code::kIo;
      hint = "check the disk and file system that hold the store";
      break;
    case SQLITE_CONSTRAINT:
      code = Code::kFailedPrecondition;
      break;
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
      code = Code::kInvalidArgument;
      break;
    default:
      break;
  }
  std::string message = fmt::format("{}: {}", context, detail);
  if (!hint.empty()) message += "; " + hint;
  return Status(code, std::move(message));
}

Status Exec(sqlite3* db, const char* sql, std::string_view context) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, context);
  return Status::Ok();
}

Result<int> ReadUserVersion(sqlite3* db, std::string_view context) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, context);
  rc = sqlite3_step(stmt);
  if (rc != SQLITE_ROW) {
    Status st = SqliteStatus(db, rc, context);
    sqlite3_finalize(stmt);
    return st;
  }
  int version = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  return version;
}

Status CheckNotNewer(int version, int latest, const std::string& path) {
  if (version <= latest) return Status::Ok();
  return FailedPrecondition(fmt::format(
      "store at {} has schema version {}, newer than this drover understands ({}); upgrade drover",
      path, version, latest));
}

Status ApplyMigrations(sqlite3* db, const std::string& path,
                       const std::vector<Migration>& migrations) {
  const std::string context = fmt::format("upgrading store at {}", path);
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  DROVER_ASSIGN_OR_RETURN(int current, ReadUserVersion(db, context));
  DROVER_RETURN_IF_ERROR(CheckNotNewer(current, latest, path));
  // Up to date: take no write lock (the store may be read-only, or busy with its writer).
  if (current == latest) return Status::Ok();

  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    DROVER_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", context));
    Status st = [&]() -> Status {
      // Read again under the write lock: another process may have migrated meanwhile.
      DROVER_ASSIGN_OR_RETURN(int now, ReadUserVersion(db, context));
      DROVER_RETURN_IF_ERROR(CheckNotNewer(now, latest, path));
      if (now >= m.version) return Status::Ok();
      const std::string step =
          fmt::format("{}: migration {} ({})", context, m.version, m.description);
      DROVER_RETURN_IF_ERROR(Exec(db, m.sql, step));
      const std::string bump = fmt::format("PRAGMA user_version = {}", m.version);
      return Exec(db, bump.c_str(), step);
    }();
    if (!st.ok()) {
      // Undo the partial step; the file stays at the last completed version.
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return st;
    }
    DROVER_RETURN_IF_ERROR(Exec(db, "COMMIT", context));
    current = m.version;
  }
  return Status::Ok();
}

}  // namespace drover::store
