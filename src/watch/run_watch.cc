#include "watch/run_watch.h"

#include <algorithm>
#include <cmath>

namespace drover::watch {

bool IsLossLike(const Spec& spec, const std::string& name) {
  if (!spec.monitor.watch.empty()) {
    return std::find(spec.monitor.watch.begin(), spec.monitor.watch.end(), name) !=
           spec.monitor.watch.end();
  }
  return name.find("loss") != std::string::npos;
}

namespace {
constexpr const char* kAllocated = "cuda_allocated_bytes";
constexpr const char* kReserved = "cuda_reserved_bytes";
constexpr const char* kFragmentation = "cuda_fragmentation";
}  // namespace

RunWatch::RunWatch(const Spec& spec, const DetectorConfig& config)
    : spec_(spec),
      config_(config),
      allocator_leak_(kAllocated, config),
      driver_leak_("GPU memory used by the run's processes", config),
      fragmentation_(config) {
  if (spec.objective) {
    plateau_metric_ = spec.objective->metric;
    plateau_ = std::make_unique<PlateauDetector>(plateau_metric_, spec.objective->maximize, config);
  } else {
    plateau_metric_ = "loss";
    plateau_ = std::make_unique<PlateauDetector>(plateau_metric_, /*maximize=*/false, config);
  }
}

std::vector<RunFinding> RunWatch::OnPoint(const MetricPoint& p) {
  std::vector<RunFinding> out;
  if (!std::isfinite(p.value)) return out;
  auto add = [&](std::optional<Finding> f, const std::string& suffix) {
    if (f) out.push_back({std::move(*f), suffix});
  };
  if (IsLossLike(spec_, p.name)) {
    auto& d = spikes_[p.name];
    if (!d) d = std::make_unique<SpikeDetector>(p.name, config_);
    add(d->Add(p.step, p.value), "loss_spike:" + p.name);
  }
  if (p.name == plateau_metric_) add(plateau_->Add(p.step, p.value), "plateau:" + p.name);
  if (p.name == kAllocated) {
    last_allocated_ = static_cast<int64_t>(p.value);
    last_allocator_step_ = p.step;
    add(allocator_leak_.Add(p.t_ms, last_allocated_), std::string("memory_leak:") + kAllocated);
  }
  if (pending_fragmentation_ && pending_fragmentation_->step != p.step) FlushFragmentation(out);
  if (p.name == kReserved) {
    // The Python client logs allocated and reserved on one line: the ratio with its size.
    pending_fragmentation_.reset();
    last_reserved_ = static_cast<int64_t>(p.value);
    if (last_allocator_step_ == p.step && last_reserved_ > 0) {
      double ratio = static_cast<double>(last_reserved_ - last_allocated_) / last_reserved_;
      add(fragmentation_.Add(p.step, ratio, last_reserved_), "fragmentation");
    }
  }
  if (p.name == kFragmentation && (last_reserved_ < 0 || last_allocator_step_ != p.step)) {
    pending_fragmentation_ = p;
  }
  return out;
}

void RunWatch::FlushFragmentation(std::vector<RunFinding>& out) {
  // Only the ratio was logged on that line: no size to judge it by.
  auto f = fragmentation_.Add(pending_fragmentation_->step, pending_fragmentation_->value, -1);
  pending_fragmentation_.reset();
  if (f) out.push_back({std::move(*f), "fragmentation"});
}

std::optional<RunFinding> RunWatch::OnGpuMemory(Millis t_ms, int64_t bytes) {
  auto f = driver_leak_.Add(t_ms, bytes);
  if (!f) return std::nullopt;
  return RunFinding{std::move(*f), "memory_leak:driver"};
}

}  // namespace drover::watch
