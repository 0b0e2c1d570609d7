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

Pruner::Place At(double at, std::string unit = "step") {
  return Pruner::Place{at, unit, static_cast<int64_t>(at)};
}

TEST(Pruner, AshaKeepsTheBestThirdAtEachRung) {
  Pruner p(Rule(PruneRule::kAsha));
  EXPECT_EQ(p.RungStep(0, 0), 1);
  EXPECT_EQ(p.RungStep(0, 2), 9);
  // The first two runs at a rung go on (under `reduction` values there); then only the best
  // ceil(n/3).
  auto r1 = p.Report(1, 0, At(1), 0.5);
  ASSERT_TRUE(r1);
  EXPECT_FALSE(r1->pruned);
  auto r0 = p.Report(6, 5, At(1), 0.1);  // n = 2: worse than run 1, but too few to judge
  ASSERT_TRUE(r0);
  EXPECT_FALSE(r0->pruned);
  auto r2 = p.Report(2, 1, At(1), 0.4);  // n = 3: keep 1, and run 1 is better
  ASSERT_TRUE(r2);
  EXPECT_TRUE(r2->pruned);
  EXPECT_EQ(r2->rung, 0);
  EXPECT_FALSE(p.Report(2, 1, At(2), 0.9));  // pruned runs report nothing more
  auto r3 = p.Report(3, 2, At(1), 0.7);  // the best so far goes on
  EXPECT_FALSE(r3->pruned);
  auto r4 = p.Report(4, 3, At(1), 0.45);  // n = 5: keep 2; 0.7 and 0.5 are better
  EXPECT_TRUE(r4->pruned);
  auto r7 = p.Report(7, 6, At(1), 0.6);  // n = 6: keep 2; 0.7 is better, 0.6 second
  EXPECT_FALSE(r7->pruned);
  auto r5 = p.Report(5, 4, At(1), std::nan(""));  // a NaN is the worst
  EXPECT_TRUE(r5->pruned);
  // Run 1 jumps from step 1 to step 10: it passes rung 1 (step 3) and reaches rung 2 (step 9)
  // with one value, so only rung 2 judges it: no two rungs are judged on one report.
  auto r6 = p.Report(1, 0, At(10), 0.8);
  ASSERT_TRUE(r6);
  EXPECT_EQ(r6->rung, 2);
  EXPECT_EQ(r6->step, 9);
  EXPECT_EQ(r6->report_step, 10);
  EXPECT_FALSE(p.Report(1, 0, At(11), 0.9));  // the next rung is at 27
}

// Rungs on epochs: a script that reports val_acc once an epoch, at optimizer steps 51, 103, ...
// is judged at epochs 1, 3 and 9 on three different values, whatever its steps are.
TEST(Pruner, RungsOnEpochsJudgeEachOnItsOwnReport) {
  Pruner p(Rule(PruneRule::kAsha));
  std::vector<RungRecord> seen;
  for (int epoch = 1; epoch <= 10; ++epoch) {
    Pruner::Place place{static_cast<double>(epoch), "epoch", epoch * 51 + epoch / 2};
    if (auto r = p.Report(1, 0, place, 0.5 + epoch * 0.01)) seen.push_back(*r);
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].step, 1);
  EXPECT_EQ(seen[1].step, 3);
  EXPECT_EQ(seen[2].step, 9);
  EXPECT_EQ(seen[1].unit, "epoch");
  EXPECT_EQ(seen[1].report_step, 154);
  EXPECT_DOUBLE_EQ(seen[2].value, 0.59);
}

// A run that says where it ends (its `epochs`) has no rung there, nor one so near it that the
// runs it keeps have no next rung: rung 9 of a 9-epoch run would judge its final value, and of a
// 10-epoch run would stop runs 90% done. As ASHA, the end is the top rung.
TEST(Pruner, NoRungAtOrNearARunsOwnEnd) {
  Pruner p(Rule(PruneRule::kAsha));
  Pruner::Place last{9, "epoch", 460, 9};
  auto r = p.Report(1, 0, last, 0.9);  // rungs 1 and 3 passed over; 9 is the run's end
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step, 3);
  Pruner q(Rule(PruneRule::kAsha));
  last.end = 10;
  ASSERT_EQ(q.Report(1, 0, last, 0.9)->step, 3);  // 9 * 3 = 27 is past 10
  Pruner w(Rule(PruneRule::kAsha));
  last.end = 27;
  ASSERT_EQ(w.Report(1, 0, last, 0.9)->step, 9);  // runs kept at 9 go on to 27
  EXPECT_TRUE(w.Judges(9, 27));
  EXPECT_FALSE(w.Judges(9, 26));
  EXPECT_TRUE(w.Judges(1000));  // no end known: every rung
}

// A run whose rung came with its last report had finished: its value counts, it is not stopped.
TEST(Pruner, ARunThatHadEndedIsComparedButNotPruned) {
  Pruner p(Rule(PruneRule::kAsha));
  ASSERT_FALSE(p.Report(1, 0, At(1), 0.9)->pruned);
  auto late = p.Report(2, 1, At(1), 0.1, /*ended=*/true);
  ASSERT_TRUE(late);
  EXPECT_FALSE(late->pruned);
  EXPECT_EQ(p.PrunedAt(2), nullptr);
  EXPECT_TRUE(p.Report(3, 2, At(1), 0.05)->pruned);  // run 2's value is among the others
}

TEST(Pruner, MinimisingAndLoadedRecordsDecideTheSame) {
  PruneSpec spec = Rule(PruneRule::kAsha, 2, 2);
  spec.maximize = false;
  Pruner live(spec);
  std::vector<RungRecord> kept;
  for (int64_t run = 1; run <= 6; ++run) {
    if (auto r = live.Report(run, run, At(2), static_cast<double>(7 - run))) kept.push_back(*r);
  }
  // A restarted engine loads what was stored and decides the next run as the first would have.
  Pruner restarted(spec);
  for (const RungRecord& r : kept) restarted.Load(r);
  auto a = live.Report(7, 7, At(2), 3.5);
  auto b = restarted.Report(7, 7, At(2), 3.5);
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->pruned, b->pruned);
  EXPECT_FALSE(restarted.Report(1, 1, At(2), 0.0));  // already past that rung
}

TEST(Pruner, MedianWaitsForStartupRunsThenStopsTheWorseHalf) {
  Pruner p(Rule(PruneRule::kMedian, 5, 2));
  EXPECT_FALSE(p.Report(1, 0, At(5), 0.1)->pruned);  // no other run yet
  EXPECT_FALSE(p.Report(2, 1, At(5), 0.2)->pruned);  // one other: under startup_trials (2)
  EXPECT_TRUE(p.Report(3, 2, At(5), 0.1)->pruned);   // others 0.1, 0.2: median 0.15
  EXPECT_FALSE(p.Report(4, 3, At(5), 0.3)->pruned);
  EXPECT_FALSE(p.Report(4, 3, At(7), 0.3));   // the next rung is at step 10
}

TEST(Pruner, HyperbandSpreadsTrialsOverBracketsThatStartLater) {
  Pruner p(Rule(PruneRule::kHyperband, 1, 3, 27));
  EXPECT_EQ(p.Brackets(), 4);  // rungs at 1, 3, 9, 27: brackets start at 1, 3, 9 and 27
  EXPECT_EQ(p.BracketOf(5), 1);
  EXPECT_EQ(p.RungStep(1, 0), 3);
  // Bracket 3 starts at step 27 = max_steps: its trials run to the end unchecked.
  EXPECT_FALSE(p.Report(3, 3, At(100), 0.0));
  // Bracket 1 compares only its own trials.
  EXPECT_FALSE(p.Report(1, 1, At(2), 0.5));  // below its first rung
  EXPECT_FALSE(p.Report(1, 1, At(3), 0.5)->pruned);
  EXPECT_FALSE(p.Report(5, 5, At(3), 0.4)->pruned);  // two values there: too few to judge
  EXPECT_TRUE(p.Report(9, 9, At(3), 0.3)->pruned);   // bracket 1 too; the worst of three
  EXPECT_FALSE(p.Report(0, 0, At(3), 0.1)->pruned);  // bracket 0, rung 0 (step 1) first
}

}  // namespace
}  // namespace drover::search

namespace drover::search {
namespace {

// A line's epoch places the metric beside it, whatever order the points come in; a run that
// never reports an epoch is placed by its steps; a named resource not reported places nothing.
TEST(ReportPlacer, EpochsBesideTheMetricPlaceItElseSteps) {
  PruneSpec spec = Rule(PruneRule::kAsha);
  ReportPlacer placer(spec);
  std::vector<std::pair<std::string, double>> seen;
  auto note = [&](const MetricPoint& m, const Pruner::Place& p) {
    seen.emplace_back(p.unit, p.at);
    return true;
  };
  placer.Place(1, {{.step = 51, .name = "acc", .value = 0.5}, {.step = 51, .name = "epoch", .value = 1},
                   {.step = 103, .name = "acc", .value = 0.6}, {.step = 103, .name = "epoch", .value = 2}},
               10, note);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::pair<std::string, double>("epoch", 1)));
  EXPECT_EQ(seen[1], (std::pair<std::string, double>("epoch", 2)));
  seen.clear();
  placer.Place(2, {{.step = 51, .name = "acc", .value = 0.5}}, 0, note);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::pair<std::string, double>("step", 51)));
  spec.resource = "tokens";
  ReportPlacer named(spec);
  seen.clear();
  named.Place(3, {{.step = 51, .name = "acc", .value = 0.5}, {.step = 51, .name = "epoch", .value = 1}}, 0, note);
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace drover::search
