// Slurm's own commands, run by drover against the test cluster (scripts/slurm-local.sh start;
// skipped where no Slurm answers): a job submitted, listed while it runs, cancelled, and found
// again in the accounting once ended; a refused submit says why.
#include "slurm/cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include "common/subprocess.h"
#include "testutil/slurm.h"

namespace drover::slurm {
namespace {

namespace fs = std::filesystem;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::SlurmAnswers()) GTEST_SKIP() << testing::kNoSlurm;
    dir_ = fs::temp_directory_path() / ("drover-cluster-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Submission Job(const std::string& name, std::vector<std::string> argv) {
    Submission s;
    s.job_name = name;
    s.argv = std::move(argv);
    s.env = {{"PATH", "/usr/bin:/bin"}};
    s.workdir = dir_.string();
    s.script_path = (dir_ / (name + ".sh")).string();
    s.stdout_path = (dir_ / (name + ".out")).string();
    s.stderr_path = (dir_ / (name + ".err")).string();
    return s;
  }
  // The job as squeue lists it, once `done` says so (or after 30 s).
  template <typename Done>
  slurm::Job WaitFor(Cluster& c, int64_t id, Done done) {
    slurm::Job found;
    for (int i = 0; i < 300; ++i) {
      auto jobs = c.List();
      EXPECT_TRUE(jobs.ok()) << jobs.status().message();
      if (!jobs.ok()) break;
      auto it = std::find_if(jobs->begin(), jobs->end(),
                             [&](const slurm::Job& j) { return j.id == id; });
      if (it != jobs->end()) {
        found = *it;
        if (done(found)) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return found;
  }
  fs::path dir_;
};

TEST_F(ClusterTest, SubmitListCancelAndTheAccountingOfAnEndedJob) {
  CommandCluster cluster;
  const int64_t since = static_cast<int64_t>(std::time(nullptr)) - 5;
  const std::string name = JobName("ct" + std::to_string(getpid()), 1, 1);
  auto id = cluster.Submit(Target{}, Job(name, {"sleep", "60"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  slurm::Job running = WaitFor(cluster, *id, [](const slurm::Job& j) {
    return Judge(j, false).phase == Phase::kRunning;
  });
  EXPECT_EQ(running.name, name);
  EXPECT_EQ(running.nodes, "localhost");
  ASSERT_TRUE(cluster.Cancel(*id, 0).ok());
  slurm::Job ended = WaitFor(cluster, *id, [](const slurm::Job& j) {
    return Judge(j, true).phase == Phase::kEnded;
  });
  EXPECT_EQ(Judge(ended, true).outcome, AttemptOutcome::kCancelled);
  // squeue forgets it after MinJobAge; the accounting (here the jobcomp file) still has it.
  slurm::Job accounted;
  for (int i = 0; i < 50 && accounted.id == 0; ++i) {
    auto done = cluster.Ended(since);
    ASSERT_TRUE(done.ok()) << done.status().message();
    for (const slurm::Job& j : *done) {
      if (j.id == *id) accounted = j;
    }
    if (accounted.id == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(accounted.name, name);
  EXPECT_EQ(accounted.state, JobState::kCancelled);
  EXPECT_GE(cluster.commands(), 4);
}

TEST_F(ClusterTest, ARefusedSubmitSaysWhySlurmRefusedIt) {
  CommandCluster cluster;
  Submission s = Job(JobName("ct", 2, 1), {"true"});
  s.gpus = 9;  // the node has 4
  auto id = cluster.Submit(Target{}, s);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("Requested node configuration is not available"),
            std::string::npos)
      << id.status().message();
  Target nowhere;
  nowhere.partition = "nosuchpartition";
  auto bad = cluster.Submit(nowhere, Job(JobName("ct", 3, 1), {"true"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nosuchpartition"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace drover::slurm
