#include "report/search_view.h"

#include <gtest/gtest.h>

namespace drover::report {
namespace {

TEST(SearchView, BestSoFarStatesAndTheParameterThatDecidesTheScore) {
  std::vector<drover::Run> runs;
  CurveSummaries curves;
  // The score depends on `model` alone; `lr` is noise around it.
  const char* models[] = {"cnn", "mlp", "cnn", "mlp", "cnn", "mlp", "cnn", "mlp"};
  for (int i = 0; i < 8; ++i) {
    drover::Run r;
    r.id = 10 + i;
    r.index = i;
    r.state = i == 7 ? RunState::kPruned : RunState::kSucceeded;
    r.params = {{"model", models[i]}, {"lr", 0.001 * (1 + (i * 5) % 8)}};
    runs.push_back(r);
    CurveSummary c;
    c.points = 1;
    c.last = (std::string(models[i]) == "cnn" ? 0.9 : 0.7) + 0.001 * ((i * 3) % 5);
    curves[r.id] = c;
  }
  RankRule rule;
  rule.metric = "acc";
  rule.maximize = true;
  Comparison c = Rank(runs, rule, curves);
  SearchView v = SearchViewOf(c);
  EXPECT_EQ(v.states["succeeded"], 7);
  EXPECT_EQ(v.states["pruned"], 1);
  ASSERT_EQ(v.history.size(), 7u);  // succeeded trials only
  EXPECT_EQ(v.history[0].trial, 1);
  EXPECT_DOUBLE_EQ(v.history[0].best, 0.9);
  for (size_t i = 1; i < v.history.size(); ++i) {
    EXPECT_GE(v.history[i].best, v.history[i - 1].best);
  }
  ASSERT_EQ(v.importance.size(), 2u);
  EXPECT_EQ(v.importance[0].first, "model");
  EXPECT_GT(v.importance[0].second, 0.9);
  EXPECT_NEAR(v.importance[0].second + v.importance[1].second, 1.0, 1e-9);
}

}  // namespace
}  // namespace drover::report
