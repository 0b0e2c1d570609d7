// The engine's watching: each run's metric points to its detectors, and the running attempts
// handed to GPU telemetry (engine/telemetry_sampler.h), whose readings go to the observer live.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "engine/live.h"
#include "metrics/metric_lines.h"
#include "engine/recovery.h"
#include "common/strings.h"

namespace drover {

void Engine::WatchPoints(Live& live, const std::vector<MetricPoint>& points, Millis now) {
  for (const auto& rf : watchers_.OnPoints(live.run.id, points)) {
    alerts_.RaiseForRun(live.run, AttemptNumber(live), rf.finding, rf.key_suffix, now);
  }
}

void Engine::SampleTelemetry(Instant now) {
  std::optional<Millis> due = sampler_.NextDue(pool_.devices());
  if (!due || now.mono < *due) return;
  std::vector<RunOnGpus> running;
  for (int64_t id : queue_.running()) {
    auto found = live_.find(id);
    if (found == live_.end() || !found->second->attempt) continue;
    const Live& live = *found->second;
    running.push_back({id, live.run.experiment_id, live.attempt->number, live.placement.gpus,
                       HandleOf(*live.attempt)});
  }
  auto samples = sampler_.Sample(now, pool_.devices(), running,
                                 [this](int64_t pid) { return launcher_.OwnerOf(pid); });
  if (samples && observer_) observer_->OnGpuSamples(*samples);
}

}  // namespace drover
