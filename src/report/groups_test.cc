#include "report/groups.h"

#include <gtest/gtest.h>

#include <cmath>

namespace drover::report {
namespace {

TEST(Groups, StudentTailMatchesTables) {
  // Two-sided p of Student's t, from standard tables.
  EXPECT_NEAR(StudentTwoSidedP(2.228, 10), 0.05, 5e-4);
  EXPECT_NEAR(StudentTwoSidedP(2.0, 10), 0.0734, 5e-4);
  EXPECT_NEAR(StudentTwoSidedP(1.0, 1), 0.5, 1e-9);  // Cauchy: P(|T| >= 1) = 1/2
  EXPECT_NEAR(StudentTwoSidedP(1.96, 1e6), 0.05, 5e-4);
  EXPECT_NEAR(StudentTwoSidedP(0, 5), 1.0, 1e-12);
  EXPECT_NEAR(StudentTwoSidedP(-2.0, 10), StudentTwoSidedP(2.0, 10), 1e-12);
}

TEST(Groups, WelchAgreesWithAWorkedExample) {
  // a = {0.91, 0.93, 0.92}, b = {0.80, 0.95, 0.88}: means 0.92 and 0.8767, sds 0.01 and 0.0751.
  auto w = WelchTest(0.92, 0.01, 3, 0.876667, 0.075056, 3);
  ASSERT_TRUE(w.has_value());
  EXPECT_NEAR(w->t, 0.9911, 1e-3);
  EXPECT_NEAR(w->df, 2.07, 0.01);
  EXPECT_GT(w->p, 0.3);  // they overlap
  EXPECT_FALSE(WelchTest(1, 0.1, 1, 0, 0.1, 5).has_value());
  w = WelchTest(1, 0, 3, 0, 0, 3);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->p, 0);
}

Run MakeGroupRun(int64_t id, RunState state, Json params) {
  Run r;
  r.id = id;
  r.state = state;
  r.params = params;
  r.current_params = params;
  return r;
}

TEST(Groups, SeedsPoolIntoConfigsRankedByMean) {
  Comparison c;
  c.maximize = true;
  c.metric = "val_acc";
  const double acc[] = {0.90, 0.92, 0.94, 0.95, 0.80, 0.96};
  for (int i = 0; i < 6; ++i) {
    c.runs.push_back(MakeGroupRun(i + 1, i == 4 ? RunState::kFailed : RunState::kSucceeded,
                             {{"model", i < 3 ? "mlp" : "cnn"}, {"seed", i % 3}}));
    c.scores[i + 1] = acc[i];
  }
  c.varying = VaryingParams(c.runs);
  Grouping g = GroupBySeed(c);
  EXPECT_EQ(g.seeds, (std::vector<std::string>{"seed"}));
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.seeds_per_config, 3);
  // cnn's mean is higher, but one of its three seeds failed: an incomplete group ranks after
  // the complete ones and is never the best (its mean is of the seeds that survived).
  EXPECT_EQ(g.groups[0].params, Json({{"model", "mlp"}}));
  EXPECT_TRUE(g.groups[0].complete);
  EXPECT_EQ(g.groups[0].n, 3);
  EXPECT_NEAR(g.groups[0].mean, 0.92, 1e-12);
  EXPECT_NEAR(g.groups[0].stddev, 0.02, 1e-12);
  EXPECT_EQ(g.groups[0].min, 0.90);
  EXPECT_EQ(g.groups[0].max, 0.94);
  EXPECT_EQ(g.groups[1].params, Json({{"model", "cnn"}}));
  EXPECT_FALSE(g.groups[1].complete);
  EXPECT_EQ(g.groups[1].runs, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(g.groups[1].n, 2);  // the failed run's score does not count
  EXPECT_NEAR(g.groups[1].mean, 0.955, 1e-12);
  EXPECT_NEAR(g.groups[1].stddev, std::sqrt(0.00005), 1e-12);
  EXPECT_FALSE(g.top_two.has_value());  // only complete groups are compared
  // With its third seed in, cnn is complete and first, and the two are compared.
  c.runs[4].state = RunState::kSucceeded;
  c.scores[5] = 0.97;
  g = GroupBySeed(c);
  EXPECT_EQ(g.groups[0].params, Json({{"model", "cnn"}}));
  EXPECT_TRUE(g.groups[0].complete);
  ASSERT_TRUE(g.top_two.has_value());
  EXPECT_GT(g.top_two->t, 0);
  // Without a varying seed there are no groups.
  for (auto& r : c.runs) r.params.erase("seed");
  c.varying = VaryingParams(c.runs);
  EXPECT_TRUE(GroupBySeed(c).groups.empty());
  EXPECT_TRUE(IsSeedParam("Random_Seed"));
  EXPECT_FALSE(IsSeedParam("seeds_dir"));
}

}  // namespace
}  // namespace drover::report
