#include "watch/watchers.h"

#include <algorithm>

namespace drover::watch {

void RunWatchers::Start(int64_t run_id, const Spec& spec) {
  runs_[run_id] = std::make_unique<RunWatch>(spec, config_);
}

std::vector<RunFinding> RunWatchers::OnPoints(int64_t run_id,
                                              const std::vector<MetricPoint>& points) {
  std::vector<RunFinding> out;
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return out;
  for (const MetricPoint& p : points) {
    for (auto& f : it->second->OnPoint(p)) out.push_back(std::move(f));
  }
  return out;
}

std::optional<RunFinding> RunWatchers::OnGpuMemory(int64_t run_id, Millis t_ms, int64_t bytes) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return std::nullopt;
  return it->second->OnGpuMemory(t_ms, bytes);
}

std::vector<GpuTelemetry::GpuFinding> GpuTelemetry::Observe(
    const std::vector<GpuSample>& samples, const std::map<int, std::vector<int64_t>>& holders,
    Millis now) {
  std::vector<GpuFinding> out;
  static const std::vector<int64_t> kNone;
  for (const GpuSample& s : samples) {
    auto h = holders.find(s.index);
    const std::vector<int64_t>& held = h == holders.end() ? kNone : h->second;
    // Idleness is about the runs holding the GPU now: a new set of holders starts afresh.
    const bool changed = holders_[s.index] != held;
    auto [idle, idle_new] = idle_.try_emplace(s.index, s.index, config_);
    if (!idle_new && changed) idle->second = IdleGpuDetector(s.index, config_);
    auto [input, input_new] = input_.try_emplace(s.index, s.index, config_);
    if (!input_new && changed) input->second = InputStallDetector(s.index, config_);
    holders_[s.index] = held;
    if (auto stall = input->second.Add(now, s.utilization, !held.empty())) {
      out.push_back({s.index, false, held, std::move(*stall)});
    }
    if (auto f = idle->second.Add(now, s.utilization, !held.empty())) {
      out.push_back({s.index, true, held, std::move(*f)});
    }
  }
  return out;
}

GpuTelemetry::Rows GpuTelemetry::Bucket(const std::vector<GpuSample>& samples, bool flush_all) {
  // One averaged row per GPU per store_every: a year of 5 s samples would be 6 million rows per
  // GPU; at one a minute it is half a million.
  const Millis every = std::max<Millis>(1, every_ms_);
  Rows out;
  auto emit = [&](SampleBucket& b) {
    if (b.count == 0) return;
    GpuSample row = b.sum;
    auto mean = [&](double& v) {
      if (v >= 0) v /= b.count;
    };
    mean(row.utilization);
    mean(row.temperature_c);
    mean(row.power_w);
    mean(row.pcie_tx_bytes_per_s);
    mean(row.pcie_rx_bytes_per_s);
    if (row.memory_used >= 0) row.memory_used /= b.count;
    out.rows.push_back(row);
    out.counts.push_back(b.count);
    b = SampleBucket{};
  };
  for (const GpuSample& s : samples) {
    SampleBucket& b = buckets_[s.index];
    Millis bucket = s.t_ms - s.t_ms % every;
    if (b.count > 0 && b.sum.t_ms != bucket) emit(b);
    if (b.count == 0) {
      b.sum = s;
      b.sum.t_ms = bucket;
      b.sum.processes.clear();
      b.count = 1;
      continue;
    }
    // A value unknown in any sample of the bucket stays unknown.
    auto add = [](double& acc, double v) { acc = (acc < 0 || v < 0) ? -1 : acc + v; };
    add(b.sum.utilization, s.utilization);
    add(b.sum.temperature_c, s.temperature_c);
    add(b.sum.power_w, s.power_w);
    add(b.sum.pcie_tx_bytes_per_s, s.pcie_tx_bytes_per_s);
    add(b.sum.pcie_rx_bytes_per_s, s.pcie_rx_bytes_per_s);
    b.sum.memory_used =
        (b.sum.memory_used < 0 || s.memory_used < 0) ? -1 : b.sum.memory_used + s.memory_used;
    b.sum.memory_total = s.memory_total;
    b.count += 1;
  }
  if (flush_all) {
    for (auto& [gpu, b] : buckets_) emit(b);
  }
  return out;
}

}  // namespace drover::watch
