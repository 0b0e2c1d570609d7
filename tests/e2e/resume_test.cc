// Interrupted and flaky sweeps do not start over: after Ctrl-C, `drover run --resume` finishes
// the experiment without rerunning its finished runs, and a run that checkpoints into
// $DROVER_CHECKPOINT_DIR resumes from its checkpoint; `drover retry EXP --failed` reruns only the
// failed runs, as new attempts of the same runs, in the foreground and through a daemon.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

using Json = nlohmann::json;
using testing::ReadFile;
using testing::RunDrover;

// A training script that checkpoints: it resumes from the step saved in
// $DROVER_CHECKPOINT_DIR/step, prints one metric line per step and saves after each. Its first
// argument is the number of steps; with a second argument "fail-once" its first attempt fails at
// the end (a marker in the checkpoint folder remembers it).
constexpr const char* kCheckpointingTrain = R"(#!/bin/sh
steps=$1
ck="$DROVER_CHECKPOINT_DIR"
mkdir -p "$ck"
s=0
[ -f "$ck/step" ] && s=$(cat "$ck/step")
echo "resuming from step $s" >&2
while [ "$s" -lt "$steps" ]; do
  s=$((s + 1))
  echo "{\"step\": $s, \"loss\": $((100 - s))}"
  echo "$s" > "$ck/step.tmp" && mv "$ck/step.tmp" "$ck/step"
  sleep 0.1
done
if [ "$2" = fail-once ] && [ ! -f "$ck/failed" ]; then
  touch "$ck/failed"
  echo "RuntimeError: flaky at the end" >&2
  exit 1
fi
)";

class ResumeTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    std::string path = Write("code/train.sh", kCheckpointingTrain);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  void TearDown() override {
    testing::StopDaemonOf(store_);
    CliFixture::TearDown();
  }
  std::unique_ptr<Store> OpenStore() { return std::move(Store::Open(store_ + "/drover.db").value()); }
  // The step a run last saved (0: none yet).
  int SavedStep(int64_t run_id) {
    std::string text = ReadFile(store_ + "/checkpoints/" + std::to_string(run_id) + "/step");
    return text.empty() ? 0 : std::atoi(text.c_str());
  }
};

TEST_F(ResumeTest, CtrlCHalfwayThenResumeFinishesWithoutRerunningFinishedRuns) {
  // Runs 1 and 2 are short; 3 and 4 take 40 steps and are interrupted halfway.
  std::string spec = Write("sweep.yaml",
                           "name: sweep\nworkdir: code\ncommand: ./train.sh {steps}\n"
                           "params: {steps: [2, 3, 40, 41]}\nmax_parallel: 2\nretries: 0\n");
  std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  pid_t pid = testing::SpawnDrover({"run", spec, "--store", store_}, out, err);
  for (int i = 0; i < 400 && (SavedStep(3) < 5 || SavedStep(4) < 5); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_GE(SavedStep(3), 5) << ReadFile(err);
  kill(pid, SIGINT);
  ASSERT_EQ(testing::WaitExit(pid), 130) << ReadFile(err);
  EXPECT_NE(ReadFile(err).find("Continue with: drover run --resume"), std::string::npos)
      << ReadFile(err);
  const int saved3 = SavedStep(3);
  {
    auto store = OpenStore();
    EXPECT_EQ(store->GetRun(1).value()->state, RunState::kSucceeded);
    EXPECT_EQ(store->GetRun(2).value()->state, RunState::kSucceeded);
    EXPECT_EQ(store->GetRun(3).value()->state, RunState::kCancelled);
    EXPECT_EQ(store->GetRun(4).value()->state, RunState::kCancelled);
  }
  ASSERT_LT(saved3, 40);

  auto resumed = RunDrover({"run", "--resume", spec, "--store", store_});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("experiment 1 (sweep): resumed, 2 runs queued again"),
            std::string::npos)
      << resumed.out;
  auto store = OpenStore();
  RunFilter all;
  auto runs = store->ListRuns(all).value();
  ASSERT_EQ(runs.size(), 4u);  // the same experiment: no new runs
  for (const drover::Run& r : runs) EXPECT_EQ(r.state, RunState::kSucceeded) << r.id;
  // The finished runs were not rerun.
  EXPECT_EQ(store->ListAttempts(1).value().size(), 1u);
  EXPECT_EQ(store->ListAttempts(2).value().size(), 1u);
  // The interrupted ones got a second attempt of the same run, which went on from its checkpoint:
  // its first step is the one after the saved step, not 1.
  auto attempts = store->ListAttempts(3).value();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "cancelled");
  EXPECT_EQ(attempts[1].reason, "succeeded");
  EXPECT_NE(ReadFile(attempts[1].stderr_path).find("resuming from step " + std::to_string(saved3)),
            std::string::npos)
      << ReadFile(attempts[1].stderr_path);
  int64_t first_step = -1, last_step = -1;
  const std::vector<MetricPoint> points = store->GetMetrics(3, "loss").value();
  for (const MetricPoint& p : points) {
    if (p.attempt_id != attempts[1].id) continue;
    if (first_step < 0) first_step = p.step;
    last_step = p.step;
  }
  EXPECT_EQ(first_step, saved3 + 1);
  EXPECT_EQ(last_step, 40);

  // Resuming a finished experiment runs nothing.
  auto again = RunDrover({"run", "--resume", spec, "--store", store_});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resumed, 0 runs queued again"), std::string::npos) << again.out;
  EXPECT_EQ(OpenStore()->ListAttempts(3).value().size(), 2u);
  // A changed spec is not resumed as if it were the same.
  auto changed = RunDrover({"run", "--resume", spec, "--set", "retries=2", "--store", store_});
  EXPECT_EQ(changed.exit_code, 2) << changed.err;
  EXPECT_NE(changed.err.find("the spec has changed since experiment 1 (sweep) was submitted"),
            std::string::npos)
      << changed.err;
}

TEST_F(ResumeTest, RetryFailedRerunsOnlyTheFailedRunsInTheForegroundAndThroughADaemon) {
  std::string spec = Write("flaky.yaml",
                           "name: flaky\nworkdir: code\ncommand: ./train.sh 3 {mode}\n"
                           "params: {mode: [ok, fail-once, also-ok]}\nretries: 0\n");
  auto first = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(first.exit_code, 1) << first.out << first.err;
  {
    auto store = OpenStore();
    EXPECT_EQ(store->GetRun(2).value()->state, RunState::kFailed);
  }
  auto nothing = RunDrover({"retry", "flaky", "--cancelled", "--store", store_});
  ASSERT_EQ(nothing.exit_code, 0) << nothing.err;
  EXPECT_NE(nothing.out.find("nothing to retry: experiment 1 (flaky) has no cancelled runs"),
            std::string::npos)
      << nothing.out;

  auto retried = RunDrover({"retry", "flaky", "--failed", "--store", store_});
  ASSERT_EQ(retried.exit_code, 0) << retried.out << retried.err;
  EXPECT_NE(retried.out.find("experiment 1 (flaky): 1 run queued again (2)"), std::string::npos)
      << retried.out;
  {
    auto store = OpenStore();
    EXPECT_EQ(store->ListAttempts(1).value().size(), 1u);
    EXPECT_EQ(store->ListAttempts(3).value().size(), 1u);
    auto attempts = store->ListAttempts(2).value();
    ASSERT_EQ(attempts.size(), 2u);
    EXPECT_EQ(attempts[0].reason, "exit_code");
    EXPECT_EQ(attempts[1].number, 2);
    EXPECT_EQ(attempts[1].reason, "succeeded");
    EXPECT_EQ(store->GetRun(2).value()->state, RunState::kSucceeded);
    EXPECT_EQ(store->GetExperiment(1).value()->status, ExperimentStatus::kDone);
  }

  // Through a daemon: a second experiment fails the same way; retry --failed reaches the daemon
  // (POST /experiments/{id}/retry) and follows the run to its end.
  pid_t daemon = testing::StartDaemon(store_, dir_.string());
  std::string spec2 = Write("flaky2.yaml",
                            "name: flaky2\nworkdir: code\ncommand: ./train.sh 2 {mode}\n"
                            "params: {mode: [fail-once, ok]}\nretries: 0\n");
  auto second = RunDrover({"run", spec2, "--store", store_});
  ASSERT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE(second.out.find("in the daemon"), std::string::npos) << second.out;
  auto by_daemon = RunDrover({"retry", "flaky2", "--failed", "--store", store_});
  ASSERT_EQ(by_daemon.exit_code, 0) << by_daemon.out << by_daemon.err;
  EXPECT_NE(by_daemon.out.find("1 run queued again (4)"), std::string::npos) << by_daemon.out;
  EXPECT_NE(by_daemon.out.find("in the daemon"), std::string::npos) << by_daemon.out;
  // A named run that is not in the experiment, and one that is: the succeeded run 5 runs again.
  auto wrong = RunDrover({"retry", "flaky2", "1", "--store", store_});
  EXPECT_EQ(wrong.exit_code, 2) << wrong.err;
  EXPECT_NE(wrong.err.find("run 1 is not in experiment 2 (flaky2)"), std::string::npos)
      << wrong.err;
  auto detached = RunDrover({"retry", "flaky2", "5", "--detach", "--store", store_});
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  EXPECT_NE(detached.out.find("1 run queued again (5)"), std::string::npos) << detached.out;
  for (int i = 0; i < 400; ++i) {
    auto run = OpenStore()->GetRun(5).value();
    if (run->state == RunState::kSucceeded && run->attempts == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  kill(daemon, SIGTERM);
  ASSERT_EQ(testing::WaitExit(daemon), 0) << ReadFile((dir_ / "serve.err").string());
  auto store = OpenStore();
  auto attempts = store->ListAttempts(4).value();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[1].reason, "succeeded");
  EXPECT_EQ(store->ListAttempts(5).value().size(), 2u);
  EXPECT_EQ(store->GetRun(5).value()->state, RunState::kSucceeded);
}

}  // namespace
}  // namespace drover
