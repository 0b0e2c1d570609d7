// The Slurm executor as the engine sees it (slurm/launcher.h), against a scripted cluster and a
// fake clock: a submit is a job with the attempt's name and resources; Slurm's verdicts become the
// attempt's end (an exit status the engine classifies, or an outcome Slurm alone knows); the
// views hear where a job is; a restart adopts the jobs Slurm lists and cancels those nobody claims.
// (tests/e2e/slurm_test.cc runs the same against a real Slurm.)
#include "slurm/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "testutil/fake_cluster.h"

namespace drover::slurm {
namespace {

namespace fs = std::filesystem;

// The local launcher the Slurm one waits on: nothing runs; an interrupt when the test says so.
class QuietLauncher : public ProcessLauncher {
 public:
  Result<ExecHandle> Start(const LaunchSpec&) override {
    return Status(Code::kInternal, "not here");
  }
  void Stop(ExecHandle, StopSignal) override {}
  WaitResult Wait(int64_t) override {
    WaitResult r;
    r.interrupt_signal = interrupt;
    interrupt = 0;
    return r;
  }
  int64_t Identity(ExecHandle) override { return 0; }
  void Adopt(ExecHandle, int64_t, const ExitRecordAt&) override {}
  int interrupt = 0;
};

class SlurmLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("drover-slurm-launcher-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LaunchSpec Spec(int64_t run, int attempt) {
    LaunchSpec s;
    s.argv = {"python3", "train.py"};
    s.env = {"PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=0", "DROVER_RUN_ID=" + std::to_string(run),
             "BASH_FUNC_x%%=() { :; }"};
    s.cwd = dir_.string();
    s.stdout_path = (dir_ / (std::to_string(run) + ".out")).string();
    s.stderr_path = (dir_ / (std::to_string(run) + ".err")).string();
    s.exit_path = (dir_ / (std::to_string(run) + ".exit")).string();
    s.request.run_id = run;
    s.request.attempt = attempt;
    s.request.resources.gpus = 2;
    s.request.resources.cpus = 4;
    s.request.resources.memory = 8LL << 30;
    s.request.time_limit_ms = 90'000;
    return s;
  }
  // One round: time passes to the next poll, and what Wait reports.
  WaitResult Round(SlurmLauncher& l) {
    clock_.Advance(5'000);
    return l.Wait(0);
  }
  Job& Listed(int64_t id) { return cluster_.queue.at(id); }

  fs::path dir_;
  FakeCluster cluster_;
  QuietLauncher local_;
  FakeClock clock_;
};

TEST_F(SlurmLauncherTest, AnAttemptIsOneJobAskingForItsResourcesWithSlurmsGpus) {
  ExecutorSpec defaults;
  defaults.partition = "gpu";
  defaults.sbatch = {"--nice=5"};
  SlurmLauncher l(cluster_, local_, clock_, "s1", defaults);
  LaunchSpec spec = Spec(7, 2);
  spec.request.executor.partition = "debug";  // the spec's over the daemon's
  spec.request.executor.sbatch = {"--constraint=a100"};
  auto job = l.Start(spec);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->id, 100);
  EXPECT_EQ(l.kind(), ExecutorKind::kSlurm);
  ASSERT_EQ(cluster_.submitted.size(), 1u);
  const Submission& s = cluster_.submitted[0];
  EXPECT_EQ(s.job_name, "drover-s1-7-2");
  EXPECT_EQ(s.gpus, 2);
  EXPECT_EQ(s.cpus, 4);
  EXPECT_EQ(s.memory_bytes, 8LL << 30);
  EXPECT_EQ(s.time_limit_ms, 90'000);
  EXPECT_EQ(s.exit_path, spec.exit_path);
  // Slurm gives the GPUs; a name no shell can export stays behind.
  EXPECT_EQ(s.env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(s.env.count("BASH_FUNC_x%%"), 0u);
  EXPECT_EQ(s.env.at("DROVER_RUN_ID"), "7");
  // Listed from now on; the views hear it was submitted.
  EXPECT_EQ(l.Identity(ExecHandle(100)), SlurmLauncher::kListed);
  EXPECT_EQ(l.Identity(ExecHandle(101)), 0);
  WaitResult w = l.Wait(0);
  ASSERT_EQ(w.placements.size(), 1u);
  EXPECT_EQ(w.placements[0].executor["state"], "SUBMITTED");
  EXPECT_EQ(w.placements[0].executor["partition"], "debug");
}

TEST_F(SlurmLauncherTest, WhereAJobIsReachesTheViewsAndItsEndIsTheAttempts) {
  SlurmLauncher l(cluster_, local_, clock_, "s1", {});
  ASSERT_TRUE(l.Start(Spec(1, 1)).ok());
  (void)l.Wait(0);
  WaitResult w = Round(l);  // pending, for Priority
  ASSERT_EQ(w.placements.size(), 1u);
  EXPECT_EQ(w.placements[0].executor["state"], "PENDING");
  EXPECT_EQ(w.placements[0].executor["reason"], "Priority");
  EXPECT_EQ(DescribePlacement(w.placements[0].executor), "Slurm job 100, pending (Priority)");
  // A record edited by hand into other types is shown as unknown, never thrown on.
  EXPECT_EQ(DescribePlacement(Json{{"kind", "slurm"}, {"job_id", "x"}, {"state", 3}}), "Slurm job ?");
  EXPECT_EQ(DescribePlacement(Json{{"kind", 1}}), "");
  EXPECT_EQ(DescribePlacement(Json::array()), "");
  Listed(100).state = JobState::kRunning;
  Listed(100).reason = "None";
  Listed(100).nodes = "node3";
  Listed(100).partition = "gpu";
  Listed(100).start_s = 1;
  w = Round(l);
  ASSERT_EQ(w.placements.size(), 1u);
  EXPECT_EQ(DescribePlacement(w.placements[0].executor), "Slurm job 100 on node3 (partition gpu)");
  EXPECT_TRUE(w.exits.empty());
  // It failed with exit code 3; the job's own record says so too.
  std::ofstream(Spec(1, 1).exit_path) << "100 1\n{\"exit_code\": 3, \"signal\": 0, \"ended_ms\": 5}\n";
  Listed(100).state = JobState::kFailed;
  Listed(100).exit_code = 3;
  w = Round(l);
  ASSERT_EQ(w.exits.size(), 1u);
  EXPECT_EQ(w.exits[0].handle.id, 100);
  EXPECT_EQ(w.exits[0].exit_code, 3);
  EXPECT_FALSE(w.exits[0].outcome.has_value());  // the engine reads its stderr (a CUDA OOM?)
  EXPECT_EQ(l.followed(), 0u);
}

TEST_F(SlurmLauncherTest, SlurmsOwnEndsAreSaidAsSuch) {
  SlurmLauncher l(cluster_, local_, clock_, "s1", {});
  for (int run = 1; run <= 4; ++run) ASSERT_TRUE(l.Start(Spec(run, 1)).ok());
  for (int64_t id = 100; id < 104; ++id) {
    Listed(id).state = JobState::kRunning;
    Listed(id).nodes = "node1";
    Listed(id).start_s = 1;
  }
  (void)Round(l);
  Listed(100).state = JobState::kTimeout;
  Listed(101).state = JobState::kPreempted;
  Listed(102).state = JobState::kOutOfMemory;
  cluster_.queue.erase(103);  // forgotten: in neither squeue nor the accounting
  std::map<int, ProcessExit> by_job;
  for (int round = 0; round < 4; ++round) {
    const WaitResult w = Round(l);
    for (const auto& e : w.exits) by_job[e.handle.id] = e;
  }
  ASSERT_EQ(by_job.size(), 4u);
  EXPECT_EQ(by_job[100].outcome, AttemptOutcome::kTimeout);
  EXPECT_EQ(by_job[101].outcome, AttemptOutcome::kPreempted);
  EXPECT_NE(by_job[101].detail.find("no retry spent"), std::string::npos) << by_job[101].detail;
  EXPECT_EQ(by_job[102].outcome, AttemptOutcome::kSignal);
  EXPECT_NE(by_job[102].detail.find("OUT_OF_MEMORY"), std::string::npos);
  EXPECT_TRUE(by_job[103].lost);
}

// What the engine stores and says of a job, from the launcher: it never reads a job id or a
// Slurm state itself (exec/process_launcher.h, PlacedAs, StartNote, WaitsToRun).
TEST_F(SlurmLauncherTest, TheLauncherSaysWhereAJobIsAndWhetherItStillWaitsToRun) {
  SlurmLauncher l(cluster_, local_, clock_, "s1", {});
  Result<ExecHandle> job = l.Start(Spec(1, 1));
  ASSERT_TRUE(job.ok()) << job.status().message();
  const Json placed = l.PlacedAs(*job);
  EXPECT_EQ(PlacementText(placed, "kind"), "slurm");
  EXPECT_EQ(placed.at("job_id").get<int64_t>(), job->id);
  EXPECT_EQ(PlacementText(placed, "state"), "SUBMITTED");
  EXPECT_EQ(l.StartNote(*job), "submitted as Slurm job " + std::to_string(job->id));
  EXPECT_TRUE(l.WaitsToRun(placed));
  EXPECT_TRUE(l.WaitsToRun(Json::object()));  // no state known yet
  // Where Slurm has it now comes as news; once it runs (or has ended) its clocks may start.
  (void)l.Wait(0);  // the submit's news
  Listed(job->id).state = JobState::kPending;
  Listed(job->id).reason = "Resources";
  WaitResult pending = Round(l);
  ASSERT_EQ(pending.placements.size(), 1u);
  EXPECT_EQ(pending.placements[0].handle, *job);
  EXPECT_TRUE(l.WaitsToRun(pending.placements[0].executor));
  Listed(job->id).state = JobState::kRunning;
  Listed(job->id).nodes = "node1";
  WaitResult running = Round(l);
  ASSERT_EQ(running.placements.size(), 1u);
  EXPECT_FALSE(l.WaitsToRun(running.placements[0].executor));
  // This machine's launcher places nothing: an empty record, no words, never waiting.
  EXPECT_EQ(local_.PlacedAs(*job), Json::object());
  EXPECT_EQ(local_.StartNote(*job), "");
  EXPECT_FALSE(local_.WaitsToRun(placed));
}

TEST_F(SlurmLauncherTest, CancelIsScancelAndTheEndIsACancelledJob) {
  SlurmLauncher l(cluster_, local_, clock_, "s1", {});
  ASSERT_TRUE(l.Start(Spec(1, 1)).ok());
  (void)l.Wait(0);  // the submit's news
  l.Stop(ExecHandle(100), StopSignal::kTerminate);
  ASSERT_EQ(cluster_.cancelled, std::vector<int64_t>{100});
  l.Stop(ExecHandle(100), StopSignal::kKill);  // the engine's kill after the grace: scancel --signal
  EXPECT_EQ(cluster_.cancelled.size(), 3u);  // (the tracker's cancel, then the signal)
  Listed(100).state = JobState::kCancelled;
  WaitResult w = Round(l);
  ASSERT_EQ(w.exits.size(), 1u);
  EXPECT_EQ(w.exits[0].signal, 15);  // the engine's stop reason (cancel) names the outcome
}

TEST_F(SlurmLauncherTest, ARestartAdoptsListedJobsReadsEndedOnesAndCancelsUnclaimedOnes) {
  // What the last engine left: job 100 running (run 1), 101 ended (run 2), 102 pending for an
  // attempt it never recorded (run 3), and another store's job.
  auto job = [&](int64_t id, const std::string& name, JobState st) {
    Job j;
    j.id = id;
    j.name = name;
    j.state = st;
    j.nodes = st == JobState::kPending ? "" : "node1";
    j.start_s = st == JobState::kPending ? 0 : 1;
    j.exit_code = 0;
    cluster_.queue[id] = j;
  };
  // And one squeue has forgotten that the accounting says ended with exit code 4 (run 4).
  Job gone;
  gone.id = 90;
  gone.name = "drover-s1-4-1";
  gone.state = JobState::kFailed;
  gone.exit_code = 4;
  gone.nodes = "node2";
  gone.start_s = 1;
  cluster_.accounting.push_back(gone);
  job(100, "drover-s1-1-1", JobState::kRunning);
  job(101, "drover-s1-2-1", JobState::kCompleted);
  job(102, "drover-s1-3-1", JobState::kPending);
  job(103, "drover-other-1-1", JobState::kRunning);
  SlurmLauncher l(cluster_, local_, clock_, "s1", {});
  ASSERT_TRUE(l.BeginRecovery().ok());
  EXPECT_EQ(l.Identity(ExecHandle(100)), SlurmLauncher::kListed);
  EXPECT_EQ(l.Identity(ExecHandle(101)), SlurmLauncher::kListed);
  EXPECT_EQ(l.Identity(ExecHandle(103)), 0);  // not this store's
  EXPECT_EQ(l.Identity(ExecHandle(90)), SlurmLauncher::kListed);  // from the accounting
  l.Adopt(ExecHandle(90), SlurmLauncher::kListed, {(dir_ / "4.exit").string(), ""});
  l.Adopt(ExecHandle(100), SlurmLauncher::kListed, {(dir_ / "1.exit").string(), ""});
  l.Adopt(ExecHandle(101), SlurmLauncher::kListed, {(dir_ / "2.exit").string(), ""});
  l.EndRecovery();
  EXPECT_EQ(cluster_.cancelled, std::vector<int64_t>{102});
  WaitResult w = l.Wait(0);
  ASSERT_EQ(w.exits.size(), 2u);  // 90 and 101 ended while no engine followed them
  EXPECT_EQ(w.exits[0].handle.id, 90);
  EXPECT_EQ(w.exits[0].exit_code, 4);
  EXPECT_EQ(w.exits[1].handle.id, 101);
  EXPECT_EQ(w.exits[1].exit_code, 0);
  Listed(100).state = JobState::kCompleted;
  w = Round(l);
  ASSERT_EQ(w.exits.size(), 1u);
  EXPECT_EQ(w.exits[0].handle.id, 100);
}

TEST_F(SlurmLauncherTest, AnInterruptReachesTheEngineAndAControllerThatFailsIsAskedAgain) {
  SlurmLauncher l(cluster_, local_, clock_, "s1", {});
  local_.interrupt = SIGINT;
  EXPECT_EQ(l.Wait(0).interrupt_signal, SIGINT);
  // sbatch refuses: the launch fails with what it said.
  class Refusing : public FakeCluster {
   public:
    Result<int64_t> Submit(const Target&, const Submission&) override {
      return FailedPrecondition("sbatch refused the job: Invalid partition name specified");
    }
  } refusing;
  SlurmLauncher r(refusing, local_, clock_, "s1", {});
  auto job = r.Start(Spec(1, 1));
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("Invalid partition"), std::string::npos);
}

}  // namespace
}  // namespace drover::slurm
