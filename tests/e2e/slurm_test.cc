// The Slurm executor end to end (docs/slurm.md): the drover binary against a real one-node Slurm
// from Debian's packages (scripts/slurm-local.sh start; 8 CPU slots, 4 fake GPUs, partitions debug
// and high, high preempting debug). Every test skips where no Slurm answers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/process_groups.h"
#include "testutil/slurm.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunDrover;

// The test store lives where the node sees it as the daemon does (one machine here: any path).
class SlurmTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    if (!testing::SlurmAnswers()) GTEST_SKIP() << testing::kNoSlurm;
    CliFixture::SetUp();
  }
  void TearDown() override {
    StopDaemon(SIGKILL);
    // Jobs outlive a killed daemon by design: cancel what the test left in Slurm.
    if (auto store = Store::Open(store_ + "/drover.db"); store.ok()) {
      auto runs = (*store)->ListRuns(RunFilter{});
      for (const auto& r : runs.ok() ? *runs : std::vector<drover::Run>{}) {
        auto attempts = (*store)->ListAttempts(r.id);
        for (const auto& a : attempts.ok() ? *attempts : std::vector<Attempt>{}) {
          if (!a.ended && a.executor.value("kind", "") == "slurm" && a.pid > 0) {
            (void)RunAndCapture({"scancel", std::to_string(a.pid)}, {.timeout_ms = 10'000});
          }
        }
      }
    }
    if (!dir_.empty()) CliFixture::TearDown();
  }

  std::unique_ptr<Store> OpenStore() {
    auto s = Store::Open(store_ + "/drover.db");
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::vector<Attempt> AttemptsOf(int64_t run_id) {
    auto store = OpenStore();
    return store ? store->ListAttempts(run_id).value() : std::vector<Attempt>{};
  }

  // Slurm's own record of a job: sacct -c over the jobcomp file (no accounting database here).
  static std::string SlurmState(int64_t job) {
    for (int i = 0; i < 100; ++i) {
      auto r = RunAndCapture({"sacct", "-c", "-X", "-n", "-P", "-j", std::to_string(job), "-o",
                              "State"},
                             {.timeout_ms = 10'000});
      if (r.ok() && !r->out.empty()) return std::string(r->out.substr(0, r->out.find('\n')));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "";
  }

  void StartDaemon(const std::string& executor = "executor: {kind: slurm, max_jobs: 8}\n") {
    const std::string config = Write("slurm.yaml", executor);
    fs::remove(store_ + "/daemon.json");
    pid_ = testing::SpawnDrover({"serve", "--listen", "127.0.0.1:0", "--store", store_,
                                 "--config", config},
                                (dir_ / "serve.out").string(), (dir_ / "serve.err").string());
    for (int i = 0; i < 1200; ++i) {  // the shared-folder probe runs a job first
      Json j = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
      if (j.is_object() && j.value("pid", 0) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "daemon did not start: " << ReadFile((dir_ / "serve.err").string());
  }
  int StopDaemon(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    const int code = testing::WaitExit(pid_);
    pid_ = -1;
    return code;
  }
  // Waits up to `seconds` for `n` runs in the store, all final.
  std::vector<drover::Run> WaitFinal(size_t n, int seconds) {
    std::vector<drover::Run> runs;
    for (int i = 0; i < seconds * 10; ++i) {
      auto store = OpenStore();
      if (store) runs = store->ListRuns(RunFilter{}).value();
      if (runs.size() == n &&
          std::all_of(runs.begin(), runs.end(), [](const drover::Run& r) { return IsFinal(r.state); })) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return runs;
  }
  // Waits until run `id`'s latest attempt is RUNNING in Slurm; its job id.
  int64_t WaitRunningJob(int64_t id, int seconds = 60) {
    for (int i = 0; i < seconds * 10; ++i) {
      auto attempts = AttemptsOf(id);
      if (!attempts.empty() && attempts.back().executor.value("state", "") == "RUNNING") {
        return attempts.back().pid;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }

  pid_t pid_ = -1;
};

// The digits comparison (PyTorch on CPU) through Slurm: four jobs, each with a fake GPU of its
// own while they run together, metrics read from their logs, and `drover compare` ranks all four.
TEST_F(SlurmTest, TheDigitsSweepRunsAsJobsWithAGpuEachAndCompareShowsEveryRun) {
  const std::string spec = std::string(DROVER_SOURCE_DIR) + "/examples/digits/compare.yaml";
  auto r = RunDrover({"run", spec, "--store", store_, "--set", "executor.kind=slurm", "--set",
                      "params.epochs=2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("on Slurm"), std::string::npos) << r.out;
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto runs = store->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 4u);
  std::set<int64_t> jobs;
  for (const drover::Run& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded) << run.id;
    auto attempts = store->ListAttempts(run.id).value();
    ASSERT_FALSE(attempts.empty());
    const Attempt& a = attempts.back();
    EXPECT_EQ(a.executor.value("kind", ""), "slurm");
    EXPECT_EQ(a.executor.value("node", ""), "localhost");
    jobs.insert(a.pid);
    EXPECT_TRUE(run.final_metrics.contains("val_acc")) << run.final_metrics.dump();
  }
  EXPECT_EQ(jobs.size(), 4u);  // one job per run
  auto compare = RunDrover({"compare", "digits-compare", "--store", store_});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  for (const drover::Run& run : runs) {
    EXPECT_NE(compare.out.find(std::to_string(run.id)), std::string::npos) << compare.out;
  }
  auto show = RunDrover({"show", std::to_string(runs.front().id), "--store", store_});
  EXPECT_NE(show.out.find("Slurm job"), std::string::npos) << show.out;
}

// Issue 40: the documented command, plain `drover run` (a daemon started on demand), with a spec
// that says executor: {kind: slurm}. The daemon it started ran attempts locally and refused the
// spec, telling the user to type `drover run`. Now the daemon is started to submit to Slurm; one
// already serving the store locally is named, with what to type.
TEST_F(SlurmTest, PlainDroverRunOfASlurmSpecSubmitsJobsThroughTheDaemonItStarts) {
  Write("code/slurm.yaml", "name: plain\nexecutor: {kind: slurm}\nresources: {gpus: 0}\n"
                           "params: {i: [1, 2]}\ncommand: \"echo loss=0.{i}\"\n");
  ::unsetenv("DROVER_FOREGROUND");
  auto r = RunDrover({"--store", store_, "run", "slurm.yaml", "--idle-exit", "2s"},
                     (dir_ / "code").string());
  ::setenv("DROVER_FOREGROUND", "1", 1);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("in a daemon started for the store"), std::string::npos) << r.out;
  auto runs = WaitFinal(2, 30);
  ASSERT_EQ(runs.size(), 2u);
  for (const drover::Run& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded) << run.id << " " << run.reason;
    auto attempts = AttemptsOf(run.id);
    ASSERT_FALSE(attempts.empty());
    EXPECT_EQ(attempts.back().executor.value("kind", ""), "slurm") << attempts.back().executor;
  }
  // A daemon serving the store locally is not silently used for a Slurm spec: the refusal names
  // the command that stops it.
  // The one started on demand exits once idle (2 s, looked at every 2 s): its process gone, not
  // only its daemon.json, since the store stays locked until it ends.
  Json started = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
  const pid_t idle = started.is_object() ? started.value("pid", 0) : 0;
  for (int i = 0; i < 600 && idle > 0 && testing::ProcessAlive(idle); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(idle > 0 && testing::ProcessAlive(idle))
      << "the daemon started on demand (pid " << idle << ") is still running 30 s after its "
      << "2 s idle exit; its log:\n" << ReadFile(store_ + "/serve.log");
  StartDaemon("executor: {kind: local}\n");
  ::unsetenv("DROVER_FOREGROUND");
  auto joined = RunDrover({"--store", store_, "run", "slurm.yaml", "--rerun"},
                          (dir_ / "code").string());
  ::setenv("DROVER_FOREGROUND", "1", 1);
  EXPECT_NE(joined.exit_code, 0) << joined.out;
  EXPECT_NE(joined.err.find("drover daemon stop"), std::string::npos) << joined.err;
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
}

// Jobs that run together get distinct GPUs from Slurm, and each run sees the one it was given.
TEST_F(SlurmTest, ConcurrentJobsSeeDistinctGpusFromSlurm) {
  const std::string spec = Write(
      "gpus.yaml",
      "name: gpus\nworkdir: code\nshell: true\nexecutor: {kind: slurm}\n"
      "resources: {gpus: 1}\nparams: {i: [1, 2, 3, 4]}\n"
      "command: \"echo cvd=$CUDA_VISIBLE_DEVICES; date +%s%N > started; sleep 4; echo i={i}\"\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = OpenStore();
  auto runs = store->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 4u);
  std::set<std::string> seen;
  for (const drover::Run& run : runs) {
    const Attempt a = store->ListAttempts(run.id).value().back();
    const std::string out = ReadFile(a.stdout_path);
    const size_t at = out.find("cvd=");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string cvd = out.substr(at + 4, out.find('\n', at) - at - 4);
    EXPECT_FALSE(cvd.empty()) << "Slurm gave the job no GPU";
    seen.insert(cvd);
  }
  // Four jobs of one GPU each on a node of four: all ran at once, each on its own.
  EXPECT_EQ(seen.size(), 4u);
}

// A container run under Slurm: the job starts podman on the node (docs/containers.md, "Under
// Slurm"); the job's GPUs are Slurm's, the container has the node's and picks the job's by
// CUDA_VISIBLE_DEVICES. Skips where podman has no test image (scripts/podman-local.sh images).
TEST_F(SlurmTest, AContainerRunIsAJobThatStartsItsContainerOnTheNode) {
  auto have = RunAndCapture({"podman", "image", "exists", "localhost/drover-bb:test"},
                            {.timeout_ms = 30'000});
  if (!have.ok() || have->exit_code != 0) GTEST_SKIP() << "no podman test image";
  const std::string spec = Write(
      "c.yaml",
      "name: c\nworkdir: code\nexecutor: {kind: slurm}\nresources: {gpus: 1}\n"
      "container: {image: localhost/drover-bb:test}\nparams: {i: [1, 2]}\n"
      "command: [sh, -c, \"echo host=$(hostname) cvd=$CUDA_VISIBLE_DEVICES; ls /dev | grep -c "
      "fakegpu; echo i={i}\"]\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = OpenStore();
  auto runs = store->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 2u);
  for (const drover::Run& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded);
    const Attempt a = store->ListAttempts(run.id).value().back();
    EXPECT_EQ(a.executor.value("kind", ""), "slurm");
    const std::string out = ReadFile(a.stdout_path);
    EXPECT_NE(out.find(fmt::format("host=drover-run-{} cvd=", run.id)), std::string::npos) << out;
    EXPECT_EQ(out.find("cvd=\n"), std::string::npos) << "Slurm gave the job no GPU: " << out;
    EXPECT_NE(out.find("\n4\n"), std::string::npos) << "the node's 4 GPUs: " << out;
  }
}

// Cancel through the daemon: scancel, the run cancelled, Slurm records the job CANCELLED.
TEST_F(SlurmTest, CancelEndsTheJobInSlurm) {
  StartDaemon();
  const std::string spec = Write(
      "sleep.yaml", "name: sleeper\nworkdir: code\ncommand: [sleep, \"300\"]\n");
  auto sub = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  const int64_t job = WaitRunningJob(1);
  ASSERT_GT(job, 0) << ReadFile((dir_ / "serve.err").string());
  auto ls = RunDrover({"ls", "--store", store_});
  EXPECT_NE(ls.out.find("Slurm job " + std::to_string(job) + " on localhost"), std::string::npos)
      << ls.out;
  // The API (what the web UI shows): the attempt's job, in fields and in words.
  {
    Json info = Json::parse(ReadFile(store_ + "/daemon.json"));
    std::string token = ReadFile(store_ + "/token");
    token.erase(token.find_last_not_of("\n") + 1);
    httplib::Client http("127.0.0.1", info["port"].get<int>());
    auto got = http.Get("/api/v1/runs/1", {{"Authorization", "Bearer " + token}});
    ASSERT_TRUE(got && got->status == 200);
    Json a = Json::parse(got->body)["attempt_list"][0];
    EXPECT_EQ(a["executor"]["job_id"], job);
    EXPECT_EQ(a["executor"]["node"], "localhost");
    EXPECT_EQ(a["placement"], "Slurm job " + std::to_string(job) + " on localhost (partition debug)");
  }
  auto cancel = RunDrover({"cancel", "1", "--store", store_});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  auto runs = WaitFinal(1, 60);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::kCancelled);
  EXPECT_EQ(SlurmState(job).rfind("CANCELLED", 0), 0u) << SlurmState(job);
}

// A failing job: its exit code and its own last words are the attempt's, and it is not retried
// past the spec's retries.
TEST_F(SlurmTest, AFailingJobKeepsItsExitCodeAndReason) {
  const std::string spec = Write(
      "fail.yaml", "name: failing\nworkdir: code\nshell: true\nexecutor: {kind: slurm}\n"
                   "command: \"echo 'ValueError: bad lr' >&2; exit 3\"\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  EXPECT_NE(r.exit_code, 0);
  auto attempts = AttemptsOf(1);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].exit_code, 3);
  EXPECT_EQ(attempts[0].reason, "exit_code");
  EXPECT_NE(attempts[0].error.find("ValueError: bad lr"), std::string::npos) << attempts[0].error;
  EXPECT_EQ(SlurmState(attempts[0].pid), "FAILED");
  // drover retry in the foreground sends it back to Slurm, as the spec said.
  auto retry = RunDrover({"retry", "1", "--store", store_});
  EXPECT_NE(retry.exit_code, 0);
  attempts = AttemptsOf(1);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[1].executor.value("kind", ""), "slurm");
  EXPECT_NE(attempts[1].pid, attempts[0].pid);
}

// The OOM example (examples/digits/oom.yaml: PyTorch raises a real torch.cuda.OutOfMemoryError
// above a batch of 100) through Slurm: each OOM is retried with half the batch and twice the
// gradient accumulation, each attempt a job of its own, until 64 fits.
TEST_F(SlurmTest, AnOomIsRetriedSmallerAsANewJob) {
  const std::string spec = std::string(DROVER_SOURCE_DIR) + "/examples/digits/oom.yaml";
  auto r = RunDrover({"run", spec, "--store", store_, "--set", "executor.kind=slurm", "--set",
                      "params.epochs=1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto attempts = AttemptsOf(1);
  ASSERT_EQ(attempts.size(), 4u);
  std::set<int64_t> jobs;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(attempts[i].reason, "cuda_oom") << i;
    EXPECT_NE(attempts[i].error.find("OutOfMemoryError"), std::string::npos) << attempts[i].error;
  }
  EXPECT_EQ(attempts[0].params["batch_size"], 512);
  EXPECT_EQ(attempts[1].params["batch_size"], 256);
  EXPECT_EQ(attempts[3].params["batch_size"], 64);
  EXPECT_EQ(attempts[3].params["grad_accum"], 8);
  EXPECT_EQ(attempts[3].reason, "succeeded");
  for (const auto& a : attempts) {
    EXPECT_EQ(a.executor.value("kind", ""), "slurm");
    jobs.insert(a.pid);
  }
  EXPECT_EQ(jobs.size(), 4u);
}

// A higher-priority partition preempts drover's job: the attempt ends preempted (no retry spent)
// and the run goes on as a new job, which finds its checkpoint.
TEST_F(SlurmTest, AJobPreemptedBySlurmContinuesAsANewAttempt) {
  StartDaemon();
  const std::string spec = Write(
      "long.yaml",
      "name: long\nworkdir: code\nshell: true\nexecutor: {kind: slurm, partition: debug}\n"
      "resources: {cpus: 8}\nretries: 0\n"
      "command: \"ck=$DROVER_CHECKPOINT_DIR/ck; if [ -f $ck ]; then echo resumed; exit 0; fi; "
      "mkdir -p $DROVER_CHECKPOINT_DIR; touch $ck; echo started; sleep 300\"\n");
  ASSERT_EQ(RunDrover({"submit", spec, "--store", store_}).exit_code, 0);
  const int64_t job = WaitRunningJob(1);
  ASSERT_GT(job, 0) << ReadFile((dir_ / "serve.err").string());
  // Its checkpoint is written (the job's script has started, not only its allocation).
  for (int i = 0; i < 300; ++i) {
    if (ReadFile(AttemptsOf(1).back().stdout_path).find("started") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Someone's job in the high partition needs the whole node.
  auto high = RunAndCapture({"sbatch", "--parsable", "-p", "high", "--cpus-per-task=8", "-o",
                             "/dev/null", "--wrap", "sleep 2"},
                            {.timeout_ms = 10'000});
  ASSERT_TRUE(high.ok() && high->exit_code == 0) << (high.ok() ? high->out : "");
  auto runs = WaitFinal(1, 120);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::kSucceeded);
  EXPECT_EQ(runs[0].retries_used, 0);
  auto attempts = AttemptsOf(1);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "preempted");
  EXPECT_NE(attempts[0].pid, attempts[1].pid);
  EXPECT_NE(ReadFile(attempts[1].stdout_path).find("resumed"), std::string::npos);
}

// The daemon killed with SIGKILL mid-sweep and started again adopts its jobs: every run ends
// succeeded, and each ran exactly once.
TEST_F(SlurmTest, ADaemonKilledMidSweepAdoptsItsJobsAndRunsNothingTwice) {
  StartDaemon();
  const std::string ran = (dir_ / "ran.txt").string();
  const std::string spec = Write(
      "sweep.yaml",
      "name: sweep\nworkdir: code\nshell: true\nparams: {i: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n"
      "command: \"echo $DROVER_RUN_ID >> " + ran + "; sleep 3; echo loss={i}\"\n");
  ASSERT_EQ(RunDrover({"submit", spec, "--store", store_}).exit_code, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  StopDaemon(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  StartDaemon();
  auto runs = WaitFinal(10, 120);
  ASSERT_EQ(runs.size(), 10u);
  std::map<std::string, int> times;
  std::istringstream lines(ReadFile(ran));
  for (std::string line; std::getline(lines, line);) ++times[line];
  for (const drover::Run& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded) << run.id << " " << run.reason;
    EXPECT_EQ(times[std::to_string(run.id)], 1) << "run " << run.id << " ran more than once";
  }
  EXPECT_NE(ReadFile((dir_ / "serve.out").string()).find("adopted"), std::string::npos);
}

// executor.shared_dir: the runs' folders live in a folder the nodes see, the database stays in
// the store; a store that already holds runs' files is not moved behind the user's back.
TEST_F(SlurmTest, SharedDirHoldsTheRunsFoldersAndTheDatabaseStaysInTheStore) {
  const std::string shared = (dir_ / "shared").string();
  StartDaemon("executor: {kind: slurm, shared_dir: " + shared + "}\n");
  EXPECT_TRUE(fs::is_symlink(store_ + "/runs"));
  EXPECT_TRUE(fs::is_symlink(store_ + "/logs"));
  EXPECT_TRUE(fs::exists(store_ + "/drover.db"));
  const std::string spec = Write(
      "one.yaml", "name: one\nworkdir: code\nshell: true\ncommand: \"echo at $PWD\"\n");
  ASSERT_EQ(RunDrover({"submit", spec, "--store", store_}).exit_code, 0);
  auto runs = WaitFinal(1, 60);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::kSucceeded);
  const Attempt a = AttemptsOf(1).at(0);
  EXPECT_EQ(a.stdout_path.rfind(shared + "/logs/", 0), 0u) << a.stdout_path;
  EXPECT_EQ(a.workdir.rfind(shared + "/runs/", 0), 0u) << a.workdir;
  EXPECT_NE(ReadFile(a.stdout_path).find("at " + shared + "/runs/1"), std::string::npos);
  auto logs = RunDrover({"logs", "1", "--store", store_});
  EXPECT_NE(logs.out.find("at " + shared), std::string::npos) << logs.out << logs.err;
  StopDaemon(SIGTERM);
  // Another shared_dir for a store whose folders link elsewhere: refused, saying what to move.
  Write("slurm.yaml", "executor: {kind: slurm, shared_dir: " + shared + "2}\n");
  auto serve = RunDrover({"serve", "--listen", "127.0.0.1:0", "--store", store_, "--config",
                          (dir_ / "slurm.yaml").string()});
  EXPECT_NE(serve.exit_code, 0);
  EXPECT_NE(serve.err.find("move its contents there"), std::string::npos) << serve.err;
}

// --dry-run of a Slurm spec asks Slurm (sbatch --test-only), not this machine's GPUs: it submits
// nothing, and says why Slurm would refuse.
TEST_F(SlurmTest, ADryRunAsksSlurmWhetherItWouldTakeTheJobs) {
  const std::string spec = Write(
      "dry.yaml", "name: dry\nworkdir: code\nexecutor: {kind: slurm}\nresources: {gpus: 2}\n"
                  "command: \"true {i}\"\nparams: {i: [1, 2]}\n");
  auto ok = RunDrover({"run", spec, "--store", store_, "--dry-run"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("2 runs (dry run"), std::string::npos) << ok.out;
  auto too_big = RunDrover({"run", spec, "--store", store_, "--dry-run", "--set",
                            "resources.gpus=9"});
  EXPECT_NE(too_big.exit_code, 0);
  EXPECT_NE(too_big.err.find("Requested node configuration is not available"), std::string::npos)
      << too_big.err;
  auto bad = RunDrover({"run", spec, "--store", store_, "--dry-run", "--set",
                        "executor.partition=nope"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("invalid partition"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(store_ + "/drover.db") &&
               !OpenStore()->ListRuns(RunFilter{}).value().empty());
}

// A spec's executor key that drover sets itself is refused with what to do.
TEST_F(SlurmTest, SbatchFlagsDroverOwnsAreRefused) {
  const std::string spec = Write(
      "bad.yaml", "name: bad\nworkdir: code\ncommand: [true]\n"
                  "executor: {kind: slurm, sbatch: [--output=/tmp/x]}\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'--output' is drover's to set"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace drover
