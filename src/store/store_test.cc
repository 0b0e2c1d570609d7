#include "store/store.h"
#include "store/store_files.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <tuple>
#include <sqlite3.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "store/engine_lock.h"
#include "store/fault_vfs.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

// ---- helpers ----

std::unique_ptr<Store> OpenOrDie(const std::string& path) {
  auto s = Store::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return nullptr;
  return std::move(s).value();
}

// A fresh folder under $TMPDIR, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "drover-store-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Runs SQL on a raw connection to `path`, outside the Store.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

std::string RawQueryText(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

RunFilter Filter(int64_t experiment_id, std::optional<RunState> state = std::nullopt, int limit = 0,
                 int offset = 0, bool newest_first = false) {
  RunFilter f;
  f.experiment_id = experiment_id;
  f.state = state;
  f.limit = limit;
  f.offset = offset;
  f.newest_first = newest_first;
  return f;
}

Experiment MakeExperiment(const std::string& name, Millis created = 1'700'000'000'000) {
  Experiment e;
  e.name = name;
  e.spec_yaml = "name: " + name + "\ncommand: [python3, train.py, \"{lr}\"]\n# 注释\n";
  e.spec = Json{{"name", name}, {"params", {{"lr", {0.1, 0.01}}}}, {"resources", {{"gpus", 1}}}};
  e.snapshot_hash = "sha256:0123abcd";
  e.status = ExperimentStatus::kActive;
  e.created_ms = created;
  e.git_commit = "0123456789abcdef0123456789abcdef01234567";
  e.git_diff = "diff --git a/train.py b/train.py\n+lr = 0.1\n";
  return e;
}

drover::Run MakeRun(int64_t experiment_id, int index = 0) {
  drover::Run r;
  r.experiment_id = experiment_id;
  r.index = index;
  r.params = Json{{"lr", 0.1}, {"batch_size", 64}, {"model", "mlp"}, {"nested", {{"a", {1, 2}}}}};
  r.current_params = Json{{"lr", 0.1}, {"batch_size", 32}, {"model", "mlp"}};
  r.fingerprint = "fp-" + std::to_string(index);
  r.state = RunState::kRetrying;
  r.priority = -3;
  r.resources = Resources{2, 12LL << 30, 4};
  r.attempts = 2;
  r.retries_used = 1;
  r.not_before_ms = 1'700'000'005'000;
  r.created_ms = 1'700'000'000'001;
  r.started_ms = 1'700'000'001'000;
  r.ended_ms = 1'700'000'009'000;
  r.reason = "cuda_oom";
  r.final_metrics = Json{{"loss", 0.25}, {"acc", 0.9}};
  return r;
}

Attempt MakeAttempt(int64_t run_id, int number) {
  Attempt a;
  a.run_id = run_id;
  a.number = number;
  a.ended = true;
  a.reason = "exit_code";
  a.exit_code = 3;
  a.signal = 9;
  a.pid = 123456789012LL;
  a.gpus = {1, 3};
  a.cuda_visible_devices = "1,3";
  a.params = Json{{"lr", 0.1}, {"batch_size", 32}};
  a.argv = {"python3", "train.py", "--name", "a b \"quoted\" 'x'", "ünï"};
  a.started_ms = 1'700'000'001'000;
  a.ended_ms = 1'700'000'002'000;
  a.stdout_path = "/s/runs/1/1/stdout";
  a.stderr_path = "/s/runs/1/1/stderr";
  a.stdout_offset = 1LL << 40;
  a.hostname = "gpu-box";
  a.drover_version = "0.1.0";
  a.workdir = "/s/work/1";
  a.pid_start = 987654321;
  a.exit_path = "/s/runs/1/attempt-1.exit";
  return a;
}

void ExpectSame(const Experiment& a, const Experiment& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.spec_yaml, b.spec_yaml);
  EXPECT_EQ(a.spec, b.spec);
  EXPECT_EQ(a.snapshot_hash, b.snapshot_hash);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.created_ms, b.created_ms);
  EXPECT_EQ(a.git_commit, b.git_commit);
  EXPECT_EQ(a.git_diff, b.git_diff);
}

void ExpectSame(const drover::Run& a, const drover::Run& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.experiment_id, b.experiment_id);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.current_params, b.current_params);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.resources.gpus, b.resources.gpus);
  EXPECT_EQ(a.resources.gpu_memory, b.resources.gpu_memory);
  EXPECT_EQ(a.resources.cpus, b.resources.cpus);
  EXPECT_EQ(a.attempts, b.attempts);
  EXPECT_EQ(a.retries_used, b.retries_used);
  EXPECT_EQ(a.not_before_ms, b.not_before_ms);
  EXPECT_EQ(a.created_ms, b.created_ms);
  EXPECT_EQ(a.started_ms, b.started_ms);
  EXPECT_EQ(a.ended_ms, b.ended_ms);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.final_metrics, b.final_metrics);
  EXPECT_EQ(a.snapshot_hash, b.snapshot_hash);
  EXPECT_EQ(a.snapshot_from, b.snapshot_from);
  EXPECT_EQ(a.origin, b.origin);
}

void ExpectSame(const Attempt& a, const Attempt& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.number, b.number);
  EXPECT_EQ(a.ended, b.ended);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.signal, b.signal);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.cuda_visible_devices, b.cuda_visible_devices);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.argv, b.argv);
  EXPECT_EQ(a.started_ms, b.started_ms);
  EXPECT_EQ(a.ended_ms, b.ended_ms);
  EXPECT_EQ(a.stdout_path, b.stdout_path);
  EXPECT_EQ(a.stderr_path, b.stderr_path);
  EXPECT_EQ(a.stdout_offset, b.stdout_offset);
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.drover_version, b.drover_version);
  EXPECT_EQ(a.workdir, b.workdir);
  EXPECT_EQ(a.pid_start, b.pid_start);
  EXPECT_EQ(a.exit_path, b.exit_path);
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrDie(":memory:");
    ASSERT_NE(store_, nullptr);
  }
  int64_t AddExperiment(const std::string& name = "exp") {
    Experiment e = MakeExperiment(name);
    EXPECT_TRUE(store_->InsertExperiment(e).ok());
    return e.id;
  }
  int64_t AddRun(int64_t exp, RunState state = RunState::kQueued, int index = 0) {
    drover::Run r = MakeRun(exp, index);
    r.state = state;
    EXPECT_TRUE(store_->InsertRun(r).ok());
    return r.id;
  }
  std::unique_ptr<Store> store_;
};

// ---- counting ----

TEST_F(StoreTest, RunsAreCountedByStateForManyExperimentsInOneQuery) {
  const int64_t a = AddExperiment("a"), b = AddExperiment("b"), empty = AddExperiment("empty");
  for (RunState s : {RunState::kSucceeded, RunState::kSucceeded, RunState::kPruned,
                     RunState::kRunning, RunState::kFailed}) {
    AddRun(a, s);
  }
  AddRun(b, RunState::kQueued);
  auto counts = store_->CountRunsOf({a, b, empty, 999});
  ASSERT_TRUE(counts.ok()) << counts.status().message();
  ASSERT_EQ(counts->size(), 2u);  // no runs, no row
  const RunCounts& ca = counts->at(a);
  EXPECT_EQ(ca.Of(RunState::kSucceeded), 2);
  EXPECT_EQ(ca.Of(RunState::kPruned), 1);
  EXPECT_EQ(ca.Of(RunState::kCancelled), 0);
  EXPECT_EQ(ca.Total(), 5);
  EXPECT_EQ(ca.Unfinished(), 1);
  EXPECT_EQ(counts->at(b).Unfinished(), 1);
  auto one = store_->CountRuns(empty);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->Total(), 0);
  auto none = store_->CountRunsOf({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// ---- opening ----

TEST_F(StoreTest, FreshStoreIsAtLatestVersion) {
  EXPECT_EQ(Store::LatestSchemaVersion(), 15);
  auto v = store_->SchemaVersion();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 15);
  auto ok = store_->IntegrityOk();
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(*ok);
}

TEST(StoreOpen, FileStoreCreatesFoldersUsesWalAndPersists) {
  TempDir dir;
  const std::string path = dir / "a/b/c/drover.db";
  int64_t run_id = 0;
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    Experiment e = MakeExperiment("persist");
    ASSERT_TRUE(store->InsertExperiment(e).ok());
    drover::Run r = MakeRun(e.id);
    ASSERT_TRUE(store->InsertRun(r).ok());
    run_id = r.id;
    // WAL is a property of the file: a second connection sees it.
    EXPECT_EQ(RawQueryText(path, "PRAGMA journal_mode"), "wal");
    auto ok = store->IntegrityOk();
    ASSERT_TRUE(ok.ok());
    EXPECT_TRUE(*ok);
  }
  EXPECT_TRUE(fs::exists(path));
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), Store::LatestSchemaVersion());
  auto r = store->GetRun(run_id);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->fingerprint, "fp-0");
}

// A commit that fails for want of room (the fault VFS fails the WAL's writes as a full disk
// would) loses nothing: the store keeps the transaction's writes, says Unavailable, and the next
// Begin() replays them, with the same row ids, so the engine's view and the file agree.
TEST(StoreFaults, AFullDiskAtCommitKeepsTheWritesAndTheNextTransactionLandsThem) {
  TempDir dir;
  const std::string path = dir / "drover.db";
  auto opened = Store::Open(path, {.vfs = store::FaultVfsName()});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Store> store = std::move(opened).value();
  Experiment e = MakeExperiment("full");
  ASSERT_TRUE(store->InsertExperiment(e).ok());

  for (int code : {SQLITE_FULL, SQLITE_IOERR_WRITE}) {
    SCOPED_TRACE(code);
    ASSERT_TRUE(store->Begin().ok());
    drover::Run r = MakeRun(e.id, code);
    ASSERT_TRUE(store->InsertRun(r).ok());
    std::vector<MetricPoint> points;
    for (int i = 0; i < 300; ++i) points.push_back({r.id, 0, i, "loss", 1.0 / (i + 1), i});
    ASSERT_TRUE(store->InsertMetrics(points).ok());
    const int64_t before = store::InjectedWriteFaults();
    store::ArmWriteFaults({.code = code});
    Status commit = store->Commit();
    EXPECT_EQ(commit.code(), Code::kUnavailable) << commit.ToString();
    EXPECT_NE(commit.message().find("nothing is lost"), std::string::npos) << commit.message();
    EXPECT_TRUE(store->CommitPending());
    EXPECT_GT(store::InjectedWriteFaults(), before);
    // Not in the file: another connection sees no such run.
    EXPECT_EQ(RawQueryText(path, fmt::format("SELECT count(*) FROM runs WHERE id = {}", r.id)), "0");
    // Still full: the replay's commit fails too, and keeps it all again.
    ASSERT_TRUE(store->Begin().ok());
    EXPECT_EQ(store->Commit().code(), Code::kUnavailable);
    store::DisarmWriteFaults();
    // Room again: Begin replays, new writes join, one commit lands both.
    ASSERT_TRUE(store->Begin().ok());
    drover::Run later = MakeRun(e.id, code + 1);
    ASSERT_TRUE(store->InsertRun(later).ok());
    EXPECT_EQ(later.id, r.id + 1);  // the replayed insert took r's id again
    ASSERT_TRUE(store->Commit().ok());
    EXPECT_FALSE(store->CommitPending());
    auto got = store->GetRun(r.id);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->fingerprint, r.fingerprint);
    auto metrics = store->GetMetrics(r.id);
    ASSERT_TRUE(metrics.ok());
    EXPECT_EQ(metrics->size(), 300u);  // each point once
  }
  // A rollback drops what a failed commit kept.
  ASSERT_TRUE(store->Begin().ok());
  drover::Run dropped = MakeRun(e.id, 99);
  ASSERT_TRUE(store->InsertRun(dropped).ok());
  store::ArmWriteFaults({.code = SQLITE_FULL});
  EXPECT_EQ(store->Commit().code(), Code::kUnavailable);
  store::DisarmWriteFaults();
  ASSERT_TRUE(store->Rollback().ok());
  EXPECT_FALSE(store->CommitPending());
  ASSERT_TRUE(store->Begin().ok());
  ASSERT_TRUE(store->Commit().ok());
  auto none = store->GetRun(dropped.id);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto ok = store->IntegrityOk();
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(*ok);
}

TEST(StoreOpen, TwoConnectionsOnOneFile) {
  TempDir dir;
  const std::string path = dir / "drover.db";
  auto writer = OpenOrDie(path);
  auto reader = OpenOrDie(path);
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  int64_t exp = 0;
  {
    Experiment e = MakeExperiment("shared");
    ASSERT_TRUE(writer->InsertExperiment(e).ok());
    exp = e.id;
  }
  // A reader is not blocked by an open write transaction (WAL) and sees the last commit.
  ASSERT_TRUE(writer->Begin().ok());
  drover::Run r = MakeRun(exp);
  ASSERT_TRUE(writer->InsertRun(r).ok());
  auto before = reader->ListRuns({});
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_TRUE(before->empty());
  ASSERT_TRUE(writer->Commit().ok());
  auto after = reader->ListRuns({});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 1u);
}

TEST(StoreOpen, GarbageFileGivesClearErrorAndIsLeftAlone) {
  TempDir dir;
  const std::string path = dir / "drover.db";
  const std::string garbage(4096, 'x');
  WriteFile(path, "this is not a database\n" + garbage);
  auto s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.status().message(),
            "cannot open store at " + path +
                ": file is not a database; point --store at a drover store folder or remove the "
                "file");
  EXPECT_EQ(ReadFile(path), "this is not a database\n" + garbage);
}

TEST(StoreOpen, NewerSchemaIsRefusedAndLeftByteIdentical) {
  TempDir dir;
  const std::string path = dir / "drover.db";
  const int newer = Store::LatestSchemaVersion() + 1;
  RawExec(path, "CREATE TABLE future (x); INSERT INTO future VALUES (1); PRAGMA user_version = " +
                    std::to_string(newer) + ";");
  const std::string before = ReadFile(path);
  ASSERT_FALSE(before.empty());
  auto s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.status().message(), "store at " + path + " has schema version " +
                                      std::to_string(newer) + ", newer than this drover understands (" +
                                      std::to_string(Store::LatestSchemaVersion()) +
                                      "); upgrade drover");
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST(StoreOpen, ForeignSqliteDatabaseIsRefused) {
  TempDir dir;
  const std::string path = dir / "other.db";
  RawExec(path, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT);");
  const std::string before = ReadFile(path);
  auto s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("not a drover store"), std::string::npos)
      << s.status().message();
  EXPECT_EQ(ReadFile(path), before);
}

TEST(StoreOpen, EmptyFileBecomesAStore) {
  TempDir dir;
  const std::string path = dir / "drover.db";
  WriteFile(path, "");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), Store::LatestSchemaVersion());
}

TEST(StoreOpen, AMissingOrEmptyDatabaseBesideRunFoldersIsRefused) {
  TempDir dir;
  const fs::path root = fs::path(dir / "store");
  const fs::path db = root / "drover.db";
  fs::create_directories(root / "logs" / "1");
  std::ofstream(root / "logs" / "1" / "1-1.out") << "the old run's log\n";
  // Truncated to 0 bytes, or deleted: refused, and the old run's files left as they were.
  std::ofstream(db).close();
  auto truncated = Store::Open(db.string());
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(truncated.status().message().find("is empty but the folder holds runs"),
            std::string::npos)
      << truncated.status().message();
  EXPECT_EQ(fs::file_size(db), 0u);
  fs::remove(db);
  auto missing = Store::Open(db.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("is missing"), std::string::npos);
  EXPECT_FALSE(fs::exists(db));
  // Without run folders an empty folder becomes a store.
  fs::remove_all(root / "logs");
  EXPECT_TRUE(Store::Open(db.string()).ok());
}

// The database's experiment ids are checked against the log folders beside it: a database that
// lost its newest commits (an old backup put back, its write-ahead log gone) would number new
// experiments and runs again from what it remembers and write over the files of those it forgot.
TEST(StoreOpen, ADatabaseOlderThanItsLogFoldersIsRefused) {
  TempDir dir;
  const fs::path root = fs::path(dir / "store");
  const std::string db = (root / "drover.db").string();
  int64_t run_id = 0, experiment_id = 0;
  {
    auto store = OpenOrDie(db);
    ASSERT_NE(store, nullptr);
    Experiment e = MakeExperiment("kept");
    ASSERT_TRUE(store->InsertExperiment(e).ok());
    drover::Run r = MakeRun(e.id);
    ASSERT_TRUE(store->InsertRun(r).ok());
    run_id = r.id;
    experiment_id = e.id;
  }
  fs::create_directories(root / "runs" / std::to_string(run_id));
  fs::create_directories(root / "logs" / std::to_string(experiment_id));
  // Folders of what it holds (and names that are not ids) are fine.
  fs::create_directories(root / "logs" / ".tmp-9");
  EXPECT_NE(OpenOrDie(db), nullptr);

  // A run folder beyond the database's runs is no loss: a search trial is started in the pass
  // of the loop that proposed it, before its row is committed, so a crash leaves one.
  fs::create_directories(root / "runs" / "7");
  EXPECT_NE(OpenOrDie(db), nullptr);
  fs::remove(root / "runs" / "7");

  fs::create_directories(root / "logs" / "3");
  auto newer_experiment = Store::Open(db);
  ASSERT_FALSE(newer_experiment.ok());
  EXPECT_EQ(newer_experiment.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(newer_experiment.status().message().find("logs of experiment 3"), std::string::npos)
      << newer_experiment.status().message();
  EXPECT_NE(newer_experiment.status().message().find("experiments end at 1"), std::string::npos);
  EXPECT_NE(newer_experiment.status().message().find("from a backup"), std::string::npos);
  fs::remove(root / "logs" / "3");

  // Ids are never given out twice (AUTOINCREMENT), so a removed experiment's leftover folders
  // are not taken for a loss.
  {
    auto store = OpenOrDie(db);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Begin().ok());
    ASSERT_TRUE(store->DeleteExperiment(experiment_id).ok());
    ASSERT_TRUE(store->Commit().ok());
  }
  EXPECT_NE(OpenOrDie(db), nullptr);
}

// Issue 39, item 9: drover.db-wal deleted under a running daemon, then the daemon killed. The
// next open found a schema-only database and numbered new runs from 1 over the old runs' files.
// Now the log's index (drover.db-shm) gives the loss away before SQLite can rebuild it, and once
// that is gone too, the run folders do.
TEST(StoreOpen, ALostWriteAheadLogIsRefusedAndSaysWhatToDo) {
  TempDir dir;
  const fs::path root = fs::path(dir / "store");
  const std::string db = (root / "drover.db").string();
  fs::create_directories(root);
  // A daemon's process: holds the engine lock and the store, commits runs, has its log deleted
  // under it, reports, and then waits to be killed (no close: a close would checkpoint).
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t daemon = fork();
  ASSERT_GE(daemon, 0);
  if (daemon == 0) {
    close(ready[0]);
    auto lock = EngineLock::Acquire(root.string());
    auto opened = Store::Open(db);
    if (!lock.ok() || !opened.ok()) _exit(1);
    Store& store = **opened;
    Experiment e = MakeExperiment("lost");
    if (!store.InsertExperiment(e).ok()) _exit(1);
    for (int i = 0; i < 6; ++i) {
      drover::Run r = MakeRun(e.id, i);
      if (!store.InsertRun(r).ok()) _exit(1);
      fs::create_directories(root / "runs" / std::to_string(r.id));
      fs::create_directories(root / "logs" / std::to_string(e.id));
    }
    fs::remove(db + "-wal");
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);

  // While the daemon lives: what happened, and how to save its copy of the log.
  auto live = Store::Open(db);
  ASSERT_FALSE(live.ok());
  EXPECT_EQ(live.status().code(), Code::kFailedPrecondition);
  const std::string& said = live.status().message();
  EXPECT_NE(said.find("write-ahead log drover.db-wal is missing"), std::string::npos) << said;
  EXPECT_NE(said.find(fmt::format("the daemon (pid {}) still has the deleted log open", daemon)),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("stop it cleanly"), std::string::npos) << said;
  EXPECT_NE(said.find(fmt::format("cp /proc/{}/fd/", daemon)), std::string::npos) << said;

  kill(daemon, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(daemon, &status, 0), daemon);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the daemon's process failed before its log was deleted";

  // Killed: the log's commits are gone, the index still names them.
  auto after_kill = Store::Open(db);
  ASSERT_FALSE(after_kill.ok());
  EXPECT_NE(after_kill.status().message().find("drover.db-wal is missing"), std::string::npos)
      << after_kill.status().message();
  EXPECT_NE(after_kill.status().message().find("restore drover.db and drover.db-wal together"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(db + "-wal"));

  // The index gone as well: the log folders still say the database forgot experiment 1.
  fs::remove(db + "-shm");
  auto no_index = Store::Open(db);
  ASSERT_FALSE(no_index.ok());
  EXPECT_NE(no_index.status().message().find("the folder holds the logs of experiment 1"),
            std::string::npos)
      << no_index.status().message();
}

// A log cut short (truncated rather than deleted) is the same loss.
TEST(StoreOpen, AWriteAheadLogShorterThanItsIndexIsRefused) {
  TempDir dir;
  const std::string db = dir / "store/drover.db";
  auto store = OpenOrDie(db);
  ASSERT_NE(store, nullptr);
  Experiment e = MakeExperiment("cut");
  ASSERT_TRUE(store->InsertExperiment(e).ok());
  // The writer still open (so the log is not checkpointed away), its log cut to its header.
  ASSERT_EQ(truncate((db + "-wal").c_str(), 32), 0);
  // What another process's open checks first (this one holds a connection, so its own opens
  // leave the files alone: a raw read beside a live connection would drop its locks).
  Status cut = store::CheckWalPresent(db, "cannot open store at " + db);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.message().find("bytes where"), std::string::npos) << cut.message();
  // And this process's second open does not read them: SQLite itself finds the log damaged.
  EXPECT_FALSE(Store::Open(db).ok());
}

TEST(StoreOpen, UnwritableFolderIsAnIoError) {
  TempDir dir;
  const std::string file = dir / "plain-file";
  WriteFile(file, "x");
  // A parent "folder" that is a file cannot be created.
  auto s = Store::Open(file + "/sub/drover.db");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kIo);
  EXPECT_NE(s.status().message().find("cannot open store at"), std::string::npos);
}

// ---- migration from an older file ----

TEST(StoreMigration, OpensVersion1FileAndUpgrades) {
  TempDir dir;
  const std::string path = dir / "old/drover.db";
  fs::create_directories(fs::path(path).parent_path());
  const std::string sql = ReadFile(std::string(DROVER_SOURCE_DIR) + "/tests/data/store_v1.sql");
  ASSERT_FALSE(sql.empty()) << "tests/data/store_v1.sql not found under " << DROVER_SOURCE_DIR;
  RawExec(path, sql);
  ASSERT_EQ(RawQueryText(path, "PRAGMA user_version"), "1");

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->SchemaVersion(), Store::LatestSchemaVersion());
  EXPECT_EQ(RawQueryText(path, "PRAGMA user_version"), std::to_string(Store::LatestSchemaVersion()));
  EXPECT_TRUE(*store->IntegrityOk());

  // Old rows read back through the API.
  auto e1 = store->GetExperiment(1);
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  ASSERT_TRUE(e1->has_value());
  EXPECT_EQ((*e1)->name, "mnist-grid");
  EXPECT_EQ((*e1)->status, ExperimentStatus::kDone);
  EXPECT_EQ((*e1)->snapshot_hash, "sha256:aaaa");
  EXPECT_EQ((*e1)->created_ms, 1700000000000);
  EXPECT_EQ((*e1)->spec["params"]["lr"], Json({0.1, 0.01}));
  EXPECT_NE((*e1)->spec_yaml.find("lr: [0.1, 0.01]"), std::string::npos);

  auto newest = store->FindExperiment("mnist-grid");
  ASSERT_TRUE(newest.ok());
  ASSERT_TRUE(newest->has_value());
  EXPECT_EQ((*newest)->id, 2);
  auto zh = store->FindExperiment("比较 mlp");
  ASSERT_TRUE(zh.ok());
  ASSERT_TRUE(zh->has_value());
  EXPECT_EQ((*zh)->id, 3);

  auto runs = store->ListRuns(Filter(1));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 2u);
  const drover::Run& r2 = (*runs)[1];
  EXPECT_EQ(r2.id, 2);
  EXPECT_EQ(r2.index, 1);
  EXPECT_EQ(r2.state, RunState::kFailed);
  EXPECT_EQ(r2.params, Json({{"lr", 0.01}, {"batch_size", 64}}));
  EXPECT_EQ(r2.current_params["batch_size"], 32);
  EXPECT_EQ(r2.resources.gpus, 1);
  EXPECT_EQ(r2.resources.gpu_memory, 8589934592);
  EXPECT_EQ(r2.resources.cpus, 2);
  EXPECT_EQ(r2.attempts, 2);
  EXPECT_EQ(r2.retries_used, 1);
  EXPECT_EQ(r2.not_before_ms, 1700000070000);
  EXPECT_EQ(r2.reason, "cuda_oom");
  EXPECT_EQ((*runs)[0].final_metrics, Json({{"loss", 0.25}, {"acc", 0.93}}));

  auto queued = store->ListRuns(Filter(0, RunState::kQueued));
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 1u);
  EXPECT_EQ((*queued)[0].id, 3);

  auto attempts = store->ListAttempts(2);
  ASSERT_TRUE(attempts.ok()) << attempts.status().ToString();
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].gpus, std::vector<int>({1, 2}));
  EXPECT_EQ((*attempts)[0].cuda_visible_devices, "1,2");
  EXPECT_EQ((*attempts)[0].stdout_offset, 99);
  EXPECT_EQ((*attempts)[1].number, 2);
  EXPECT_EQ((*attempts)[1].signal, 9);
  EXPECT_EQ((*attempts)[1].exit_code, -1);
  EXPECT_EQ((*attempts)[1].argv, std::vector<std::string>({"python3", "train.py", "--lr", "0.01"}));

  auto loss1 = store->GetMetrics(1, "loss");
  ASSERT_TRUE(loss1.ok());
  ASSERT_EQ(loss1->size(), 2u);
  EXPECT_DOUBLE_EQ((*loss1)[1].value, 0.25);
  auto all1 = store->GetMetrics(1);
  ASSERT_TRUE(all1.ok());
  EXPECT_EQ(all1->size(), 4u);
  auto loss2 = store->GetMetrics(2, "loss");
  ASSERT_TRUE(loss2.ok());
  ASSERT_EQ(loss2->size(), 2u);
  EXPECT_TRUE(std::isnan((*loss2)[0].value));  // stored as NULL
  EXPECT_EQ((*loss2)[1].attempt_id, 3);

  // The tables of version 2 work, and new ids continue after the old ones.
  Event ev;
  ev.kind = "run_state";
  ev.run_id = 3;
  ev.experiment_id = 2;
  ev.data = Json{{"state", "running"}};
  ASSERT_TRUE(store->InsertEvent(ev).ok());
  EXPECT_EQ(ev.id, 1);
  Snapshot snap;
  snap.hash = "sha256:bbbb";
  snap.path = "/store/snapshots/bbbb";
  ASSERT_TRUE(store->PutSnapshot(snap).ok());
  EXPECT_TRUE(store->GetSnapshot("sha256:bbbb")->has_value());
  ASSERT_TRUE(store->PutEnvironment({2, "/usr/bin/python3", "torch==1.13.1", "gpu-box", ""}).ok());
  EXPECT_EQ(store->ListEnvironments(2)->size(), 1u);
  drover::Run r = MakeRun(2);
  ASSERT_TRUE(store->InsertRun(r).ok());
  EXPECT_EQ(r.id, 4);
  EXPECT_EQ(RawQueryText(path,
                         "SELECT count(*) FROM sqlite_schema WHERE name = "
                         "'metrics_by_run_name_attempt_step'"),
            "1");
}

// ---- experiments ----

TEST_F(StoreTest, ExperimentRoundTrip) {
  Experiment e = MakeExperiment("round-trip");
  ASSERT_TRUE(store_->InsertExperiment(e).ok());
  EXPECT_GT(e.id, 0);
  auto got = store_->GetExperiment(e.id);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  ExpectSame(**got, e);

  ASSERT_TRUE(store_->UpdateExperimentStatus(e.id, ExperimentStatus::kDone).ok());
  EXPECT_EQ((*store_->GetExperiment(e.id))->status, ExperimentStatus::kDone);
  Status missing = store_->UpdateExperimentStatus(999, ExperimentStatus::kDone);
  EXPECT_EQ(missing.code(), Code::kNotFound);
  auto none = store_->GetExperiment(999);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(StoreTest, FindExperimentByIdOrNewestName) {
  Experiment a = MakeExperiment("sweep", 1);
  Experiment b = MakeExperiment("sweep", 2);
  Experiment c = MakeExperiment("other", 3);
  Experiment numeric = MakeExperiment("77", 4);
  for (Experiment* e : {&a, &b, &c, &numeric}) ASSERT_TRUE(store_->InsertExperiment(*e).ok());

  auto by_id = store_->FindExperiment(std::to_string(a.id));
  ASSERT_TRUE(by_id.ok());
  ASSERT_TRUE(by_id->has_value());
  EXPECT_EQ((*by_id)->id, a.id);

  auto by_name = store_->FindExperiment("sweep");
  ASSERT_TRUE(by_name.ok());
  ASSERT_TRUE(by_name->has_value());
  EXPECT_EQ((*by_name)->id, b.id);  // the newest of that name

  // A number that is no id falls back to a name.
  auto named_number = store_->FindExperiment("77");
  ASSERT_TRUE(named_number.ok());
  ASSERT_TRUE(named_number->has_value());
  EXPECT_EQ((*named_number)->id, numeric.id);

  for (const char* missing : {"nope", "", "12x", "-1", "99999999999999999999999"}) {
    auto r = store_->FindExperiment(missing);
    ASSERT_TRUE(r.ok()) << missing;
    EXPECT_FALSE(r->has_value()) << missing;
  }
}

TEST_F(StoreTest, ListExperimentsNewestFirstWithLimit) {
  for (int i = 0; i < 5; ++i) AddExperiment("e" + std::to_string(i));
  auto all = store_->ListExperiments();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[0].name, "e4");
  EXPECT_EQ((*all)[4].name, "e0");
  auto two = store_->ListExperiments(2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].name, "e3");
}

// ---- runs ----

TEST_F(StoreTest, RunRoundTripAndUpdate) {
  int64_t exp = AddExperiment();
  drover::Run r = MakeRun(exp, 7);
  ASSERT_TRUE(store_->InsertRun(r).ok());
  EXPECT_GT(r.id, 0);
  auto got = store_->GetRun(r.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  ExpectSame(**got, r);

  r.state = RunState::kSucceeded;
  r.current_params["batch_size"] = 16;
  r.priority = 9;
  r.resources = Resources{0, 0, 1};
  r.attempts = 3;
  r.retries_used = 2;
  r.not_before_ms = 0;
  r.ended_ms = 1'700'000'099'000;
  r.reason = "succeeded";
  r.final_metrics = Json{{"loss", 0.01}};
  r.fingerprint = "fp-new";
  r.origin = TrialOrigin::kTpe;  // how a search's trial was proposed
  ASSERT_TRUE(store_->UpdateRun(r).ok());
  got = store_->GetRun(r.id);
  ASSERT_TRUE(got.ok());
  ExpectSame(**got, r);

  drover::Run ghost = r;
  ghost.id = 12345;
  EXPECT_EQ(store_->UpdateRun(ghost).code(), Code::kNotFound);
  EXPECT_FALSE(store_->GetRun(12345)->has_value());
}

TEST_F(StoreTest, EveryRunStateSurvives) {
  int64_t exp = AddExperiment();
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying,
                     RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    int64_t id = AddRun(exp, s);
    EXPECT_EQ((*store_->GetRun(id))->state, s) << ToString(s);
  }
}

TEST_F(StoreTest, RunNeedsItsExperiment) {
  drover::Run r = MakeRun(424242);
  Status st = store_->InsertRun(r);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("inserting a run"), std::string::npos) << st.message();
}

TEST_F(StoreTest, ListRunsFiltersAndPages) {
  int64_t e1 = AddExperiment("one");
  int64_t e2 = AddExperiment("two");
  std::vector<int64_t> e1_ids;
  for (int i = 0; i < 6; ++i) {
    e1_ids.push_back(AddRun(e1, i % 2 == 0 ? RunState::kQueued : RunState::kSucceeded, i));
  }
  AddRun(e2, RunState::kQueued);
  AddRun(e2, RunState::kFailed);

  auto all = store_->ListRuns({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 8u);
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i - 1].id, (*all)[i].id);

  auto of_e1 = store_->ListRuns(Filter(e1));
  ASSERT_TRUE(of_e1.ok());
  ASSERT_EQ(of_e1->size(), 6u);
  EXPECT_EQ((*of_e1)[0].id, e1_ids[0]);

  auto queued = store_->ListRuns(Filter(0, RunState::kQueued));
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->size(), 4u);

  auto e1_done = store_->ListRuns(Filter(e1, RunState::kSucceeded));
  ASSERT_TRUE(e1_done.ok());
  ASSERT_EQ(e1_done->size(), 3u);
  for (const drover::Run& r : *e1_done) {
    EXPECT_EQ(r.experiment_id, e1);
    EXPECT_EQ(r.state, RunState::kSucceeded);
  }

  auto page = store_->ListRuns(Filter(e1, std::nullopt, 2, 2, false));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, e1_ids[2]);
  EXPECT_EQ((*page)[1].id, e1_ids[3]);

  auto newest = store_->ListRuns(Filter(e1, std::nullopt, 2, 0, true));
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 2u);
  EXPECT_EQ((*newest)[0].id, e1_ids[5]);
  EXPECT_EQ((*newest)[1].id, e1_ids[4]);

  auto offset_only = store_->ListRuns(Filter(0, std::nullopt, 0, 7, false));
  ASSERT_TRUE(offset_only.ok());
  EXPECT_EQ(offset_only->size(), 1u);

  auto empty = store_->ListRuns(Filter(999));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());

  // The same filter shape again reuses its cached statement and still binds correctly.
  auto again = store_->ListRuns(Filter(e2, RunState::kFailed));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].experiment_id, e2);
}

// ---- attempts ----

// What a run reported about itself (event file offsets, hyper-parameters, its last checkpoint)
// is kept with the attempt and updated with it.
TEST_F(StoreTest, AttemptKeepsWhatTheRunReported) {
  int64_t run = AddRun(AddExperiment());
  Attempt a = MakeAttempt(run, 1);
  a.event_files["logs/events.out.tfevents.1.host"] = EventFileProgress{54870, 2};
  a.hparams = Json{{"args.lr", 0.01}, {"Net.hidden", 64}, {"optimizer", "adamw"}};
  a.checkpoint = CheckpointMark{1200, 1700000000123};
  ASSERT_TRUE(store_->InsertAttempt(a).ok());
  auto back = store_->ListAttempts(run).value();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].event_files, a.event_files);
  EXPECT_EQ(back[0].hparams, a.hparams);
  EXPECT_EQ(back[0].checkpoint, a.checkpoint);
  a.checkpoint = CheckpointMark{1300, 1700000000999};
  a.event_files["logs/events.out.tfevents.1.host"].offset = 60000;
  ASSERT_TRUE(store_->UpdateAttempt(a).ok());
  back = store_->ListAttempts(run).value();
  EXPECT_EQ(back[0].checkpoint->step, 1300);
  EXPECT_EQ(back[0].event_files.begin()->second.offset, 60000);
}

TEST_F(StoreTest, AttemptRoundTripUpdateAndOrder) {
  int64_t run = AddRun(AddExperiment());
  Attempt second = MakeAttempt(run, 2);
  Attempt first = MakeAttempt(run, 1);
  first.ended = false;
  first.reason = "";
  first.gpus = {};
  first.argv = {};
  ASSERT_TRUE(store_->InsertAttempt(second).ok());
  ASSERT_TRUE(store_->InsertAttempt(first).ok());
  EXPECT_GT(first.id, second.id);

  auto list = store_->ListAttempts(run);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  ExpectSame((*list)[0], first);  // by number
  ExpectSame((*list)[1], second);

  first.ended = true;
  first.reason = "cuda_oom";
  first.exit_code = 1;
  first.ended_ms = 1'700'000'003'000;
  first.stdout_offset = 4096;
  first.gpus = {0};
  first.argv = {"sh", "-c", "echo hi"};
  ASSERT_TRUE(store_->UpdateAttempt(first).ok());
  list = store_->ListAttempts(run);
  ASSERT_TRUE(list.ok());
  ExpectSame((*list)[0], first);

  Attempt ghost = first;
  ghost.id = 999;
  EXPECT_EQ(store_->UpdateAttempt(ghost).code(), Code::kNotFound);
  EXPECT_TRUE(store_->ListAttempts(run + 100)->empty());
}

TEST_F(StoreTest, AnExperimentsAttemptsComeInOneListByRunAndNumber) {
  int64_t exp = AddExperiment();
  int64_t a = AddRun(exp);
  int64_t b = AddRun(exp);
  int64_t idle = AddRun(exp);
  int64_t elsewhere = AddRun(AddExperiment("other"));
  for (auto [run, number] : {std::pair{b, 2}, {a, 1}, {b, 1}, {elsewhere, 1}}) {
    Attempt at = MakeAttempt(run, number);
    ASSERT_TRUE(store_->InsertAttempt(at).ok());
  }
  auto all = store_->ListExperimentAttempts(exp);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);  // the run with no attempt is absent, the other experiment's too
  ASSERT_EQ(all->at(a).size(), 1u);
  ASSERT_EQ(all->at(b).size(), 2u);
  EXPECT_EQ(all->at(b)[0].number, 1);
  EXPECT_EQ(all->at(b)[1].number, 2);
  EXPECT_FALSE(all->count(idle));
  // The same as one look per run.
  ExpectSame(all->at(b)[1], (*store_->ListAttempts(b))[1]);
  EXPECT_TRUE(store_->ListExperimentAttempts(exp + 100)->empty());
}

// ---- metrics ----

TEST_F(StoreTest, MetricsOrderedByAttemptStepAndInsertion) {
  int64_t run = AddRun(AddExperiment());
  int64_t other = AddRun(AddExperiment("other"));
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<MetricPoint> points = {
      {run, 2, 1, "loss", 0.7, 5},          {run, 1, 2, "loss", 0.5, 2},
      {run, 1, 1, "loss", 0.9, 1},          {run, 1, 1, "acc", 0.1, 1},
      {run, 1, 2, "loss", 0.4, 3},  // the same step again: kept, after the first
      {run, 2, 2, "loss", std::nan(""), 6}, {run, 2, 3, "loss", inf, 7},
      {run, 2, 4, "loss", -inf, 8},         {other, 9, 1, "loss", 42, 9},
  };
  ASSERT_TRUE(store_->InsertMetrics(points).ok());

  auto loss = store_->GetMetrics(run, "loss");
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  ASSERT_EQ(loss->size(), 7u);
  std::vector<std::pair<int64_t, int64_t>> order;
  for (const MetricPoint& p : *loss) order.emplace_back(p.attempt_id, p.step);
  EXPECT_EQ(order, (std::vector<std::pair<int64_t, int64_t>>{
                       {1, 1}, {1, 2}, {1, 2}, {2, 1}, {2, 2}, {2, 3}, {2, 4}}));
  EXPECT_DOUBLE_EQ((*loss)[1].value, 0.5);
  EXPECT_DOUBLE_EQ((*loss)[2].value, 0.4);
  EXPECT_EQ((*loss)[2].t_ms, 3);
  EXPECT_EQ((*loss)[0].run_id, run);
  EXPECT_EQ((*loss)[0].name, "loss");
  EXPECT_TRUE(std::isnan((*loss)[4].value));
  EXPECT_EQ((*loss)[5].value, inf);
  EXPECT_EQ((*loss)[6].value, -inf);

  auto all = store_->GetMetrics(run);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 8u);
  EXPECT_EQ((*all)[0].name, "loss");  // (1,1) loss was inserted before (1,1) acc
  EXPECT_EQ((*all)[1].name, "acc");

  EXPECT_EQ(store_->GetMetrics(other)->size(), 1u);
  EXPECT_TRUE(store_->GetMetrics(run, "missing")->empty());
  EXPECT_TRUE(store_->InsertMetrics({}).ok());
}

TEST_F(StoreTest, MetricSummariesOfEachRunsLatestAttempt) {
  int64_t exp = AddExperiment();
  int64_t a = AddRun(exp, RunState::kQueued, 0);
  int64_t b = AddRun(exp, RunState::kQueued, 1);
  int64_t nan_only = AddRun(exp, RunState::kQueued, 2);
  int64_t none = AddRun(exp, RunState::kQueued, 3);
  int64_t elsewhere = AddRun(AddExperiment("other"));
  auto attempt = [&](int64_t run, int number) {
    Attempt at = MakeAttempt(run, number);
    EXPECT_TRUE(store_->InsertAttempt(at).ok());
    return at.id;
  };
  const int64_t a1 = attempt(a, 1), a2 = attempt(a, 2), b1 = attempt(b, 1);
  const int64_t n1 = attempt(nan_only, 1), e1 = attempt(elsewhere, 1);
  attempt(none, 1);
  const double inf = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(store_
                  ->InsertMetrics({// run a's first attempt peaked at 0.99: not its curve now
                                   {a, a1, 1, "acc", 0.99, 1},
                                   {a, a2, 1, "acc", 0.5, 1},
                                   {a, a2, 2, "acc", 0.9, 2},
                                   {a, a2, 3, "acc", inf, 3},
                                   {a, a2, 4, "acc", 0.6, 4},
                                   {a, a2, 1, "loss", 7, 1},
                                   {b, b1, 1, "acc", 0.7, 1},
                                   {b, b1, 2, "acc", std::nan(""), 2},
                                   {nan_only, n1, 1, "acc", std::nan(""), 1},
                                   {elsewhere, e1, 1, "acc", 0.1, 1}})
                  .ok());
  auto curves = store_->MetricSummaries(exp, "acc", 2);
  ASSERT_TRUE(curves.ok()) << curves.status().ToString();
  ASSERT_EQ(curves->size(), 3u);  // no run without points, none of another experiment
  const CurveSummary& ca = curves->at(a);
  EXPECT_EQ(ca.points, 4);
  EXPECT_EQ(ca.last, 0.6);
  EXPECT_EQ(ca.lowest, 0.5);
  EXPECT_EQ(ca.highest, 0.9);  // infinities and NaN are left out of the extremes
  EXPECT_EQ(ca.mean_last, inf);  // the last two values: inf and 0.6
  const CurveSummary& cb = curves->at(b);
  EXPECT_TRUE(std::isnan(cb.last));  // the last value was NaN: kept as such
  EXPECT_TRUE(std::isnan(cb.mean_last));
  EXPECT_EQ(cb.highest, 0.7);
  const CurveSummary& cn = curves->at(nan_only);
  EXPECT_EQ(cn.points, 1);
  EXPECT_TRUE(std::isnan(cn.highest));
  // The mean of the last value alone is that value.
  curves = store_->MetricSummaries(exp, "acc", 1);
  ASSERT_TRUE(curves.ok());
  EXPECT_EQ(curves->at(a).mean_last, 0.6);
  EXPECT_TRUE(store_->MetricSummaries(exp, "missing", 1)->empty());
}

TEST_F(StoreTest, ScanMetricsStreamsOneSeriesInAttemptStepOrder) {
  int64_t run = AddRun(AddExperiment());
  ASSERT_TRUE(store_
                  ->InsertMetrics({{run, 2, 1, "loss", 0.7, 5},
                                   {run, 1, 2, "loss", 0.5, 2},
                                   {run, 1, 1, "loss", 0.9, 1},
                                   {run, 1, 1, "acc", 0.1, 1},
                                   {run, 1, 2, "loss", 0.4, 3},
                                   {run, 2, 3, "zeta", 1, 3}})
                  .ok());
  Store::SeriesQuery q{run, "loss", 0, std::nullopt};
  EXPECT_EQ(*store_->CountMetrics(q), 4);
  std::vector<std::tuple<int64_t, int64_t, double>> seen;
  ASSERT_TRUE(store_
                  ->ScanMetrics(q, [&](const MetricPoint& p) {
                    EXPECT_EQ(p.run_id, run);
                    seen.emplace_back(p.attempt_id, p.step, p.value);
                  })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::tuple<int64_t, int64_t, double>>{
                      {1, 1, 0.9}, {1, 2, 0.5}, {1, 2, 0.4}, {2, 1, 0.7}}));
  q.attempt_id = 1;
  q.after_step = 1;
  EXPECT_EQ(*store_->CountMetrics(q), 2);
  seen.clear();
  ASSERT_TRUE(store_->ScanMetrics(q, [&](const MetricPoint& p) {
                      seen.emplace_back(p.attempt_id, p.step, p.value);
                    }).ok());
  EXPECT_EQ(seen, (std::vector<std::tuple<int64_t, int64_t, double>>{{1, 2, 0.5}, {1, 2, 0.4}}));
  EXPECT_EQ(*store_->MetricNames(run), (std::vector<std::string>{"acc", "loss", "zeta"}));
  EXPECT_TRUE(store_->MetricNames(run + 1)->empty());
}

TEST_F(StoreTest, MetricsBatchOutsideTransactionIsAllOrNothing) {
  int64_t run = AddRun(AddExperiment());
  std::vector<MetricPoint> points = {{run, 1, 1, "loss", 1.0, 1}, {424242, 1, 1, "loss", 1.0, 1}};
  Status st = store_->InsertMetrics(points);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(store_->GetMetrics(run)->empty());
  // The store is usable afterwards (no transaction left open).
  ASSERT_TRUE(store_->InsertMetrics({{run, 1, 1, "loss", 1.0, 1}}).ok());
  EXPECT_EQ(store_->GetMetrics(run)->size(), 1u);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->Commit().ok());
}

TEST(StoreMetrics, TenThousandPointsInOneTransaction) {
  TempDir dir;
  auto store = OpenOrDie(dir / "drover.db");
  ASSERT_NE(store, nullptr);
  Experiment e = MakeExperiment("big");
  ASSERT_TRUE(store->InsertExperiment(e).ok());
  drover::Run r = MakeRun(e.id);
  ASSERT_TRUE(store->InsertRun(r).ok());

  std::vector<MetricPoint> points;
  points.reserve(10'000);
  for (int i = 0; i < 10'000; ++i) {
    points.push_back({r.id, 1, i / 2, i % 2 == 0 ? "loss" : "acc", 1.0 / (i + 1), 1'000'000 + i});
  }
  ASSERT_TRUE(store->Begin().ok());
  Attempt a = MakeAttempt(r.id, 1);
  ASSERT_TRUE(store->InsertAttempt(a).ok());
  ASSERT_TRUE(store->InsertMetrics(points).ok());
  a.stdout_offset = 777'777;  // committed together with the points it covers
  ASSERT_TRUE(store->UpdateAttempt(a).ok());
  ASSERT_TRUE(store->Commit().ok());

  auto all = store->GetMetrics(r.id);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 10'000u);
  auto loss = store->GetMetrics(r.id, "loss");
  ASSERT_TRUE(loss.ok());
  ASSERT_EQ(loss->size(), 5'000u);
  for (size_t i = 0; i < loss->size(); ++i) {
    ASSERT_EQ((*loss)[i].step, static_cast<int64_t>(i));
    ASSERT_DOUBLE_EQ((*loss)[i].value, 1.0 / (2 * i + 1));
  }
  EXPECT_EQ((*store->ListAttempts(r.id))[0].stdout_offset, 777'777);
}

// ---- transactions ----

TEST_F(StoreTest, BeginCommitBatchesWrites) {
  ASSERT_TRUE(store_->Begin().ok());
  int64_t exp = AddExperiment("batched");
  for (int i = 0; i < 50; ++i) AddRun(exp, RunState::kQueued, i);
  Event ev{0, 5, "experiment_submitted", exp, 0, Json{{"runs", 50}}};
  ASSERT_TRUE(store_->InsertEvent(ev).ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(store_->ListRuns(Filter(exp))->size(), 50u);
  EXPECT_EQ(store_->ListEvents(0)->size(), 1u);
}

TEST_F(StoreTest, RollbackDiscards) {
  int64_t exp = AddExperiment("kept");
  ASSERT_TRUE(store_->Begin().ok());
  int64_t run = AddRun(exp);
  ASSERT_TRUE(store_->UpdateExperimentStatus(exp, ExperimentStatus::kDone).ok());
  ASSERT_TRUE(store_->InsertMetrics({{run, 1, 1, "loss", 1.0, 1}}).ok());
  ASSERT_TRUE(store_->Rollback().ok());
  EXPECT_FALSE(store_->GetRun(run)->has_value());
  EXPECT_EQ((*store_->GetExperiment(exp))->status, ExperimentStatus::kActive);
  EXPECT_TRUE(store_->GetMetrics(run)->empty());
  // Rollback with nothing open is harmless; a nested Begin is an error.
  EXPECT_TRUE(store_->Rollback().ok());
  ASSERT_TRUE(store_->Begin().ok());
  EXPECT_FALSE(store_->Begin().ok());
  EXPECT_TRUE(store_->Rollback().ok());
  EXPECT_FALSE(store_->Commit().ok());  // nothing to commit
}

// ---- events ----

TEST_F(StoreTest, EventsAfterIdWithLimit) {
  int64_t exp = AddExperiment();
  std::vector<int64_t> ids;
  for (int i = 0; i < 10; ++i) {
    Event e;
    e.t_ms = 1000 + i;
    e.kind = i == 0 ? "experiment_submitted" : "run_state";
    e.experiment_id = exp;
    e.run_id = i;
    e.data = Json{{"i", i}, {"state", "running"}, {"text", "ünï"}};
    ASSERT_TRUE(store_->InsertEvent(e).ok());
    ids.push_back(e.id);
  }
  auto all = store_->ListEvents(0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 10u);
  const Event& first = (*all)[0];
  EXPECT_EQ(first.id, ids[0]);
  EXPECT_EQ(first.t_ms, 1000);
  EXPECT_EQ(first.kind, "experiment_submitted");
  EXPECT_EQ(first.experiment_id, exp);
  EXPECT_EQ(first.run_id, 0);
  EXPECT_EQ(first.data, Json({{"i", 0}, {"state", "running"}, {"text", "ünï"}}));

  auto after = store_->ListEvents(ids[6]);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 3u);
  EXPECT_EQ((*after)[0].id, ids[7]);

  auto page = store_->ListEvents(ids[2], 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, ids[3]);
  EXPECT_EQ((*page)[1].id, ids[4]);

  EXPECT_TRUE(store_->ListEvents(ids[9])->empty());
}

// ---- snapshots and environments ----

TEST_F(StoreTest, SnapshotPutIsIdempotent) {
  Snapshot s;
  s.hash = "sha256:feed";
  s.path = "/store/snapshots/feed";
  s.git = true;
  s.git_commit = "0123456789abcdef0123456789abcdef01234567";
  s.git_diff = "diff --git a/train.py b/train.py\n+lr = 0.1\n\0after-nul";
  s.git_diff += std::string("\0tail", 5);
  s.bytes = 5LL << 32;
  s.files = 321;
  s.created_ms = 1'700'000'000'123;
  ASSERT_TRUE(store_->PutSnapshot(s).ok());
  Snapshot again = s;
  again.path = "/elsewhere";
  ASSERT_TRUE(store_->PutSnapshot(again).ok());

  auto got = store_->GetSnapshot(s.hash);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  const Snapshot& g = **got;
  EXPECT_EQ(g.hash, s.hash);
  EXPECT_EQ(g.path, s.path);  // the first put wins
  EXPECT_EQ(g.git, s.git);
  EXPECT_EQ(g.git_commit, s.git_commit);
  EXPECT_EQ(g.git_diff, s.git_diff);
  EXPECT_EQ(g.bytes, s.bytes);
  EXPECT_EQ(g.files, s.files);
  EXPECT_EQ(g.created_ms, s.created_ms);
  EXPECT_FALSE(store_->GetSnapshot("sha256:none")->has_value());
}

TEST_F(StoreTest, EnvironmentsOnePerExperimentAndInterpreter) {
  int64_t e1 = AddExperiment("one");
  int64_t e2 = AddExperiment("two");
  Environment py{e1, "/usr/bin/python3", "numpy==1.24.2\ntorch==1.13.1", "gpu-box", "NVIDIA H100"};
  Environment venv{e1, "/opt/venv/bin/python", "torch==2.1.0", "gpu-box", ""};
  ASSERT_TRUE(store_->PutEnvironment(py).ok());
  ASSERT_TRUE(store_->PutEnvironment(venv).ok());
  ASSERT_TRUE(store_->PutEnvironment({e2, "/usr/bin/python3", "", "other", ""}).ok());
  py.packages = "numpy==1.26.0\ntorch==1.13.1";
  py.hostname = "gpu-box-2";
  ASSERT_TRUE(store_->PutEnvironment(py).ok());  // replaces, not a second row

  auto list = store_->ListEnvironments(e1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  const Environment& a = (*list)[0];  // ordered by interpreter
  EXPECT_EQ(a.interpreter, "/opt/venv/bin/python");
  EXPECT_EQ(a.packages, "torch==2.1.0");
  const Environment& b = (*list)[1];
  EXPECT_EQ(b.experiment_id, e1);
  EXPECT_EQ(b.interpreter, "/usr/bin/python3");
  EXPECT_EQ(b.packages, py.packages);
  EXPECT_EQ(b.hostname, "gpu-box-2");
  EXPECT_EQ(b.gpu_info, "NVIDIA H100");
  EXPECT_EQ(store_->ListEnvironments(e2)->size(), 1u);
  EXPECT_TRUE(store_->ListEnvironments(999)->empty());
  EXPECT_FALSE(store_->PutEnvironment({999, "/usr/bin/python3", "", "", ""}).ok());
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(EngineLockTest, OneHolderPerStoreAndItSaysWho) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("drover-lock-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  {
    auto first = EngineLock::Acquire(dir);
    ASSERT_TRUE(first.ok()) << first.status().message();
    auto second = EngineLock::Acquire(dir);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), Code::kFailedPrecondition);
    EXPECT_NE(
        second.status().message().find("another drover (pid " + std::to_string(getpid()) + ")"),
        std::string::npos)
        << second.status().message();
  }
  // Released with its holder.
  EXPECT_TRUE(EngineLock::Acquire(dir).ok());
  std::filesystem::remove_all(dir);
}

// A daemon that exited, still a zombie (its parent, or a container's init, has not reaped it),
// while a short-lived child forked under the lock still has the lock's file open: the lock is
// its own again within moments and a new daemon waits for that rather than refusing with "another
// drover (pid N) is running" about a process that has exited (seen in CI after an idle exit).
TEST(EngineLockTest, AHolderThatExitedIsGoneThoughNotReapedAndItsChildsHoldIsWaitedFor) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("drover-lock-zombie-" + std::to_string(getpid())))
                        .string();
  std::filesystem::remove_all(dir);
  pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    auto lock = EngineLock::Acquire(dir);
    if (!lock.ok()) _exit(1);
    if (fork() == 0) {  // keeps the lock's file (forked while it was held) for a while
      usleep(800'000);
      _exit(0);
    }
    _exit(0);  // the holder exits at once, its child still holding the lock
  }
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(holder), &info, WEXITED | WNOWAIT), 0);  // not reaped
  ASSERT_EQ(info.si_status, 0);
  auto lock = EngineLock::Acquire(dir);
  EXPECT_TRUE(lock.ok()) << lock.status().message();
  waitpid(holder, nullptr, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST_F(StoreTest, DeleteExperimentTakesEverythingOfItsAndNothingElse) {
  const int64_t keep = AddExperiment("keep");
  const int64_t gone = AddExperiment("gone");
  const int64_t kept_run = AddRun(keep);
  const int64_t gone_run = AddRun(gone);
  for (int64_t run : {kept_run, gone_run}) {
    Attempt a = MakeAttempt(run, 1);
    ASSERT_TRUE(store_->InsertAttempt(a).ok());
    ASSERT_TRUE(store_->InsertMetrics({{run, a.id, 1, "loss", 0.5, 10}}).ok());
    Alert al;
    al.kind = "idle_gpu";
    al.key = "k" + std::to_string(run);
    al.run_id = run;
    al.experiment_id = run == kept_run ? keep : gone;
    ASSERT_TRUE(store_->InsertAlert(al).ok());
    Event ev;
    ev.kind = "run_state";
    ev.experiment_id = al.experiment_id;
    ev.run_id = run;
    ASSERT_TRUE(store_->InsertEvent(ev).ok());
    ASSERT_TRUE(store_->InsertRung(al.experiment_id, {run, 0, 0, 1, 0.5, false}).ok());
  }
  ASSERT_TRUE(store_->PutEnvironment({gone, "/usr/bin/python3", "torch==2", "box", ""}).ok());
  Snapshot other;
  other.hash = "sha256:feed";
  other.path = "/nowhere";
  ASSERT_TRUE(store_->PutSnapshot(other).ok());
  Snapshot used;
  used.hash = "sha256:0123abcd";  // MakeExperiment's
  ASSERT_TRUE(store_->PutSnapshot(used).ok());

  ASSERT_TRUE(store_->DeleteExperiment(gone).ok());
  EXPECT_FALSE(store_->GetExperiment(gone).value().has_value());
  EXPECT_FALSE(store_->GetRun(gone_run).value().has_value());
  EXPECT_TRUE(store_->ListAttempts(gone_run).value().empty());
  EXPECT_TRUE(store_->GetMetrics(gone_run).value().empty());
  EXPECT_TRUE(store_->ListEnvironments(gone).value().empty());
  EXPECT_TRUE(store_->ListRungs(gone).value().empty());
  EXPECT_EQ(store_->ListRungs(keep).value().size(), 1u);
  AlertFilter af;
  const std::vector<Alert> alerts = store_->ListAlerts(af).value();
  for (const Alert& a : alerts) EXPECT_NE(a.experiment_id, gone);
  const std::vector<Event> events = store_->ListEvents(0).value();
  for (const Event& e : events) EXPECT_NE(e.experiment_id, gone);
  // The other experiment is whole.
  EXPECT_TRUE(store_->GetRun(kept_run).value().has_value());
  EXPECT_EQ(store_->ListAttempts(kept_run).value().size(), 1u);
  EXPECT_EQ(store_->GetMetrics(kept_run).value().size(), 1u);
  EXPECT_EQ(store_->ListAlerts(af).value().size(), 1u);
  // Only the snapshot no experiment refers to is unreferenced.
  EXPECT_EQ(store_->UnreferencedSnapshots().value(), std::vector<std::string>{"sha256:feed"});
  ASSERT_TRUE(store_->DeleteSnapshot("sha256:feed").ok());
  EXPECT_FALSE(store_->GetSnapshot("sha256:feed").value().has_value());
  // A second delete of the same experiment says there is none.
  EXPECT_EQ(store_->DeleteExperiment(gone).code(), Code::kNotFound);
}

TEST_F(StoreTest, RungsAreKeptPerExperimentInTheOrderRecorded) {
  const int64_t e = AddExperiment("search");
  const int64_t a = AddRun(e), b = AddRun(e);
  ASSERT_TRUE(store_->InsertRung(e, {b, 0, 0, 1, 0.9, false}).ok());
  ASSERT_TRUE(store_->InsertRung(e, {a, 1, 2, 27, std::nan(""), true}).ok());
  std::vector<RungRecord> rungs = store_->ListRungs(e).value();
  ASSERT_EQ(rungs.size(), 2u);
  EXPECT_EQ(rungs[0].run_id, b);
  EXPECT_DOUBLE_EQ(rungs[0].value, 0.9);
  EXPECT_FALSE(rungs[0].pruned);
  EXPECT_EQ(rungs[1].bracket, 1);
  EXPECT_EQ(rungs[1].rung, 2);
  EXPECT_EQ(rungs[1].step, 27);
  EXPECT_TRUE(std::isnan(rungs[1].value));  // a NaN is kept as NaN
  EXPECT_TRUE(rungs[1].pruned);
  // One run's curve only, when asked for.
  for (int64_t run : {a, b}) {
    Attempt at = MakeAttempt(run, 1);
    ASSERT_TRUE(store_->InsertAttempt(at).ok());
    ASSERT_TRUE(store_->InsertMetrics({{run, at.id, 1, "acc", run == a ? 0.3 : 0.6, 10}}).ok());
  }
  auto one = store_->MetricSummaries(e, "acc", 1, a).value();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_DOUBLE_EQ(one.at(a).last, 0.3);
  EXPECT_EQ(store_->MetricSummaries(e, "acc", 1).value().size(), 2u);
}

}  // namespace
}  // namespace drover
