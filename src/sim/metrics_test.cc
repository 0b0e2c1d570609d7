#include "sim/metrics.h"

#include <gtest/gtest.h>

namespace drover::sim {
namespace {

TEST(Summarize, HandComputed) {
  // One GPU: A (10 s) runs first, B (100 s) waits for it.
  std::vector<JobOutcome> jobs = {{0, 10, 10, 1, 0}, {0, 110, 100, 1, 2}};
  Summary s = Summarize(jobs, 1);
  EXPECT_EQ(s.jobs, 2u);
  EXPECT_DOUBLE_EQ(s.avg_jct_s, 60);
  EXPECT_DOUBLE_EQ(s.p99_jct_s, 110);
  EXPECT_DOUBLE_EQ(s.avg_queue_s, 5);
  // A: max(1, 10 / max(10, 60)) = 1; B: 110 / 100 = 1.1.
  EXPECT_DOUBLE_EQ(s.mean_bounded_slowdown, 1.05);
  EXPECT_DOUBLE_EQ(s.makespan_s, 110);
  EXPECT_DOUBLE_EQ(s.utilization, 1.0);
  EXPECT_EQ(s.preemptions, 2);
  EXPECT_EQ(Summarize({}, 4).jobs, 0u);
}

TEST(Summarize, P99IsTheNearestRank) {
  std::vector<JobOutcome> jobs;
  for (int i = 1; i <= 200; ++i) jobs.push_back({0, static_cast<double>(i), 1, 1, 0});
  EXPECT_DOUBLE_EQ(Summarize(jobs, 8).p99_jct_s, 198);  // ceil(0.99 x 200) = 198th
}

TEST(LowerBound, SrptServesTheSmallestRemainingWork) {
  // One GPU. A (100 s) at 0, B (10 s) at 50: SRPT runs A to 50, B to 60, A to 110.
  std::vector<TraceJob> jobs(2);
  jobs[0].submit_s = 0;
  jobs[0].duration_s = 100;
  jobs[0].gpus = 1;
  jobs[1].submit_s = 50;
  jobs[1].duration_s = 10;
  jobs[1].gpus = 1;
  LowerBound b = LowerBoundAvgJct(jobs, 1);
  EXPECT_DOUBLE_EQ(b.srpt_avg_jct_s, (110 + 10) / 2.0);
  EXPECT_DOUBLE_EQ(b.per_job_avg_jct_s, 55);
  EXPECT_DOUBLE_EQ(b.best_avg_jct_s, 60);
  // On 10 GPUs the relaxation is fast (work / 10): the per-job bound is the larger.
  b = LowerBoundAvgJct(jobs, 10);
  EXPECT_DOUBLE_EQ(b.srpt_avg_jct_s, (10 + 1) / 2.0);
  EXPECT_DOUBLE_EQ(b.best_avg_jct_s, 55);
  // A gap: the machine idles until the next release.
  jobs[1].submit_s = 500;
  b = LowerBoundAvgJct(jobs, 1);
  EXPECT_DOUBLE_EQ(b.srpt_avg_jct_s, (100 + 10) / 2.0);
}

TEST(Metrics, FinishTimeFairnessPerGroup) {
  // Team a: two jobs that never waited (ratio 1 each). Team b: a 100 s job that took 400 s
  // (ratio 4) and a 10 s job that took 30 s (floor 60 s: ratio 1).
  std::vector<JobOutcome> jobs = {{0, 100, 100, 1, 0, "a"},
                                  {0, 200, 200, 1, 0, "a"},
                                  {0, 400, 100, 1, 0, "b"},
                                  {0, 30, 10, 1, 0, "b"}};
  Summary s = Summarize(jobs, 2);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].group, "a");
  EXPECT_DOUBLE_EQ(s.groups[0].finish_time_fairness, 1);
  EXPECT_DOUBLE_EQ(s.groups[0].avg_queue_s, 0);
  EXPECT_EQ(s.groups[1].group, "b");
  EXPECT_EQ(s.groups[1].jobs, 2u);
  EXPECT_DOUBLE_EQ(s.groups[1].finish_time_fairness, 2.5);
  EXPECT_DOUBLE_EQ(s.groups[1].avg_queue_s, (300 + 20) / 2.0);
  EXPECT_DOUBLE_EQ(s.fairness_max_over_min, 2.5);
  // Jain: (1 + 2.5)^2 / (2 x (1 + 6.25)).
  EXPECT_DOUBLE_EQ(s.fairness_jain, 12.25 / 14.5);
}

}  // namespace
}  // namespace drover::sim
