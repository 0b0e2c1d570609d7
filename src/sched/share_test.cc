// Fair share, quotas with borrowing and reclaim, backfill that does not delay the head of the
// queue, and fractional GPUs: small hand-made pools, no clock, no threads.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace drover::sched {
namespace {

using namespace testing;  // NOLINT

constexpr int64_t kShareGiB = 1LL << 30;

PolicyConfig Fifo() { return ForPolicy(PolicyKind::kFifo); }

TEST(FairShare, GroupsAreOfferedGpusByHeldOverWeight) {
  // 4 idle GPUs; alice (weight 3) and bob (weight 1) each queue 4 one-GPU runs, alice's first.
  ClusterView c = Machines(1, 4);
  c.groups["alice"].weight = 3;
  c.groups["bob"].weight = 1;
  std::vector<PendingRun> q;
  for (int i = 1; i <= 4; ++i) q.push_back(Job(i, 1, 0, "alice"));
  for (int i = 5; i <= 8; ++i) q.push_back(Job(i, 1, 0, "bob"));
  Decision d = Decide(q, c, 0, Fifo());
  // Shares 0/3 vs 0/1 (tie: alice's run is older), then 1/3 < 0? no: bob 0 -> bob, then
  // 1/3 vs 1/1 -> alice, 2/3 vs 1 -> alice: 3 to alice, 1 to bob.
  EXPECT_EQ(Started(d), (std::vector<int64_t>{1, 5, 2, 3}));
}

TEST(FairShare, OnceEveryWaitingGroupHasItsShareThePolicyDecides) {
  // 6 GPUs; weights carol 4, alice 1, bob 0.5: shares 4.4, 1.1 and 0.5 GPUs. carol holds 1 and
  // waits for nothing; alice holds 3 and bob 1, both past their shares. The one idle GPU goes by
  // the policy (alice's run has priority 5), not to bob for holding less per weight.
  ClusterView c = Machines(1, 6);
  c.groups["carol"].weight = 4;
  c.groups["alice"].weight = 1;
  c.groups["bob"].weight = 0.5;
  Hold(c, 10, {0}, 0, 0, {}, "carol");
  for (int g = 1; g <= 3; ++g) Hold(c, 10 + g, {g}, 0, 0, {}, "alice");
  Hold(c, 14, {4}, 0, 0, {}, "bob");
  PendingRun urgent = Job(1, 1, 0, "alice");
  urgent.priority = 5;
  Decision d = Decide({urgent, Job(2, 1, 0, "bob")}, c, 0, Fifo());
  EXPECT_EQ(Started(d), (std::vector<int64_t>{1}));
  // Below its share, a group comes first whatever the policy says.
  ClusterView below = Machines(1, 6);
  below.groups = c.groups;
  Hold(below, 10, {0}, 0, 0, {}, "carol");
  Hold(below, 11, {1}, 0, 0, {}, "alice");
  Hold(below, 12, {2}, 0, 0, {}, "alice");
  EXPECT_EQ(Started(Decide({urgent, Job(2, 1, 0, "bob")}, below, 0, Fifo())).front(), 2);
}

PendingRun By(PendingRun p, int64_t user) {
  p.user = user;
  return p;
}

TEST(FairShare, InsideATeamItsUsersShareItsGpus) {
  // One team's 4 GPUs; alice queued 4 runs before carol queued 2: they alternate, by GPUs held.
  ClusterView c = Machines(1, 4);
  c.groups["vision"].weight = 1;
  std::vector<PendingRun> q;
  for (int i = 1; i <= 4; ++i) q.push_back(By(Job(i, 1, 0, "vision"), 1001));
  for (int i = 5; i <= 6; ++i) q.push_back(By(Job(i, 1, 0, "vision"), 1003));
  EXPECT_EQ(Started(Decide(q, c, 0, Fifo())), (std::vector<int64_t>{1, 5, 2, 6}));
  // Alice already holds 2 of them: carol, holding none, gets both idle ones.
  ClusterView busy = Machines(1, 4);
  busy.groups = c.groups;
  Hold(busy, 20, {0}, 0, 0, {}, "vision");
  Hold(busy, 21, {1}, 0, 0, {}, "vision");
  for (RunningRun& r : busy.active) r.user = 1001;
  EXPECT_EQ(Started(Decide(q, busy, 0, Fifo())), (std::vector<int64_t>{5, 6}));
  // Between teams the team's share decides first: nlp (holding none) before vision's users.
  std::vector<PendingRun> both = q;
  both.push_back(By(Job(7, 1, 0, "nlp"), 1002));
  busy.groups["nlp"].weight = 1;
  EXPECT_EQ(Started(Decide(both, busy, 0, Fifo())), (std::vector<int64_t>{7, 5}));
  // Without groups, users still share the machine (a shared daemon with no teams configured).
  ClusterView plain = Machines(1, 2);
  EXPECT_EQ(Started(Decide(q, plain, 0, Fifo())), (std::vector<int64_t>{1, 5}));
}

TEST(FairShare, WithoutGroupsTheQueueIsThePolicysOrder) {
  ClusterView c = Machines(1, 2);
  Decision d = Decide({Job(1, 1, 0, "alice"), Job(2, 1, 0, "alice"), Job(3, 1, 0, "bob")}, c, 0,
                      Fifo());
  EXPECT_EQ(Started(d), (std::vector<int64_t>{1, 2}));
}

TEST(Quota, CapsAGroupWhileAnotherWaitsForTheGpus) {
  // alice's quota is 2 of 4 GPUs; bob waits for 2 of them: alice gets her 2, bob his 2.
  ClusterView c = Machines(1, 4);
  c.groups["alice"].quota_gpus = 2;
  c.groups["bob"].quota_gpus = 2;
  Hold(c, 10, {0}, 0, 0, {}, "alice");
  std::vector<PendingRun> q = {Job(1, 1, 0, "alice"), Job(2, 1, 0, "alice"),
                               Job(3, 1, 0, "bob"), Job(4, 1, 0, "bob")};
  Decision d = Decide(q, c, 0, Fifo());
  // alice already holds 1: one more of hers (within quota), both of bob's. Run 2 would take
  // alice past her quota; there is no idle GPU left to lend.
  EXPECT_EQ(Started(d), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_TRUE(d.preempt.empty());
}

TEST(Quota, IdleQuotaIsBorrowed) {
  // Nobody else wants the GPUs: alice runs past her quota of 1 on borrowed GPUs.
  ClusterView c = Machines(1, 4);
  c.groups["alice"].quota_gpus = 1;
  c.groups["bob"].quota_gpus = 3;
  Decision d = Decide({Job(1, 1, 0, "alice"), Job(2, 1, 0, "alice"), Job(3, 2, 0, "alice")}, c,
                      0, Fifo());
  EXPECT_EQ(Started(d), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Quota, BorrowedGpusAreReclaimedByPreemptionEvenUnderFifo) {
  // alice borrowed 3 GPUs past her quota of 1; bob's run (within his quota of 3) waits: the most
  // recently started of alice's borrowed runs are stopped until it fits, and no more.
  ClusterView c = Machines(1, 4);
  c.groups["alice"].quota_gpus = 1;
  c.groups["bob"].quota_gpus = 3;
  Hold(c, 10, {0}, 0, 5 * kHour, {}, "alice");
  Hold(c, 11, {1}, 1000, 5 * kHour, {}, "alice");
  Hold(c, 12, {2, 3}, 2000, 5 * kHour, {}, "alice");
  Decision d = Decide({Job(1, 2, 0, "bob")}, c, 3000, Fifo());
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.preempt, (std::vector<int64_t>{12}));
  EXPECT_EQ(d.preempt_for, 1);
  EXPECT_NE(d.preempt_why.find("quota"), std::string::npos) << d.preempt_why;
  // Once run 12 let go, bob starts on its GPUs.
  ClusterView after = Machines(1, 4);
  after.groups = c.groups;
  Hold(after, 10, {0}, 0, 5 * kHour, {}, "alice");
  Hold(after, 11, {1}, 1000, 5 * kHour, {}, "alice");
  Decision next = Decide({Job(1, 2, 0, "bob")}, after, 4000, Fifo());
  ASSERT_EQ(Started(next), (std::vector<int64_t>{1}));
  EXPECT_EQ(next.starts[0].gpus, (std::vector<int>{2, 3}));
}

TEST(Quota, ReclaimHappensWhenTheBorrowersHoldEveryCpuSlotToo) {
  // alice borrowed both GPUs and her runs hold both CPU slots: bob's run (within his quota) has
  // no slot either, yet his GPU is reclaimed (the stopped run frees a slot with it).
  ClusterView c = Machines(1, 2);
  c.groups["alice"].quota_gpus = 1;
  c.groups["bob"].quota_gpus = 1;
  c.cpu_slots_total = 2;
  c.cpu_slots_used = 2;
  Hold(c, 10, {0}, 0, 5 * kHour, {}, "alice");
  Hold(c, 11, {1}, 1000, 5 * kHour, {}, "alice");
  PendingRun bob = Job(1, 1, 0, "bob");
  bob.resources.cpus = 1;
  Decision d = Decide({bob}, c, 3000, Fifo());
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.preempt, (std::vector<int64_t>{11}));
  EXPECT_EQ(d.preempt_for, 1);
}

TEST(Quota, AGroupWithinItsQuotaIsNotPreempted) {
  // alice is within her quota of 4: bob (quota 2) waits, nothing is reclaimed.
  ClusterView c = Machines(1, 4);
  c.groups["alice"].quota_gpus = 4;
  c.groups["bob"].quota_gpus = 2;
  for (int g = 0; g < 4; ++g) Hold(c, 10 + g, {g}, 0, kHour, {}, "alice");
  Decision d = Decide({Job(1, 1, 0, "bob")}, c, kHour, Fifo());
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.preempt.empty());
}

TEST(Backfill, ShortRunsFillTheGapButDoNotDelayTheWaitingGang) {
  // 1 machine of 4: two GPUs busy until t=2h (predicted). A 4-GPU gang has waited past
  // reserve_after; behind it, a 1-hour run (ends before the gang could start) and a 3-hour run.
  ClusterView c = Machines(1, 4);
  Hold(c, 10, {0}, 0, 0, 2 * kHour);
  Hold(c, 11, {1}, 0, 0, 2 * kHour);
  PolicyConfig p = Fifo();
  p.reserve_after_ms = kHour;
  PendingRun gang = Job(1, 4, 0);
  PendingRun short_run = Job(2, 1, 0);
  short_run.predicted_ms = kHour;
  PendingRun long_run = Job(3, 1, 0);
  long_run.predicted_ms = 3 * kHour;
  PendingRun unknown = Job(4, 1, 0);  // no prediction: could run forever
  Decision d = Decide({gang, short_run, long_run, unknown}, c, kHour / 2 + kHour / 2, p);
  EXPECT_EQ(Started(d), (std::vector<int64_t>{2}));
  EXPECT_EQ(d.reserved_for, 1);
  EXPECT_EQ(d.reserved_gpus, (std::vector<int>{3}));  // the GPU the short run did not take
}

TEST(Backfill, BeforeReserveAfterLaterRunsMayPass) {
  // The gang has waited less than reserve_after: later runs take the idle GPUs (no hold).
  ClusterView c = Machines(1, 4);
  Hold(c, 10, {0}, 0, 0, 2 * kHour);
  PolicyConfig p = Fifo();
  p.reserve_after_ms = kHour;
  PendingRun gang = Job(1, 4, 0);
  Decision d = Decide({gang, Job(2, 1, 0), Job(3, 1, 0)}, c, kHour / 2, p);
  EXPECT_EQ(Started(d), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(d.reserved_for, 0);
}

TEST(Backfill, HoldsTheMachineClosestToFitting) {
  // Two machines of 4: machine 0 has 3 idle, machine 1 has 1 idle. The waiting 4-GPU gang holds
  // machine 0; a 1-GPU run without a prediction goes to machine 1.
  ClusterView c = Machines(2, 4);
  Hold(c, 10, {0}, 0, 0);
  Hold(c, 11, {4, 5, 6}, 0, 0);
  PolicyConfig p = Fifo();
  p.reserve_after_ms = 0;
  Decision d = Decide({Job(1, 4, 0), Job(2, 1, 0), Job(3, 1, 0)}, c, kHour, p);
  ASSERT_EQ(Started(d), (std::vector<int64_t>{2}));
  EXPECT_EQ(d.starts[0].gpus, (std::vector<int>{7}));
  EXPECT_EQ(d.reserved_gpus, (std::vector<int>{1, 2, 3}));
}

TEST(Fractional, RunsShareAGpuWhenTheirMemoryFitsNextToTheMonitoringReserve) {
  // A 16 GiB GPU with 1 GiB kept for monitoring offers 15 GiB: two 7 GiB runs share it, a third
  // goes to the next GPU, and a whole-GPU run takes neither shared GPU.
  ClusterView c;
  for (int i = 0; i < 2; ++i) {
    GpuState g;
    g.index = i;
    g.capacity = 15 * kShareGiB;
    c.gpus.push_back(g);
  }
  auto frac = [](int64_t id) {
    PendingRun p = Job(id, 1);
    p.resources.gpu_memory = 7 * kShareGiB;
    return p;
  };
  Decision d = Decide({frac(1), frac(2), frac(3), Job(4, 1)}, c, 0, Fifo());
  ASSERT_EQ(Started(d), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(d.starts[0].gpus, d.starts[1].gpus);
  EXPECT_NE(d.starts[2].gpus, d.starts[0].gpus);
  EXPECT_EQ(d.starts[0].gpu_memory, 7 * kShareGiB);
}

TEST(Quota, ABorrowerNeverPreemptsAGroupWithinItsQuota) {
  // 8 GPUs: a (quota 8) holds 7 in LAS's second queue; b (quota 2) asks for 3, one past its
  // quota: b may borrow the idle GPU if it fits, but stops none of a's runs.
  ClusterView c = Machines(1, 8);
  c.groups["a"].quota_gpus = 8;
  c.groups["b"].quota_gpus = 2;
  for (int g = 0; g < 7; ++g) Hold(c, 10 + g, {g}, 0, 20 * kHour, {}, "a");
  PolicyConfig las = ForPolicy(PolicyKind::kLas);
  Decision d = Decide({Job(1, 3, 0, "b")}, c, kHour, las);
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.preempt.empty());
}

TEST(Quota, ReclaimStopsRunsOnOneMachine) {
  // 4 machines of 2, every GPU borrowed by a, started alternating machines; b needs 2: the two
  // runs of one machine are stopped, not one per machine until something fits.
  ClusterView c = Machines(4, 2);
  c.groups["a"].quota_gpus = 1;
  c.groups["b"].quota_gpus = 2;
  int64_t id = 10;
  for (int g : {0, 2, 4, 6, 1, 3, 5, 7}) {
    Hold(c, id, {g}, 1000 * id, kHour, {}, "a");
    ++id;
  }
  Decision d = Decide({Job(1, 2, 0, "b")}, c, 2 * kHour, Fifo());
  ASSERT_EQ(d.preempt.size(), 2u);
  // Both on the machine whose runs started last (GPUs 6 and 7: runs 13 and 17).
  EXPECT_EQ(d.preempt, (std::vector<int64_t>{17, 13}));
}

TEST(Quota, ARunThatMayNotBePreemptedDoesNotBorrow) {
  ClusterView c = Machines(1, 4);
  c.groups["a"].quota_gpus = 1;
  PendingRun within = Job(1, 1, 0, "a");
  PendingRun past = Job(2, 1, 0, "a");
  past.preemptible = false;
  Decision d = Decide({within, past}, c, 0, Fifo());
  EXPECT_EQ(Started(d), (std::vector<int64_t>{1}));
}

TEST(Quota, AFailedReclaimLeavesThePolicysPreemptionAlone) {
  // 2 machines of 4, all busy. a (quota 1) borrows 3 GPUs with non-preemptible runs, so nothing
  // can be reclaimed for b; LAS still stops b's own second-queue runs for b's first-queue run.
  ClusterView c = Machines(2, 4);
  c.groups["a"].quota_gpus = 1;
  c.groups["b"].quota_gpus = 7;
  Hold(c, 10, {0}, 0, kHour, {}, "a");
  for (int g = 1; g < 4; ++g) {
    Hold(c, 10 + g, {g}, 0, kHour, {}, "a");
    c.active.back().preemptible = false;
  }
  for (int g = 4; g < 8; ++g) Hold(c, 20 + g, {g}, 0, 20 * kHour, {}, "b");
  PolicyConfig las = ForPolicy(PolicyKind::kLas);
  las.preempt_above_allocated = 0.9;
  Decision d = Decide({Job(1, 2, 0, "b")}, c, kHour, las);
  EXPECT_EQ(d.preempt.size(), 2u);
  for (int64_t id : d.preempt) EXPECT_GE(id, 24);
}

TEST(Preemption, RunsOfTheSameRankDoNotPreemptEachOther) {
  // LAS: both in the first queue; only the submit order differs.
  ClusterView c = Machines(1, 1);
  Hold(c, 9, {0}, 0, kHour);
  Decision d = Decide({Job(5, 1, 0)}, c, kHour, ForPolicy(PolicyKind::kLas));
  EXPECT_TRUE(d.preempt.empty());
}

TEST(Preemption, TheRunPreemptedForGetsTheFreedGpusFirst) {
  // A 2-GPU gang preempted two runs; one has let go of its GPU, the other is still stopping. A
  // better-placed 1-GPU run must not take the freed GPU: it is held for the gang.
  ClusterView c = Machines(1, 2);
  Hold(c, 20, {1}, 0, 0);  // the victim still stopping
  c.first = 1;
  Decision d = Decide({Job(1, 2, 0), Job(0, 1, 0)}, c, kHour, Fifo());
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.reserved_for, 1);
  EXPECT_EQ(d.reserved_gpus, (std::vector<int>{0}));
  // Once both are free it starts, ahead of the run submitted before it.
  ClusterView free = Machines(1, 2);
  free.first = 1;
  EXPECT_EQ(Started(Decide({Job(1, 2, 0), Job(0, 1, 0)}, free, kHour, Fifo())),
            (std::vector<int64_t>{1}));
}

TEST(Backfill, KeepsABackfilledGangOnOneMachine) {
  // An 8-GPU gang holds 2 machines of 4 (3 idle on each); a 3-GPU run that ends in time is
  // backfilled onto one machine, not across both.
  ClusterView c = Machines(2, 4);
  Hold(c, 10, {0}, 0, 0, 2 * kHour);
  Hold(c, 11, {4}, 0, 0, 2 * kHour);
  PolicyConfig p = Fifo();
  p.reserve_after_ms = 0;
  PendingRun small = Job(2, 3, 0);
  small.predicted_ms = kHour / 2;
  Decision d = Decide({Job(1, 8, 0), small}, c, kHour, p);
  ASSERT_EQ(Started(d), (std::vector<int64_t>{2}));
  EXPECT_EQ(d.starts[0].gpus, (std::vector<int>{1, 2, 3}));
}

TEST(Scheduler, CpuRunsStartBehindAGpuRunThatWaits) {
  // Every GPU is taken and a GPU run waits: a CPU run behind it still gets a CPU slot.
  ClusterView c = Machines(1, 1);
  Hold(c, 10, {0}, 0, 0);
  c.cpu_slots_total = 4;
  PendingRun cpu = Job(2, 0);
  cpu.resources.cpus = 1;
  Decision d = Decide({Job(1, 1, 0), cpu}, c, 0, Fifo());
  EXPECT_EQ(Started(d), (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace drover::sched
