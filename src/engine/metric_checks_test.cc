// Metrics a run cannot break or hide (issue 39, items 11, 12 and 14): every point, logged or
// derived, passes the same divergence check; one wide line cannot keep the run's main metrics
// out; +Inf stays infinite in the run's record; event files beyond a large tree are found. The
// engine with a scripted launcher and a fake clock; the store is real SQLite, the working copy a
// real folder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>

#include "engine/engine.h"
#include "metrics/metric_lines.h"
#include "protocol/json_codec.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"
#include "tfevents/writer.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::FakeLauncher;
using testing::FakeProcess;

class MetricChecksTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeLauncher& launcher, GpuProbe& probe) {
    return std::make_unique<Engine>(*store_, launcher, probe, clock_, BaseOptions());
  }
  std::vector<Alert> AlertsOf(int64_t run_id, const std::string& kind) {
    AlertFilter f;
    f.run_id = run_id;
    f.kind = kind;
    return store_->ListAlerts(f).value();
  }
};

// A derived loss that becomes NaN in the last step of a batch of lines was computed by Flush(),
// which stored it without the check logged points get: the run trained on for ten minutes.
TEST_F(MetricChecksTest, ADerivedNaNAtTheEndOfABatchStopsTheRunAsDiverged) {
  Spec spec = ParseSpec(
      "name: d\ncommand: ./train\nretries: 2\nmetrics: {norm_loss: total / count}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 600'000;  // would train for ten minutes more
    p.stdout_text = "{\"step\": 1, \"total\": 4, \"count\": 2}\n"
                    "{\"step\": 2, \"total\": 0, \"count\": 0}\n";  // 0 / 0: NaN at step 2
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  const Millis t0 = clock_.Now();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_LT(clock_.Now() - t0, 60'000);  // stopped at its first looks, not after ten minutes
  const int64_t id = sub->runs[0].id;
  auto attempts = store_->ListAttempts(id).value();
  ASSERT_EQ(attempts.size(), 1u);  // diverged: not retried
  EXPECT_EQ(attempts[0].reason, "diverged");
  auto points = store_->GetMetrics(id, "norm_loss").value();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_DOUBLE_EQ(points[0].value, 2);
  EXPECT_TRUE(std::isnan(points[1].value));
  auto alerts = AlertsOf(id, "diverged");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_NE(alerts[0].message.find("norm_loss became NaN at step 2"), std::string::npos)
      << alerts[0].message;
}

// A first line of 1,000 per-class values used to fill the run's 1,000 names, so its loss was
// never recorded and its NaN never noticed.
TEST_F(MetricChecksTest, AWideFirstLineKeepsNeitherTheLossNorLaterNamesOut) {
  Spec spec = ParseSpec("name: wide\ncommand: ./train\n");
  std::string wide = "{\"step\": 0";
  for (int i = 0; i < 1000; ++i) wide += ", \"class_" + std::to_string(i) + "\": 0.5";
  wide += "}\n";
  FakeLauncher launcher(clock_, [&](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 600'000;
    p.stdout_text = wide + "{\"step\": 1, \"val_acc\": 0.5, \"loss\": 2.3}\n" +
                    "{\"step\": 2, \"loss\": NaN}\n";
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  const int64_t id = sub->runs[0].id;
  EXPECT_EQ(store_->ListAttempts(id).value()[0].reason, "diverged");
  EXPECT_EQ(store_->GetMetrics(id, "loss").value().size(), 2u);
  EXPECT_EQ(store_->GetMetrics(id, "val_acc").value().size(), 1u);
  auto run = store_->GetRun(id).value();
  ASSERT_TRUE(run);
  // One line adds at most kMaxNewMetricNamesPerLine names: the rest of it is dropped, said once.
  EXPECT_EQ(run->final_metrics.size(), kMaxNewMetricNamesPerLine + 2);
  EXPECT_EQ(AlertsOf(id, "metric_names").size(), 1u);
}

// +Inf (a derived ratio over a zero, or a logged Infinity) was stored in the run's record as
// null and shown as nan; it is "Infinity" there and in the API's points.
TEST_F(MetricChecksTest, InfinityStaysInfiniteInTheRunsRecordAndItsPoints) {
  Spec spec = ParseSpec(
      "name: inf\ncommand: ./train\nmetrics: {ratio: hits / misses}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 1000;
    p.stdout_text = "{\"step\": 1, \"hits\": 3, \"misses\": 0, \"gain\": -Infinity}\n";
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  const int64_t id = sub->runs[0].id;
  auto run = store_->GetRun(id).value();  // read back from SQLite: through the stored JSON
  ASSERT_TRUE(run);
  EXPECT_EQ(run->state, RunState::kSucceeded);  // neither is watched
  EXPECT_EQ(run->final_metrics["ratio"], "Infinity") << run->final_metrics.dump();
  EXPECT_EQ(run->final_metrics["gain"], "-Infinity") << run->final_metrics.dump();
  EXPECT_EQ(protocol::ToJson(*run)["metrics"]["ratio"], "Infinity");
  auto points = store_->GetMetrics(id, "ratio").value();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(protocol::ToJson(points[0])["value"], "Infinity");
}

// A run that writes 30,000 other files besides its event files: the walk spent its 20,000
// entries on the same first ones at every look, and event files beyond them were never read.
TEST_F(MetricChecksTest, EventFilesBeyondOneLooksWalkAreFoundWhileTheRunRuns) {
  Spec spec = ParseSpec("name: tb\ncommand: ./train\n");
  constexpr int kFolders = 100, kFilesEach = 300, kEventEvery = 3;
  FakeLauncher launcher(clock_, [&](const LaunchSpec& ls) {
    // What the run writes: an overlay's upper layer, or its plain working copy.
    const fs::path out = ls.overlay.upper.empty() ? fs::path(ls.cwd) : fs::path(ls.overlay.upper);
    for (int d = 0; d < kFolders; ++d) {
      const fs::path dir = out / ("d" + std::to_string(d));
      fs::create_directories(dir);
      for (int f = 0; f < kFilesEach; ++f) std::ofstream(dir / ("f" + std::to_string(f)));
      if (d % kEventEvery != 0) continue;
      std::string bytes;
      tfevents::EventWriter w(&bytes);
      w.FileVersion(1.7e9);
      w.Scalar(1.7e9, 1, "m" + std::to_string(d), d);
      std::ofstream(dir / "events.out.tfevents.1700000000.host.1.0", std::ios::binary) << bytes;
    }
    FakeProcess p;
    p.duration_ms = 120'000;
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  const int64_t id = sub->runs[0].id;
  const Millis t0 = clock_.Monotonic();
  size_t found_while_running = 0;
  launcher.on_wait = [&](FakeLauncher&) {
    // A minute in (twelve looks), before the run ends and its last look walks further.
    if (clock_.Monotonic() - t0 < 60'000 || found_while_running != 0) return;
    auto attempts = store_->ListAttempts(id).value();
    if (!attempts.empty()) found_while_running = attempts[0].event_files.size();
  };
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  const size_t want = (kFolders + kEventEvery - 1) / kEventEvery;
  EXPECT_EQ(found_while_running, want);
  for (int d = 0; d < kFolders; d += kEventEvery) {
    EXPECT_EQ(store_->GetMetrics(id, "m" + std::to_string(d)).value().size(), 1u) << d;
  }
  // Said once, with what to do.
  auto alerts = AlertsOf(id, "event_files");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_NE(alerts[0].message.find("set tensorboard: <folder>"), std::string::npos)
      << alerts[0].message;
}

// A retry of a run that writes TensorBoard event files in its working copy: the second attempt
// goes on from where the first stopped reading them. The seeding was once done once per run in
// an engine, so a retry in the same engine read the first attempt's points again as its own.
TEST_F(MetricChecksTest, ARetriedRunDoesNotReadItsFirstAttemptsEventFilesAgain) {
  Spec spec = ParseSpec("name: tb\ncommand: ./train\nretries: 1\n");
  FakeLauncher launcher(clock_, [&](const LaunchSpec& ls) {
    const fs::path out = ls.overlay.upper.empty() ? fs::path(ls.cwd) : fs::path(ls.overlay.upper);
    fs::create_directories(out / "runs");
    const int attempt = ls.request.attempt;
    std::string bytes;
    tfevents::EventWriter w(&bytes);
    if (attempt == 1) w.FileVersion(1.7e9);
    w.Scalar(1.7e9 + attempt, attempt, "loss_tb", 1.0 / attempt);
    std::ofstream(out / "runs" / "events.out.tfevents.1700000000.host.1.0",
                  std::ios::binary | std::ios::app) << bytes;
    FakeProcess p;
    p.duration_ms = 20'000;
    p.exit_code = attempt == 1 ? 1 : 0;  // the first attempt fails, the retry succeeds
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  const int64_t id = sub->runs[0].id;
  auto run = store_->GetRun(id).value();
  ASSERT_TRUE(run);
  EXPECT_EQ(run->state, RunState::kSucceeded);
  auto attempts = store_->ListAttempts(id).value();
  ASSERT_EQ(attempts.size(), 2u);
  auto points = store_->GetMetrics(id, "loss_tb").value();
  ASSERT_EQ(points.size(), 2u);  // step 1 by attempt 1, step 2 by attempt 2; nothing twice
  EXPECT_EQ(points[0].step, 1);
  EXPECT_EQ(points[0].attempt_id, attempts[0].id);
  EXPECT_EQ(points[1].step, 2);
  EXPECT_EQ(points[1].attempt_id, attempts[1].id);
}

}  // namespace
}  // namespace drover
