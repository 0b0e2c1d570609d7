#pragma once
// A submit's work done off the engine's loop (PrepareSubmit), and what a submit returns.
#include <string>
#include <vector>
#include "common/status.h"
#include "common/users.h"
#include "model/run.h"
#include "model/spec.h"

namespace drover {

// A submit's work that needs none of the engine's state: the grid, the commands and the code
// snapshot. Safe on any thread; the daemon does it on the HTTP worker, off the loop, so a big or
// slow workdir never holds the loop.
struct PreparedSubmit {
  Spec spec;
  std::vector<Json> params;                     // one per run
  std::vector<std::vector<std::string>> argvs;  // one per run
  Snapshot snapshot;
  // A pipeline's: each run's stage (index into spec.stages) and needs (indexes of earlier runs);
  // empty for other specs. The stages' inputs are hashed into spec.stages[i].input_hashes.
  std::vector<int> stages;
  std::vector<std::vector<int>> needs;
  // A search's first trials: how they were proposed (the random start); none for other specs.
  TrialOrigin origin = TrialOrigin::kNone;
  // Who submitted it (the daemon's caller); left unknown (uid -1), the engine's own user.
  UnixUser submitter;
};
// `reader` set (a root daemon's submit, EngineOptions::runs_as_submitter): the project's files
// are read with that user's rights, and the snapshot is theirs. `now`: when its snapshot is
// recorded as taken (the caller's clock).
Result<PreparedSubmit> PrepareSubmit(const Spec& spec, const std::string& store_dir, Millis now,
                                     const UnixUser* reader = nullptr);

struct SubmitResult {
  int64_t experiment_id = 0;
  std::vector<Run> runs;
  Snapshot snapshot;
  // What the submitter should know though nothing was refused: runs that will see no GPU on a
  // machine that has some (NoGpuNote).
  std::vector<std::string> notes;
};

}  // namespace drover
