#pragma once
// GPU health, a component of the engine (docs/metrics.md, "GPU health"; docs/architecture.md):
// each telemetry reading evaluated per GPU, the GPUs drained for a critical fault, and the
// drain book in the store folder (gpu/drain_book.h) that keeps drains across restarts and
// through which an admin drains or clears a GPU (`drover gpu drain|clear`). The engine asks
// which GPUs are drained at each scheduling pass (Drained) and hands over each reading (Check);
// what it finds is raised through EngineContext::Alert.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/engine_context.h"
#include "gpu/drain_book.h"
#include "gpu/health.h"
#include "model/gpu.h"

namespace drover {

// A running run on a GPU, as a health finding names it.
struct RunOnGpu {
  int64_t run_id = 0;
  int64_t experiment_id = 0;
  int attempt = 0;  // its attempt's number (0: unknown)
};

class HealthWatch {
 public:
  // `drain_book`: the book's path (DrainBookPath of the store folder).
  HealthWatch(EngineContext& ctx, std::string drain_book) : ctx_(ctx) {
    book_.path = std::move(drain_book);
  }

  // The indexes of `devices` drained now (the book is looked at again at most once a second: an
  // admin's drain or clear is read back and said in an alert).
  std::set<int> Drained(const std::vector<GpuDevice>& devices, Instant now);
  // One reading of every GPU: findings raised as alerts (on a GPU's runs too, by `holders`: the
  // runs on each GPU index), a critical one drains its GPU (all its MIG instances) in the book.
  void Check(const std::vector<GpuSample>& samples, const std::vector<GpuDevice>& devices,
             const std::map<int, std::vector<RunOnGpu>>& holders, Instant now);

 private:
  // The book read again when it changed on disk.
  void Refresh(const std::vector<GpuDevice>& devices, Instant now);

  // The book as last read: its identity (a change renames a new file over it) and when to look
  // again.
  struct Book {
    std::string path;
    bool present = false;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    Millis next_look_mono = 0;
    std::string unreadable;  // the last error reading it, logged once
  };

  EngineContext& ctx_;
  Book book_;
  bool looked_ = false;                         // the book was read once
  std::map<std::string, DrainEntry> drained_;   // by device key, as last read or written
  std::map<std::string, HealthMemory> memory_;  // by the GPU's key (a MIG instance's GPU)
  std::map<std::string, HealthCounters> seen_;  // what the book's "seen" holds
  HealthConfig config_;
};

}  // namespace drover
