#pragma once
// A test seam under the store, as leveldb's Env wrapper is under leveldb: a SQLite VFS over the
// default one that fails chosen writes with a chosen code (SQLITE_FULL as on a full disk,
// SQLITE_IOERR_WRITE as on a failing one), so tests can show that nothing is lost and the error
// is clear. Production code never selects it; tests open a store with
// Store::Open(path, {.vfs = FaultVfsName()}) and arm it.
#include <cstdint>

namespace drover::store {

struct WriteFaults {
  int code = 0;        // what a failed xWrite returns (SQLITE_FULL, SQLITE_IOERR_WRITE, ...)
  int64_t after = 0;   // writes let through before the first failure
  int64_t count = -1;  // writes failed after that (-1: every one until Disarm)
};

// Registers the VFS (once; not as the default) and returns its name.
const char* FaultVfsName();
// Process-wide, for every file opened through the VFS; safe from any thread.
void ArmWriteFaults(const WriteFaults& faults);
void DisarmWriteFaults();
int64_t InjectedWriteFaults();  // failed writes since the process started

}  // namespace drover::store
