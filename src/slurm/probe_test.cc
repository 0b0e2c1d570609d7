// The shared-folder probe on the test cluster (scripts/slurm-local.sh start; skipped where no
// Slurm answers): one node sees drover's folder; a job that cannot start in time says why.
#include "slurm/probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/subprocess.h"
#include "testutil/slurm.h"

namespace drover::slurm {
namespace {

namespace fs = std::filesystem;

TEST(Probe, TheNodesSeeTheFolderOrTheJobSaysWhyItWaits) {
  if (!testing::SlurmAnswers()) GTEST_SKIP() << testing::kNoSlurm;
  const fs::path dir = fs::temp_directory_path() / ("drover-probe-" + std::to_string(getpid()));
  fs::create_directories(dir);
  CommandCluster cluster;
  Status ok = ProbeSharedFolder(cluster, Target{}, dir.string(), 30'000);
  EXPECT_TRUE(ok.ok()) << ok.message();
  EXPECT_TRUE(fs::is_empty(dir)) << "the probe's files are left";
  Target later;
  later.sbatch = {"--begin=now+1hour"};  // held: it cannot end in time
  Status held = ProbeSharedFolder(cluster, later, dir.string(), 1'500);
  EXPECT_EQ(held.code(), Code::kUnavailable);
  EXPECT_NE(held.message().find("BeginTime"), std::string::npos) << held.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::slurm
