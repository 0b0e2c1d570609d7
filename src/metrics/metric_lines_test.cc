#include "metrics/metric_lines.h"

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

TEST(MetricLines, UnusableStepFallsBackAndIsNeverAMetric) {
  // A step outside int64 (or not finite) is not used, and never becomes a metric named step
  // (issue 39, 14): through the scanner and through the full parser alike.
  for (const char* line :
       {R"({"step": 1e300, "loss": 1})", R"({"step": 99999999999999999999, "loss": 1})",
        R"({"step": -1e19, "loss": 1})", R"({"step": NaN, "loss": 1})",
        R"({"step": 1e300, "loss": 1, "v": {"a": 2}})"}) {
    for (auto parse : {&ParseMetricLine, &ParseMetricLineWithJson}) {
      auto m = parse(line, 9);
      ASSERT_TRUE(m) << line;
      EXPECT_EQ(m->step, 9) << line;
      for (const auto& [name, value] : m->values) EXPECT_NE(name, "step") << line;
    }
  }
  // An unusable step lets a usable epoch be the step; neither is a metric then.
  auto m = ParseMetricLine(R"({"step": 1e300, "epoch": 3, "loss": 1})", 9);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 3);
  ASSERT_EQ(m->values.size(), 1u);
  EXPECT_EQ(m->values[0].first, "loss");
  // A line whose only number is an unusable step has no metric.
  EXPECT_FALSE(ParseMetricLine(R"({"step": 1e300})", 9).has_value());
}

TEST(MetricLines, DroverFieldsAreNeverMetricsWhateverTheirType) {
  // {"drover_checkpoint": 5} is a malformed report, not a metric named drover_checkpoint.
  for (auto parse : {&ParseMetricLine, &ParseMetricLineWithJson}) {
    EXPECT_FALSE(parse(R"({"drover_checkpoint": 5})", 0).has_value());
    EXPECT_FALSE(parse(R"({"drover_resume": 1.5, "drover_hparams": 2})", 0).has_value());
    auto m = parse(R"({"step": 1, "drover_alert": 5, "drover_x": NaN, "loss": 1})", 0);
    ASSERT_TRUE(m);
    ASSERT_EQ(m->values.size(), 1u);
    EXPECT_EQ(m->values[0].first, "loss");
    // Below the top a drover_ name is the run's own: a.drover_x is a metric.
    auto nested = parse(R"({"a": {"drover_x": 1}})", 0);
    ASSERT_TRUE(nested);
    EXPECT_EQ(nested->values[0].first, "a.drover_x");
  }
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

TEST(MetricLines, NestedObjectsAreFlattenedWithDots) {
  // print(json.dumps({"step": 3, "val": {"acc": 0.9, "loss": float("nan")}, ...}))
  auto m = ParseMetricLine(
      R"({"step": 3, "val": {"acc": 0.9, "loss": NaN, "per_class": {"cat": 0.5}, "n": [1, 2]},)"
      R"( "train": {"loss": 0.25, "phase": "warmup"}, "a": {"b": {"c": {"d": {"e": 1, "f": {"g": 2}}}}}})",
      0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 3);
  std::map<std::string, double> v(m->values.begin(), m->values.end());
  EXPECT_EQ(v.size(), 5u) << testing::PrintToString(m->values);
  EXPECT_EQ(v["val.acc"], 0.9);
  EXPECT_TRUE(std::isnan(v["val.loss"]));
  EXPECT_EQ(v["val.per_class.cat"], 0.5);
  EXPECT_EQ(v["train.loss"], 0.25);
  EXPECT_EQ(v["a.b.c.d.e"], 1);  // four levels below the top; a fifth is not read
  EXPECT_EQ(v.count("a.b.c.d.f.g"), 0u);
  // Objects with nothing numeric give nothing.
  EXPECT_FALSE(ParseMetricLine(R"({"cfg": {"name": "x", "on": true}})", 0));
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

TEST(MetricLines, ReadingIsBoundedWhateverTheFileHolds) {
  auto dir = std::filesystem::temp_directory_path() / ("drover-mlb-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "out").string();
  // A line that spans several 64 KiB chunks and is within the limit; one over the limit; then a
  // metric line; then many short lines (3 MiB in all).
  const std::string spanning(200 * 1024, 's');
  const std::string over(3 << 20, 'x');
  {
    std::ofstream out(path);
    out << spanning << "\n" << over << "\n" << R"({"loss": 0.5})" << "\n";
    for (int i = 0; i < 300'000; ++i) out << "line " << i << "\n";
  }
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path));
  std::vector<std::string> seen;
  size_t longest = 0;
  auto collect = [&](std::string_view l) {
    longest = std::max(longest, l.size());
    if (seen.size() < 3) seen.emplace_back(l);
  };
  const LineLimits limits{1 << 20, 4 << 20};
  // The first look stops after about 4 MiB, at a line's end, and has skipped the long line.
  Result<int64_t> off = ReadNewLines(path, 0, false, collect, limits);
  ASSERT_TRUE(off.ok());
  EXPECT_GT(*off, static_cast<int64_t>(spanning.size() + over.size()));
  EXPECT_LT(*off, size);
  EXPECT_LE(*off, (4 << 20) + 64 * 1024);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], spanning);
  EXPECT_EQ(seen[1], R"({"loss": 0.5})");
  EXPECT_EQ(seen[2], "line 0");
  EXPECT_LE(longest, spanning.size());
  // Later looks go on from there to the end, a line at a time, none twice.
  int64_t lines_after = 0;
  std::string last;
  while (*off < size) {
    off = ReadNewLines(path, *off, false, [&](std::string_view l) {
      ++lines_after;
      last = std::string(l);
    }, limits);
    ASSERT_TRUE(off.ok());
  }
  EXPECT_EQ(*off, size);
  EXPECT_EQ(last, "line 299999");
  // A file no longer than the offset is not read at all.
  EXPECT_EQ(*ReadNewLines(path, size, true, collect, limits), size);
  // An over-long last line without a newline is skipped, not handed over, even when final.
  {
    std::ofstream out(path, std::ios::app);
    out << over;
  }
  seen.clear();
  longest = 0;
  off = ReadNewLines(path, size, true, collect, limits);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, size + static_cast<int64_t>(over.size()));
  EXPECT_TRUE(seen.empty());
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

TEST(MetricLines, TheFastScannerAgreesWithTheJsonParser) {
  const std::vector<std::string> lines = {
      R"({"step": 1, "loss": 0.5})",
      R"({"loss":0.5,"step":3,"acc":0.25})",
      R"(  { "epoch" : 2 , "val_acc" : 9.5e-1 }  )",
      R"({"step": 1, "loss": NaN, "x": Infinity, "y": -Infinity})",
      R"({"step": 1, "phase": "train", "ok": true, "none": null, "lr": 1e-3})",
      R"({"step": 1, "note": "a \"quoted\" , } value", "loss": 2})",
      R"({"step": 1, "loss": 0.5, "loss": 0.7})",      // duplicate: the last wins
      R"({"step": 1, "nested": {"a": 1}, "loss": 1})",  // nested: full parser
      R"({"step": 1, "v": {"a": NaN, "b": {"c": 2}}})",
      R"({"drover_alert": 5, "loss": 1})",              // drover_* is never a metric
      R"({"drover_alert": {"message": "x", "n": 1}, "loss": 1})",
      R"({"step": 1, "list": [1, 2], "loss": 1})",
      R"({"st\u0065p": 4, "loss": 1})",                 // escaped key
      R"({"step": 01, "loss": 1})",                     // not JSON
      R"({"step": 1, "loss": 1,})",                     // trailing comma
      R"({"step": 1, "loss": .5})",
      R"({"step": 1, "loss": 1e999})",
      R"({"step": -0, "loss": -0.0})",
      R"({"step": 1.7, "loss": 3})",
      R"({"step": "7", "loss": 3})",
      R"({"epoch": 5, "step": NaN, "loss": 3})",
      R"({"step": 99999999999999999999, "loss": 3})",
      R"({})",
      R"({"flag": true})",
      R"({"loss": 1} x)",
      R"({"a": 1 "b": 2})",
      R"({"a"   :   -12.5E+2})",
      "{\"a\": 1}\r",
      R"({"loss": 1, "note": "\q"})",                  // a bad escape: not JSON
      R"({"loss": 1, "note": "\u00"})",
      "{\"lo\xffss\": 1}",                              // not UTF-8
      "{\"loss\": 1, \"note\": \"caf\xc3\xa9\"}",    // UTF-8 is fine
      R"({"loss": "@drover:nan", "acc": 1})",           // the marker text as a string
  };
  for (const auto& line : lines) {
    auto fast = ParseMetricLine(line, 42);
    auto full = ParseMetricLineWithJson(line, 42);
    ASSERT_EQ(fast.has_value(), full.has_value()) << line;
    if (!fast) continue;
    EXPECT_EQ(fast->step, full->step) << line;
    ASSERT_EQ(fast->values.size(), full->values.size()) << line;
    for (size_t i = 0; i < fast->values.size(); ++i) {
      EXPECT_EQ(fast->values[i].first, full->values[i].first) << line;
      double a = fast->values[i].second, b = full->values[i].second;
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a)) << line;
      } else {
        EXPECT_EQ(a, b) << line;
      }
    }
  }
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// What a run reports of itself: checkpoints, resumes and hyper-parameters; a deeply nested value
// is named, never dumped (its depth is the run's to choose), and nothing of it is a metric.
TEST(ReportLine, CheckpointsResumesAndHyperParametersAreReadAndBounded) {
  auto c = ParseReportLine(R"({"drover_checkpoint": {"step": 12, "path": "ckpt-12.pt"}})");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->kind, ReportLine::Kind::kCheckpoint);
  EXPECT_EQ(c->step, 12);
  auto r = ParseReportLine(R"({"drover_resume": {"step": 7}})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, ReportLine::Kind::kResume);
  EXPECT_FALSE(ParseReportLine(R"({"drover_checkpoint": {"step": 18446744073709551615}})"));
  EXPECT_FALSE(ParseReportLine(R"({"drover_checkpoint": {"step": "x"}})"));
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto h = ParseReportLine(R"({"drover_hparams": {"lr": 0.01, "name": "adamw", "deep": )" + deep +
                           "}}");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->hparams["lr"], 0.01);
  EXPECT_EQ(h->hparams["deep"], "(a list)");
  EXPECT_EQ(h->hparams["name"], "adamw");
  auto cut = ParseReportLine(R"({"drover_hparams": {"s": ")" + std::string(199, 'a') +
                             "\u00e9\"}}");
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->hparams["s"].get<std::string>(), std::string(199, 'a'));  // not half a character
  EXPECT_FALSE(ParseMetricLine(R"({"drover_hparams": {"lr": 0.01}})", 0).has_value());
}

}  // namespace
}  // namespace drover
