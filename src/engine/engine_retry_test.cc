// Engine::Retry with a scripted launcher and a fake clock: finished runs go back to the queue as
// new attempts of the same runs (same checkpoint folder), only those asked for, with a fresh
// retry budget, and a finished experiment becomes active again until they end.
#include <gtest/gtest.h>

#include <csignal>

#include "engine/engine.h"
#include "spec/spec_parser.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

using testing::EnvOf;
using testing::FakeLauncher;
using testing::FakeProcess;

class EngineRetryTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeLauncher& launcher, GpuProbe& probe) {
    return std::make_unique<Engine>(*store_, launcher, probe, clock_, BaseOptions());
  }
  RunState StateOf(int64_t run_id) { return store_->GetRun(run_id).value()->state; }
};

// Four runs: i=1 and i=3 fail (exit 1) on their first attempt, the others succeed.
TEST_F(EngineRetryTest, FailedRunsAloneRunAgainAsNewAttemptsWithTheirCheckpointFolders) {
  Spec spec = ParseSpec(R"(
name: flaky
command: "./train.sh {i}"
params: {i: [1, 2, 3, 4]}
retries: 0
)");
  std::map<std::string, int> starts;  // argv[1] -> starts
  std::vector<std::string> checkpoint_dirs;
  FakeLauncher launcher(clock_, [&](const LaunchSpec& ls) {
    const std::string i = ls.argv.at(1);
    const int n = ++starts[i];
    checkpoint_dirs.push_back(i + ":" + EnvOf(ls, "DROVER_CHECKPOINT_DIR"));
    FakeProcess p;
    p.duration_ms = 100;
    p.exit_code = (i == "1" || i == "3") && n == 1 ? 1 : 0;
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(StateOf(sub->runs[0].id), RunState::kFailed);
  ASSERT_EQ(StateOf(sub->runs[1].id), RunState::kSucceeded);
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kDone);

  cmd::Retry retry;
  retry.experiment_id = sub->experiment_id;
  retry.failed = true;
  auto queued = engine->Retry(retry);
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  ASSERT_EQ(queued->size(), 2u);
  EXPECT_EQ((*queued)[0].id, sub->runs[0].id);
  EXPECT_EQ((*queued)[1].id, sub->runs[2].id);
  EXPECT_EQ(StateOf(sub->runs[0].id), RunState::kQueued);
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kActive);

  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  for (const drover::Run& r : sub->runs) EXPECT_EQ(StateOf(r.id), RunState::kSucceeded) << r.id;
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kDone);
  // The succeeded runs did not start again; the failed ones got attempt 2 of the same run.
  EXPECT_EQ(starts["2"], 1);
  EXPECT_EQ(starts["4"], 1);
  EXPECT_EQ(starts["1"], 2);
  auto attempts = store_->ListAttempts(sub->runs[0].id).value();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "exit_code");
  EXPECT_EQ(attempts[1].number, 2);
  EXPECT_EQ(attempts[1].reason, "succeeded");
  // Both attempts of run i=1 were given the same checkpoint folder.
  std::vector<std::string> ones;
  for (const auto& c : checkpoint_dirs) {
    if (c.rfind("1:", 0) == 0) ones.push_back(c);
  }
  ASSERT_EQ(ones.size(), 2u);
  EXPECT_EQ(ones[0], ones[1]);
  EXPECT_NE(ones[0], "1:");
  // The state change is in the run's history with the reason.
  auto events = store_->ListEvents(0).value();
  bool noted = false;
  for (const Event& e : events) {
    if (e.run_id == sub->runs[0].id && e.data.value("note", "").find("retried (it had failed): attempt 2 is next") !=
        std::string::npos) {
      noted = true;
    }
  }
  EXPECT_TRUE(noted);
}

TEST_F(EngineRetryTest, CancelledRunsComeBackAfterAnInterruptAndTheRetryBudgetStartsAfresh) {
  Spec spec = ParseSpec(R"(
name: long
command: "./train.sh {i}"
params: {i: [1, 2, 3]}
max_parallel: 1
retries: 1
retry_backoff: 1s
)");
  int launches = 0;
  bool interrupt_sent = false;
  FakeLauncher launcher(clock_, [&](const LaunchSpec& ls) {
    ++launches;
    FakeProcess p;
    p.duration_ms = 1000;
    // Run i=2 fails every attempt; the others succeed.
    p.exit_code = ls.argv.at(1) == "2" ? 3 : 0;
    return p;
  });
  launcher.on_wait = [&](FakeLauncher& l) {
    // Ctrl-C while the first run is still running.
    if (!interrupt_sent && l.launches.size() == 1) {
      interrupt_sent = true;
      l.pending_interrupt = SIGINT;
    }
  };
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  for (const drover::Run& r : sub->runs) ASSERT_EQ(StateOf(r.id), RunState::kCancelled);
  ASSERT_EQ(launches, 1);

  // Nothing failed: retrying the failed ones queues nothing and is not an error.
  cmd::Retry failed_only{.experiment_id = sub->experiment_id, .failed = true};
  auto none = engine->Retry(failed_only);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  auto engine2 = MakeEngine(launcher, probe);  // a later `drover run --resume`
  ASSERT_TRUE(engine2->Recover().ok());
  cmd::Retry cancelled{.experiment_id = sub->experiment_id, .cancelled = true};
  auto queued = engine2->Retry(cancelled);
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  EXPECT_EQ(queued->size(), 3u);
  ASSERT_TRUE(engine2->RunUntilDone(nullptr).ok());
  EXPECT_EQ(StateOf(sub->runs[0].id), RunState::kSucceeded);
  EXPECT_EQ(StateOf(sub->runs[2].id), RunState::kSucceeded);
  // Run i=2 used its one retry and failed.
  EXPECT_EQ(StateOf(sub->runs[1].id), RunState::kFailed);
  EXPECT_EQ(store_->ListAttempts(sub->runs[1].id).value().size(), 2u);

  // An explicit retry of it gets the spec's retry budget again (2 more attempts), not blocked by
  // its earlier failures.
  cmd::Retry by_id{.experiment_id = sub->experiment_id, .run_ids = {sub->runs[1].id}};
  ASSERT_TRUE(engine2->Retry(by_id).ok());
  ASSERT_TRUE(engine2->RunUntilDone(nullptr).ok());
  auto run = store_->GetRun(sub->runs[1].id).value();
  EXPECT_EQ(run->state, RunState::kFailed);
  EXPECT_EQ(run->attempts, 4);
  EXPECT_EQ(run->retries_used, 1);
}

TEST_F(EngineRetryTest, RefusesUnfinishedRunsRunsOfOtherExperimentsAndAnEmptyAsk) {
  Spec spec = ParseSpec("name: a\ncommand: \"./t.sh {i}\"\nparams: {i: [1, 2]}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto a = engine->Submit(spec);
  ASSERT_TRUE(a.ok());
  // Queued, not finished: refused with what to do.
  auto queued = engine->Retry({.experiment_id = a->experiment_id, .run_ids = {a->runs[0].id}});
  ASSERT_FALSE(queued.ok());
  EXPECT_NE(queued.status().message().find("is queued: only finished runs can be retried"),
            std::string::npos)
      << queued.status().message();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto b = engine->Submit(ParseSpec("name: b\ncommand: ./t.sh\n"));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());

  auto other = engine->Retry({.experiment_id = a->experiment_id, .run_ids = {b->runs[0].id}});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "run " + std::to_string(b->runs[0].id) + " is not in experiment " +
                std::to_string(a->experiment_id) + " (a)");
  auto missing = engine->Retry({.experiment_id = 999, .failed = true});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  auto empty = engine->Retry({.experiment_id = a->experiment_id});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Code::kInvalidArgument);
  // A succeeded run named by id runs again (an explicit rerun).
  auto rerun = engine->Retry({.experiment_id = a->experiment_id, .run_ids = {a->runs[1].id}});
  ASSERT_TRUE(rerun.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(store_->ListAttempts(a->runs[1].id).value().size(), 2u);
  EXPECT_EQ(store_->ListAttempts(a->runs[0].id).value().size(), 1u);
}

}  // namespace
}  // namespace drover
