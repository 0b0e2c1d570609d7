// The policies on small hand-made queues: no clock, no threads.
#include "sched/policy.h"

#include <gtest/gtest.h>

#include "sched/gittins.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace drover::sched {
namespace {

using namespace testing;  // NOLINT

PolicyConfig Policy(PolicyKind k) {
  PolicyConfig p;
  p.kind = k;
  return p;
}

TEST(Policy, NamesParseAndUnknownOnesSayWhatExists) {
  for (const char* n : {"fifo", "priority", "las", "srtf", "gittins", "default"}) {
    auto k = ParsePolicy(n);
    ASSERT_TRUE(k.ok()) << n;
    EXPECT_EQ(ToString(*k), n);
  }
  auto bad = ParsePolicy("fair");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "no scheduling policy 'fair'; choose fifo, priority, las, srtf, gittins or default");
  EXPECT_EQ(ParsePolicy("sfrt").status().message(),
            "no scheduling policy 'sfrt'; choose fifo, priority, las, srtf, gittins or default; "
            "did you mean 'srtf'?");
  EXPECT_EQ(PolicyNames().size(), 6u);
  EXPECT_FALSE(Preemptive(PolicyKind::kFifo));
  EXPECT_TRUE(Preemptive(PolicyKind::kLas));
}

TEST(Policy, FifoIsSubmitOrderAndFillsGaps) {
  ClusterView c = Machines(1, 4);
  Hold(c, 100, {0, 1}, 0, 0);
  // 3 wants 4 GPUs (only 2 idle): it waits, 4 and 5 behind it still start.
  std::vector<PendingRun> q = {Job(5, 1), Job(3, 4), Job(4, 1)};
  Decision d = Decide(q, c, 0, Policy(PolicyKind::kFifo));
  EXPECT_EQ(Started(d), (std::vector<int64_t>{4, 5}));
  EXPECT_TRUE(d.preempt.empty());
}

TEST(Policy, PriorityBidFavoursShortRunsAndAgingEndsStarvation) {
  ClusterView c = Machines(1, 1);
  PendingRun long_old = Job(1, 1, 0);
  long_old.predicted_ms = 10 * kHour;
  PendingRun short_new = Job(2, 1, 0);
  short_new.predicted_ms = kHour / 10;
  PolicyConfig p = Policy(PolicyKind::kPriority);
  // Both just submitted: the short one bids higher (0.36 vs 0).
  EXPECT_EQ(Started(Decide({long_old, short_new}, c, 0, p)), (std::vector<int64_t>{2}));
  // The long one has waited 5 hours, the short one arrives now: aging (0.1 per hour) wins.
  short_new.submitted_ms = 5 * kHour;
  EXPECT_EQ(Started(Decide({long_old, short_new}, c, 5 * kHour, p)), (std::vector<int64_t>{1}));
  // A higher priority outweighs both.
  PendingRun urgent = Job(3, 1, 5 * kHour);
  urgent.priority = 10;
  EXPECT_EQ(Started(Decide({long_old, short_new, urgent}, c, 5 * kHour, p)),
            (std::vector<int64_t>{3}));
}

TEST(Policy, LasServesLeastAttainedFirstAndPreemptsTheSecondQueue) {
  ClusterView c = Machines(1, 4);
  // 10 has had 20 GPU-hours (second queue), 11 has had 1 (first queue); both hold 2 GPUs for an
  // hour now.
  Hold(c, 10, {0, 1}, 0, 20 * kHour);
  Hold(c, 11, {2, 3}, 0, 1 * kHour);
  PendingRun fresh = Job(12, 2, kHour);
  Decision d = Decide({fresh}, c, kHour, Policy(PolicyKind::kLas));
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.preempt, (std::vector<int64_t>{10}));  // only the second-queue run
  // A waiting run that attained 20 GPU-hours itself is not above anyone in the second queue...
  PendingRun veteran = Job(13, 2, kHour);
  veteran.attained_gpu_ms = 20 * kHour;
  EXPECT_TRUE(Decide({veteran}, c, kHour, Policy(PolicyKind::kLas)).preempt.empty());
  // ... and a run younger than the minimum run time is never preempted.
  ClusterView young = Machines(1, 2);
  Hold(young, 10, {0, 1}, kHour - 60'000, 20 * kHour);
  EXPECT_TRUE(Decide({fresh}, young, kHour, Policy(PolicyKind::kLas)).preempt.empty());
}

TEST(Policy, SrtfRunsTheShortestRemainingAndPreemptsLongerOnes) {
  ClusterView c = Machines(1, 2);
  // 20 is predicted 10 h and ran 1 h on 2 GPUs: 9 h left.
  Hold(c, 20, {0, 1}, 0, 2 * kHour, 10 * kHour);
  PendingRun quick = Job(21, 1, kHour);
  quick.predicted_ms = kHour / 2;
  PendingRun unknown = Job(22, 1, kHour);  // no prediction: after the known ones
  Decision d = Decide({unknown, quick}, c, kHour, Policy(PolicyKind::kSrtf));
  EXPECT_EQ(d.preempt, (std::vector<int64_t>{20}));
  // With room, the known-short run goes first.
  ClusterView free1 = Machines(1, 1);
  EXPECT_EQ(Started(Decide({unknown, quick}, free1, kHour, Policy(PolicyKind::kSrtf))),
            (std::vector<int64_t>{21}));
  // A longer waiting run never preempts a shorter running one.
  PendingRun slow = Job(23, 1, kHour);
  slow.predicted_ms = 20 * kHour;
  EXPECT_TRUE(Decide({slow}, c, kHour, Policy(PolicyKind::kSrtf)).preempt.empty());
}

TEST(Policy, PreemptsOnlyWhenThePoolIsBusyAndItMakesRoom) {
  // 10 GPUs, 2 held by a second-queue run: 20% allocated, under the 80% threshold; the 12-GPU
  // run cannot fit anyway, and nobody is stopped for nothing.
  ClusterView c = Machines(1, 10);
  Hold(c, 10, {0, 1}, 0, 20 * kHour);
  PendingRun big = Job(11, 12, kHour);
  Decision d = Decide({big}, c, kHour, Policy(PolicyKind::kLas));
  EXPECT_TRUE(d.preempt.empty());
  // Busy pool, but stopping every candidate would still not make room for 12 GPUs on 10.
  ClusterView busy = Machines(1, 10);
  for (int g = 0; g < 10; ++g) Hold(busy, 100 + g, {g}, 0, 20 * kHour);
  EXPECT_TRUE(Decide({big}, busy, kHour, Policy(PolicyKind::kLas)).preempt.empty());
  // A 2-GPU run needs two of them: the two worst (latest submitted) go.
  PendingRun two = Job(11, 2, kHour);
  EXPECT_EQ(Decide({two}, busy, kHour, Policy(PolicyKind::kLas)).preempt,
            (std::vector<int64_t>{109, 108}));
}

TEST(Policy, DefaultRanksByEstimatedRemainingTimeInClasses) {
  PolicyConfig p = Policy(PolicyKind::kDefault);
  auto rank = [&](Millis attained, std::optional<Millis> predicted, int64_t seq, int gpus = 1,
                  int priority = 0) {
    RankInput r;
    r.seq = seq;
    r.gpus = gpus;
    r.priority = priority;
    r.attained_gpu_ms = attained;
    r.predicted_ms = predicted;
    return RankOf(p, r);
  };
  // Predicted 30 minutes beats predicted 5 hours, whatever the submit order.
  EXPECT_TRUE(rank(0, kHour / 2, 9) < rank(0, 5 * kHour, 1));
  // Within a class (2.83-4 hours left), FIFO: estimates that wobble do not reorder.
  EXPECT_TRUE(rank(0, 3 * kHour + kHour / 2, 1) < rank(0, 3 * kHour, 2));
  // The next class down (2-2.83 hours) comes first.
  EXPECT_TRUE(rank(0, 2 * kHour + kHour / 2, 2) < rank(0, 3 * kHour, 1));
  // Remaining, not total: 8 GPU-hours on 4 GPUs is 2 hours run of a predicted 3, 1 hour left.
  EXPECT_TRUE(rank(8 * kHour, 3 * kHour, 9, 4) < rank(0, 3 * kHour, 1, 4));
  // A run past its prediction is expected to run twice as long again as it has: after 5 hours
  // of a predicted 1 hour, 10 hours left ranks behind a fresh 5-hour run.
  EXPECT_TRUE(rank(0, 5 * kHour, 9) < rank(5 * kHour, kHour, 1));
  // Unknown: what it has run, at least an hour.
  EXPECT_TRUE(rank(0, kHour / 4, 9) < rank(0, std::nullopt, 1));
  // ... in the class of 1 hour left (FIFO there).
  EXPECT_TRUE(rank(0, std::nullopt, 1) < rank(0, kHour, 2));
  EXPECT_TRUE(rank(0, kHour, 1) < rank(0, std::nullopt, 2));
  // The user's priority comes first.
  EXPECT_TRUE(rank(0, 100 * kHour, 9, 1, 1) < rank(0, kHour / 4, 1));
  // So a run with 10 hours left yields its GPU to a new 1-hour one on a busy pool.
  ClusterView c = Machines(1, 1);
  Hold(c, 10, {0}, 0, 2 * kHour, 12 * kHour);
  PendingRun fresh = Job(11, 1, kHour);
  fresh.predicted_ms = kHour;
  EXPECT_EQ(Decide({fresh}, c, 2 * kHour, p).preempt, (std::vector<int64_t>{10}));
  // ... but not to a run expected to take longer than it has left.
  fresh.predicted_ms = 20 * kHour;
  EXPECT_TRUE(Decide({fresh}, c, 2 * kHour, p).preempt.empty());
}

TEST(Placement, GangsStayOnOneMachineBestFit) {
  ClusterView c = Machines(3, 4);
  Hold(c, 50, {0, 1, 2}, 0, 0);  // machine 0: 1 idle
  Hold(c, 51, {4}, 0, 0);        // machine 1: 3 idle; machine 2: 4 idle
  Decision d = Decide({Job(1, 3), Job(2, 1), Job(3, 4)}, c, 0, Policy(PolicyKind::kFifo));
  ASSERT_EQ(d.starts.size(), 3u);
  EXPECT_EQ(d.starts[0].gpus, (std::vector<int>{5, 6, 7}));  // the tightest machine that fits
  EXPECT_EQ(d.starts[1].gpus, (std::vector<int>{3}));        // machine 0's last GPU
  EXPECT_EQ(d.starts[2].gpus, (std::vector<int>{8, 9, 10, 11}));
  // 3 GPUs idle on three different machines do not make a 3-GPU gang.
  ClusterView spread = Machines(3, 2);
  Hold(spread, 60, {0}, 0, 0);
  Hold(spread, 61, {2}, 0, 0);
  Hold(spread, 62, {4}, 0, 0);
  EXPECT_TRUE(Decide({Job(1, 2)}, spread, 0, Policy(PolicyKind::kFifo)).starts.empty());
}

TEST(Placement, LargerThanAMachineTakesWholeIdleMachines) {
  ClusterView c = Machines(4, 8);
  Hold(c, 70, {8}, 0, 0);  // machine 1 is not whole
  Decision d = Decide({Job(1, 16)}, c, 0, Policy(PolicyKind::kFifo));
  ASSERT_EQ(d.starts.size(), 1u);
  std::vector<int> want;
  for (int g = 0; g < 8; ++g) want.push_back(g);
  for (int g = 16; g < 24; ++g) want.push_back(g);
  EXPECT_EQ(d.starts[0].gpus, want);
  EXPECT_TRUE(Decide({Job(1, 32)}, c, 0, Policy(PolicyKind::kFifo)).starts.empty());
}

}  // namespace
}  // namespace drover::sched

#include "sched/predictor.h"

namespace drover::sched {
namespace {

TEST(Predictor, EwmaByKeyThenByGpusThenAll) {
  DurationPredictor p(0.5);
  EXPECT_FALSE(p.Predict("team-a", 1).has_value());
  p.Observe("team-a", 1, 100);
  p.Observe("team-a", 1, 300);  // 0.5 x 300 + 0.5 x 100
  EXPECT_EQ(p.Predict("team-a", 1), 200);
  p.Observe("team-b", 8, 1000);
  EXPECT_EQ(p.Predict("team-b", 8), 1000);
  EXPECT_EQ(p.Predict("team-c", 1), 200);  // unseen key: the 1-GPU runs'
  EXPECT_EQ(p.Predict("team-c", 4), 600);  // unseen size too: all runs (0.5 x 1000 + 0.5 x 200)
}

}  // namespace
}  // namespace drover::sched

namespace drover::sched {
namespace {

constexpr Millis kMinute = 60'000;

TEST(Gittins, NotReadyBeforeEnoughRunsFinished) {
  GittinsIndex g({kMinute, 2 * kMinute}, 50);
  EXPECT_FALSE(g.ready());
  EXPECT_EQ(g.Index(0), 0);
}

TEST(Gittins, HeavyTailIsLeastAttainedFirst) {
  // Half the runs take a minute, a quarter 16 minutes, a quarter 4 hours: the longer a run has
  // run, the longer it is likely to run on, so a fresh run comes first.
  std::vector<Millis> sizes;
  for (int i = 0; i < 100; ++i) sizes.push_back(kMinute);
  for (int i = 0; i < 50; ++i) sizes.push_back(16 * kMinute);
  for (int i = 0; i < 50; ++i) sizes.push_back(240 * kMinute);
  GittinsIndex g(sizes);
  ASSERT_TRUE(g.ready());
  EXPECT_GT(g.Index(0), g.Index(2 * kMinute));
  EXPECT_GT(g.Index(2 * kMinute), g.Index(20 * kMinute));
}

TEST(Gittins, KnownSizeFavoursTheRunNearlyDone) {
  // Every run takes 60 minutes: one that ran 40 has less left than a fresh one, so it comes
  // first (FIFO-like, where LAS would stop it).
  GittinsIndex g(std::vector<Millis>(100, 60 * kMinute));
  EXPECT_GT(g.Index(40 * kMinute), g.Index(0));
}

TEST(Gittins, PolicyRanksByIndexAndFallsBackToLasWithoutOne) {
  PolicyConfig p = ForPolicy(PolicyKind::kGittins);
  RankInput fresh{0, 2, 1, 0, 0, {}};
  RankInput ran{0, 1, 1, 0, 40 * kMinute, {}};
  // No index yet: 2D-LAS, both in the first queue, FIFO.
  EXPECT_TRUE(RankOf(p, ran) < RankOf(p, fresh));
  p.gittins = std::make_shared<const GittinsIndex>(std::vector<Millis>(100, 60 * kMinute));
  EXPECT_TRUE(RankOf(p, ran) < RankOf(p, fresh));
  // Heavy tail: the fresh run first.
  std::vector<Millis> sizes(100, kMinute);
  sizes.insert(sizes.end(), 100, 600 * kMinute);
  p.gittins = std::make_shared<const GittinsIndex>(sizes);
  EXPECT_TRUE(RankOf(p, fresh) < RankOf(p, ran));
}

TEST(Policy, DefaultPreemptsOnceHalfThePoolIsAllocated) {
  EXPECT_DOUBLE_EQ(ForPolicy(PolicyKind::kDefault).preempt_above_allocated, 0.5);
  EXPECT_DOUBLE_EQ(ForPolicy(PolicyKind::kLas).preempt_above_allocated, 0.8);
  EXPECT_EQ(ForPolicy(PolicyKind::kSrtf).kind, PolicyKind::kSrtf);
}

}  // namespace
}  // namespace drover::sched
