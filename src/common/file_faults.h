#pragma once
// A test seam under the files drover writes itself (snapshots, working copies, run folders, the
// notes it leaves in a run's logs), as store/fault_vfs.h is under the store and leveldb's Env
// wrapper under leveldb: armed, it fails chosen writes with a chosen errno (ENOSPC as on a full
// disk, EIO as on a failing one), so tests can show that no run is charged for it and the error
// is clear. Production code only asks (FileFault), which costs one atomic load; tests arm it.
#include <cstdint>
#include <string>
#include <string_view>

namespace drover {

struct FileFaults {
  int error = 0;            // the errno a failed write gets (ENOSPC, EIO, EDQUOT, ...)
  std::string under;        // only paths that start with this ("" for every path)
  int64_t after = 0;        // writes let through before the first failure
  int64_t count = -1;       // writes failed after that (-1: every one until Disarm)
};

// Process-wide; safe from any thread.
void ArmFileFaults(const FileFaults& faults);
void DisarmFileFaults();
int64_t InjectedFileFaults();  // failed writes since the process started

// Asked before each write (a folder made, a file created or written) to `path`: the errno it
// must fail with, or 0. Sets errno too, so a caller can go on as after a failed system call.
int FileFault(std::string_view path);

}  // namespace drover
