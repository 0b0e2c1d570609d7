#include "store/store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>

#include <charconv>
#include <cmath>
#include <concepts>
#include <filesystem>
#include <memory>
#include <mutex>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "store/migrations.h"
#include "store/sqlite_stmt.h"
#include "store/store_files.h"

namespace drover {

namespace {

using store::CorruptColumn;
using store::DumpJson;
using store::ParseJson;
using store::ParseJsonArray;
using store::SqliteStatus;
using store::Stmt;

// Column lists, in the order the row readers below expect them.
#define DROVER_EXPERIMENT_COLS                                                            \
  "id, name, spec_yaml, spec, snapshot_hash, status, created_ms, git_commit, git_diff, user, " \
  "uid, gid"
#define DROVER_RUN_COLS                                                                         \
  "id, experiment_id, grid_index, params, current_params, fingerprint, state, priority, gpus, " \
  "gpu_memory, cpus, attempts, retries_used, not_before_ms, created_ms, started_ms, ended_ms, " \
  "reason, final_metrics, stage, needs, cached_from, snapshot_hash, snapshot_from, origin, "   \
  "(SELECT user FROM experiments WHERE experiments.id = runs.experiment_id), "               \
  "COALESCE((SELECT uid FROM experiments WHERE experiments.id = runs.experiment_id), -1)"
#define DROVER_ATTEMPT_COLS                                                                 \
  "id, run_id, number, ended, reason, exit_code, signal, pid, gpus, cuda_visible_devices, " \
  "params, argv, started_ms, ended_ms, stdout_path, stderr_path, stdout_offset, hostname, " \
  "drover_version, workdir, pid_start, exit_path, error, executor, reported"
#define DROVER_METRIC_COLS "run_id, attempt_id, step, name, value, t_ms"
#define DROVER_EVENT_COLS "id, t_ms, kind, experiment_id, run_id, data"
#define DROVER_SNAPSHOT_COLS "hash, path, git, git_commit, git_diff, bytes, files, created_ms"
#define DROVER_ENVIRONMENT_COLS "experiment_id, interpreter, packages, hostname, gpu_info"

Status ReadExperiment(const Stmt& st, Experiment* e) {
  e->id = st.Int(0);
  e->name = st.Text(1);
  e->spec_yaml = st.Text(2);
  DROVER_RETURN_IF_ERROR(ParseJson(st.Text(3), fmt::format("experiment {} spec", e->id), &e->spec));
  e->snapshot_hash = st.Text(4);
  const std::string status = st.Text(5);
  std::optional<ExperimentStatus> parsed = ParseExperimentStatus(status);
  if (!parsed) {
    return CorruptColumn(fmt::format("experiment {} status '{}'", e->id, status), "is unknown");
  }
  e->status = *parsed;
  e->created_ms = st.Int(6);
  e->git_commit = st.Text(7);
  e->git_diff = st.Text(8);
  e->user = st.Text(9);
  e->uid = st.Int(10);
  e->gid = st.Int(11);
  return Status::Ok();
}

Status ReadRun(const Stmt& st, Run* r) {
  r->id = st.Int(0);
  r->experiment_id = st.Int(1);
  r->index = static_cast<int>(st.Int(2));
  DROVER_RETURN_IF_ERROR(ParseJson(st.Text(3), fmt::format("run {} params", r->id), &r->params));
  DROVER_RETURN_IF_ERROR(
      ParseJson(st.Text(4), fmt::format("run {} current_params", r->id), &r->current_params));
  r->fingerprint = st.Text(5);
  std::string state = st.Text(6);
  std::optional<RunState> parsed = ParseRunState(state);
  if (!parsed) return CorruptColumn(fmt::format("run {} state '{}'", r->id, state), "is unknown");
  r->state = *parsed;
  r->priority = static_cast<int>(st.Int(7));
  r->resources.gpus = static_cast<int>(st.Int(8));
  r->resources.gpu_memory = st.Int(9);
  r->resources.cpus = static_cast<int>(st.Int(10));
  r->attempts = static_cast<int>(st.Int(11));
  r->retries_used = static_cast<int>(st.Int(12));
  r->not_before_ms = st.Int(13);
  r->created_ms = st.Int(14);
  r->started_ms = st.Int(15);
  r->ended_ms = st.Int(16);
  r->reason = st.Text(17);
  DROVER_RETURN_IF_ERROR(
      ParseJson(st.Text(18), fmt::format("run {} final_metrics", r->id), &r->final_metrics));
  r->stage = st.Text(19);
  DROVER_RETURN_IF_ERROR(ParseJsonArray(st.Text(20), fmt::format("run {} needs", r->id), &r->needs));
  r->cached_from = st.Int(21);
  r->snapshot_hash = st.Text(22);
  r->snapshot_from = static_cast<int>(st.Int(23));
  const std::string origin = st.Text(24);
  std::optional<TrialOrigin> how = ParseTrialOrigin(origin);
  if (!how) return CorruptColumn(fmt::format("run {} origin '{}'", r->id, origin), "is unknown");
  r->origin = *how;
  r->user = st.Text(25);
  r->user_uid = st.Int(26);
  return Status::Ok();
}

void ReportedFromJson(const Json& j, Attempt* a);

Status ReadAttempt(const Stmt& st, Attempt* a) {
  a->id = st.Int(0);
  a->run_id = st.Int(1);
  a->number = static_cast<int>(st.Int(2));
  a->ended = st.Int(3) != 0;
  a->reason = st.Text(4);
  if (!a->ended) {
    // A running attempt's reason column says why it is being stopped ("stopping:<reason>";
    // "preempting" from drovers before StopReason).
    std::string_view r = a->reason;
    if (r == "preempting") a->stopping = StopReason::kPreempt;
    if (r.starts_with("stopping:")) a->stopping = ParseStopReason(r.substr(9));
    a->reason.clear();
  }
  a->exit_code = static_cast<int>(st.Int(5));
  a->signal = static_cast<int>(st.Int(6));
  a->pid = st.Int(7);
  DROVER_RETURN_IF_ERROR(
      ParseJsonArray(st.Text(8), fmt::format("attempt {} gpus", a->id), &a->gpus));
  a->cuda_visible_devices = st.Text(9);
  DROVER_RETURN_IF_ERROR(
      ParseJson(st.Text(10), fmt::format("attempt {} params", a->id), &a->params));
  DROVER_RETURN_IF_ERROR(
      ParseJsonArray(st.Text(11), fmt::format("attempt {} argv", a->id), &a->argv));
  a->started_ms = st.Int(12);
  a->ended_ms = st.Int(13);
  a->stdout_path = st.Text(14);
  a->stderr_path = st.Text(15);
  a->stdout_offset = st.Int(16);
  a->hostname = st.Text(17);
  a->drover_version = st.Text(18);
  a->workdir = st.Text(19);
  a->pid_start = st.Int(20);
  a->exit_path = st.Text(21);
  a->error = st.Text(22);
  DROVER_RETURN_IF_ERROR(
      ParseJson(st.Text(23), fmt::format("attempt {} executor", a->id), &a->executor));
  Json reported;
  DROVER_RETURN_IF_ERROR(
      ParseJson(st.Text(24), fmt::format("attempt {} reported", a->id), &reported));
  ReportedFromJson(reported, a);
  return Status::Ok();
}

void ReadMetric(const Stmt& st, MetricPoint* p) {
  p->run_id = st.Int(0);
  p->attempt_id = st.Int(1);
  p->step = st.Int(2);
  p->name = st.Text(3);
  p->value = st.Real(4);
  p->t_ms = st.Int(5);
}

Status ReadEvent(const Stmt& st, Event* e) {
  e->id = st.Int(0);
  e->t_ms = st.Int(1);
  e->kind = st.Text(2);
  e->experiment_id = st.Int(3);
  e->run_id = st.Int(4);
  return ParseJson(st.Text(5), fmt::format("event {} data", e->id), &e->data);
}

void ReadSnapshot(const Stmt& st, Snapshot* s) {
  s->hash = st.Text(0);
  s->path = st.Text(1);
  s->git = st.Int(2) != 0;
  s->git_commit = st.Text(3);
  s->git_diff = st.Text(4);
  s->bytes = st.Int(5);
  s->files = st.Int(6);
  s->created_ms = st.Int(7);
}

void ReadEnvironment(const Stmt& st, Environment* e) {
  e->experiment_id = st.Int(0);
  e->interpreter = st.Text(1);
  e->packages = st.Text(2);
  e->hostname = st.Text(3);
  e->gpu_info = st.Text(4);
}

// Binds the 24 stored fields of a run (everything but id), as ?1..?24.
void BindRunFields(Stmt& st, const Run& r) {
  st.Bind(r.experiment_id, r.index, DumpJson(r.params), DumpJson(r.current_params), r.fingerprint,
          ToString(r.state), r.priority, r.resources.gpus, r.resources.gpu_memory, r.resources.cpus,
          r.attempts, r.retries_used, r.not_before_ms, r.created_ms, r.started_ms, r.ended_ms,
          r.reason, DumpJson(r.final_metrics), r.stage, DumpJson(Json(r.needs)), r.cached_from,
          r.snapshot_hash, r.snapshot_from, std::string(ToString(r.origin)));
}

// The attempt's `reported` column (anything of another shape in it is left out, not an error: it
// is what a run said about itself, and the attempt must still load).
std::string ReportedToJson(const Attempt& a) {
  Json j = Json::object();
  if (!a.event_files.empty()) {
    Json files = Json::object();
    for (const auto& [path, f] : a.event_files) {
      files[path] = {{"offset", f.offset}, {"corrupt", f.corrupt}};
    }
    j["event_files"] = std::move(files);
  }
  if (!a.hparams.empty()) j["hparams"] = a.hparams;
  if (a.checkpoint) j["checkpoint"] = {{"step", a.checkpoint->step}, {"t_ms", a.checkpoint->t_ms}};
  return DumpJson(j);
}

// An integer field of `j`, 0 when absent or of another type (never a throw).
int64_t Int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  if (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX) return 0;
  return it->get<int64_t>();
}

void ReportedFromJson(const Json& j, Attempt* a) {
  if (!j.is_object()) return;
  if (auto it = j.find("event_files"); it != j.end() && it->is_object()) {
    for (auto f = it->begin(); f != it->end(); ++f) {
      if (!f->is_object() || a->event_files.size() >= kMaxEventFiles) continue;
      a->event_files[f.key()] = EventFileProgress{std::max<int64_t>(0, Int(*f, "offset")),
                                                  Int(*f, "corrupt")};
    }
  }
  if (auto it = j.find("hparams"); it != j.end() && it->is_object()) a->hparams = *it;
  if (auto it = j.find("checkpoint"); it != j.end() && it->is_object()) {
    a->checkpoint = CheckpointMark{Int(*it, "step"), Int(*it, "t_ms")};
  }
}

// Binds the 24 stored fields of an attempt (everything but id), as ?1..?24.
void BindAttemptFields(Stmt& st, const Attempt& a) {
  std::string reason =
      a.ended || !a.stopping ? a.reason : "stopping:" + std::string(ToString(*a.stopping));
  st.Bind(a.run_id, a.number, a.ended, reason, a.exit_code, a.signal, a.pid, DumpJson(Json(a.gpus)),
          a.cuda_visible_devices, DumpJson(a.params), DumpJson(Json(a.argv)), a.started_ms,
          a.ended_ms, a.stdout_path, a.stderr_path, a.stdout_offset, a.hostname, a.drover_version,
          a.workdir, a.pid_start, a.exit_path, a.error,
          a.executor.empty() ? std::string("{}") : DumpJson(a.executor), ReportedToJson(a));
}

}  // namespace

namespace {

// Whether the store's folder (or its database file) cannot be written: a read-only mount, or
// permissions. access() answers for the file system too (EROFS), where root's rights do not help.
// How many database connections this process holds (Store::Open), and the lock around reading
// a database's files raw before opening one.
int& OpenConnections() {
  static int n = 0;
  return n;
}
std::mutex& OpenConnectionsMutex() {
  static std::mutex mu;
  return mu;
}

bool IsReadOnlyStore(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;  // a new store: made, or refused, below
  return access(path.c_str(), W_OK) != 0 ||
         access(folder.empty() ? "." : folder.c_str(), W_OK) != 0;
}

// A file path as the path of a file: URI (RFC 3986: what would end or escape it, encoded).
std::string UriPath(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      out += fmt::format("%{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Store::Store(sqlite3* db) : impl_(std::make_unique<Impl>()) { impl_->db = db; }
Store::~Store() = default;

int Store::LatestSchemaVersion() { return store::LatestVersion(); }

Result<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                           const StoreOpenOptions& options) {
  const char* vfs = options.vfs.empty() ? nullptr : options.vfs.c_str();
  if (path.empty()) return InvalidArgument("no store path given; point --store at a folder");
  const bool memory = path == ":memory:";
  const std::string context = fmt::format("cannot open store at {}", path);
  if (!memory) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) {
      return Status(Code::kIo, fmt::format("{}: cannot create folder {}: {}; check the "
                                           "permissions of the folders above it",
                                           context, parent.string(), ec.message()));
    }
  }

  if (!memory) {
    // A database that is missing or empty beside the run folders of a store that had one was
    // deleted or truncated: a new one would number its runs from 1 again and write over their
    // logs and working copies.
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    std::error_code ec;
    const bool empty_db = !std::filesystem::exists(path, ec) ||
                          (std::filesystem::is_regular_file(path, ec) &&
                           std::filesystem::file_size(path, ec) == 0);
    auto has_entries = [&](const char* sub) {
      std::error_code e;
      std::filesystem::directory_iterator it(folder / sub, e);
      return !e && it != std::filesystem::directory_iterator();
    };
    if (empty_db && (has_entries("runs") || has_entries("logs"))) {
      return FailedPrecondition(fmt::format(
          "{}: the database is {} but the folder holds runs (runs/, logs/): it was deleted or "
          "truncated, and a new one would reuse their numbers and write over their files; "
          "restore drover.db (and drover.db-wal) from a backup, or move the folder away to start "
          "a new store",
          context, std::filesystem::exists(path, ec) ? "empty" : "missing"));
    }
  }
  // A database that lost its newest commits beside files of runs it would forget: refused
  // before SQLite opens it (an open rebuilds the log's index and so erases the evidence), and the
  // log folders listed before the database is read (store_files.h).
  // The index is read raw only while this process holds no connection to a database: closing
  // any descriptor of a file drops every POSIX lock the process holds on it, SQLite's included,
  // so a raw read beside a live connection (a daemon's HTTP thread opening its own) would let
  // another process take the index for abandoned and rebuild it under the connection's mapping
  // (SIGBUS). A process's first open checks; the engine's open is its daemon's first.
  store::FolderIds folder_ids;
  const std::string store_dir = std::filesystem::path(path).parent_path().string();
  std::shared_ptr<void> counted;  // this open, counted while it lives (released on failure)
  if (!memory) {
    std::unique_lock<std::mutex> lock(OpenConnectionsMutex());
    if (OpenConnections() == 0) {
      DROVER_RETURN_IF_ERROR(store::CheckWalPresent(path, context));
    }
    ++OpenConnections();
    counted = std::shared_ptr<void>(nullptr, [](void*) {
      std::lock_guard<std::mutex> l(OpenConnectionsMutex());
      --OpenConnections();
    });
    lock.unlock();
    folder_ids = store::ListFolderIds(store_dir.empty() ? "." : store_dir);
  }
  // A store on a read-only file system (an archive, a mount from another machine) can still be
  // read: ls, show, compare and report work; anything that writes says why it cannot.
  const bool read_only = !memory && IsReadOnlyStore(path);
  // NOMUTEX: a Store (and its statement cache) belongs to one thread; other threads open their
  // own Store on the same file, and WAL lets them read while this one writes.
  sqlite3* db = nullptr;
  int rc = SQLITE_OK;
  if (read_only) {
    // mode=ro reads a WAL database whose -shm file exists; without one (the last writer closed
    // cleanly, so there is no WAL either) only immutable=1 can, which takes no locks.
    for (const char* mode : {"mode=ro", "immutable=1"}) {
      if (db) sqlite3_close_v2(db);
      db = nullptr;
      rc = sqlite3_open_v2(("file:" + UriPath(path) + "?" + mode).c_str(), &db,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, vfs);
      if (rc == SQLITE_OK) rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", nullptr,
                                             nullptr, nullptr);
      if (rc == SQLITE_OK) break;
    }
  } else {
    rc = sqlite3_open_v2(path.c_str(), &db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
  }
  std::unique_ptr<Store> s(new Store(db));  // closes the handle on every error below
  s->impl_->path = path;
  s->impl_->on_close = [counted] {};  // the count lives as long as the connection
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, context);
  if (read_only) {
    DROVER_ASSIGN_OR_RETURN(int version, store::ReadUserVersion(db, context));
    DROVER_RETURN_IF_ERROR(store::CheckNotNewer(version, LatestSchemaVersion(), path));
    DROVER_RETURN_IF_ERROR(store::CheckIdsCoverFolders(db, folder_ids, store_dir, context));
    if (version != LatestSchemaVersion()) {
      return FailedPrecondition(fmt::format(
          "{}: the store is read-only and was made by an older drover (schema {}, this one reads "
          "{}); open it once where it can be written, so drover can upgrade it",
          context, version, LatestSchemaVersion()));
    }
    DROVER_RETURN_IF_ERROR(store::Exec(db, "PRAGMA foreign_keys = ON", context));
    return s;
  }

  DROVER_RETURN_IF_ERROR(store::Exec(db, "PRAGMA busy_timeout = 5000", context));
  // The first read of the file: a file that is not a database fails here.
  DROVER_ASSIGN_OR_RETURN(int version, store::ReadUserVersion(db, context));
  // Refuse a newer store before anything below writes to it (switching to WAL rewrites the
  // header), so an older drover leaves it byte for byte as it was.
  DROVER_RETURN_IF_ERROR(store::CheckNotNewer(version, LatestSchemaVersion(), path));
  if (!memory) {
    DROVER_RETURN_IF_ERROR(store::CheckIdsCoverFolders(db, folder_ids, store_dir, context));
  }
  if (version == 0) {
    DROVER_ASSIGN_OR_RETURN(
        Stmt st, s->impl_->Use("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'",
                               "cannot open store"));
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    const bool has_tables = row && st.Int(0) > 0;
    st.Reset();
    // Tables but no version: a foreign database, or a drover creating this store right now
    // (its first migration committed between the two reads): read the version again.
    Result<int> again = has_tables ? store::ReadUserVersion(db, context) : Result<int>(0);
    if (has_tables && (!again.ok() || *again == 0)) {
      return FailedPrecondition(fmt::format(
          "{}: it is a SQLite database but not a drover store; point --store at a drover store "
          "folder or an empty one",
          context));
    }
  }
  if (!memory) DROVER_RETURN_IF_ERROR(store::Exec(db, "PRAGMA journal_mode = WAL", context));
  DROVER_RETURN_IF_ERROR(store::Exec(db, "PRAGMA synchronous = NORMAL", context));
  DROVER_RETURN_IF_ERROR(store::Exec(db, "PRAGMA foreign_keys = ON", context));
  // A transaction's pages stay in memory until its commit: a full disk then fails the commit
  // (which the store can replay, see Begin) rather than one write halfway through.
  DROVER_RETURN_IF_ERROR(store::Exec(db, "PRAGMA cache_spill = OFF", context));
  DROVER_RETURN_IF_ERROR(store::Migrate(db, path));
  return s;
}

Result<int> Store::SchemaVersion() {
  return store::ReadUserVersion(impl_->db, "reading the store's schema version");
}

namespace {

// Errors after which a commit can succeed later, once there is room or the lock is free.
bool Retryable(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_BUSY;
}

// Runs one journaled write again with its values.
int Replay(const store::JournalEntry& e) {
  sqlite3_reset(e.stmt);
  sqlite3_clear_bindings(e.stmt);
  int i = 0;
  for (const store::Bound& v : e.values) {
    int rc = SQLITE_OK;
    switch (v.kind) {
      case store::Bound::Kind::kInt: rc = sqlite3_bind_int64(e.stmt, ++i, v.i); break;
      case store::Bound::Kind::kReal: rc = sqlite3_bind_double(e.stmt, ++i, v.d); break;
      case store::Bound::Kind::kNull: rc = sqlite3_bind_null(e.stmt, ++i); break;
      case store::Bound::Kind::kText:
        rc = sqlite3_bind_text64(e.stmt, ++i, v.text.data(), v.text.size(), SQLITE_TRANSIENT,
                                 SQLITE_UTF8);
        break;
    }
    if (rc != SQLITE_OK) return rc;
  }
  int rc;
  while ((rc = sqlite3_step(e.stmt)) == SQLITE_ROW) {
  }
  sqlite3_reset(e.stmt);
  sqlite3_clear_bindings(e.stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

}  // namespace

Status Store::Begin() {
  Impl& m = *impl_;
  DROVER_ASSIGN_OR_RETURN(Stmt st, m.Use("BEGIN IMMEDIATE", "beginning a transaction"));
  DROVER_RETURN_IF_ERROR(st.Run());
  m.journaling = true;
  if (!m.pending) {
    m.journal.clear();
    return Status::Ok();
  }
  // The writes of the commit that failed, again, before anything new.
  for (const store::JournalEntry& e : m.journal) {
    if (int rc = Replay(e); rc != SQLITE_OK) {
      Status failed = SqliteStatus(m.db, rc, "replaying the writes of a failed commit");
      m.journaling = false;
      if (sqlite3_get_autocommit(m.db) == 0) sqlite3_exec(m.db, "ROLLBACK", nullptr, nullptr, nullptr);
      if (!Retryable(rc)) {
        // The same writes on the same base cannot fail otherwise unless someone else wrote.
        m.pending = false;
        m.journal.clear();
      }
      return failed;
    }
  }
  return Status::Ok();
}

Status Store::Commit() {
  Impl& m = *impl_;
  m.journaling = false;
  DROVER_ASSIGN_OR_RETURN(Stmt st, m.Use("COMMIT", "committing a transaction"));
  int rc = sqlite3_step(st.raw());
  if (rc == SQLITE_DONE) {
    m.journal.clear();
    m.pending = false;
    return Status::Ok();
  }
  Status failed = SqliteStatus(m.db, rc, "committing a transaction");
  // SQLite rolls a transaction back itself after a failed commit for want of room (a busy
  // commit stays open: roll it back too, so the replay starts from the same base).
  if (sqlite3_get_autocommit(m.db) == 0) sqlite3_exec(m.db, "ROLLBACK", nullptr, nullptr, nullptr);
  if (!Retryable(rc)) {
    m.journal.clear();
    m.pending = false;
    return failed;
  }
  m.pending = true;
  return Status(Code::kUnavailable,
                failed.message() + "; nothing is lost: the changes are kept and committed when "
                                   "there is room");
}

Status Store::Rollback() {
  Impl& m = *impl_;
  m.journaling = false;
  m.journal.clear();
  m.pending = false;
  // Nothing open (never begun, or SQLite already rolled back after an error): nothing to undo.
  if (sqlite3_get_autocommit(m.db) != 0) return Status::Ok();
  DROVER_ASSIGN_OR_RETURN(Stmt st, m.Use("ROLLBACK", "rolling back a transaction"));
  return st.Run();
}

bool Store::CommitPending() const { return impl_->pending; }

// ---- experiments ----

Status Store::InsertExperiment(Experiment& e) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT INTO experiments (name, spec_yaml, spec, snapshot_hash, status, "
                          "created_ms, git_commit, git_diff, user, uid, gid) VALUES "
                          "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          "inserting an experiment"));
  st.Bind(e.name, e.spec_yaml, DumpJson(e.spec), e.snapshot_hash, std::string(ToString(e.status)), e.created_ms,
          e.git_commit, e.git_diff, e.user, e.uid, e.gid);
  DROVER_RETURN_IF_ERROR(st.Run());
  e.id = sqlite3_last_insert_rowid(impl_->db);
  return Status::Ok();
}

Status Store::UpdateExperimentStatus(int64_t id, ExperimentStatus status) {
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use("UPDATE experiments SET status = ? WHERE id = ?",
                                              "updating an experiment's status"));
  st.Bind(std::string(ToString(status)), id);
  DROVER_RETURN_IF_ERROR(st.Run());
  return impl_->ExpectChanged("experiment", id);
}

Status Store::DeleteExperiment(int64_t id) {
  // Children first; each statement walks an index by run or experiment except the event log's,
  // which has none by experiment.
  static constexpr const char* kDeletes[] = {
      "DELETE FROM metrics WHERE run_id IN (SELECT id FROM runs WHERE experiment_id = ?)",
      "DELETE FROM attempts WHERE run_id IN (SELECT id FROM runs WHERE experiment_id = ?)",
      "DELETE FROM artifacts WHERE run_id IN (SELECT id FROM runs WHERE experiment_id = ?)",
      "DELETE FROM alerts WHERE experiment_id = ?",
      "DELETE FROM rungs WHERE experiment_id = ?",
      "DELETE FROM observations WHERE experiment_id = ?",
      "DELETE FROM events WHERE experiment_id = ?",
      "DELETE FROM environments WHERE experiment_id = ?",
      "DELETE FROM runs WHERE experiment_id = ?",
      "DELETE FROM experiments WHERE id = ?",
  };
  for (const char* sql : kDeletes) {
    DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use(sql, "deleting an experiment"));
    st.Bind(id);
    DROVER_RETURN_IF_ERROR(st.Run());
  }
  return impl_->ExpectChanged("experiment", id);
}

Result<std::vector<std::string>> Store::UnreferencedSnapshots() {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT hash FROM snapshots WHERE hash NOT IN (SELECT snapshot_hash "
                          "FROM experiments) AND hash NOT IN (SELECT snapshot_hash FROM runs) "
                          "ORDER BY hash",
                          "listing unreferenced snapshots"));
  std::vector<std::string> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.Text(0));
  }
  return out;
}

Status Store::DeleteSnapshot(const std::string& hash) {
  DROVER_ASSIGN_OR_RETURN(Stmt st,
                          impl_->Use("DELETE FROM snapshots WHERE hash = ?", "deleting a snapshot"));
  st.Bind(hash);
  return st.Run();
}

Result<std::optional<Experiment>> Store::GetExperiment(int64_t id) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_EXPERIMENT_COLS " FROM experiments WHERE id = ?",
                          "reading an experiment"));
  st.Bind(id);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Experiment>();
  Experiment e;
  DROVER_RETURN_IF_ERROR(ReadExperiment(st, &e));
  return std::optional<Experiment>(std::move(e));
}

Result<std::optional<Experiment>> Store::FindExperiment(const std::string& id_or_name) {
  int64_t id = 0;
  const char* end = id_or_name.data() + id_or_name.size();
  auto [ptr, ec] = std::from_chars(id_or_name.data(), end, id);
  if (!id_or_name.empty() && ec == std::errc() && ptr == end) {
    DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> by_id, GetExperiment(id));
    if (by_id) return by_id;
    // No such id: an experiment may still be named "12".
  }
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_EXPERIMENT_COLS " FROM experiments WHERE name = ? "
                          "ORDER BY id DESC LIMIT 1",
                          "finding an experiment by name"));
  st.Bind(id_or_name);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Experiment>();
  Experiment e;
  DROVER_RETURN_IF_ERROR(ReadExperiment(st, &e));
  return std::optional<Experiment>(std::move(e));
}

Result<std::vector<Experiment>> Store::ListExperiments(int limit, int64_t offset) {
  DROVER_ASSIGN_OR_RETURN(Stmt st,
                          impl_->Use("SELECT " DROVER_EXPERIMENT_COLS
                                     " FROM experiments ORDER BY id DESC LIMIT ? OFFSET ?",
                                     "listing experiments"));
  st.Bind(limit > 0 ? limit : -1, std::max<int64_t>(0, offset));
  std::vector<Experiment> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    DROVER_RETURN_IF_ERROR(ReadExperiment(st, &out.emplace_back()));
  }
  return out;
}

// ---- runs ----

Status Store::InsertRun(Run& r) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT INTO runs (experiment_id, grid_index, params, current_params, "
                          "fingerprint, state, priority, gpus, gpu_memory, cpus, attempts, "
                          "retries_used, not_before_ms, created_ms, started_ms, ended_ms, reason, "
                          "final_metrics, stage, needs, cached_from, snapshot_hash, snapshot_from, "
                          "origin) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          "inserting a run"));
  BindRunFields(st, r);
  DROVER_RETURN_IF_ERROR(st.Run());
  r.id = sqlite3_last_insert_rowid(impl_->db);
  return Status::Ok();
}

Status Store::UpdateRun(const Run& r) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st,
      impl_->Use("UPDATE runs SET experiment_id = ?, grid_index = ?, params = ?, "
                 "current_params = ?, fingerprint = ?, state = ?, priority = ?, gpus = ?, "
                 "gpu_memory = ?, cpus = ?, attempts = ?, retries_used = ?, not_before_ms = ?, "
                 "created_ms = ?, started_ms = ?, ended_ms = ?, reason = ?, final_metrics = ?, "
                 "stage = ?, needs = ?, cached_from = ?, snapshot_hash = ?, snapshot_from = ?, "
                 "origin = ? WHERE id = ?",
                 "updating a run"));
  BindRunFields(st, r);
  st.Bind(r.id);
  DROVER_RETURN_IF_ERROR(st.Run());
  return impl_->ExpectChanged("run", r.id);
}

Result<std::optional<Run>> Store::GetRun(int64_t id) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_RUN_COLS " FROM runs WHERE id = ?", "reading a run"));
  st.Bind(id);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Run>();
  Run r;
  DROVER_RETURN_IF_ERROR(ReadRun(st, &r));
  return std::optional<Run>(std::move(r));
}

Result<RunCounts> Store::CountRuns(int64_t experiment_id) {
  DROVER_ASSIGN_OR_RETURN(auto counts, CountRunsOf({experiment_id}));
  auto it = counts.find(experiment_id);
  return it == counts.end() ? RunCounts{} : std::move(it->second);
}

Result<std::map<int64_t, RunCounts>> Store::CountRunsOf(const std::vector<int64_t>& experiment_ids) {
  std::map<int64_t, RunCounts> out;
  if (experiment_ids.empty()) return out;
  // The ids as one JSON array: one cached statement for any number, each looked up in the
  // (experiment_id, state) index and counted there without reading a run.
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT experiment_id, state, count(*) FROM runs WHERE experiment_id IN "
                          "(SELECT value FROM json_each(?)) GROUP BY experiment_id, state",
                          "counting runs"));
  st.Bind(fmt::format("[{}]", fmt::join(experiment_ids, ",")));
  while (true) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    auto state = ParseRunState(st.Text(1));
    if (!state) continue;  // not written by this drover
    out[st.Int(0)].by_state[*state] = st.Int(2);
  }
  return out;
}

Result<std::vector<Run>> Store::ListRuns(const RunFilter& filter) {
  // One SQL text per filter shape (at most eight), each cached like the fixed statements; the
  // conditions are spelled out rather than "(? = 0 OR ...)" so SQLite can use the index.
  std::string sql = "SELECT " DROVER_RUN_COLS " FROM runs";
  const char* glue = " WHERE ";
  if (filter.experiment_id != 0) {
    sql += glue;
    sql += "experiment_id = ?";
    glue = " AND ";
  }
  if (filter.state) {
    sql += glue;
    sql += "state = ?";
    glue = " AND ";
  }
  if (!filter.user.empty()) {
    sql += glue;
    sql += "experiment_id IN (SELECT id FROM experiments WHERE user = ?)";
  }
  sql += filter.newest_first ? " ORDER BY id DESC" : " ORDER BY id ASC";
  sql += " LIMIT ? OFFSET ?";
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use(sql, "listing runs"));
  if (filter.experiment_id != 0) st.Bind(filter.experiment_id);
  if (filter.state) st.Bind(ToString(*filter.state));
  if (!filter.user.empty()) st.Bind(filter.user);
  st.Bind(filter.limit > 0 ? filter.limit : -1, filter.offset > 0 ? filter.offset : 0);
  std::vector<Run> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    DROVER_RETURN_IF_ERROR(ReadRun(st, &out.emplace_back()));
  }
  return out;
}

// ---- attempts ----

Status Store::InsertAttempt(Attempt& a) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st,
      impl_->Use(
          "INSERT INTO attempts (run_id, number, ended, reason, exit_code, signal, pid, "
          "gpus, cuda_visible_devices, params, argv, started_ms, ended_ms, stdout_path, "
          "stderr_path, stdout_offset, hostname, drover_version, workdir, pid_start, exit_path, "
          "error, executor, reported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
          "?, ?, ?, ?, ?, ?)",
          "inserting an attempt"));
  BindAttemptFields(st, a);
  DROVER_RETURN_IF_ERROR(st.Run());
  a.id = sqlite3_last_insert_rowid(impl_->db);
  return Status::Ok();
}

Status Store::UpdateAttempt(const Attempt& a) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("UPDATE attempts SET run_id = ?, number = ?, ended = ?, reason = ?, "
                          "exit_code = ?, signal = ?, pid = ?, gpus = ?, cuda_visible_devices = ?, "
                          "params = ?, argv = ?, started_ms = ?, ended_ms = ?, stdout_path = ?, "
                          "stderr_path = ?, stdout_offset = ?, hostname = ?, drover_version = ?, "
                          "workdir = ?, pid_start = ?, exit_path = ?, error = ?, executor = ?, "
                          "reported = ? "
                          "WHERE id = ?",
                          "updating an attempt"));
  BindAttemptFields(st, a);
  st.Bind(a.id);
  DROVER_RETURN_IF_ERROR(st.Run());
  return impl_->ExpectChanged("attempt", a.id);
}

Result<std::vector<Attempt>> Store::ListAttempts(int64_t run_id) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_ATTEMPT_COLS " FROM attempts WHERE run_id = ? "
                          "ORDER BY number, id",
                          "listing attempts"));
  st.Bind(run_id);
  std::vector<Attempt> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    DROVER_RETURN_IF_ERROR(ReadAttempt(st, &out.emplace_back()));
  }
  return out;
}

Result<std::map<int64_t, std::vector<Attempt>>> Store::ListExperimentAttempts(
    int64_t experiment_id, int64_t first_run, int64_t last_run) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_ATTEMPT_COLS " FROM attempts WHERE run_id IN "
                          "(SELECT id FROM runs WHERE experiment_id = ? AND id BETWEEN ? AND ?) "
                          "ORDER BY run_id, number, id",
                          "listing an experiment's attempts"));
  st.Bind(experiment_id, first_run, last_run);
  std::map<int64_t, std::vector<Attempt>> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    Attempt a;
    DROVER_RETURN_IF_ERROR(ReadAttempt(st, &a));
    out[a.run_id].push_back(std::move(a));
  }
  return out;
}

// ---- metrics ----

Status Store::InsertMetrics(const std::vector<MetricPoint>& points) {
  if (points.empty()) return Status::Ok();
  // Outside a caller's transaction, the batch is still all-or-nothing (and one commit, not one
  // per point).
  const bool own_transaction = sqlite3_get_autocommit(impl_->db) != 0;
  if (own_transaction) DROVER_RETURN_IF_ERROR(Begin());
  Status status = [&]() -> Status {
    DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use("INSERT INTO metrics (" DROVER_METRIC_COLS
                                                ") VALUES (?, ?, ?, ?, ?, ?)",
                                                "inserting metric points"));
    for (const MetricPoint& p : points) {
      st.Reset();
      st.Bind(p.run_id, p.attempt_id, p.step, p.name, p.value, p.t_ms);
      DROVER_RETURN_IF_ERROR(st.Run());
    }
    return Status::Ok();
  }();
  if (own_transaction) {
    if (!status.ok()) {
      (void)Rollback();
      return status;
    }
    return Commit();
  }
  return status;
}

Result<std::vector<MetricPoint>> Store::GetMetrics(int64_t run_id, const std::string& name) {
  // rowid breaks ties in insertion order (a step logged twice keeps both points, in order).
  auto stmt = name.empty() ? impl_->Use("SELECT " DROVER_METRIC_COLS
                                        " FROM metrics WHERE run_id = ? "
                                        "ORDER BY attempt_id, step, rowid",
                                        "reading metrics")
                           : impl_->Use("SELECT " DROVER_METRIC_COLS
                                        " FROM metrics WHERE run_id = ? "
                                        "AND name = ? ORDER BY attempt_id, step, rowid",
                                        "reading metrics");
  if (!stmt.ok()) return stmt.status();
  Stmt& st = *stmt;
  st.Bind(run_id);
  if (!name.empty()) st.Bind(name);
  std::vector<MetricPoint> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ReadMetric(st, &out.emplace_back());
  }
  return out;
}

namespace {
// The WHERE clause of a SeriesQuery; its parameters are bound by BindSeries in the same order.
std::string SeriesWhere(const Store::SeriesQuery& q) {
  std::string where = " FROM metrics WHERE run_id = ? AND name = ?";
  if (q.attempt_id != 0) where += " AND attempt_id = ?";
  if (q.after_step) where += " AND step > ?";
  return where;
}
void BindSeries(Stmt& st, const Store::SeriesQuery& q) {
  st.Bind(q.run_id, q.name);
  if (q.attempt_id != 0) st.Bind(q.attempt_id);
  if (q.after_step) st.Bind(*q.after_step);
}
}  // namespace

Result<int64_t> Store::CountMetrics(const SeriesQuery& q) {
  DROVER_ASSIGN_OR_RETURN(Stmt st,
                          impl_->Use("SELECT count(*)" + SeriesWhere(q), "counting metrics"));
  BindSeries(st, q);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Int(0) : 0;
}

Status Store::ScanMetrics(const SeriesQuery& q, const std::function<void(const MetricPoint&)>& fn) {
  // (run_id, name, attempt_id, step) is an index (schema v6): no sort, one pass.
  DROVER_ASSIGN_OR_RETURN(Stmt st,
                          impl_->Use("SELECT attempt_id, step, value, t_ms" + SeriesWhere(q) +
                                         " ORDER BY attempt_id, step, rowid",
                                     "reading metrics"));
  BindSeries(st, q);
  MetricPoint p;
  p.run_id = q.run_id;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    p.attempt_id = st.Int(0);
    p.step = st.Int(1);
    p.value = st.Real(2);
    p.t_ms = st.Int(3);
    fn(p);
  }
  return Status::Ok();
}

Result<std::vector<std::string>> Store::MetricNames(int64_t run_id) {
  // One index seek per name (a DISTINCT would walk every point of the run).
  std::vector<std::string> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use("SELECT name FROM metrics WHERE run_id = ? AND "
                                                "name > ? ORDER BY name LIMIT 1",
                                                "reading metric names"));
    st.Bind(run_id, out.empty() ? std::string() : out.back());
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.Text(0));
    st.Reset();
  }
  return out;
}

Result<std::map<int64_t, CurveSummary>> Store::MetricSummaries(int64_t experiment_id,
                                                               const std::string& name,
                                                               int last_k, int64_t run_id) {
  // The latest attempt of each run (whose values the run shows: its final metrics start afresh
  // with each attempt), its points of `name`: one pass for the count and extremes, and the last
  // values read backwards along the (run, name, attempt, step) index (as fast as the extremes
  // alone: 1,000 runs x 1,000 points in about 0.5 s of CPU). SQLite stores NaN as NULL;
  // infinities are kept, and left out of the lowest and highest with the NaNs.
  DROVER_ASSIGN_OR_RETURN(
      Stmt st,
      impl_->Use(
          // A run cached from another (a pipeline's, docs/pipelines.md) shows that one's curve.
          "WITH src AS (SELECT r.id AS run_id, "
          "  CASE WHEN r.cached_from > 0 THEN r.cached_from ELSE r.id END AS src FROM runs r "
          "  WHERE r.experiment_id = ?1 AND (?4 = 0 OR r.id = ?4)), "
          "latest AS (SELECT s.run_id, s.src, "
          "  (SELECT MAX(a.id) FROM attempts a WHERE a.run_id = s.src) AS attempt_id FROM src s) "
          "SELECT l.run_id, COUNT(*), "
          "  MIN(CASE WHEN m.value BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308 "
          "      THEN m.value END), "
          "  MAX(CASE WHEN m.value BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308 "
          "      THEN m.value END), "
          // The last value and the last K: read backwards along the index, no sort.
          "  (SELECT x.value FROM metrics x WHERE x.run_id = l.src AND x.name = ?2 "
          "     AND x.attempt_id = l.attempt_id ORDER BY x.step DESC, x.rowid DESC LIMIT 1), "
          "  (SELECT AVG(v) FROM (SELECT x.value AS v FROM metrics x WHERE x.run_id = l.src "
          "     AND x.name = ?2 AND x.attempt_id = l.attempt_id "
          "     ORDER BY x.step DESC, x.rowid DESC LIMIT ?3)), "
          "  (SELECT SUM(v IS NULL) FROM (SELECT x.value AS v FROM metrics x "
          "     WHERE x.run_id = l.src AND x.name = ?2 AND x.attempt_id = l.attempt_id "
          "     ORDER BY x.step DESC, x.rowid DESC LIMIT ?3)) "
          "FROM latest l JOIN metrics m ON m.run_id = l.src AND m.name = ?2 "
          "  AND m.attempt_id = l.attempt_id GROUP BY l.run_id",
          "summing up metric curves"));
  st.Bind(experiment_id, name, std::max(1, last_k), run_id);
  std::map<int64_t, CurveSummary> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    CurveSummary c;  // Real() reads SQL NULL (a NaN, or no value at all) as NaN
    c.points = st.Int(1);
    c.lowest = st.Real(2);
    c.highest = st.Real(3);
    c.last = st.Real(4);
    c.mean_last = st.Int(6) > 0 ? std::numeric_limits<double>::quiet_NaN() : st.Real(5);
    out[st.Int(0)] = c;
  }
  return out;
}

Result<std::map<int64_t, std::pair<double, double>>> Store::MetricRanges(int64_t experiment_id,
                                                                         const std::string& name) {
  // SQLite stores NaN as NULL, which MIN and MAX skip; +-Inf are left out explicitly.
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT m.run_id, MIN(m.value), MAX(m.value) FROM runs r "
                          "JOIN metrics m ON m.run_id = r.id AND m.name = ? "
                          "WHERE r.experiment_id = ? AND m.value BETWEEN -1.7976931348623157e308 "
                          "AND 1.7976931348623157e308 GROUP BY m.run_id",
                          "reading metric ranges"));
  st.Bind(name, experiment_id);
  std::map<int64_t, std::pair<double, double>> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out[st.Int(0)] = {st.Real(1), st.Real(2)};
  }
  return out;
}

// ---- events ----

Status Store::InsertRung(int64_t experiment_id, const RungRecord& r) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT OR REPLACE INTO rungs (run_id, experiment_id, bracket, rung, "
                          "step, value, pruned, unit, report_step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          "recording a rung"));
  st.Bind(r.run_id, experiment_id, r.bracket, r.rung, r.step, r.value, r.pruned ? 1 : 0, r.unit,
          r.report_step);
  return st.Run();
}

Result<std::vector<RungRecord>> Store::ListRungs(int64_t experiment_id, int64_t run_id) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT run_id, bracket, rung, step, value, pruned, unit, report_step FROM rungs WHERE "
                          "experiment_id = ?1 AND (?2 = 0 OR run_id = ?2) ORDER BY rowid",
                          "listing rungs"));
  st.Bind(experiment_id, run_id);
  std::vector<RungRecord> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    RungRecord& r = out.emplace_back();
    r.run_id = st.Int(0);
    r.bracket = static_cast<int>(st.Int(1));
    r.rung = static_cast<int>(st.Int(2));
    r.step = st.Int(3);
    r.value = st.Real(4);
    r.pruned = st.Int(5) != 0;
    r.unit = st.Text(6);
    r.report_step = st.Int(7);
  }
  return out;
}

Status Store::InsertObservation(Observation& o) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT INTO observations (experiment_id, params, value, created_ms) "
                          "VALUES (?, ?, ?, ?)",
                          "recording an observation"));
  st.Bind(o.experiment_id, DumpJson(o.params),
          o.value ? *o.value : std::numeric_limits<double>::quiet_NaN(), o.created_ms);
  DROVER_RETURN_IF_ERROR(st.Run());
  o.id = sqlite3_last_insert_rowid(impl_->db);
  return Status::Ok();
}

Result<std::vector<Observation>> Store::ListObservations(int64_t experiment_id) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT id, params, value, created_ms FROM observations WHERE "
                          "experiment_id = ? ORDER BY id",
                          "listing observations"));
  st.Bind(experiment_id);
  std::vector<Observation> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    Observation& o = out.emplace_back();
    o.id = st.Int(0);
    o.experiment_id = experiment_id;
    o.params = Json::parse(st.Text(1), nullptr, false);
    const double v = st.Real(2);
    if (!std::isnan(v)) o.value = v;
    o.created_ms = st.Int(3);
  }
  return out;
}

Status Store::InsertEvent(Event& e) {
  DROVER_ASSIGN_OR_RETURN(Stmt st,
                          impl_->Use("INSERT INTO events (t_ms, kind, experiment_id, run_id, data) "
                                     "VALUES (?, ?, ?, ?, ?)",
                                     "inserting an event"));
  st.Bind(e.t_ms, e.kind, e.experiment_id, e.run_id, DumpJson(e.data));
  DROVER_RETURN_IF_ERROR(st.Run());
  e.id = sqlite3_last_insert_rowid(impl_->db);
  return Status::Ok();
}

Result<std::vector<Event>> Store::ListEvents(int64_t after_id, int limit) {
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use("SELECT " DROVER_EVENT_COLS
                                              " FROM events WHERE id > ? ORDER BY id LIMIT ?",
                                              "listing events"));
  st.Bind(after_id, limit > 0 ? limit : -1);
  std::vector<Event> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    DROVER_RETURN_IF_ERROR(ReadEvent(st, &out.emplace_back()));
  }
  return out;
}

// ---- snapshots ----

Status Store::PutSnapshot(const Snapshot& s) {
  // The hash names the content, so a second put of the same hash has nothing new: keep the first.
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT INTO snapshots (" DROVER_SNAPSHOT_COLS
                          ") VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING",
                          "storing a snapshot"));
  st.Bind(s.hash, s.path, s.git, s.git_commit, s.git_diff, s.bytes, s.files, s.created_ms);
  return st.Run();
}

Result<std::optional<Snapshot>> Store::GetSnapshot(const std::string& hash) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_SNAPSHOT_COLS " FROM snapshots WHERE hash = ?",
                          "reading a snapshot"));
  st.Bind(hash);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Snapshot>();
  Snapshot s;
  ReadSnapshot(st, &s);
  return std::optional<Snapshot>(std::move(s));
}

// ---- environments ----

Status Store::PutEnvironment(const Environment& env) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT INTO environments (" DROVER_ENVIRONMENT_COLS
                          ") VALUES (?, ?, ?, ?, ?) ON CONFLICT (experiment_id, interpreter) "
                          "DO UPDATE SET packages = excluded.packages, "
                          "hostname = excluded.hostname, gpu_info = excluded.gpu_info",
                          "storing an environment"));
  st.Bind(env.experiment_id, env.interpreter, env.packages, env.hostname, env.gpu_info);
  return st.Run();
}

Result<std::vector<Environment>> Store::ListEnvironments(int64_t experiment_id) {
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use("SELECT " DROVER_ENVIRONMENT_COLS
                                              " FROM environments WHERE experiment_id = ? "
                                              "ORDER BY interpreter",
                                              "listing environments"));
  st.Bind(experiment_id);
  std::vector<Environment> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ReadEnvironment(st, &out.emplace_back());
  }
  return out;
}

Result<bool> Store::IntegrityOk() {
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use("PRAGMA integrity_check", "checking the store"));
  std::vector<std::string> lines;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    lines.push_back(st.Text(0));
  }
  return lines.size() == 1 && lines[0] == "ok";
}

}  // namespace drover
