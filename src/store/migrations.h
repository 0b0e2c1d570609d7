#pragma once
// The store's schema history and the small SQLite helpers the store is built on. Internal to
// src/store/: the rest of drover sees only store.h.
//
// A store file carries its schema version in PRAGMA user_version. Migrations are applied in
// order, each in its own BEGIN IMMEDIATE transaction that also bumps user_version, so a crash or
// an error mid-way leaves the file at the previous version, never half-upgraded. Never edit a
// migration that has shipped: add a new one (and a tests/data/store_vN.sql fixture of the old
// schema, opened by store_test).
#include <sqlite3.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::store {

struct Migration {
  int version;              // user_version after this migration: 1, 2, ...
  const char* description;  // shown in docs and error messages
  const char* sql;          // one or more statements
};

// The whole history, ordered by version, starting at 1 with no gaps.
const std::vector<Migration>& Migrations();
int LatestVersion();

// The one place a SQLite result code becomes a Status. `context` says what was being done
// ("cannot open store at /x/drover.db", "inserting run"); the message adds SQLite's words and,
// where there is one, what the user can do about it.
Status SqliteStatus(sqlite3* db, int rc, std::string_view context);

// Runs `sql` (one or more statements, no results wanted).
Status Exec(sqlite3* db, const char* sql, std::string_view context);

Result<int> ReadUserVersion(sqlite3* db, std::string_view context);

// FailedPrecondition when `version` is newer than `latest`, naming the store at `path`.
Status CheckNotNewer(int version, int latest, const std::string& path);

// Brings the database from its current user_version up to the last of `migrations`, one
// transaction per step. Refuses (untouched) a database newer than the list knows.
Status ApplyMigrations(sqlite3* db, const std::string& path,
                       const std::vector<Migration>& migrations);
inline Status Migrate(sqlite3* db, const std::string& path) {
  return ApplyMigrations(db, path, Migrations());
}

}  // namespace drover::store
