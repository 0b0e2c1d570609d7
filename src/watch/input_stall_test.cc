#include <gtest/gtest.h>

#include "watch/detectors.h"

namespace drover::watch {
namespace {

TEST(InputStallDetector, BurstsBetweenIdleSamplesAreAStalledInputPipeline) {
  DetectorConfig c;
  InputStallDetector d(0, c);
  std::optional<Finding> f;
  int fired = 0;
  // A data-loading-bound run: 2 samples of work, 2 of waiting, over and over.
  for (int i = 0; i < 60; ++i) {
    double u = (i % 4 < 2) ? 95 : 2;
    if (auto x = d.Add(i * 5000, u, true)) {
      f = x;
      ++fired;
    }
  }
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(fired, 1);  // once per episode
  EXPECT_EQ(f->kind, "input_stall");
  EXPECT_NE(f->message.find("waits for its input data"), std::string::npos) << f->message;
  EXPECT_GE(f->data["bursts"].get<int>(), 3);
}

TEST(InputStallDetector, SteadyWorkSteadyIdleAndNoHolderAreNot) {
  DetectorConfig c;
  InputStallDetector busy(0, c), idle(1, c), free(2, c);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(busy.Add(i * 5000, 90 + (i % 3), true).has_value());
    EXPECT_FALSE(idle.Add(i * 5000, 1, true).has_value());
    EXPECT_FALSE(free.Add(i * 5000, (i % 4 < 2) ? 95 : 2, false).has_value());
  }
  // One dip in a busy run is not a pattern.
  InputStallDetector once(3, c);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(once.Add(i * 5000, i == 50 ? 0 : 92, true).has_value());
  }
}

TEST(Advice, EachDetectorsAlertSaysWhatToTry) {
  for (const char* kind : {"diverged", "loss_spike", "plateau", "idle_gpu", "input_stall",
                           "memory_leak", "fragmentation", "stalled", "repeated_failure"}) {
    auto a = AdviceFor(kind);
    ASSERT_TRUE(a.has_value()) << kind;
    EXPECT_FALSE(a->cause.empty());
    EXPECT_GE(a->remedies.size(), 2u) << kind;
  }
  EXPECT_NE(AdviceFor("diverged")->remedies[0].find("learning rate"), std::string::npos);
  EXPECT_NE(AdviceFor("input_stall")->remedies[0].find("num_workers"), std::string::npos);
  EXPECT_NE(AdviceFor("fragmentation")->remedies[0].find("expandable_segments:True"),
            std::string::npos);
  EXPECT_NE(AdviceFor("memory_leak")->remedies[0].find(".item()"), std::string::npos);
  EXPECT_FALSE(AdviceFor("run").has_value());
}

}  // namespace
}  // namespace drover::watch
