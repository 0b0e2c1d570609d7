// The batch script and sbatch command of an attempt: their text, and (where a Slurm answers on
// this machine: scripts/slurm-local.sh start) a real job run from them.
#include "slurm/sbatch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "slurm/jobs.h"
#include "testutil/slurm.h"

namespace drover::slurm {
namespace {

namespace fs = std::filesystem;

Submission Example(const std::string& dir) {
  Submission s;
  s.job_name = JobName("t0", 7, 1);
  s.argv = {"/bin/sh", "-c", "echo \"lr=$LR cvd=$CUDA_VISIBLE_DEVICES it's\"; pwd"};
  s.env = {{"LR", "0.1 'quoted'"}, {"PATH", "/usr/bin:/bin"}};
  s.workdir = dir;
  s.script_path = dir + "/job.sh";
  s.stdout_path = dir + "/out";
  s.stderr_path = dir + "/err";
  s.gpus = 1;
  s.cpus = 2;
  s.memory_bytes = 1536LL << 20;
  s.time_limit_ms = 90'000;
  return s;
}

TEST(Sbatch, TheCommandLineSaysWhatTheAttemptAsks) {
  Target t;
  t.partition = "debug";
  t.sbatch = {"--constraint=a100"};
  const auto argv = SbatchArgv(t, Example("/w"));
  const std::vector<std::string> want = {
      "sbatch", "--parsable", "--job-name=drover-t0-7-1", "--output=/w/out", "--error=/w/err",
      "--export=ALL", "--no-requeue", "--chdir=/w", "--partition=debug", "--gres=gpu:1",
      "--cpus-per-task=2", "--mem=1536M", "--time=0-00:02:00", "--constraint=a100",
      "/w/job.sh"};
  EXPECT_EQ(argv, want);
  Submission day = Example("/w");
  day.time_limit_ms = 25LL * 3600 * 1000;
  day.gpus = 0;
  const auto d = SbatchArgv(Target{}, day);
  EXPECT_NE(std::find(d.begin(), d.end(), "--time=1-01:00:00"), d.end());
  EXPECT_EQ(std::find(d.begin(), d.end(), "--gres=gpu:0"), d.end());
}

TEST(Sbatch, TheScriptQuotesEverythingAndRefusesWhatAShellCannotCarry) {
  auto script = BatchScript(Example("/w d"));
  ASSERT_TRUE(script.ok()) << script.status().message();
  EXPECT_NE(script->find("export LR='0.1 '\\''quoted'\\'''\n"), std::string::npos) << *script;
  EXPECT_NE(script->find("cd '/w d' || exit 127\n"), std::string::npos) << *script;
  Submission bad = Example("/w");
  bad.env["A-B"] = "x";
  EXPECT_FALSE(BatchScript(bad).ok());
  bad = Example("/w");
  bad.env["A"] = std::string("x\0y", 3);
  EXPECT_FALSE(BatchScript(bad).ok());
  bad.argv.clear();
  EXPECT_FALSE(BatchScript(bad).ok());
}

TEST(Sbatch, PollingBacksOffWhenNothingHappens) {
  EXPECT_EQ(NextPollMs(0, 20), 1'000);
  EXPECT_EQ(NextPollMs(30'000, 20), 5'000);
  EXPECT_EQ(NextPollMs(120'000, 20), 30'000);
  EXPECT_EQ(NextPollMs(120'000, 9'000), 45'000);  // a slow controller is asked less
}

std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// On a real Slurm (scripts/slurm-local.sh start): the job runs the script with drover's
// environment in its folder, gets a GPU of its own, and ends COMPLETED as squeue tells it.
TEST(Sbatch, ARealJobRunsTheScript) {
  if (!testing::SlurmAnswers()) GTEST_SKIP() << testing::kNoSlurm;
  const fs::path dir = fs::temp_directory_path() / ("drover-sbatch-" + std::to_string(getpid()));
  fs::create_directories(dir);
  Submission s = Example(dir.string());
  auto script = BatchScript(s);
  ASSERT_TRUE(script.ok());
  std::ofstream(s.script_path) << *script;
  std::string cmd;
  for (const std::string& a : SbatchArgv(Target{}, s)) cmd += "'" + a + "' ";
  const std::string id_text = Shell(cmd + "2>&1");
  const int64_t id = std::atoll(id_text.c_str());
  ASSERT_GT(id, 0) << id_text;
  Job job;
  for (int i = 0; i < 300; ++i) {
    // squeue --json lists every job whatever -j or --name says (Slurm 22.05): found by id.
    auto jobs = ParseSqueueJson(Shell("squeue --json -t all"));
    ASSERT_TRUE(jobs.ok()) << jobs.status().message();
    auto it = std::find_if(jobs->begin(), jobs->end(), [&](const Job& j) { return j.id == id; });
    if (it != jobs->end() && Judge(*it, false).phase == Phase::kEnded) {
      job = *it;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(job.name, "drover-t0-7-1");
  EXPECT_EQ(Judge(job, false).outcome, AttemptOutcome::kSucceeded) << ToString(job.state);
  std::ifstream in(s.stdout_path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("lr=0.1 'quoted' cvd="), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("cvd= "), std::string::npos) << "no GPU given: " << text.str();
  EXPECT_NE(text.str().find(dir.string()), std::string::npos) << text.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::slurm
