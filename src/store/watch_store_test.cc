// Alerts, GPU samples, a config's recent outcomes and the /metrics totals, on a real SQLite store.
#include <gtest/gtest.h>

#include "store/store.h"

namespace drover {
namespace {

std::unique_ptr<Store> Memory() {
  auto s = Store::Open(":memory:");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

int64_t AddExperiment(Store& store) {
  Experiment e;
  e.name = "watch";
  EXPECT_TRUE(store.InsertExperiment(e).ok());
  return e.id;
}

drover::Run AddRun(Store& store, int64_t exp, const std::string& fingerprint, RunState state,
                   Millis created, Millis started) {
  drover::Run r;
  r.experiment_id = exp;
  r.fingerprint = fingerprint;
  r.state = state;
  r.created_ms = created;
  r.started_ms = started;
  EXPECT_TRUE(store.InsertRun(r).ok());
  return r;
}

void AddAttempt(Store& store, int64_t run_id, int number, const std::string& reason) {
  Attempt a;
  a.run_id = run_id;
  a.number = number;
  a.ended = !reason.empty();
  a.reason = reason;
  EXPECT_TRUE(store.InsertAttempt(a).ok());
}

TEST(WatchStore, AlertsRoundTripAndFilter) {
  auto store = Memory();
  int64_t exp = AddExperiment(*store);
  Alert a;
  a.kind = "loss_spike";
  a.key = "run:1:loss_spike:loss";
  a.message = "loss spiked";
  a.experiment_id = exp;
  a.run_id = 1;
  a.data = {{"value", 9.5}};
  a.first_ms = a.last_ms = 1000;
  ASSERT_TRUE(store->InsertAlert(a).ok());
  EXPECT_GT(a.id, 0);
  Alert b;
  b.kind = "idle_gpu";
  b.key = "gpu:0:idle";
  b.gpu = 0;
  b.first_ms = b.last_ms = 2000;
  ASSERT_TRUE(store->InsertAlert(b).ok());

  a.count = 4;
  a.last_ms = 5000;
  ASSERT_TRUE(store->UpdateAlert(a).ok());
  auto latest = store->LatestAlert("run:1:loss_spike:loss");
  ASSERT_TRUE(latest.ok());
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->count, 4);
  EXPECT_EQ((*latest)->last_ms, 5000);
  EXPECT_EQ((*latest)->data["value"], 9.5);
  EXPECT_EQ((*latest)->gpu, -1);
  EXPECT_FALSE(store->LatestAlert("nope")->has_value());

  auto all = store->ListAlerts({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].kind, "idle_gpu");  // newest first
  AlertFilter by_run;
  by_run.run_id = 1;
  EXPECT_EQ(store->ListAlerts(by_run)->size(), 1u);
  AlertFilter by_kind;
  by_kind.kind = "idle_gpu";
  auto idle = store->ListAlerts(by_kind);
  ASSERT_EQ(idle->size(), 1u);
  EXPECT_EQ((*idle)[0].gpu, 0);
  AlertFilter after;
  after.after_id = a.id;
  after.newest_first = false;
  EXPECT_EQ(store->ListAlerts(after)->size(), 1u);

  Alert missing;
  missing.id = 99;
  EXPECT_EQ(store->UpdateAlert(missing).code(), Code::kNotFound);
}

TEST(WatchStore, GpuSamplesKeepUnknownsUnknown) {
  auto store = Memory();
  GpuSample s;
  s.index = 1;
  s.t_ms = 60'000;
  s.utilization = 42.5;
  s.memory_used = int64_t{10} << 30;
  s.memory_total = int64_t{80} << 30;
  s.temperature_c = 61;
  GpuSample t = s;
  t.index = 0;
  t.utilization = -1;
  ASSERT_TRUE(store->InsertGpuSamples({s, t}, {12, 3}).ok());
  EXPECT_FALSE(store->InsertGpuSamples({s}, {}).ok());
  auto rows = store->ListGpuSamples(-1, 0);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].index, 0);
  EXPECT_EQ((*rows)[0].utilization, -1);
  EXPECT_EQ((*rows)[1].utilization, 42.5);
  EXPECT_EQ((*rows)[1].memory_used, int64_t{10} << 30);
  EXPECT_EQ((*rows)[1].power_w, -1);
  EXPECT_EQ(store->ListGpuSamples(1, 0)->size(), 1u);
  // The same period again (an engine restarted within it): merged, weighted by the counts.
  GpuSample more = s;
  more.utilization = 82.5;
  ASSERT_TRUE(store->InsertGpuSamples({more}, {4}).ok());
  auto merged = store->ListGpuSamples(1, 0);
  ASSERT_EQ(merged->size(), 1u);
  EXPECT_DOUBLE_EQ((*merged)[0].utilization, (42.5 * 12 + 82.5 * 4) / 16);
  EXPECT_EQ((*merged)[0].power_w, -1);  // unknown on both sides stays unknown
  EXPECT_EQ(store->ListGpuSamples(-1, 60'001)->size(), 0u);
}

TEST(WatchStore, RecentOutcomesFollowTheFingerprintAcrossRuns) {
  auto store = Memory();
  int64_t exp = AddExperiment(*store);
  auto r1 = AddRun(*store, exp, "fp-a", RunState::kFailed, 0, 0);
  auto r2 = AddRun(*store, exp, "fp-a", RunState::kRunning, 0, 0);
  auto other = AddRun(*store, exp, "fp-b", RunState::kFailed, 0, 0);
  AddAttempt(*store, r1.id, 1, "exit_code");
  AddAttempt(*store, other.id, 1, "signal");
  AddAttempt(*store, r2.id, 1, "timeout");
  AddAttempt(*store, r2.id, 2, "");
  auto out = store->RecentOutcomes("fp-a", 5);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, (std::vector<std::string>{"", "timeout", "exit_code"}));
  EXPECT_EQ(store->RecentOutcomes("fp-a", 1)->size(), 1u);
}

TEST(WatchStore, TotalsCountRunsAlertsFailuresAndQueueWaits) {
  auto store = Memory();
  int64_t exp = AddExperiment(*store);
  auto a = AddRun(*store, exp, "x", RunState::kSucceeded, 0, 500);     // waited 0.5 s
  auto b = AddRun(*store, exp, "y", RunState::kFailed, 0, 30'000);     // 30 s
  AddRun(*store, exp, "z", RunState::kQueued, 0, 0);                   // not started
  AddAttempt(*store, a.id, 1, "succeeded");
  AddAttempt(*store, b.id, 1, "cuda_oom");
  AddAttempt(*store, b.id, 2, "exit_code");
  AddAttempt(*store, b.id, 3, "exit_code");
  Alert al;
  al.kind = "plateau";
  al.key = "k";
  ASSERT_TRUE(store->InsertAlert(al).ok());
  auto t = store->Totals({1, 60});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->runs_by_state["succeeded"], 1);
  EXPECT_EQ(t->runs_by_state["queued"], 1);
  EXPECT_EQ(t->alerts_by_kind["plateau"], 1);
  EXPECT_EQ(t->attempt_failures_by_reason["exit_code"], 2);
  EXPECT_EQ(t->attempt_failures_by_reason["cuda_oom"], 1);
  EXPECT_EQ(t->attempt_failures_by_reason.count("succeeded"), 0u);
  EXPECT_EQ(t->wait_count, 2);
  EXPECT_DOUBLE_EQ(t->wait_sum_s, 30.5);
  EXPECT_EQ(t->wait_cumulative, (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace drover
