#include "gpu/background_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace drover {
namespace {

// A probe whose readings block until the test lets them go, and count themselves.
class GatedProbe : public GpuProbe {
 public:
  Result<std::vector<GpuDevice>> Devices() override { return std::vector<GpuDevice>{}; }
  Result<std::vector<GpuSample>> Sample(Millis now) override {
    entered = true;
    while (!open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    GpuSample s;
    s.t_ms = now;
    s.utilization = static_cast<double>(++reads);
    return std::vector<GpuSample>{s};
  }
  std::string Kind() const override { return "gated"; }
  std::string Describe() override { return "gated\n"; }
  std::atomic<bool> open{false};
  std::atomic<bool> entered{false};
  std::atomic<int> reads{0};
};

TEST(BackgroundGpuProbe, AnswersFromTheLatestReadingWithoutWaitingForTheDriver) {
  auto inner = std::make_unique<GatedProbe>();
  GatedProbe* gated = inner.get();
  RealClock clock;
  BackgroundGpuProbe probe(std::move(inner), clock, /*period_ms=*/10);
  // No reading yet, and the driver is stuck: an error after the short first wait, not a hang.
  auto first = probe.Sample(clock.Now());
  EXPECT_FALSE(first.ok());
  gated->open = true;
  while (gated->reads < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto s = probe.Sample(clock.Now());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_GE((*s)[0].utilization, 2);  // a recent reading, read by the thread
  EXPECT_EQ(probe.Kind(), "gated");
}

TEST(BackgroundGpuProbe, AStuckDriverDoesNotHoldUpShutdown) {
  auto inner = std::make_unique<GatedProbe>();  // not opened: the first reading hangs
  GatedProbe* gated = inner.get();               // kept alive by the thread left behind
  static RealClock clock;
  {
    BackgroundGpuProbe probe(std::move(inner), clock, /*period_ms=*/10);
    while (!gated->entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The destructor returned (after its bounded wait) while the reading still hangs; let the
  // driver go now, and the thread ends on its own.
  EXPECT_EQ(gated->reads, 0);
  gated->open = true;
}

TEST(BackgroundGpuProbe, AStaleReadingIsAnError) {
  auto inner = std::make_unique<GatedProbe>();
  inner->open = true;
  RealClock clock;
  BackgroundGpuProbe probe(std::move(inner), clock, /*period_ms=*/10);
  ASSERT_TRUE(probe.Sample(clock.Now()).ok());
  auto old = probe.Sample(clock.Now() + 60'000);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("driver may be hung"), std::string::npos);
}

}  // namespace
}  // namespace drover
