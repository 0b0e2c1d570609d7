#include "report/search_view.h"

#include <gtest/gtest.h>

#include <map>

namespace drover::report {
namespace {

TEST(SearchView, BestSoFarStatesAndTheParameterThatDecidesTheScore) {
  std::vector<drover::Run> runs;
  CurveSummaries curves;
  // The score depends on `model` alone; `lr` is noise around it.
  const char* models[] = {"cnn", "mlp", "cnn", "mlp", "cnn", "mlp", "cnn", "mlp", "mlp"};
  for (int i = 0; i < 9; ++i) {
    drover::Run r;
    r.id = 10 + i;
    r.index = i;
    r.state = i == 8 ? RunState::kPruned : RunState::kSucceeded;
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
  EXPECT_EQ(v.states["succeeded"], 8);
  EXPECT_EQ(v.states["pruned"], 1);
  ASSERT_EQ(v.history.size(), 8u);  // succeeded trials only
  EXPECT_EQ(v.history[0].trial, 1);
  EXPECT_DOUBLE_EQ(v.history[0].best, 0.9);
  for (size_t i = 1; i < v.history.size(); ++i) {
    EXPECT_GE(v.history[i].best, v.history[i - 1].best);
  }
  ASSERT_EQ(v.importance.size(), 2u);
  EXPECT_EQ(v.importance[0].first, "model");
  EXPECT_GT(v.importance[0].second, 0.9);
  EXPECT_NEAR(v.importance[0].second + v.importance[1].second, 1.0, 1e-9);
  EXPECT_TRUE(v.importance_note.empty());
}

// The importance of a function whose importances are known. score = 2*a + b + 0*c with a a
// choice of {0, 1} and b, c uniform on [0, 1), drawn independently: the variance 2*a explains is
// 4 * 1/4 = 1, b's is 1/12, and b grouped in quartiles keeps 15/16 of it (the rest is within the
// quartiles); c explains none. So a's share is 1 / (1 + 0.078) = 0.928, b's 0.072, c's 0. A
// seed, a constant and pruned trials (scored on an earlier, lower value) are left out.
// How a search spent its budget: trials by how they were chosen, then how they ended.
TEST(SearchView, SaysHowTheBudgetWent) {
  std::vector<drover::Run> runs;
  CurveSummaries curves;
  const TrialOrigin how[] = {TrialOrigin::kRandomStart, TrialOrigin::kRandomStart,
                             TrialOrigin::kRandomStart, TrialOrigin::kRandomStart,
                             TrialOrigin::kTpe,         TrialOrigin::kTpe,
                             TrialOrigin::kAgent};
  for (int i = 0; i < 7; ++i) {
    drover::Run r;
    r.id = i + 1;
    r.index = i;
    r.origin = how[i];
    r.state = i % 3 == 0 ? RunState::kSucceeded : i == 5 ? RunState::kFailed : RunState::kPruned;
    r.params = {{"x", i}};
    runs.push_back(r);
    CurveSummary c;
    c.points = 1;
    c.last = 0.1 * i;
    curves[r.id] = c;
  }
  RankRule rule;
  rule.metric = "acc";
  Comparison c = Rank(runs, rule, curves);
  SearchView v = SearchViewOf(c);
  ASSERT_EQ(v.origins.size(), 3u);
  EXPECT_EQ(v.origins[0], (std::pair<std::string, int>{"random start", 4}));
  EXPECT_EQ(v.origins[1], (std::pair<std::string, int>{"tpe", 2}));
  EXPECT_EQ(BudgetLine(v),
            "7 trials: 4 random (the start), 2 by TPE, 1 an agent's own; 3 pruned early, 3 ran to "
            "the end, 1 failed");
  EXPECT_EQ(SearchViewJson(v)["origins"]["tpe"], 2);
  // A grid with no pruned run: nothing to say.
  for (drover::Run& r : runs) {
    r.origin = TrialOrigin::kNone;
    r.state = RunState::kSucceeded;
  }
  EXPECT_EQ(BudgetLine(SearchViewOf(Rank(runs, rule, curves))), "");
}

TEST(SearchView, ImportanceOfAKnownFunction) {
  std::vector<drover::Run> runs;
  CurveSummaries curves;
  uint64_t state = 12345;
  auto uniform = [&] {  // a small LCG: the same draws on every platform
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / static_cast<double>(uint64_t{1} << 53);
  };
  for (int i = 0; i < 4000; ++i) {
    drover::Run r;
    r.id = 1 + i;
    r.index = i;
    const int a = uniform() < 0.5 ? 0 : 1;
    const double b = uniform(), c = uniform();
    const bool pruned = i % 4 == 3;
    r.state = pruned ? RunState::kPruned : RunState::kSucceeded;
    r.params = {{"a", a}, {"b", b}, {"c", c}, {"seed", i % 3}, {"epochs", 10}};
    runs.push_back(r);
    CurveSummary s;
    s.points = 1;
    // A pruned trial's value is from epoch 1: much lower, and with a's effect reversed.
    s.last = pruned ? 0.1 * (1 - a) : 2.0 * a + b + 0.0 * c + 0.3 * (i % 3);
    curves[r.id] = s;
  }
  // epochs differs only in a pruned trial: among the finished ones it is a constant.
  runs[3].params["epochs"] = 20;
  RankRule rule;
  rule.metric = "score";
  rule.maximize = true;
  SearchView v = SearchViewOf(Rank(runs, rule, curves));
  std::map<std::string, double> share(v.importance.begin(), v.importance.end());
  EXPECT_EQ(share.count("seed"), 0u);
  EXPECT_EQ(share.count("epochs"), 0u);
  ASSERT_EQ(share.size(), 3u);
  EXPECT_EQ(v.importance[0].first, "a");
  EXPECT_NEAR(share["a"], 0.928, 0.03);
  EXPECT_NEAR(share["b"], 0.072, 0.03);
  EXPECT_LT(share["c"], 0.02);
}

// Fewer than 8 finished trials: no importance, and a note that says why (pruned ones do not
// count).
TEST(SearchView, NoImportanceFromTooFewFinishedTrials) {
  std::vector<drover::Run> runs;
  CurveSummaries curves;
  for (int i = 0; i < 12; ++i) {
    drover::Run r;
    r.id = 1 + i;
    r.index = i;
    r.state = i < 5 ? RunState::kSucceeded : RunState::kPruned;
    r.params = {{"lr", 0.001 * (i + 1)}};
    runs.push_back(r);
    CurveSummary s;
    s.points = 1;
    s.last = 0.5 + 0.01 * i;
    curves[r.id] = s;
  }
  RankRule rule;
  rule.metric = "acc";
  SearchView v = SearchViewOf(Rank(runs, rule, curves));
  EXPECT_TRUE(v.importance.empty());
  EXPECT_NE(v.importance_note.find("needs 8 finished trials with a score; 5 have (7 pruned"),
            std::string::npos)
      << v.importance_note;
}

}  // namespace
}  // namespace drover::report
