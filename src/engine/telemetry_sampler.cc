// GPU telemetry, a component of the engine (engine/telemetry_sampler.h).
#include "engine/telemetry_sampler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>

namespace drover {

std::optional<Millis> TelemetrySampler::NextDue(const std::vector<GpuDevice>& devices) const {
  if (devices.empty() || config_.telemetry_period_ms <= 0) return std::nullopt;
  return next_mono_;
}

std::optional<std::vector<GpuSample>> TelemetrySampler::Sample(
    Instant now, const std::vector<GpuDevice>& devices, const std::vector<RunOnGpus>& running,
    const OwnerOf& owner_of) {
  if (config_.telemetry_period_ms <= 0 || now.mono < next_mono_) return std::nullopt;
  next_mono_ = now.mono + config_.telemetry_period_ms;
  if (devices.empty()) return std::nullopt;
  auto samples = probe_.Sample(now.wall);
  if (!samples.ok()) {
    // Old numbers shown as current would hide the problem: show none.
    if (!latest_.empty() || error_ != samples.status().message()) {
      spdlog::warn("sampling GPUs: {}", samples.status().message());
    }
    error_ = samples.status().message();
    latest_.clear();
    return std::nullopt;
  }
  error_.clear();
  latest_ = *samples;
  // Which runs hold each GPU, and the GPU memory of each run's processes (by its handle).
  std::map<int, std::vector<int64_t>> holders;
  std::map<int, std::vector<RunOnGpu>> on_gpu;
  std::map<ExecHandle, const RunOnGpus*> by_handle;
  std::map<int64_t, const RunOnGpus*> by_id;
  for (const RunOnGpus& r : running) {
    by_handle[r.handle] = &r;
    by_id[r.run_id] = &r;
    for (int g : r.gpus) {
      holders[g].push_back(r.run_id);
      on_gpu[g].push_back({r.run_id, r.experiment_id, r.attempt});
    }
  }
  health_.Check(*samples, devices, on_gpu, now);  // alerts and drains (health_watch.h)
  std::map<int64_t, int64_t> run_memory;
  for (const GpuSample& s : *samples) {
    for (const GpuProcess& p : s.processes) {
      const std::optional<ExecHandle> owner = owner_of(p.pid);
      if (!owner) continue;
      auto it = by_handle.find(*owner);
      if (it == by_handle.end() || p.memory_used < 0) continue;
      run_memory[it->second->run_id] += p.memory_used;
    }
  }
  for (const auto& g : telemetry_.Observe(*samples, holders, now.wall)) {
    for (int64_t id : g.runs) {
      auto found = by_id.find(id);
      if (found == by_id.end()) continue;
      const RunOnGpus& r = *found->second;
      if (!g.idle) {
        alerts_.RaiseForRun(r.run_id, r.experiment_id, r.attempt, g.finding,
                            fmt::format("gpu:{}:input", g.gpu), now.wall);
        continue;
      }
      // One alert per GPU and run: the run is what someone has to look at.
      Alert a;
      a.kind = g.finding.kind;
      a.severity = g.finding.severity;
      a.key = fmt::format("gpu:{}:idle:run:{}", g.gpu, id);
      a.message = fmt::format("{} (run {})", g.finding.message, id);
      a.experiment_id = r.experiment_id;
      a.run_id = id;
      a.gpu = g.gpu;
      a.data = g.finding.data;
      alerts_.Raise(std::move(a), now.wall);
    }
  }
  for (const auto& [run_id, bytes] : run_memory) {
    auto found = by_id.find(run_id);  // always there (run_memory's ids come from `running`)
    if (found == by_id.end()) continue;
    const RunOnGpus& r = *found->second;
    if (auto f = watchers_.OnGpuMemory(run_id, now.wall, bytes)) {
      alerts_.RaiseForRun(r.run_id, r.experiment_id, r.attempt, f->finding, f->key_suffix,
                          now.wall);
    }
  }
  Store(*samples, /*flush_all=*/false);
  return std::move(*samples);
}

void TelemetrySampler::Store(const std::vector<GpuSample>& samples, bool flush_all) {
  watch::GpuTelemetry::Rows rows = telemetry_.Bucket(samples, flush_all);
  if (rows.rows.empty()) return;
  ctx_.Tx();
  if (Status st = ctx_.store().InsertGpuSamples(rows.rows, rows.counts); !st.ok()) ctx_.Fail(st);
}

}  // namespace drover
