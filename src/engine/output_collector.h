#pragma once
// A stage's declared outputs, stored off the engine's loop (docs/pipelines.md): hashing and
// copying a checkpoint of gigabytes takes seconds, and the loop must go on running, watching and
// answering meanwhile. The run ends (succeeded, or failed for a missing output) when its job
// comes back.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/worker.h"
#include "exec/artifacts.h"

namespace drover {

struct CollectJob {
  int64_t run_id = 0;
  std::string store_dir;
  RunTree tree;
  std::vector<std::string> outputs;
};

struct CollectDone {
  int64_t run_id = 0;
  Status status;  // FailedPrecondition: an output was not written
  std::vector<Artifact> artifacts;
};

using OutputCollector = Worker<CollectJob, CollectDone>;
// On a thread of its own (`wake` after each job), or at once in Start when not `off_loop`.
std::unique_ptr<OutputCollector> MakeOutputCollector(std::function<void()> wake, bool off_loop);

}  // namespace drover
