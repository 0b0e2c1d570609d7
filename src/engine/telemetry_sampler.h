#pragma once
// GPU telemetry, a component of the engine (docs/metrics.md, "GPU telemetry";
// docs/architecture.md): the probe read every `watch.telemetry_period_ms`, each reading handed to
// GPU health (HealthWatch::Check) and to the GPU detectors (idle GPU, input stall) and each run's
// GPU memory to its detectors, what they find raised as alerts, the readings stored averaged per
// bucket, and the latest kept for the scheduler (the least busy GPU) and `drover gpu ls`. It
// never includes engine/engine.h.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/alert_desk.h"
#include "engine/engine_context.h"
#include "engine/health_watch.h"
#include "exec/process_launcher.h"
#include "gpu/gpu_probe.h"
#include "watch/config.h"
#include "watch/watchers.h"

namespace drover {

// A running attempt as GPU telemetry sees it.
struct RunOnGpus {
  int64_t run_id = 0;
  int64_t experiment_id = 0;
  int attempt = 0;        // its number (0: unknown)
  std::vector<int> gpus;  // the indexes it holds
  ExecHandle handle;      // whose processes' GPU memory is the run's
};

class TelemetrySampler {
 public:
  // Which running attempt a process belongs to (ProcessLauncher::OwnerOf).
  using OwnerOf = std::function<std::optional<ExecHandle>(int64_t pid)>;
  TelemetrySampler(EngineContext& ctx, GpuProbe& probe, const watch::WatchConfig& config,
                   HealthWatch& health, watch::RunWatchers& watchers, AlertDesk& alerts)
      : ctx_(ctx), probe_(probe), config_(config), health_(health), watchers_(watchers),
        alerts_(alerts), telemetry_(config.detectors, config.telemetry_store_every_ms) {}

  // When the next reading is due (monotonic ms); none while there is nothing to read.
  std::optional<Millis> NextDue(const std::vector<GpuDevice>& devices) const;
  // One reading when it is due: returns it (nothing when none was due, or the probe failed: the
  // latest is then empty, old numbers shown as current would hide the problem).
  std::optional<std::vector<GpuSample>> Sample(Instant now, const std::vector<GpuDevice>& devices,
                                               const std::vector<RunOnGpus>& running,
                                               const OwnerOf& owner_of);
  // The buckets not stored yet, stored (the loop ends).
  void Flush() { Store({}, /*flush_all=*/true); }
  // The latest reading per GPU (empty before the first, and after a failed one).
  const std::vector<GpuSample>& latest() const { return latest_; }

 private:
  void Store(const std::vector<GpuSample>& samples, bool flush_all);

  EngineContext& ctx_;
  GpuProbe& probe_;
  const watch::WatchConfig& config_;
  HealthWatch& health_;
  watch::RunWatchers& watchers_;
  AlertDesk& alerts_;
  watch::GpuTelemetry telemetry_;  // each GPU's detectors and its telemetry rows
  Millis next_mono_ = 0;
  std::vector<GpuSample> latest_;
  std::string error_;  // the last sampling error, logged once
};

}  // namespace drover
