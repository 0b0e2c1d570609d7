#include "search/pruner.h"

#include <gtest/gtest.h>

#include <cmath>

namespace drover::search {
namespace {

PruneSpec Rule(PruneRule rule, int64_t min_steps = 1, int reduction = 3, int64_t max_steps = 0) {
  PruneSpec p;
  p.rule = rule;
  p.metric = "acc";
  p.maximize = true;
  p.min_steps = min_steps;
  p.reduction = reduction;
  p.max_steps = max_steps;
  p.startup_trials = 2;
  return p;
}

TEST(Pruner, AshaKeepsTheBestThirdAtEachRung) {
  Pruner p(Rule(PruneRule::kAsha));
  EXPECT_EQ(p.RungStep(0, 0), 1);
  EXPECT_EQ(p.RungStep(0, 2), 9);
  // The first run at a rung always goes on; then only the best ceil(n/3).
  auto r1 = p.Report(1, 0, 1, 0.5);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_FALSE(r1[0].pruned);
  auto r2 = p.Report(2, 1, 1, 0.4);  // n = 2: keep 1, and run 1 is better
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_TRUE(r2[0].pruned);
  EXPECT_EQ(r2[0].rung, 0);
  EXPECT_TRUE(p.Report(2, 1, 2, 0.9).empty());  // pruned runs report nothing more
  auto r3 = p.Report(3, 2, 1, 0.7);  // the best so far goes on
  EXPECT_FALSE(r3[0].pruned);
  auto r4 = p.Report(4, 3, 1, 0.6);  // n = 4: keep 2; 0.7 is better, 0.6 second
  EXPECT_FALSE(r4[0].pruned);
  auto r5 = p.Report(5, 4, 1, std::nan(""));  // a NaN is the worst
  EXPECT_TRUE(r5[0].pruned);
  // Run 1 jumps from step 1 to step 10: it reaches rungs 1 (step 3) and 2 (step 9) at once.
  auto r6 = p.Report(1, 0, 10, 0.8);
  ASSERT_EQ(r6.size(), 2u);
  EXPECT_EQ(r6[0].step, 3);
  EXPECT_EQ(r6[1].step, 9);
}

TEST(Pruner, MinimisingAndLoadedRecordsDecideTheSame) {
  PruneSpec spec = Rule(PruneRule::kAsha, 2, 2);
  spec.maximize = false;
  Pruner live(spec);
  std::vector<RungRecord> kept;
  for (int64_t run = 1; run <= 6; ++run) {
    for (const RungRecord& r : live.Report(run, run, 2, static_cast<double>(7 - run))) {
      kept.push_back(r);
    }
  }
  // A restarted engine loads what was stored and decides the next run as the first would have.
  Pruner restarted(spec);
  for (const RungRecord& r : kept) restarted.Load(r);
  auto a = live.Report(7, 7, 2, 3.5);
  auto b = restarted.Report(7, 7, 2, 3.5);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].pruned, b[0].pruned);
  EXPECT_TRUE(restarted.Report(1, 1, 2, 0.0).empty());  // already past that rung
}

TEST(Pruner, MedianWaitsForStartupRunsThenStopsTheWorseHalf) {
  Pruner p(Rule(PruneRule::kMedian, 5, 2));
  EXPECT_FALSE(p.Report(1, 0, 5, 0.1)[0].pruned);  // no other run yet
  EXPECT_FALSE(p.Report(2, 1, 5, 0.2)[0].pruned);  // one other: under startup_trials (2)
  EXPECT_TRUE(p.Report(3, 2, 5, 0.1)[0].pruned);   // others 0.1, 0.2: median 0.15
  EXPECT_FALSE(p.Report(4, 3, 5, 0.3)[0].pruned);
  EXPECT_EQ(p.Report(4, 3, 7, 0.3).size(), 0u);   // the next rung is at step 10
}

TEST(Pruner, HyperbandSpreadsTrialsOverBracketsThatStartLater) {
  Pruner p(Rule(PruneRule::kHyperband, 1, 3, 27));
  EXPECT_EQ(p.Brackets(), 4);  // rungs at 1, 3, 9, 27: brackets start at 1, 3, 9 and 27
  EXPECT_EQ(p.BracketOf(5), 1);
  EXPECT_EQ(p.RungStep(1, 0), 3);
  // Bracket 3 starts at step 27 = max_steps: its trials run to the end unchecked.
  EXPECT_TRUE(p.Report(3, 3, 100, 0.0).empty());
  // Bracket 1 compares only its own trials.
  EXPECT_TRUE(p.Report(1, 1, 2, 0.5).empty());  // below its first rung
  EXPECT_FALSE(p.Report(1, 1, 3, 0.5)[0].pruned);
  EXPECT_TRUE(p.Report(5, 5, 3, 0.4)[0].pruned);
  EXPECT_FALSE(p.Report(0, 0, 3, 0.1)[0].pruned);  // bracket 0, rung 0 (step 1) first
}

}  // namespace
}  // namespace drover::search
