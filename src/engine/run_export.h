#pragma once
// A run's stored outputs with its reproducibility record, as one .tar.gz another machine reads
// without drover (drover export; docs/pipelines.md, "Export" gives the layout). Written by the
// CLI from the store, or by the daemon for its users (GET /runs/{id}/export), whose store is its
// own: the same archive either way.
#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/users.h"
#include "store/store.h"

namespace drover {

struct ExportOptions {
  bool code = true;  // the code snapshot under code/
  // The snapshot's owner (a root daemon's users): its files are copied with their rights, so a
  // file of theirs swapped for a link is never read with the daemon's. Null: the caller's own.
  const UnixUser* code_owner = nullptr;
};

struct ExportResult {
  size_t artifacts = 0;
};

// Writes run `run_id`'s archive to `out` (a new file; replaced when it exists). Artifacts are
// taken from the store's objects by hash, never through the outputs/ tree.
Result<ExportResult> ExportRun(Store& store, int64_t run_id, const std::string& out,
                               const ExportOptions& options = {});

}  // namespace drover
