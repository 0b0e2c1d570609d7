// The engine's watching: detectors on each run's metrics and GPU memory, GPU telemetry sampling
// (stored averaged, handed to the observer live), the idle-GPU and repeated-failure checks, and
// alerts: stored, deduplicated by key within the silence window, sent to the sinks.
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

void Engine::RaiseAlert(Alert alert, Millis now) { alerts_.Raise(std::move(alert), now); }

void Engine::RaiseRunAlert(const Live& live, const watch::Finding& f, const std::string& key_suffix,
                           Millis now) {
  alerts_.RaiseForRun(live.run, live.attempt ? live.attempt->number : 0, f, key_suffix, now);
}

void Engine::WatchPoints(Live& live, const std::vector<MetricPoint>& points, Millis now) {
  for (const auto& rf : watchers_.OnPoints(live.run.id, points)) {
    RaiseRunAlert(live, rf.finding, rf.key_suffix, now);
  }
}

void Engine::SampleTelemetry(Instant now) {
  if (options_.watch.telemetry_period_ms <= 0 || now.mono < next_sample_mono_) return;
  next_sample_mono_ = now.mono + options_.watch.telemetry_period_ms;
  if (pool_.devices().empty()) return;
  auto samples = probe_.Sample(now.wall);
  if (!samples.ok()) {
    // Old numbers shown as current would hide the problem: show none.
    if (!latest_samples_.empty() || sample_error_ != samples.status().message()) {
      spdlog::warn("sampling GPUs: {}", samples.status().message());
    }
    sample_error_ = samples.status().message();
    latest_samples_.clear();
    return;
  }
  sample_error_.clear();
  latest_samples_ = *samples;
  // Which runs hold each GPU, and the GPU memory of each run's processes (by process group).
  std::map<int, std::vector<int64_t>> holders;
  std::map<int, std::vector<RunOnGpu>> on_gpu;
  for (int64_t id : queue_.running()) {
    auto found = live_.find(id);
    if (found == live_.end()) continue;
    const Live& live = *found->second;
    for (int g : live.placement.gpus) {
      holders[g].push_back(id);
      on_gpu[g].push_back({id, live.run.experiment_id, live.attempt ? live.attempt->number : 0});
    }
  }
  health_.Check(*samples, pool_.devices(), on_gpu, now);  // alerts and drains (health_watch.h)
  std::map<int64_t, int64_t> run_memory;
  for (const GpuSample& s : *samples) {
    for (const GpuProcess& p : s.processes) {
      const std::optional<ExecHandle> owner = launcher_.OwnerOf(p.pid);
      if (!owner) continue;
      auto it = by_handle_.find(*owner);
      if (it == by_handle_.end() || p.memory_used < 0) continue;
      run_memory[it->second] += p.memory_used;
    }
  }
  for (const auto& g : telemetry_.Observe(*samples, holders, now.wall)) {
    for (int64_t id : g.runs) {
      auto found = live_.find(id);
      if (found == live_.end()) continue;
      const Live& live = *found->second;
      if (!g.idle) {
        RaiseRunAlert(live, g.finding, fmt::format("gpu:{}:input", g.gpu), now.wall);
        continue;
      }
      // One alert per GPU and run: the run is what someone has to look at.
      Alert a;
      a.kind = g.finding.kind;
      a.severity = g.finding.severity;
      a.key = fmt::format("gpu:{}:idle:run:{}", g.gpu, id);
      a.message = fmt::format("{} (run {})", g.finding.message, id);
      a.experiment_id = live.run.experiment_id;
      a.run_id = id;
      a.gpu = g.gpu;
      a.data = g.finding.data;
      RaiseAlert(std::move(a), now.wall);
    }
  }
  for (const auto& [run_id, bytes] : run_memory) {
    auto it = live_.find(run_id);
    if (it == live_.end()) continue;
    if (auto f = watchers_.OnGpuMemory(run_id, now.wall, bytes)) {
      RaiseRunAlert(*it->second, f->finding, f->key_suffix, now.wall);
    }
  }
  StoreSamples(*samples, /*flush_all=*/false);
  if (observer_) observer_->OnGpuSamples(*samples);
}

void Engine::StoreSamples(const std::vector<GpuSample>& samples, bool flush_all) {
  watch::GpuTelemetry::Rows rows = telemetry_.Bucket(samples, flush_all);
  if (rows.rows.empty()) return;
  Tx();
  if (Status st = store_.InsertGpuSamples(rows.rows, rows.counts); !st.ok()) Fail(st);
}

}  // namespace drover
