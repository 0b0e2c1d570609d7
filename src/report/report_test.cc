#include "report/report.h"

#include <gtest/gtest.h>

#include <limits>

#include "testutil/ranking.h"
#include "testutil/xml_check.h"

namespace drover::report {
namespace {

using testing::ParseHtml;
using testing::XmlNode;

constexpr double kReportNaN = std::numeric_limits<double>::quiet_NaN();

Run MakeReportRun(int64_t id, RunState state, Json params, Json metrics, std::string reason = "") {
  Run r;
  r.id = id;
  r.experiment_id = 7;
  r.state = state;
  r.params = params;
  r.current_params = params;
  r.final_metrics = metrics;
  r.reason = reason.empty() ? std::string(ToString(state)) : reason;
  r.attempts = 1;
  r.started_ms = 1'700'000'000'000;
  r.ended_ms = r.started_ms + 65'000;
  return r;
}

Attempt MakeAttempt(int number, std::string reason, Json params, int exit_code = 0) {
  Attempt a;
  a.number = number;
  a.ended = true;
  a.reason = std::move(reason);
  a.params = params;
  a.exit_code = exit_code;
  a.started_ms = 1'700'000'000'000;
  a.ended_ms = a.started_ms + 5'000;
  return a;
}

MetricSeries Curve(const std::string& name, std::vector<double> values) {
  MetricSeries s;
  s.name = name;
  for (size_t i = 0; i < values.size(); ++i) {
    MetricPoint p;
    p.step = static_cast<int64_t>(i);
    p.name = name;
    p.value = values[i];
    s.points.push_back(p);
  }
  s.count = static_cast<int64_t>(s.points.size());
  return s;
}

// An experiment of five runs: three succeed (one after a CUDA OOM), one diverges, one crashes
// twice.
ReportData Digits() {
  ReportData d;
  d.experiment.id = 7;
  d.experiment.name = "digits <cmp> & co";
  d.experiment.status = ExperimentStatus::kDone;
  d.experiment.created_ms = 1'700'000'000'000;
  d.experiment.git_commit = "0123456789abcdef0123";
  d.experiment.git_diff = "diff --git a/train.py";
  d.experiment.snapshot_hash = "feedbeef00112233";
  d.experiment.spec_yaml = "name: digits\ncommand: python3 train.py --bs {batch_size}\n";
  d.experiment.spec = {{"objective", {{"metric", "val_acc"}, {"mode", "max"}}},
                       {"oom", {{"param", "batch_size"}, {"min", 8}, {"accumulate", "grad_accum"}}},
                       {"timeout_ms", 0}};
  d.drover_version = "0.1.0";
  d.generated_ms = 1'700'000'100'000;
  Json mlp32 = {{"model", "mlp"}, {"batch_size", 32}, {"grad_accum", 1}};
  Json cnn32 = {{"model", "cnn"}, {"batch_size", 32}, {"grad_accum", 1}};
  Json mlp64 = {{"model", "mlp"}, {"batch_size", 64}, {"grad_accum", 1}};
  Json cnn64 = {{"model", "cnn"}, {"batch_size", 64}, {"grad_accum", 1}};
  Json rnn64 = {{"model", "rnn"}, {"batch_size", 64}, {"grad_accum", 1}};
  d.runs = {
      MakeReportRun(1, RunState::kSucceeded, mlp32, {{"val_acc", 0.95}, {"loss", 0.2}}),
      MakeReportRun(2, RunState::kSucceeded, cnn32, {{"val_acc", 0.98}, {"loss", 0.1}}),
      MakeReportRun(3, RunState::kSucceeded, mlp64, {{"val_acc", 0.96}, {"loss", 0.15}}),
      MakeReportRun(4, RunState::kFailed, cnn64, {{"loss", nullptr}}, "diverged"),
      MakeReportRun(5, RunState::kFailed, rnn64, Json::object(), "exit_code"),
  };
  // Run 3 ran out of memory at 64 and succeeded at 32 with twice the accumulation.
  Json mlp32x2 = {{"model", "mlp"}, {"batch_size", 32}, {"grad_accum", 2}};
  d.runs[2].current_params = mlp32x2;
  d.runs[2].attempts = 2;
  d.details[1].attempts = {MakeAttempt(1, "succeeded", mlp32)};
  d.details[2].attempts = {MakeAttempt(1, "succeeded", cnn32)};
  d.details[3].attempts = {MakeAttempt(1, "cuda_oom", mlp64, 1),
                           MakeAttempt(2, "succeeded", mlp32x2)};
  d.details[4].attempts = {MakeAttempt(1, "diverged", cnn64, -1)};
  d.details[5].attempts = {MakeAttempt(1, "exit_code", rnn64, 1),
                           MakeAttempt(2, "exit_code", rnn64, 3)};
  d.details[1].curves = {{"val_acc", Curve("val_acc", {0.5, 0.8, 0.95})},
                         {"loss", Curve("loss", {1.0, 0.5, 0.2})}};
  d.details[2].curves = {{"val_acc", Curve("val_acc", {0.6, 0.9, 0.98})},
                         {"loss", Curve("loss", {0.9, 0.3, 0.1})}};
  d.details[3].curves = {{"val_acc", Curve("val_acc", {0.4, 0.9, 0.96})},
                         {"loss", Curve("loss", {1.2, 0.4, 0.15})}};
  d.details[3].curve_attempt = 2;
  d.details[4].curves = {{"loss", Curve("loss", {1.1, 0.7, kReportNaN, 0.6, kReportNaN})}};
  for (auto& [id, det] : d.details) {
    if (!det.curves.empty() && det.curve_attempt == 0) det.curve_attempt = 1;
  }
  Alert a;
  a.kind = "diverged";
  a.run_id = 4;
  a.experiment_id = 7;
  a.message = "run 4: loss became NaN at step 2";
  d.alerts = {a};
  d.ranking = testing::RankByLastValues(d.experiment, d.runs);
  return d;
}

const XmlNode* ById(const XmlNode& root, const std::string& id) {
  for (const auto* n : root.FindAll("")) {
    if (n->Attr("id") == id) return n;
  }
  return nullptr;
}

TEST(Report, IsOneWellFormedSelfContainedPage) {
  std::string html = RenderReportHtml(Digits());
  ASSERT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  auto doc = ParseHtml(html);
  ASSERT_EQ(doc.error, "") << html.substr(0, 2000);
  // Nothing is loaded from elsewhere: no URL, no external stylesheet, image or script.
  for (const char* bad : {"http://", "https://", "<link", " src=", "url(", "@import"}) {
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  }
  EXPECT_EQ(doc.root.FindAll("script").size(), 1u);
  EXPECT_EQ(doc.root.FindAll("style").size(), 1u);
  // Dark and light, and one colour per state.
  std::string css = doc.root.FindAll("style")[0]->text;
  EXPECT_NE(css.find("prefers-color-scheme:dark"), std::string::npos);
  size_t dark = css.find("prefers-color-scheme:dark");
  for (const char* s : {"succeeded", "failed", "running", "queued", "cancelled"}) {
    EXPECT_NE(css.find(std::string(".state-") + s), std::string::npos) << s;
    // Its colour is set for light, and again for dark.
    size_t light = css.find(std::string("--") + s + ":");
    EXPECT_LT(light, dark) << s;
    EXPECT_NE(css.find(std::string("--") + s + ":", dark), std::string::npos) << s;
  }
  EXPECT_NE(css.find("system-ui"), std::string::npos);
}

TEST(Report, HeaderSaysWhatRanAndFromWhichCode) {
  auto doc = ParseHtml(RenderReportHtml(Digits()));
  ASSERT_EQ(doc.error, "");
  auto h1 = doc.root.FindAll("h1");
  ASSERT_EQ(h1.size(), 1u);
  EXPECT_EQ(h1[0]->AllText(), "digits <cmp> & co experiment 7");
  EXPECT_EQ(doc.root.FindAll("title")[0]->text,
            "digits <cmp> & co \u00b7 experiment 7 \u00b7 drover report");
  std::string header = doc.root.FindAll("header")[0]->AllText();
  EXPECT_NE(header.find("git 0123456789ab + uncommitted changes"), std::string::npos) << header;
  EXPECT_NE(header.find("snapshot feedbeef0011"), std::string::npos) << header;
  EXPECT_NE(header.find("5 runs:3 succeeded2 failed"), std::string::npos) << header;
  EXPECT_NE(header.find("run 2: val_acc = 0.98"), std::string::npos) << header;
  EXPECT_NE(header.find("val_acc, higher is better"), std::string::npos) << header;
}

TEST(Report, TableRanksRunsLikeCompare) {
  ReportData d = Digits();
  auto doc = ParseHtml(RenderReportHtml(d));
  ASSERT_EQ(doc.error, "");
  const XmlNode* table = ById(doc.root, "runs");
  ASSERT_NE(table, nullptr);
  std::vector<std::string> order;
  for (const auto* tr : table->FindAll("tr")) {
    if (!tr->Attr("data-run").empty()) order.push_back(tr->Attr("data-run"));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"2", "3", "1", "4", "5"}));
  std::vector<std::string> compare;
  for (const auto& r : testing::RankByLastValues(d.experiment, d.runs).runs) {
    compare.push_back(std::to_string(r.id));
  }
  EXPECT_EQ(order, compare);

  auto rows = table->FindAll("tr");
  ASSERT_EQ(rows.size(), 6u);  // the head and five runs
  std::vector<std::string> head;
  for (const auto* th : rows[0]->FindAll("th")) head.push_back(th->AllText());
  // The parameters that vary as the grid expanded them (grad_accum changed only after the OOM).
  EXPECT_EQ(head, (std::vector<std::string>{"rank", "run", "batch_size", "model", "state",
                                            "attempts", "val_acc (max, last)", "loss", "time"}));
  EXPECT_TRUE(rows[1]->HasClass("best"));
  EXPECT_FALSE(rows[2]->HasClass("best"));
  std::vector<std::string> best;
  for (const auto* td : rows[1]->FindAll("td")) best.push_back(td->AllText());
  EXPECT_EQ(best, (std::vector<std::string>{"\u2605 1", "2", "32", "cnn", "succeeded", "1", "0.98",
                                            "0.1", "1m05s"}));
  // Run 3's batch was halved after the OOM: the table says what it was.
  std::vector<std::string> oom;
  for (const auto* td : rows[2]->FindAll("td")) oom.push_back(td->AllText());
  EXPECT_EQ(oom[2], "32 (was 64)");
  EXPECT_EQ(oom[5], "2");
  // Sort keys: numbers raw, missing values empty.
  EXPECT_EQ(rows[2]->FindAll("td")[2]->Attr("data-v"), "32");
  EXPECT_EQ(rows[2]->FindAll("td")[6]->Attr("data-v"), "0.96");
  std::vector<std::string> diverged;
  for (const auto* td : rows[4]->FindAll("td")) diverged.push_back(td->AllText());
  EXPECT_EQ(diverged[4], "failed (diverged)");
  EXPECT_EQ(diverged[6], "-");
  EXPECT_EQ(diverged[7], "nan");
  EXPECT_EQ(rows[4]->FindAll("td")[6]->Attr("data-v"), "");
  EXPECT_EQ(rows[4]->FindAll("span", "state")[0]->Attr("class"), "state state-failed");
}

TEST(Report, OneCurveChartPerMetricWithEveryRun) {
  auto doc = ParseHtml(RenderReportHtml(Digits()));
  ASSERT_EQ(doc.error, "");
  auto figures = doc.root.FindAll("figure", "curve");
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0]->Attr("data-metric"), "val_acc");
  EXPECT_EQ(figures[1]->Attr("data-metric"), "loss");
  for (const auto* f : figures) EXPECT_EQ(f->FindAll("svg").size(), 1u);
  // Runs with curves are in both legends in rank order (same colour in both charts); run 4 has
  // no val_acc, so only its legend entry is in the first chart.
  auto names = [](const XmlNode* figure) {
    std::vector<std::string> out;
    for (const auto* e : figure->FindAll("g", "entry")) out.push_back(e->FindAll("title")[0]->text);
    return out;
  };
  std::vector<std::string> legend = {
      "run 2 \u00b7 batch_size=32 model=cnn", "run 3 \u00b7 batch_size=32 model=mlp",
      "run 1 \u00b7 batch_size=32 model=mlp", "run 4 \u00b7 batch_size=64 model=cnn"};
  EXPECT_EQ(names(figures[0]), legend);
  EXPECT_EQ(names(figures[1]), legend);
  EXPECT_EQ(figures[0]->FindAll("path", "line").size(), 3u);
  auto loss = figures[1]->FindAll("path", "line");
  ASSERT_EQ(loss.size(), 4u);
  // The best run is drawn last and thicker; run 4's NaN breaks its line.
  EXPECT_EQ(loss.back()->Attr("data-series"), legend[0]);
  EXPECT_TRUE(loss.back()->HasClass("best"));
  for (const auto* p : loss) {
    std::string d = p->Attr("d");
    size_t subpaths = std::count(d.begin(), d.end(), 'M');
    EXPECT_EQ(subpaths, p->Attr("data-series").rfind("run 4", 0) == 0 ? 2u : 1u) << d;
  }
  EXPECT_EQ(figures[0]->FindAll("path", "line")[0]->Attr("stroke"),
            loss[0]->Attr("stroke"));  // run 3: same colour in both charts
}

TEST(Report, OneScatterPerVariedParameterWithTheBestMarked) {
  auto doc = ParseHtml(RenderReportHtml(Digits()));
  ASSERT_EQ(doc.error, "");
  auto figures = doc.root.FindAll("figure", "scatter");
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0]->Attr("data-param"), "batch_size");
  EXPECT_EQ(figures[1]->Attr("data-param"), "model");
  for (const auto* f : figures) {
    // Runs 1-3 reported val_acc; the failed ones did not.
    EXPECT_EQ(f->FindAll("circle", "point").size(), 3u);
    auto best = f->FindAll("circle", "best");
    ASSERT_EQ(best.size(), 1u);
    EXPECT_EQ(best[0]->FindAll("title")[0]->text.rfind("run 2 (succeeded)", 0), 0u);
  }
}

// A parameter the spec searches on a log scale is plotted on a log axis with decade ticks; one
// that is not stays linear.
TEST(Report, LogParametersOnLogAxes) {
  ReportData d = Digits();
  d.experiment.spec["params"] = {{"batch_size", {{"int_log", {16, 256}}}}};
  auto doc = ParseHtml(RenderReportHtml(d));
  ASSERT_EQ(doc.error, "");
  auto figures = doc.root.FindAll("figure", "scatter");
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0]->Attr("data-param"), "batch_size");
  EXPECT_EQ(figures[0]->Attr("data-scale"), "log");
  EXPECT_EQ(figures[1]->Attr("data-scale"), "linear");  // model: categories
  std::vector<std::string> ticks;
  for (const auto* t : figures[0]->FindAll("text", "tick")) ticks.push_back(t->AllText());
  EXPECT_NE(std::find(ticks.begin(), ticks.end(), "10"), ticks.end());
  EXPECT_NE(std::find(ticks.begin(), ticks.end(), "100"), ticks.end());
  EXPECT_NE(figures[0]->AllText().find("batch_size (log scale)"), std::string::npos);
  // Unless the spec says so, 32 and 64 (less than two decades) stay on a linear axis.
  auto plain = ParseHtml(RenderReportHtml(Digits()));
  EXPECT_EQ(plain.root.FindAll("figure", "scatter")[0]->Attr("data-scale"), "linear");
}

// A pruned attempt was stopped by design: it is not listed under Failures.
TEST(Report, PrunedIsNotAFailure) {
  ReportData d = Digits();
  d.runs[0].state = RunState::kPruned;
  Attempt a;
  a.run_id = 1;
  a.number = 1;
  a.ended = true;
  a.reason = "pruned";
  d.details[1].attempts = {a};
  auto doc = ParseHtml(RenderReportHtml(d));
  ASSERT_EQ(doc.error, "");
  for (const auto* tr : ById(doc.root, "failures-table")->FindAll("tr")) {
    EXPECT_NE(tr->Attr("data-run"), "1");
  }
}

TEST(Report, FailuresSayWhyAndWhatHappenedNext) {
  auto doc = ParseHtml(RenderReportHtml(Digits()));
  ASSERT_EQ(doc.error, "");
  const XmlNode* table = ById(doc.root, "failures-table");
  ASSERT_NE(table, nullptr);
  std::vector<std::vector<std::string>> rows;
  for (const auto* tr : table->FindAll("tr")) {
    if (tr->Attr("data-run").empty()) continue;
    std::vector<std::string> cells;
    for (const auto* td : tr->FindAll("td")) cells.push_back(td->AllText());
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][0], "run 3");
  EXPECT_EQ(rows[0][2], "cuda_oom");
  EXPECT_EQ(rows[0][3],
            "CUDA out of memory at batch_size=64; retried with batch_size=32 grad_accum=2");
  EXPECT_EQ(rows[0][4], "batch_size=64 model=mlp");
  EXPECT_EQ(rows[1][2], "diverged");
  EXPECT_EQ(rows[1][3], "run 4: loss became NaN at step 2");
  EXPECT_EQ(rows[2][3], "exited with code 1; retried as attempt 2");
  EXPECT_EQ(rows[3][1], "2");
  EXPECT_EQ(rows[3][3], "exited with code 3");
  std::string section = ById(doc.root, "failures")->AllText();
  EXPECT_NE(section.find("4 attempts of 3 runs did not succeed."), std::string::npos) << section;
}

TEST(Report, OtherFailureReasons) {
  ReportData d = Digits();
  d.experiment.spec["timeout_ms"] = 90'000;
  d.experiment.spec["monitor"] = {{"stall_ms", 600'000}};
  Json p = d.runs[4].params;
  d.details[5].attempts = {MakeAttempt(1, "timeout", p), MakeAttempt(2, "stalled", p),
                           MakeAttempt(3, "signal", p), MakeAttempt(4, "launch_error", p),
                           MakeAttempt(5, "cancelled", p)};
  d.details[5].attempts[2].signal = 9;
  std::string html = RenderReportHtml(d);
  ASSERT_EQ(ParseHtml(html).error, "");
  for (const char* s :
       {"ran past its timeout of 1m30s; retried as attempt 2",
        "no output for 10m00s (monitor.stall); retried as attempt 3", "killed by SIGKILL",
        "could not be started", "state state-cancelled\">cancelled"}) {
    EXPECT_NE(html.find(s), std::string::npos) << s;
  }
}

TEST(Report, EmptyExperimentsAndMissingMetricsStillMakeAPage) {
  ReportData d;
  d.experiment.id = 1;
  d.experiment.name = "empty";
  auto doc = ParseHtml(RenderReportHtml(d));
  ASSERT_EQ(doc.error, "");
  std::string text = doc.root.AllText();
  EXPECT_NE(text.find("This experiment has no runs."), std::string::npos);
  EXPECT_NE(text.find("No run reported a metric."), std::string::npos);
  EXPECT_NE(text.find("No attempt failed."), std::string::npos);
  EXPECT_NE(text.find("not a git repository"), std::string::npos);
}

TEST(Report, CurveMetricsAreTheObjectiveAndTheLoss) {
  Comparison c;
  c.metric = "val_acc";
  c.metrics = {"val_acc", "loss", "train_loss"};
  EXPECT_EQ(CurveMetrics(c), (std::vector<std::string>{"val_acc", "loss"}));
  c.metrics = {"val_acc", "train_loss"};
  EXPECT_EQ(CurveMetrics(c), (std::vector<std::string>{"val_acc", "train_loss"}));
  c.metric = "loss";
  c.metrics = {"loss", "val_acc"};
  EXPECT_EQ(CurveMetrics(c), (std::vector<std::string>{"loss"}));
  c.metric = "";
  EXPECT_TRUE(CurveMetrics(c).empty());
}

TEST(Report, ASearchHasItsSectionAGridHasNone) {
  ReportData d = Digits();
  EXPECT_EQ(RenderReportHtml(d).find("id=\"search\""), std::string::npos);
  d.experiment.spec["search"] = {{"trials", 5}};
  const std::string html = RenderReportHtml(d);
  auto doc = ParseHtml(html);
  const XmlNode* states = ById(doc.root, "search-states");
  ASSERT_NE(states, nullptr);
  EXPECT_EQ(states->AllText(), "2 failed, 3 succeeded");
  const XmlNode* history = ById(doc.root, "search-history");
  ASSERT_NE(history, nullptr);
  // Trial 1 (0.95) then trial 2 (0.98) improved the best; trial 3 (0.96) did not.
  EXPECT_EQ(history->FindAll("tr").size(), 3u);
}

TEST(Report, StandaloneCurvesForComparePlot) {
  ReportData d = Digits();
  Comparison c = testing::RankByLastValues(d.experiment, d.runs);
  std::string svg = CurvesSvg(d.experiment, c, d.details, "val_acc", true);
  auto doc = testing::ParseXml(svg);
  ASSERT_EQ(doc.error, "");
  EXPECT_EQ(doc.root.children[0].Attr("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(doc.root.FindAll("text", "title")[0]->text,
            "digits <cmp> & co: val_acc (higher is better)");
  EXPECT_EQ(doc.root.FindAll("path", "line").size(), 3u);
}

}  // namespace
}  // namespace drover::report
