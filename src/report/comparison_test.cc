#include "report/comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "testutil/ranking.h"

namespace drover::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Run MakeRun(int64_t id, RunState state, Json params, Json metrics) {
  Run r;
  r.id = id;
  r.state = state;
  r.params = params;
  r.current_params = params;
  r.final_metrics = metrics;
  return r;
}

CurveSummary Curve(int64_t points, double last, double lowest, double highest, double mean_last) {
  CurveSummary c;
  c.points = points;
  c.last = last;
  c.lowest = lowest;
  c.highest = highest;
  c.mean_last = mean_last;
  return c;
}

std::vector<int64_t> Order(const Comparison& c) {
  std::vector<int64_t> ids;
  for (const auto& r : c.runs) ids.push_back(r.id);
  return ids;
}

Experiment WithObjective(Json objective) {
  Experiment e;
  e.spec = {{"objective", objective}};
  return e;
}

TEST(Compare, RanksSucceededRunsByTheObjectiveThenTheRestById) {
  Experiment exp = WithObjective({{"metric", "val_acc"}, {"mode", "max"}});
  std::vector<drover::Run> runs = {
      MakeRun(1, RunState::kSucceeded, {{"lr", 0.1}}, {{"val_acc", 0.9}, {"loss", 0.3}}),
      MakeRun(2, RunState::kFailed, {{"lr", 0.2}}, {{"val_acc", 0.99}}),
      MakeRun(3, RunState::kSucceeded, {{"lr", 0.3}}, {{"val_acc", 0.95}}),
      MakeRun(4, RunState::kSucceeded, {{"lr", 0.4}}, {{"loss", 0.1}}),
      MakeRun(5, RunState::kCancelled, {{"lr", 0.5}}, Json::object()),
  };
  Comparison c = testing::RankByLastValues(exp, runs);
  EXPECT_EQ(Order(c), (std::vector<int64_t>{3, 1, 4, 2, 5}));
  EXPECT_EQ(c.best_run, 3);  // a failed run's better value does not win
  EXPECT_EQ(c.metrics, (std::vector<std::string>{"val_acc", "loss"}));
  EXPECT_EQ(c.varying, (std::vector<std::string>{"lr"}));
  EXPECT_FALSE(c.guessed);
  EXPECT_EQ(c.rule.Note(), "");

  // An option over the objective: "loss" goes down by its name, unless the mode says otherwise.
  exp.spec = Json::object();
  c = testing::RankByLastValues(exp, runs, {"loss", "", ""});
  EXPECT_FALSE(c.maximize);
  EXPECT_EQ(c.best_run, 4);
  c = testing::RankByLastValues(exp, runs, {"loss", "max", ""});
  EXPECT_EQ(c.best_run, 1);
}

// A script that logs its own learning rate: the parameter and the metric `lr` are two columns,
// told apart by the metric's label.
TEST(Compare, AMetricNamedLikeAParameterIsToldApart) {
  Experiment exp = WithObjective({{"metric", "val_acc"}, {"mode", "max"}});
  std::vector<drover::Run> runs = {
      MakeRun(1, RunState::kSucceeded, {{"lr", 0.1}}, {{"val_acc", 0.9}, {"lr", 0.001}}),
      MakeRun(2, RunState::kSucceeded, {{"lr", 0.2}}, {{"val_acc", 0.8}, {"lr", 0.002}}),
  };
  Comparison c = testing::RankByLastValues(exp, runs);
  EXPECT_EQ(MetricLabel(c, "lr"), "lr (metric)");
  EXPECT_EQ(MetricLabel(c, "val_acc"), "val_acc");
}

TEST(Compare, WithoutAnObjectiveAWellKnownNameRanksAndSaysSo) {
  Experiment exp;  // no objective
  std::vector<drover::Run> runs = {
      MakeRun(1, RunState::kSucceeded, {}, {{"grad_norm", 9.0}, {"loss", 0.3}, {"val_acc", 0.8}}),
      MakeRun(2, RunState::kSucceeded, {}, {{"grad_norm", 1.0}, {"loss", 0.2}, {"val_acc", 0.9}}),
  };
  // A held-out metric before the training loss, never the alphabetically first (grad_norm).
  Comparison c = testing::RankByLastValues(exp, runs);
  EXPECT_EQ(c.metric, "val_acc");
  EXPECT_TRUE(c.maximize);
  EXPECT_TRUE(c.guessed);
  EXPECT_EQ(c.best_run, 2);
  EXPECT_NE(c.rule.Note().find("the spec has no objective"), std::string::npos) << c.rule.Note();
  // Only the training loss: that, going down.
  for (auto& r : runs) r.final_metrics.erase("val_acc");
  c = testing::RankByLastValues(exp, runs);
  EXPECT_EQ(c.metric, "loss");
  EXPECT_FALSE(c.maximize);
  EXPECT_EQ(c.best_run, 2);
  // No well-known name: not ranked, and the note says how to rank.
  for (auto& r : runs) r.final_metrics.erase("loss");
  c = testing::RankByLastValues(exp, runs);
  EXPECT_EQ(c.metric, "");
  EXPECT_EQ(c.best_run, 0);
  EXPECT_EQ(Order(c), (std::vector<int64_t>{1, 2}));
  EXPECT_NE(c.rule.Note().find("set objective"), std::string::npos) << c.rule.Note();
}

TEST(Compare, TheSummaryDecidesWhenThePeakAndTheLastValueDisagree) {
  std::vector<drover::Run> runs = {
      MakeRun(1, RunState::kSucceeded, {{"lr", 1}}, {{"val_acc", 0.97}}),
      MakeRun(2, RunState::kSucceeded, {{"lr", 2}}, {{"val_acc", 0.96}}),
      MakeRun(3, RunState::kSucceeded, {{"lr", 3}}, {{"val_acc", 0.95}}),
  };
  // Run 1 ends highest; run 2 peaked highest; run 3 has the best mean over its last 3 values.
  CurveSummaries curves = {{1, Curve(10, 0.97, 0.5, 0.97, 0.90)},
                           {2, Curve(10, 0.96, 0.5, 0.99, 0.91)},
                           {3, Curve(10, 0.95, 0.5, 0.96, 0.95)}};
  auto rank = [&](const std::string& summary) {
    Experiment exp = WithObjective({{"metric", "val_acc"}, {"mode", "max"}, {"summary", summary}});
    Result<RankRule> rule = RuleFor(exp, ReportedMetrics(runs), {});
    EXPECT_TRUE(rule.ok());
    return Rank(runs, *rule, curves);
  };
  EXPECT_EQ(rank("last").best_run, 1);
  EXPECT_EQ(rank("best").best_run, 2);
  Comparison mean = rank("mean_last:3");
  EXPECT_EQ(mean.best_run, 3);
  EXPECT_EQ(mean.rule.last_k, 3);
  EXPECT_EQ(mean.rule.Describe(), "val_acc (max, mean of the last 3 values)");
  EXPECT_DOUBLE_EQ(*SortValue(mean, mean.runs[0]), 0.95);
  // A minimised metric's best is its lowest value.
  Experiment low = WithObjective({{"metric", "val_acc"}, {"mode", "min"}, {"summary", "best"}});
  Result<RankRule> rule = RuleFor(low, ReportedMetrics(runs), {});
  ASSERT_TRUE(rule.ok());
  curves[3].lowest = 0.4;
  EXPECT_EQ(Rank(runs, *rule, curves).best_run, 3);
  // A spec stored before objective.summary existed ranks by the last value.
  Experiment old = WithObjective({{"metric", "val_acc"}, {"mode", "max"}});
  rule = RuleFor(old, ReportedMetrics(runs), {});
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->summary, ScoreSummary::kLast);
  // The view's option wins over the objective's summary.
  rule = RuleFor(old, ReportedMetrics(runs), {"", "", "best"});
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(Rank(runs, *rule, curves).best_run, 2);
  EXPECT_FALSE(RuleFor(old, ReportedMetrics(runs), {"", "", "mean_last:0"}).ok());
  EXPECT_FALSE(RuleFor(old, ReportedMetrics(runs), {"", "", "peak"}).ok());
  EXPECT_FALSE(RuleFor(old, ReportedMetrics(runs), {"", "sideways", ""}).ok());
}

TEST(Compare, NaNAndInfinitiesAreShownAsSuchAndNeverWin) {
  Experiment exp = WithObjective({{"metric", "loss"}, {"mode", "min"}});
  std::vector<drover::Run> runs = {
      MakeRun(1, RunState::kSucceeded, {}, {{"loss", nullptr}}),
      MakeRun(2, RunState::kSucceeded, {}, {{"loss", nullptr}}),
      MakeRun(3, RunState::kSucceeded, {}, {{"loss", 0.5}}),
      MakeRun(4, RunState::kSucceeded, {}, {{"loss", nullptr}}),
      MakeRun(5, RunState::kSucceeded, {}, Json::object()),
  };
  CurveSummaries curves = {{1, Curve(3, kNaN, 0.1, 0.9, kNaN)},
                           {2, Curve(3, -kInf, 0.2, 0.9, -kInf)},
                           {3, Curve(3, 0.5, 0.5, 0.9, 0.6)},
                           {4, Curve(3, kInf, 0.3, 0.9, kInf)}};
  Result<RankRule> rule = RuleFor(exp, ReportedMetrics(runs), {});
  ASSERT_TRUE(rule.ok());
  Comparison c = Rank(runs, *rule, curves);
  // -inf is no better loss than a number: finite first, then the non-finite ones, then none.
  EXPECT_EQ(Order(c), (std::vector<int64_t>{3, 1, 2, 4, 5}));
  EXPECT_EQ(c.best_run, 3);
  EXPECT_EQ(FormatScore(*SortValue(c, c.runs[1])), "nan");
  EXPECT_EQ(FormatScore(*SortValue(c, c.runs[2])), "-inf");
  EXPECT_EQ(FormatScore(*SortValue(c, c.runs[3])), "inf");
  EXPECT_FALSE(SortValue(c, c.runs[4]).has_value());
  EXPECT_EQ(ScoreJson(kNaN), "NaN");
  EXPECT_EQ(ScoreJson(kInf), "Infinity");
  EXPECT_EQ(ScoreJson(-kInf), "-Infinity");
  EXPECT_EQ(ScoreJson(0.25), 0.25);
  // Under `best`, a curve that reached a finite value before diverging ranks by it.
  Experiment best = WithObjective({{"metric", "loss"}, {"mode", "min"}, {"summary", "best"}});
  rule = RuleFor(best, ReportedMetrics(runs), {});
  ASSERT_TRUE(rule.ok());
  c = Rank(runs, *rule, curves);
  EXPECT_EQ(c.best_run, 1);
  // A curve with no finite value has its last value as its best.
  curves[1] = Curve(2, kNaN, kNaN, kNaN, kNaN);
  c = Rank(runs, *rule, curves);
  EXPECT_EQ(c.best_run, 2);
  EXPECT_EQ(FormatScore(*SortValue(c, runs[0])), "nan");
}

TEST(Compare, FormatsValuesAsTheTableShowsThem) {
  EXPECT_EQ(FormatValue(Json(0.96113)), "0.9611");
  EXPECT_EQ(FormatValue(Json(1.0)), "1.0");
  EXPECT_EQ(FormatValue(Json(64)), "64");
  EXPECT_EQ(FormatValue(Json("a\tb")), "a\\tb");
  EXPECT_EQ(FormatValue(Json()), "nan");
  EXPECT_EQ(FormatScore(0.96113), "0.9611");
}

TEST(ScoreSummary, ParsesWhatTheSpecAndTheOptionsTake) {
  EXPECT_EQ(ParseScoreSummary("last")->summary, ScoreSummary::kLast);
  EXPECT_EQ(ParseScoreSummary("best")->summary, ScoreSummary::kBest);
  EXPECT_EQ(ParseScoreSummary("mean_last:5")->last_k, 5);
  EXPECT_EQ(ParseScoreSummary("mean_last:1000")->last_k, 1000);
  for (const char* bad : {"", "mean_last", "mean_last:", "mean_last:0", "mean_last:1001",
                          "mean_last:-1", "mean_last:2x", "max", "Best"}) {
    EXPECT_FALSE(ParseScoreSummary(bad).ok()) << bad;
  }
  EXPECT_EQ(ScoreSummaryText(ScoreSummary::kMeanLast, 7), "mean_last:7");
}

}  // namespace
}  // namespace drover::report
