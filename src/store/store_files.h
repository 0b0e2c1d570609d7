#pragma once
// Whether a store's database agrees with the files beside it. A database that lost its newest
// commits (drover.db-wal deleted under a running daemon, a database restored from an old backup,
// a truncated file) would be taken for a younger store: its next runs would be numbered again
// from what it remembers and write over the logs and working copies of the runs it forgot. So
// Store::Open refuses it with what happened and what to do (docs/store.md, "A database that
// disagrees with its folder").
#include <cstdint>
#include <string>

#include "common/status.h"

struct sqlite3;

namespace drover::store {

// What the write-ahead log's index (drover.db-shm) says about the log, read without SQLite (an
// open would rebuild the index from what is left of the log and so erase the evidence).
struct WalIndex {
  bool valid = false;        // the file holds an initialised header whose two copies agree
  uint32_t page_size = 0;    // bytes
  uint32_t max_frame = 0;    // frames (one page each) the log holds
  uint32_t backfilled = 0;   // frames already copied into the database
};
WalIndex ReadWalIndex(const std::string& shm_path);

// Before SQLite opens `db_path`: refuses (FailedPrecondition) a database whose log index names
// frames not yet in the database while the log is missing or shorter than they need. `context`
// starts the message. Says, when the store's daemon still holds the deleted log open, how to save
// it from /proc before that process ends.
Status CheckWalPresent(const std::string& db_path, const std::string& context);

// The numbered entries of the store's logs/ (experiment ids), listed before the database is
// read: an experiment's log folder is made only after its submit was committed (in a transaction
// of its own), so listing first never sees a folder newer than the rows read after it.
// runs/ is not compared: a run's folder can be made before its row is committed (a search trial
// proposed and started in one pass of the loop), so a crash between the two leaves a folder the
// database never knew, which is no loss.
struct FolderIds {
  int64_t highest_experiment = 0;  // logs/<experiment>
};
FolderIds ListFolderIds(const std::string& store_dir);

// After the open: refuses a database whose highest experiment id ever given out
// (sqlite_sequence: AUTOINCREMENT ids are never reused, even after drover rm) is below what
// `ids` found on disk.
Status CheckIdsCoverFolders(sqlite3* db, const FolderIds& ids, const std::string& store_dir,
                            const std::string& context);

}  // namespace drover::store
