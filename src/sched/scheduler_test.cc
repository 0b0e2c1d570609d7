#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "sched/gpu_book.h"

namespace drover::sched {
namespace {

constexpr int64_t GiB = 1024LL * 1024 * 1024;

PendingRun Pending(int64_t id, int gpus, int64_t mem, int priority = 0, int64_t exp = 1) {
  PendingRun p;
  p.run_id = id;
  p.experiment_id = exp;
  p.seq = id;
  p.priority = priority;
  p.resources.gpus = gpus;
  p.resources.gpu_memory = mem;
  p.resources.cpus = 1;
  return p;
}

ClusterView Gpus(std::vector<int64_t> capacities) {
  ClusterView c;
  for (size_t i = 0; i < capacities.size(); ++i) {
    c.gpus.push_back({static_cast<int>(i), capacities[i], 0, 0, false});
  }
  return c;
}

TEST(Scheduler, PacksTwoSixGiBRunsPerSixteenGiBGpu) {
  std::vector<PendingRun> q;
  for (int i = 1; i <= 6; ++i) q.push_back(Pending(i, 1, 6 * GiB));
  auto actions = Decide(q, Gpus({16 * GiB, 16 * GiB}), 0);
  ASSERT_EQ(actions.size(), 4u);  // the 5th and 6th would need a third 6GiB slot on a GPU
  std::map<int, int> per_gpu;
  for (const auto& a : actions) {
    ASSERT_EQ(a.gpus.size(), 1u);
    EXPECT_EQ(a.gpu_memory, 6 * GiB);
    EXPECT_FALSE(a.exclusive);
    per_gpu[a.gpus[0]]++;
  }
  EXPECT_EQ(per_gpu[0], 2);
  EXPECT_EQ(per_gpu[1], 2);
}

TEST(Scheduler, BestFitChoosesTightestGpuWhenGpusMustBeKeptWhole) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB, 16 * GiB});
  c.gpus[0].reserved = 4 * GiB;   // 12 free
  c.gpus[1].reserved = 10 * GiB;  // 6 free: fits exactly
  c.gpus[0].runs = c.gpus[1].runs = 1;
  // A whole-GPU run waits (it fits nowhere while GPU 2 is its only idle GPU and it wants 2), so
  // GPU 2 stays whole and run 1 takes the tightest shared hole.
  auto actions = Decide({Pending(1, 1, 6 * GiB), Pending(2, 2, 0)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].run_id, 1);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{1});
  // The caller may say whole-GPU runs are coming (the packing experiment does).
  c.whole_gpu_demand = true;
  actions = Decide({Pending(1, 1, 6 * GiB)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{1});
}

TEST(Scheduler, SpreadsOverIdleGpusBeforeSharing) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB, 16 * GiB});
  c.gpus[1].reserved = 10 * GiB;
  c.gpus[1].runs = 1;
  // Nothing needs whole GPUs: a shared GPU trains each of its runs at about half speed, so the
  // run takes an idle GPU.
  auto actions = Decide({Pending(1, 1, 6 * GiB)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{0});
}

TEST(Scheduler, DigitsComparisonRunsOneRunPerGpuAtATime) {
  // examples/digits/compare.yaml on --fake-gpus 2x16GiB with 2 CPU slots: 4 runs of 6 GiB.
  ClusterView c = Gpus({16 * GiB, 16 * GiB});
  c.cpu_slots_total = 2;
  std::vector<PendingRun> q;
  for (int i = 1; i <= 4; ++i) q.push_back(Pending(i, 1, 6 * GiB));
  auto actions = Decide(q, c, 0);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{0});
  EXPECT_EQ(actions[1].gpus, std::vector<int>{1});
  // Run 1 ends: GPU 0 is idle again and run 3 takes it, not a share of GPU 1.
  c.gpus[1].reserved = 6 * GiB;
  c.gpus[1].runs = 1;
  c.cpu_slots_used = 1;
  actions = Decide({q[2], q[3]}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].run_id, 3);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{0});
}

TEST(Scheduler, SixFiveGiBRunsOnTwoGpusWithTwoCpuSlotsUseBothGpus) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB});
  c.cpu_slots_total = 2;
  std::vector<PendingRun> q;
  for (int i = 1; i <= 6; ++i) q.push_back(Pending(i, 1, 5 * GiB));
  auto actions = Decide(q, c, 0);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{0});
  EXPECT_EQ(actions[1].gpus, std::vector<int>{1});
}

TEST(Scheduler, SharesTheLeastBusyGpuByTelemetry) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB, 16 * GiB});
  for (auto& g : c.gpus) {
    g.reserved = 6 * GiB;
    g.runs = 1;
  }
  c.gpus[0].utilization = 95;
  c.gpus[1].utilization = 20;  // the least busy
  c.gpus[2].utilization = 60;
  c.gpus[2].reserved = 8 * GiB;  // the tightest fit, but busier
  auto actions = Decide({Pending(1, 1, 6 * GiB)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{1});
  // Equal utilisation: the one with less memory in use, then the tightest fit.
  c.gpus[1].utilization = 60;
  c.gpus[1].memory_used = 9 * GiB;
  c.gpus[2].memory_used = 3 * GiB;
  actions = Decide({Pending(1, 1, 6 * GiB)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{2});
  c.gpus[1].memory_used = c.gpus[2].memory_used = -1;  // not measured: tightest fit
  actions = Decide({Pending(1, 1, 6 * GiB)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{2});
}

TEST(Scheduler, WholeGpuRunsNeedIdleGpusAndBlockSharing) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB});
  c.gpus[0].reserved = 2 * GiB;
  c.gpus[0].runs = 1;
  auto actions = Decide({Pending(1, 1, 0), Pending(2, 1, 0), Pending(3, 1, 2 * GiB)}, c, 0);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].run_id, 1);
  EXPECT_EQ(actions[0].gpus, std::vector<int>{1});
  EXPECT_TRUE(actions[0].exclusive);
  EXPECT_EQ(actions[0].gpu_memory, 16 * GiB);
  // Run 2 has no idle GPU left; run 3 shares GPU 0 (GPU 1 is now held whole).
  EXPECT_EQ(actions[1].run_id, 3);
  EXPECT_EQ(actions[1].gpus, std::vector<int>{0});
}

TEST(Scheduler, GangGetsAllGpusAtOnceOrWaits) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB, 16 * GiB});
  c.gpus[2].runs = 1;
  c.gpus[2].exclusive = true;
  auto wait = Decide({Pending(1, 3, 0)}, c, 0);
  EXPECT_TRUE(wait.empty());  // only two idle GPUs: nothing partial is started
  auto two = Decide({Pending(1, 2, 0)}, c, 0);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].gpus, (std::vector<int>{0, 1}));
}

TEST(Scheduler, PriorityThenSubmitOrder) {
  auto actions = Decide({Pending(1, 1, 0, 0), Pending(2, 1, 0, 5), Pending(3, 1, 0, 0)},
                        Gpus({8 * GiB, 8 * GiB}), 0);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].run_id, 2);
  EXPECT_EQ(actions[1].run_id, 1);
}

TEST(Scheduler, MaxParallelPerExperiment) {
  ClusterView c;
  c.max_parallel[1] = 2;
  c.running[1] = 1;
  std::vector<PendingRun> q = {Pending(1, 0, 0), Pending(2, 0, 0), Pending(3, 0, 0, 0, 2)};
  auto actions = Decide(q, c, 0);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].run_id, 1);
  EXPECT_EQ(actions[1].run_id, 3);  // another experiment is not limited
}

TEST(Scheduler, CpuSlotsCapCpuRuns) {
  ClusterView c;
  c.cpu_slots_total = 2;
  c.cpu_slots_used = 1;
  auto actions = Decide({Pending(1, 0, 0), Pending(2, 0, 0)}, c, 0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_TRUE(actions[0].gpus.empty());
}

TEST(Scheduler, BackoffDelaysEligibility) {
  PendingRun r = Pending(1, 0, 0);
  r.not_before_ms = 5000;
  EXPECT_TRUE(Decide({r}, ClusterView{}, 4999).empty());
  EXPECT_EQ(Decide({r}, ClusterView{}, 5000).size(), 1u);
}

TEST(Scheduler, IsDeterministic) {
  std::vector<PendingRun> q;
  for (int i = 1; i <= 20; ++i) q.push_back(Pending(i, 1 + i % 2, (i % 3) * 3 * GiB, i % 4));
  auto c = Gpus({16 * GiB, 24 * GiB, 16 * GiB, 80 * GiB});
  auto a = Decide(q, c, 0);
  auto b = Decide(q, c, 0);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].run_id, b[i].run_id);
    EXPECT_EQ(a[i].gpus, b[i].gpus);
  }
}

TEST(Scheduler, CheckFitsExplainsImpossibleRuns) {
  auto gpus = Gpus({16 * GiB}).gpus;
  Resources r;
  r.gpus = 2;
  EXPECT_EQ(CheckFits(r, gpus, 0).message(),
            "each run needs 2 GPUs but this machine has 1; lower resources.gpus");
  r.gpus = 1;
  r.gpu_memory = 32 * GiB;
  EXPECT_EQ(
      CheckFits(r, gpus, 0).message(),
      "each run needs 32GiB per GPU but the largest GPU has 16GiB; lower resources.gpu_memory");
  EXPECT_NE(CheckFits(r, {}, 0).message().find("--fake-gpus"), std::string::npos);
  r.gpu_memory = 6 * GiB;
  EXPECT_TRUE(CheckFits(r, gpus, 0).ok());
  Resources cpu;
  cpu.cpus = 4;
  EXPECT_FALSE(CheckFits(cpu, {}, 2).ok());
  EXPECT_TRUE(CheckFits(cpu, {}, 0).ok());
}

}  // namespace
}  // namespace drover::sched

namespace drover::sched {
namespace {

TEST(GpuBook, AppliesAndReleasesWhatDecideStarts) {
  ClusterView c = Gpus({16 * GiB, 16 * GiB});
  c.cpu_slots_total = 4;
  GpuBook book(c.gpus);
  std::vector<PendingRun> q = {Pending(1, 1, 6 * GiB), Pending(2, 1, 0), Pending(3, 1, 6 * GiB)};
  auto starts = Decide(q, c, 0);
  ASSERT_EQ(starts.size(), 3u);
  for (const auto& a : starts) book.Apply(a, 1);
  EXPECT_EQ(book.cpu_slots_used(), 3);
  // Decide() within its pass and the book after it agree: run 2 holds a GPU whole, runs 1 and 3
  // share the other.
  int whole = 0, shared = 0;
  for (const auto& g : book.gpus()) {
    if (g.exclusive) {
      ++whole;
      EXPECT_EQ(g.reserved, 16 * GiB);
      EXPECT_EQ(g.runs, 1);
    } else {
      ++shared;
      EXPECT_EQ(g.reserved, 12 * GiB);
      EXPECT_EQ(g.runs, 2);
    }
  }
  EXPECT_EQ(whole, 1);
  EXPECT_EQ(shared, 1);
  for (const auto& a : starts) book.Release(a, 1);
  for (const auto& g : book.gpus()) {
    EXPECT_EQ(g.reserved, 0);
    EXPECT_EQ(g.runs, 0);
    EXPECT_FALSE(g.exclusive);
  }
  EXPECT_EQ(book.cpu_slots_used(), 0);
}

}  // namespace
}  // namespace drover::sched
