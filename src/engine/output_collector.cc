#include "engine/output_collector.h"

namespace drover {

std::unique_ptr<OutputCollector> MakeOutputCollector(std::function<void()> wake, bool off_loop) {
  auto work = [](CollectJob& job, const std::function<bool()>&) {
    CollectDone d;
    d.run_id = job.run_id;
    Result<std::vector<Artifact>> stored =
        StoreOutputs(job.store_dir, job.run_id, job.tree, job.outputs);
    if (stored.ok()) d.artifacts = std::move(*stored);
    else d.status = stored.status();
    return d;
  };
  return std::make_unique<OutputCollector>(work, std::move(wake), !off_loop);
}

}  // namespace drover
