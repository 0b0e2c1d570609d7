#include "store/migrations.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

#include "store/store.h"

namespace drover::store {
namespace {

// An open in-memory database, closed at the end of the test.
class Db {
 public:
  Db() { EXPECT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK); }
  ~Db() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// name -> CREATE statement of every table and index (SQLite's own objects left out).
std::map<std::string, std::string> Schema(sqlite3* db) {
  std::map<std::string, std::string> out;
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(
      sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'",
                         -1, &st, nullptr),
      SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] =
        reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  return out;
}

int Version(sqlite3* db) {
  auto v = ReadUserVersion(db, "test");
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

std::string V1Fixture() {
  std::ifstream in(std::string(DROVER_SOURCE_DIR) + "/tests/data/store_v1.sql");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Migrations, HistoryIsOrderedWithoutGaps) {
  const auto& all = Migrations();
  ASSERT_FALSE(all.empty());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].version, static_cast<int>(i) + 1);
    EXPECT_NE(std::string(all[i].description), "");
  }
  EXPECT_EQ(LatestVersion(), 15);
  EXPECT_EQ(Store::LatestSchemaVersion(), LatestVersion());
}

TEST(Migrations, FixtureHoldsExactlyTheVersion1Schema) {
  const std::string sql = V1Fixture();
  ASSERT_FALSE(sql.empty());
  Db fixture, migrated;
  ASSERT_TRUE(Exec(fixture.get(), sql.c_str(), "loading fixture").ok());
  EXPECT_EQ(Version(fixture.get()), 1);
  std::vector<Migration> first_only = {Migrations()[0]};
  ASSERT_TRUE(ApplyMigrations(migrated.get(), ":memory:", first_only).ok());
  EXPECT_EQ(Version(migrated.get()), 1);
  EXPECT_EQ(Schema(fixture.get()), Schema(migrated.get()));
}

TEST(Migrations, StepwiseUpgradeEqualsFreshSchema) {
  Db old, fresh;
  ASSERT_TRUE(Exec(old.get(), V1Fixture().c_str(), "loading fixture").ok());
  ASSERT_TRUE(Migrate(old.get(), "old").ok());
  ASSERT_TRUE(Migrate(fresh.get(), "fresh").ok());
  EXPECT_EQ(Version(old.get()), 15);
  EXPECT_EQ(Version(fresh.get()), 15);
  EXPECT_EQ(Schema(old.get()), Schema(fresh.get()));
  // Running again is a no-op.
  ASSERT_TRUE(Migrate(fresh.get(), "fresh").ok());
  EXPECT_EQ(Version(fresh.get()), 15);
}

TEST(Migrations, Version3TakesGitFieldsFromTheSnapshot) {
  Db db;
  std::vector<Migration> up_to_2(Migrations().begin(), Migrations().begin() + 2);
  ASSERT_TRUE(ApplyMigrations(db.get(), "v2", up_to_2).ok());
  ASSERT_EQ(Version(db.get()), 2);
  ASSERT_TRUE(Exec(db.get(),
                   "INSERT INTO snapshots (hash, git, git_commit, git_diff) "
                   "VALUES ('h1', 1, 'abc123', '+x');"
                   "INSERT INTO experiments (name, snapshot_hash) VALUES ('with-git', 'h1');"
                   "INSERT INTO experiments (name, snapshot_hash) VALUES ('no-snapshot', 'gone');",
                   "seeding v2")
                  .ok());
  ASSERT_TRUE(Migrate(db.get(), "v2").ok());
  EXPECT_EQ(Version(db.get()), LatestVersion());
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(db.get(), "SELECT name, git_commit, git_diff FROM experiments ORDER BY id",
                         -1, &st, nullptr),
      SQLITE_OK);
  std::vector<std::string> rows;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::string row;
    for (int i = 0; i < 3; ++i) {
      row += reinterpret_cast<const char*>(sqlite3_column_text(st, i));
      row += "|";
    }
    rows.push_back(row);
  }
  sqlite3_finalize(st);
  EXPECT_EQ(rows, (std::vector<std::string>{"with-git|abc123|+x|", "no-snapshot|||"}));
}

TEST(Migrations, FailingStepLeavesThePreviousVersion) {
  Db db;
  ASSERT_TRUE(Migrate(db.get(), "db").ok());
  auto before = Schema(db.get());
  std::vector<Migration> with_bad = Migrations();
  const int next = LatestVersion() + 1;
  with_bad.push_back({next, "broken", "CREATE TABLE half_done (x); SELECT * FROM no_such_table;"});
  Status st = ApplyMigrations(db.get(), "/x/drover.db", with_bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("upgrading store at /x/drover.db: migration " + std::to_string(next) +
                              " (broken)"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("no such table"), std::string::npos) << st.message();
  EXPECT_EQ(Version(db.get()), LatestVersion());
  EXPECT_EQ(Schema(db.get()), before);             // half_done rolled back
  EXPECT_NE(sqlite3_get_autocommit(db.get()), 0);  // no transaction left open
}

TEST(Migrations, NewerDatabaseIsRefused) {
  Db db;
  const int newer = LatestVersion() + 1;
  const std::string pragma = "PRAGMA user_version = " + std::to_string(newer);
  ASSERT_TRUE(Exec(db.get(), pragma.c_str(), "test").ok());
  Status st = Migrate(db.get(), "/data/drover.db");
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_EQ(st.message(), "store at /data/drover.db has schema version " + std::to_string(newer) +
                              ", newer than this drover understands (" +
                              std::to_string(LatestVersion()) + "); upgrade drover");
  EXPECT_TRUE(Schema(db.get()).empty());
}

TEST(SqliteStatus, CodesBecomeStatusesWithAHint) {
  struct Case {
    int rc;
    Code code;
    const char* words;
  };
  for (const Case& c : {Case{SQLITE_NOTADB, Code::kFailedPrecondition, "file is not a database"},
                        Case{SQLITE_CORRUPT, Code::kFailedPrecondition, "integrity_check"},
                        Case{SQLITE_BUSY, Code::kUnavailable, "another process is writing"},
                        Case{SQLITE_BUSY_SNAPSHOT, Code::kUnavailable, "another process"},
                        Case{SQLITE_FULL, Code::kIo, "free some disk space"},
                        Case{SQLITE_READONLY, Code::kIo, "permissions"},
                        Case{SQLITE_CANTOPEN, Code::kIo, "folder exists"},
                        Case{SQLITE_IOERR_WRITE, Code::kIo, "disk"},
                        Case{SQLITE_CONSTRAINT_FOREIGNKEY, Code::kFailedPrecondition, "constraint"},
                        Case{SQLITE_ERROR, Code::kInternal, "SQL logic error"}}) {
    Status st = SqliteStatus(nullptr, c.rc, "doing it");
    EXPECT_EQ(st.code(), c.code) << c.rc;
    EXPECT_EQ(st.message().rfind("doing it: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(c.words), std::string::npos) << st.message();
  }
}

TEST(SqliteStatus, RealLockConflictIsUnavailable) {
  // Two connections to one file; the second finds the write lock taken and does not wait.
  char tmpl[] = "/tmp/drover-migrations-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/db";
  sqlite3 *a = nullptr, *b = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &a), SQLITE_OK);
  ASSERT_EQ(sqlite3_open(path.c_str(), &b), SQLITE_OK);
  ASSERT_TRUE(Exec(a, "CREATE TABLE t (x); BEGIN IMMEDIATE", "a").ok());
  Status st = Exec(b, "BEGIN IMMEDIATE", "beginning a transaction");
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_EQ(st.message(),
            "beginning a transaction: database is locked; another process is writing to the "
            "store; wait for it or stop it (one drover writes to a store at a time)");
  (void)Exec(a, "ROLLBACK", "a");
  sqlite3_close(a);
  sqlite3_close(b);
  std::remove(path.c_str());
  std::remove(tmpl);
}

}  // namespace
}  // namespace drover::store
