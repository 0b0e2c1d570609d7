#include "engine/metric_lines.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

namespace drover {
namespace {

TEST(MetricLines, NumericFieldsBecomePointsAtTheEpoch) {
  auto m =
      ParseMetricLine(R"({"epoch": 3, "loss": 0.5, "val_acc": 0.9, "tag": "x", "ok": true})", 7);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 3);
  ASSERT_EQ(m->values.size(), 2u);
  EXPECT_EQ(m->values[0].first, "loss");
  EXPECT_DOUBLE_EQ(m->values[1].second, 0.9);
}

TEST(MetricLines, StepWinsOverEpochAndEpochIsThenAMetric) {
  auto m = ParseMetricLine(R"({"step": 100, "epoch": 2, "loss": 1})", 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 100);
  EXPECT_EQ(m->values.size(), 2u);
}

TEST(MetricLines, FallbackStepWithoutStepOrEpoch) {
  auto m = ParseMetricLine(R"(  {"loss": 2.5}  )", 4);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 4);
}

TEST(MetricLines, UnusableStepFallsBackAndIsAMetric) {
  auto m = ParseMetricLine(R"({"step": 1e300, "loss": 1})", 9);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 9);
}

TEST(MetricLines, KeepsNaNAndInfinityAsPythonPrintsThem) {
  // json.dumps({"step": 2, "loss": float("nan"), ...}) -- a diverged run must not look healthy.
  auto m = ParseMetricLine(
      R"({"step": 2, "loss": NaN, "gn": Infinity, "lo": -Infinity, "note": "NaN"})", 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 2);
  ASSERT_EQ(m->values.size(), 3u);
  std::map<std::string, double> v(m->values.begin(), m->values.end());
  EXPECT_TRUE(std::isnan(v["loss"]));
  EXPECT_EQ(v["gn"], std::numeric_limits<double>::infinity());
  EXPECT_EQ(v["lo"], -std::numeric_limits<double>::infinity());
}

TEST(MetricLines, IgnoresWhatIsNotAMetricObject) {
  EXPECT_FALSE(ParseMetricLine("epoch 3 loss 0.5", 0));
  EXPECT_FALSE(ParseMetricLine("[1, 2]", 0));
  EXPECT_FALSE(ParseMetricLine(R"({"msg": "starting"})", 0));
  EXPECT_FALSE(ParseMetricLine(R"({"broken": )", 0));
  EXPECT_FALSE(ParseMetricLine("", 0));
}

TEST(MetricLines, ReadsOnlyCompleteLinesUntilFinal) {
  auto dir = std::filesystem::temp_directory_path() / ("drover-ml-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "out").string();
  std::ofstream(path) << "a\nb\npartial";
  std::vector<std::string> seen;
  auto collect = [&](std::string_view l) { seen.emplace_back(l); };
  auto off = ReadNewLines(path, 0, false, collect);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, 4);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  std::ofstream(path, std::ios::app) << " line\nc\n";
  off = ReadNewLines(path, *off, false, collect);
  EXPECT_EQ(seen.back(), "c");
  EXPECT_EQ(seen[2], "partial line");
  std::ofstream(path, std::ios::app) << "tail";
  off = ReadNewLines(path, *off, true, collect);
  EXPECT_EQ(seen.back(), "tail");
  EXPECT_EQ(*off, static_cast<int64_t>(std::filesystem::file_size(path)));
  EXPECT_EQ(ReadTail(path, 4), "tail");
  EXPECT_EQ(*ReadNewLines((dir / "missing").string(), 0, true, collect), 0);
  std::filesystem::remove_all(dir);
}

TEST(AlertLines, ThePythonClientsAlertIsRead) {
  auto a = ParseAlertLine(
      R"({"drover_alert": {"message": "val set empty", "level": "error", "key": "val", "t": 1.5,)"
      R"( "details": {"rows": 0}}})");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->message, "val set empty");
  EXPECT_EQ(a->level, "error");
  EXPECT_EQ(a->key, "val");
  EXPECT_EQ(a->details["rows"], 0);
  // Defaults: warning, keyed by the message.
  auto d = ParseAlertLine(R"({"drover_alert": {"message": "slow data loader"}})");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->level, "warning");
  EXPECT_EQ(d->key, "slow data loader");
  // Never a metric line, and never confused with one.
  EXPECT_FALSE(ParseMetricLine(R"({"drover_alert": {"message": "x"}})", 0).has_value());
  EXPECT_FALSE(ParseAlertLine(R"({"loss": 0.5})").has_value());
  EXPECT_FALSE(ParseAlertLine(R"({"drover_alert": {"level": "error"}})").has_value());
  EXPECT_FALSE(ParseAlertLine(R"({"drover_alert": {"message": "x", "level": "fatal"}})"));
  EXPECT_FALSE(ParseAlertLine(R"({"drover_alert": "x"})").has_value());
  EXPECT_FALSE(ParseAlertLine(R"(print "drover_alert" somewhere)").has_value());
  EXPECT_FALSE(ParseAlertLine(R"({"drover_alert": {"message": "x"}, "loss": 1})").has_value());
}

}  // namespace
}  // namespace drover
