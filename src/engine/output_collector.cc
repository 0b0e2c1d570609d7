#include "engine/output_collector.h"

namespace drover {

std::unique_ptr<OutputCollector> MakeOutputCollector(std::function<void()> wake, bool off_loop) {
  auto work = [](CollectJob& job, const std::function<bool()>&) {
    CollectDone d;
    d.run_id = job.run_id;
    try {
      Result<std::vector<Artifact>> stored =
          StoreOutputs(job.store_dir, job.run_id, job.tree, job.outputs);
      if (stored.ok()) d.artifacts = std::move(*stored);
      else d.status = stored.status();
    } catch (const std::exception& e) {
      // Nothing a run wrote may end the daemon: the run fails with the reason.
      d.status = Status(Code::kIo, std::string("storing its outputs failed: ") + e.what());
    }
    return d;
  };
  return std::make_unique<OutputCollector>(work, std::move(wake), !off_loop);
}

}  // namespace drover
