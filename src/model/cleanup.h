#pragma once
// What `drover rm` and `drover gc` delete: planned first (a dry run prints the plan), then carried
// out by the store's one writer (engine/cleanup.h). The protocol sends it as it is.
#include <cstdint>
#include <string>
#include <vector>

namespace drover {

// A file or folder under the store that goes, and why.
struct DiskItem {
  std::string path;
  std::string why;  // "logs of experiment 3", "working copy of run 7 (ended 9 days ago)", ...
  int64_t bytes = 0;
  std::string moved_to;  // where ApplyCleanup moved it (in the trash), until the trash is emptied
};

struct Cleanup {
  std::vector<int64_t> experiments;    // deleted with every record of theirs (drover rm)
  int64_t runs = 0;                    // the runs they hold
  std::vector<std::string> snapshots;  // snapshot records no experiment refers to any more
  std::vector<DiskItem> files;
  bool applied = false;  // false: a dry run, nothing was deleted
  int64_t Bytes() const {
    int64_t n = 0;
    for (const auto& f : files) n += f.bytes;
    return n;
  }
};

}  // namespace drover
