#include "gpu/background_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace drover {

struct BackgroundGpuProbe::State {
  std::unique_ptr<GpuProbe> inner;
  const Clock* clock = nullptr;
  Millis period_ms = 5000;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool exited = false;
  bool have = false;
  bool taken = false;  // Sample() has returned the latest reading (its XIDs are cleared then)
  Result<std::vector<GpuSample>> latest = std::vector<GpuSample>{};
  Millis latest_ms = 0;
};

namespace {
constexpr auto kShutdownWait = std::chrono::seconds(5);
}

BackgroundGpuProbe::BackgroundGpuProbe(std::unique_ptr<GpuProbe> inner, const Clock& clock,
                                       Millis period_ms)
    : state_(std::make_shared<State>()), kind_(inner->Kind()) {
  state_->inner = std::move(inner);
  state_->clock = &clock;
  state_->period_ms = std::max<Millis>(1, period_ms);
  std::thread([s = state_] {
    std::unique_lock<std::mutex> lock(s->mu);
    while (!s->stop) {
      lock.unlock();
      Millis t = s->clock->Now();
      auto reading = s->inner->Sample(t);
      lock.lock();
      // XIDs are events, each in one reading: those of a reading nobody took yet carry over into
      // the next, so none is lost between the thread's readings and the engine's.
      if (s->have && !s->taken && s->latest.ok() && reading.ok()) {
        for (GpuSample& next : *reading) {
          for (const GpuSample& prev : *s->latest) {
            if (prev.index != next.index || prev.xids.empty()) continue;
            next.xids.insert(next.xids.begin(), prev.xids.begin(), prev.xids.end());
          }
        }
      }
      s->taken = false;
      s->latest = std::move(reading);
      s->latest_ms = t;
      s->have = true;
      s->cv.notify_all();
      s->cv.wait_for(lock, std::chrono::milliseconds(s->period_ms), [&] { return s->stop; });
    }
    s->exited = true;
    s->cv.notify_all();
  }).detach();
}

BackgroundGpuProbe::~BackgroundGpuProbe() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->stop = true;
  state_->cv.notify_all();
  // A reading stuck in the driver is not waited for past kShutdownWait; the thread keeps the
  // state alive by its own reference and ends whenever the driver lets it.
  state_->cv.wait_for(lock, kShutdownWait, [this] { return state_->exited; });
}

Result<std::vector<GpuDevice>> BackgroundGpuProbe::Devices() { return state_->inner->Devices(); }

std::string BackgroundGpuProbe::Describe() { return state_->inner->Describe(); }

Result<std::vector<GpuSample>> BackgroundGpuProbe::Sample(Millis now) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  // The very first reading is worth a short wait: the engine samples once at start.
  s.cv.wait_for(lock, std::chrono::seconds(2), [&] { return s.have || s.stop; });
  if (!s.have) return Unavailable("the GPU probe has not answered yet");
  if (!s.latest.ok()) return s.latest.status();
  if (now - s.latest_ms > 3 * s.period_ms + 2000) {
    return Unavailable(fmt::format("the last GPU reading is {} ms old; the driver may be hung",
                                   now - s.latest_ms));
  }
  std::vector<GpuSample> out = *s.latest;
  // The same reading asked for again reports its XIDs once.
  for (GpuSample& g : *s.latest) g.xids.clear();
  s.taken = true;
  return out;
}

}  // namespace drover
