#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace drover::sim {
namespace {

constexpr double kHour = 3600;

Trace Jobs(std::vector<std::tuple<double, double, int>> rows) {
  Trace t;
  t.source = "test";
  int64_t id = 0;
  for (auto [submit, duration, gpus] : rows) {
    TraceJob j;
    j.id = ++id;
    j.submit_s = submit;
    j.duration_s = duration;
    j.gpus = gpus;
    j.group = "g";
    t.jobs.push_back(j);
  }
  return t;
}

SimOptions Cluster(int nodes, int per_node, sched::PolicyKind k) {
  SimOptions o;
  o.nodes = nodes;
  o.gpus_per_node = per_node;
  o.policy.kind = k;
  return o;
}

TEST(Simulator, FifoQueuesBehindTheFirstJob) {
  auto r = Simulate(Jobs({{0, 100, 1}, {10, 10, 1}}), Cluster(1, 1, sched::PolicyKind::kFifo));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->outcomes[0].end_s, 100);
  EXPECT_DOUBLE_EQ(r->outcomes[1].end_s, 110);
  EXPECT_DOUBLE_EQ(r->summary.avg_jct_s, 100);
  EXPECT_DOUBLE_EQ(r->summary.avg_queue_s, 45);
  EXPECT_EQ(r->summary.preemptions, 0);
  EXPECT_DOUBLE_EQ(r->summary.utilization, 1.0);
}

TEST(Simulator, OracleSrtfPreemptsAndPaysTheRestartPenalty) {
  SimOptions o = Cluster(1, 1, sched::PolicyKind::kSrtf);
  o.oracle = true;
  o.policy.min_runtime_ms = 0;
  auto r = Simulate(Jobs({{0, 100, 1}, {10, 10, 1}}), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->outcomes[1].end_s, 20);        // the short one runs at once
  EXPECT_DOUBLE_EQ(r->outcomes[0].end_s, 20 + 90 + 30);  // the rest of A, plus the penalty
  EXPECT_EQ(r->outcomes[0].preemptions, 1);
  EXPECT_EQ(r->summary.preemptions, 1);
  // With the minimum run time (10 min by default) A is too young to stop.
  o.policy.min_runtime_ms = 10 * 60 * 1000;
  r = Simulate(Jobs({{0, 100, 1}, {10, 10, 1}}), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->summary.preemptions, 0);
}

TEST(Simulator, LasDemotesALongJobAfterSixteenGpuHours) {
  // A runs 20 h on 1 GPU; B (1 h) arrives at 17 h, after A crossed 16 GPU-hours: B goes first.
  auto r = Simulate(Jobs({{0, 20 * kHour, 1}, {17 * kHour, kHour, 1}}),
                    Cluster(1, 1, sched::PolicyKind::kLas));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->outcomes[1].end_s, 18 * kHour);
  EXPECT_DOUBLE_EQ(r->outcomes[0].end_s, 21 * kHour + 30);
  // Arriving at 10 h, while A is still in the first queue, B waits (FIFO within a queue).
  r = Simulate(Jobs({{0, 20 * kHour, 1}, {10 * kHour, kHour, 1}}),
               Cluster(1, 1, sched::PolicyKind::kLas));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->outcomes[1].end_s, 21 * kHour);
  EXPECT_EQ(r->summary.preemptions, 0);
}

TEST(Simulator, GangsAndClusterSize) {
  // 2 machines of 4: a 4-GPU job and two 2-GPU jobs run at once; a 6-GPU job needs both machines.
  auto r = Simulate(Jobs({{0, 10, 4}, {0, 10, 2}, {0, 10, 2}, {0, 10, 6}}),
                    Cluster(2, 4, sched::PolicyKind::kFifo));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->outcomes[0].end_s, 10);
  EXPECT_DOUBLE_EQ(r->outcomes[1].end_s, 10);
  EXPECT_DOUBLE_EQ(r->outcomes[2].end_s, 10);
  EXPECT_DOUBLE_EQ(r->outcomes[3].end_s, 20);
  auto too_big = Simulate(Jobs({{0, 10, 9}}), Cluster(2, 4, sched::PolicyKind::kFifo));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find(
                "1 job(s) of test ask for more GPUs (up to 9) than the cluster has (8)"),
            std::string::npos)
      << too_big.status().message();
}

TEST(Simulator, PredictionsComeFromFinishedJobs) {
  // Two 100 s jobs then a third: its prediction (100 s) is exact.
  auto r = Simulate(Jobs({{0, 100, 1}, {200, 100, 1}, {400, 100, 1}}),
                    Cluster(1, 1, sched::PolicyKind::kSrtf));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->predicted_jobs, 2);
  EXPECT_DOUBLE_EQ(r->prediction_median_abs_log_error, 0);
}

TEST(Simulator, RealPhillyDaysReplayCompletely) {
  const std::string path =
      std::string(DROVER_SOURCE_DIR) + "/../shared/data/traces/philly-2017-sep-oct.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto trace = ReadPhillyTrace(path, *ParseUtcTime("2017-10-02"), *ParseUtcTime("2017-10-03"));
  ASSERT_TRUE(trace.ok());
  for (auto k : {sched::PolicyKind::kFifo, sched::PolicyKind::kLas, sched::PolicyKind::kSrtf}) {
    auto r = Simulate(*trace, Cluster(56, 8, k));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->summary.jobs, trace->jobs.size());
    for (const auto& j : r->outcomes) {
      ASSERT_GE(j.end_s + 1e-6, j.submit_s + j.duration_s);  // nobody finishes early
    }
    EXPECT_LE(r->summary.utilization, 1.0);
    EXPECT_GE(r->summary.avg_jct_s + 1e-6, r->bound.best_avg_jct_s);
  }
}

TEST(Simulator, FairShareServesTheGroupHoldingLessFirst) {
  // 2 GPUs. Team g submits three jobs at 0 (two start), team b one at 1. At 100 a GPU frees: in
  // submit order g's third job takes it; with fair share b's job does (g holds 1, b 0).
  Trace t = Jobs({{0, 100, 1}, {0, 150, 1}, {0, 100, 1}, {1, 100, 1}});
  t.jobs[3].group = "b";
  SimOptions o = Cluster(1, 2, sched::PolicyKind::kFifo);
  auto plain = Simulate(t, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_DOUBLE_EQ(plain->outcomes[2].end_s, 200);
  EXPECT_DOUBLE_EQ(plain->outcomes[3].end_s, 250);
  o.fair_share = true;
  auto fair = Simulate(t, o);
  ASSERT_TRUE(fair.ok());
  EXPECT_DOUBLE_EQ(fair->outcomes[3].end_s, 200);
  EXPECT_DOUBLE_EQ(fair->outcomes[2].end_s, 250);
  ASSERT_EQ(fair->summary.groups.size(), 2u);
  EXPECT_EQ(fair->summary.groups[0].group, "b");
  EXPECT_DOUBLE_EQ(fair->summary.groups[0].avg_queue_s, 99);
}

TEST(Simulator, ANodeListDeclaresMachinesOfDifferentSizes) {
  // Machines of 4 and 2 GPUs: a 4-GPU job and a 2-GPU job run side by side; a 3-GPU job then
  // needs the 4-GPU machine (it never spans two), and a 6-GPU job takes both whole machines.
  SimOptions o = Cluster(0, 0, sched::PolicyKind::kFifo);
  o.node_gpus = {4, 2};
  auto r = Simulate(Jobs({{0, 10, 4}, {0, 10, 2}, {1, 10, 3}, {2, 10, 6}}), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->outcomes[0].end_s, 10);
  EXPECT_DOUBLE_EQ(r->outcomes[1].end_s, 10);
  EXPECT_DOUBLE_EQ(r->outcomes[2].end_s, 20);  // waited for the 4-GPU machine
  EXPECT_DOUBLE_EQ(r->outcomes[3].end_s, 30);  // waited for both machines whole
  o.node_gpus = {4, 0};
  EXPECT_FALSE(Simulate(Jobs({{0, 10, 1}}), o).ok());
}

}  // namespace
}  // namespace drover::sim
