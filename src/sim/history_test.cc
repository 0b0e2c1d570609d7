#include "sim/history.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace drover::sim {
namespace {

TEST(History, EndedGpuRunsWithTheTimeTheirAttemptsRan) {
  std::string dir = (std::filesystem::temp_directory_path() / "drover-sim-history").string();
  std::filesystem::remove_all(dir);
  auto opened = Store::Open(dir + "/drover.db");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  Experiment e;
  e.name = "sweep";
  e.created_ms = 1'000'000;
  ASSERT_TRUE(store.InsertExperiment(e).ok());
  auto add_run = [&](RunState state, int gpus, Millis created, std::vector<std::pair<Millis, Millis>> ran) {
    drover::Run r;
    r.experiment_id = e.id;
    r.state = state;
    r.resources.gpus = gpus;
    r.created_ms = created;
    r.started_ms = ran.empty() ? 0 : ran.front().first;
    EXPECT_TRUE(store.InsertRun(r).ok());
    int n = 0;
    for (auto [start, end] : ran) {
      Attempt a;
      a.run_id = r.id;
      a.number = ++n;
      a.ended = true;
      a.started_ms = start;
      a.ended_ms = end;
      EXPECT_TRUE(store.InsertAttempt(a).ok());
    }
    return r.id;
  };
  int64_t retried = add_run(RunState::kSucceeded, 2, 10'000'000, {{10'001'000, 10'031'000}, {10'040'000, 10'100'000}});
  add_run(RunState::kSucceeded, 0, 10'000'500, {{10'001'000, 10'002'000}});  // CPU only: out
  add_run(RunState::kRunning, 1, 10'000'600, {{10'001'000, 0}});           // not ended: out
  int64_t later = add_run(RunState::kFailed, 1, 20'000'000, {{20'000'000, 20'005'000}});
  add_run(RunState::kCancelled, 1, 20'000'100, {});  // never started: out

  auto t = ReadDroverHistory(store);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].id, retried);
  EXPECT_DOUBLE_EQ(t->jobs[0].submit_s, 0);
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 30 + 60);  // both attempts
  EXPECT_EQ(t->jobs[0].gpus, 2);
  EXPECT_EQ(t->jobs[0].group, "sweep");
  EXPECT_EQ(t->jobs[1].id, later);
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_s, 10'000);
  EXPECT_EQ(t->epoch_s, 10'000);

  auto window = ReadDroverHistory(store, 15'000, 30'000);
  ASSERT_TRUE(window.ok());
  ASSERT_EQ(window->jobs.size(), 1u);
  EXPECT_EQ(window->jobs[0].id, later);
  EXPECT_DOUBLE_EQ(window->jobs[0].submit_s, 5'000);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace drover::sim
