#include "watch/watchers.h"

#include <gtest/gtest.h>

namespace drover::watch {
namespace {

GpuSample Sample(int index, Millis t, double util, int64_t used) {
  GpuSample s;
  s.index = index;
  s.t_ms = t;
  s.utilization = util;
  s.memory_used = used;
  s.memory_total = 100;
  return s;
}

// One averaged row per GPU per bucket, emitted when a reading of the next bucket comes (or when
// the engine ends); a value unknown in any sample stays unknown.
TEST(GpuTelemetry, RowsAverageEachGpusSamplesPerBucket) {
  GpuTelemetry t(DetectorConfig{}, 60'000);
  EXPECT_TRUE(t.Bucket({Sample(0, 1'000, 10, 40)}, false).rows.empty());
  EXPECT_TRUE(t.Bucket({Sample(0, 31'000, 30, 60)}, false).rows.empty());
  GpuSample unknown = Sample(1, 5'000, -1, 10);
  EXPECT_TRUE(t.Bucket({unknown}, false).rows.empty());
  auto rows = t.Bucket({Sample(0, 61'000, 90, 90), Sample(1, 20'000, 50, 30)}, false);
  ASSERT_EQ(rows.rows.size(), 1u);  // GPU 0's first minute
  EXPECT_EQ(rows.rows[0].index, 0);
  EXPECT_EQ(rows.rows[0].t_ms, 0);
  EXPECT_DOUBLE_EQ(rows.rows[0].utilization, 20);
  EXPECT_EQ(rows.rows[0].memory_used, 50);
  EXPECT_EQ(rows.counts[0], 2);
  auto rest = t.Bucket({}, true);
  ASSERT_EQ(rest.rows.size(), 2u);
  EXPECT_EQ(rest.rows[1].index, 1);
  EXPECT_LT(rest.rows[1].utilization, 0);  // unknown in one of its samples
  EXPECT_EQ(rest.rows[1].memory_used, 20);
}

// An idle GPU is reported about the runs holding it; a new set of holders starts afresh.
TEST(GpuTelemetry, IdlenessIsAboutTheRunsHoldingTheGpuNow) {
  DetectorConfig c;
  c.idle_utilization = 30;
  c.idle_for_ms = 10'000;
  GpuTelemetry t(c, 60'000);
  std::map<int, std::vector<int64_t>> held = {{0, {7}}};
  auto idle = [&](Millis now) {
    for (const auto& f : t.Observe({Sample(0, now, 1, 10)}, held, now)) {
      if (f.idle) return f.runs;
    }
    return std::vector<int64_t>{};
  };
  EXPECT_TRUE(idle(0).empty());
  EXPECT_EQ(idle(11'000), std::vector<int64_t>{7});
  held[0] = {8};  // run 8 holds it now: its own ten seconds first
  EXPECT_TRUE(idle(12'000).empty());
  EXPECT_TRUE(idle(20'000).empty());
  EXPECT_EQ(idle(23'000), std::vector<int64_t>{8});
}

TEST(RunWatchers, EachAttemptIsWatchedUntilItsRunIsFinal) {
  RunWatchers w(DetectorConfig{});
  Spec spec;
  w.Start(3, spec);
  w.Start(4, spec);
  EXPECT_EQ(w.watched(), 2u);
  w.Stop(4);  // did not start after all
  drover::Run r;
  r.id = 3;
  w.OnFinal(r);
  EXPECT_EQ(w.watched(), 0u);
  EXPECT_TRUE(w.OnPoints(3, {MetricPoint{}}).empty());
  EXPECT_FALSE(w.OnGpuMemory(3, 0, 1 << 30));
}

}  // namespace
}  // namespace drover::watch
