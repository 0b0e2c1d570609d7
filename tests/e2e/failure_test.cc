// Why a run failed, found later: the end of its stderr (the exception) is kept with the attempt
// and shown by `drover show`, `drover ls`, the report's failures table, the API's run (what the
// web run page and MCP's get_run read) and MCP's get_run itself. The web page is checked in
// tests/web/ui.test.mjs.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
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

class FailureTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    testing::StopDaemonOf(store_);  // the one `drover mcp` started
    CliFixture::TearDown();
  }
};

// A search whose first trials all fail the same way (a module the interpreter does not have)
// stops proposing after three, and `drover run` says why with the error; a grid sweep failing
// the same way cancels the runs still waiting. Neither runs its whole budget into the error.
TEST_F(FailureTest, AnExperimentWhoseFirstRunsAllFailTheSameWayStopsAndSaysWhy) {
  Write("code/train.py",
        "import sys\n"
        "import no_such_module_here\n");
  std::string search = Write("search.yaml",
                             "name: fails\nworkdir: code\n"
                             "command: /usr/bin/python3 train.py --lr {lr}\n"
                             "params:\n  lr: {log_uniform: [1e-4, 1e-1]}\n"
                             "search: {trials: 12, parallel: 2, seed: 3}\n"
                             "objective: {metric: val_acc, mode: max}\n");
  auto run = RunDrover({"run", search, "--store", store_});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("experiment 1 (fails) stopped: its first 3 runs to end"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("all failed the same way: ModuleNotFoundError: No module named "
                         "'no_such_module_here'"),
            std::string::npos)
      << run.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  RunFilter f;
  f.experiment_id = 1;
  auto runs = (*store)->ListRuns(f).value();
  EXPECT_GE(runs.size(), 3u);
  EXPECT_LE(runs.size(), 4u);  // three failed, at most one more made meanwhile; not twelve
  EXPECT_EQ((*store)->GetExperiment(1).value()->status, ExperimentStatus::kDone);
  AlertFilter af;
  af.kind = "experiment_stopped";
  EXPECT_EQ((*store)->ListAlerts(af).value().size(), 1u);

  std::string sweep = Write("sweep.yaml",
                            "name: sweep\nworkdir: code\n"
                            "command: /usr/bin/python3 train.py --lr {lr}\n"
                            "params: {lr: [1, 2, 3, 4, 5, 6, 7, 8]}\nmax_parallel: 2\n");
  auto swept = RunDrover({"run", sweep, "--store", store_});
  ASSERT_EQ(swept.exit_code, 1) << swept.out << swept.err;
  EXPECT_NE(swept.err.find("(sweep) stopped"), std::string::npos) << swept.err;
  f.experiment_id = 2;
  runs = (*store)->ListRuns(f).value();
  ASSERT_EQ(runs.size(), 8u);
  int failed = 0, cancelled = 0;
  for (const auto& r : runs) {
    failed += r.state == RunState::kFailed;
    cancelled += r.state == RunState::kCancelled;
  }
  EXPECT_GE(failed, 3);
  EXPECT_LE(failed, 4);
  EXPECT_EQ(failed + cancelled, 8);

  // A retry says which code it runs: the snapshot recorded at the submit, not the workdir now.
  const std::string snapshot = (*store)->GetExperiment(2).value()->snapshot_hash.substr(0, 12);
  auto retried = RunDrover({"retry", "2", "--failed", "--store", store_});
  EXPECT_NE(retried.err.find("the runs run the code recorded when experiment 2 was submitted "
                             "(snapshot " + snapshot + "), not the workdir as it is now"),
            std::string::npos)
      << retried.err;
}

// Fix, then retry: a plain retry runs the code recorded at the submit (and fails the same way);
// --code current runs the workdir as it is now, as a new attempt of the same run that still sees
// its checkpoint folder; show says which code; gc keeps that snapshot.
TEST_F(FailureTest, RetryWithCurrentCodeRunsTheFix) {
  Write("code/train.py",
        "import os\n"
        "ck = os.environ['DROVER_CHECKPOINT_DIR']\n"
        "os.makedirs(ck, exist_ok=True)\n"
        "open(os.path.join(ck, 'seen'), 'a').write('v1\\n')\n"
        "raise ValueError('lr must be positive')\n");
  std::string spec = Write("fix.yaml", "name: fix\nworkdir: code\ncommand: /usr/bin/python3 train.py\n");
  auto run = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  Write("code/train.py",
        "import json, os\n"
        "ck = os.environ['DROVER_CHECKPOINT_DIR']\n"
        "seen = open(os.path.join(ck, 'seen')).read().count('v1')\n"
        "print(json.dumps({'step': 1, 'acc': 0.9, 'earlier': seen}))\n");
  auto same = RunDrover({"retry", "fix", "--failed", "--store", store_});
  EXPECT_EQ(same.exit_code, 1) << same.out << same.err;
  EXPECT_NE(same.err.find("retry with --code current"), std::string::npos) << same.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->GetRun(1).value()->state, RunState::kFailed);

  auto fixed = RunDrover({"retry", "fix", "--failed", "--code", "current", "--store", store_});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.out << fixed.err;
  EXPECT_NE(fixed.err.find("the runs run the workdir as it is now (snapshot "), std::string::npos)
      << fixed.err;
  const drover::Run r = *(*store)->GetRun(1).value();
  EXPECT_EQ(r.state, RunState::kSucceeded) << r.reason;
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.final_metrics.value("earlier", 0), 2) << r.final_metrics;  // checkpoints kept
  const std::string submitted = (*store)->GetExperiment(1).value()->snapshot_hash;
  ASSERT_FALSE(r.snapshot_hash.empty());
  EXPECT_NE(r.snapshot_hash, submitted);
  EXPECT_EQ(r.snapshot_from, 3);
  auto show = RunDrover({"show", "1", "--store", store_});
  EXPECT_NE(show.out.find("code now     snapshot " + r.snapshot_hash.substr(0, 16) +
                          " of the workdir, from attempt 3 on"),
            std::string::npos)
      << show.out;
  auto gc = RunDrover({"gc", "--dry-run", "--store", store_});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_EQ(gc.out.find(r.snapshot_hash.substr(0, 12)), std::string::npos) << gc.out;
}

TEST_F(FailureTest, TheExceptionIsKeptAndShownEverywhere) {
  Write("code/crash.py",
        "import sys\n"
        "print('{\"step\": 1, \"loss\": 0.5}', flush=True)\n"
        "def train(epoch):\n"
        "    raise RuntimeError(f'simulated crash at epoch {epoch}')\n"
        "train(int(sys.argv[1]))\n");
  std::string spec = Write("crash.yaml",
                           "name: crash\nworkdir: code\ncommand: /usr/bin/python3 crash.py {e}\n"
                           "params: {e: [3]}\nretries: 1\nretry_backoff: 100ms\n");
  auto run = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  // The table drover run ends with, and drover compare's, say the exception, not the outcome.
  EXPECT_NE(run.out.find("failed: RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << run.out;
  auto compare = RunDrover({"compare", "crash", "--store", store_});
  EXPECT_NE(compare.out.find("failed: RuntimeError: simulated crash at epoch 3"),
            std::string::npos)
      << compare.out;

  auto show = RunDrover({"show", "1", "--store", store_});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("attempt 2 ended with (exit_code, the end of its stderr):"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("  Traceback (most recent call last):"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("  RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << show.out;

  auto ls = RunDrover({"ls", "--store", store_});
  EXPECT_NE(ls.out.find("failed: RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << ls.out;

  auto json = RunDrover({"show", "1", "--store", store_, "--json"});
  Json j = Json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  ASSERT_EQ(j["attempt_list"].size(), 2u) << json.out;
  for (const Json& a : j["attempt_list"]) {
    const std::string error = a.value("error", "");
    EXPECT_NE(error.find("RuntimeError: simulated crash at epoch 3"), std::string::npos) << error;
    EXPECT_LE(error.size(), 2048u + 3);
  }

  std::string html_path = (dir_ / "r.html").string();
  auto report = RunDrover({"report", "crash", "--store", store_, "-o", html_path});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  std::string html = ReadFile(html_path);
  EXPECT_NE(html.find("exited with code 1: RuntimeError: simulated crash at epoch 3; retried as "
                      "attempt 2"),
            std::string::npos);

  // MCP's get_run, through the daemon `drover mcp` starts for the store.
  std::string in = testing::McpStdin({{"get_run", {{"run_id", 1}}}});
  auto mcp = testing::RunDroverWithInput({"mcp", "--store", store_}, in);
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  EXPECT_NE(mcp.out.find("RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << mcp.out;
}

}  // namespace
}  // namespace drover
