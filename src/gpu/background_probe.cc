#include "gpu/background_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace drover {

BackgroundGpuProbe::BackgroundGpuProbe(std::unique_ptr<GpuProbe> inner, const Clock& clock,
                                       Millis period_ms)
    : inner_(std::move(inner)), clock_(clock), period_ms_(std::max<Millis>(1, period_ms)) {
  thread_ = std::thread([this] { Loop(); });
}

BackgroundGpuProbe::~BackgroundGpuProbe() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundGpuProbe::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Millis t = clock_.Now();
    auto reading = inner_->Sample(t);
    lock.lock();
    latest_ = std::move(reading);
    latest_ms_ = t;
    have_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::milliseconds(period_ms_), [this] { return stop_; });
  }
}

Result<std::vector<GpuSample>> BackgroundGpuProbe::Sample(Millis now) {
  std::unique_lock<std::mutex> lock(mu_);
  // The very first reading is worth a short wait: the engine samples once at start.
  cv_.wait_for(lock, std::chrono::seconds(2), [this] { return have_ || stop_; });
  if (!have_) return Unavailable("the GPU probe has not answered yet");
  if (!latest_.ok()) return latest_.status();
  if (now - latest_ms_ > 3 * period_ms_ + 2000) {
    return Unavailable(fmt::format("the last GPU reading is {} ms old; the driver may be hung",
                                   now - latest_ms_));
  }
  return *latest_;
}

}  // namespace drover
