// A shared machine (docs/lab-server.md): engines of different stores on one machine coordinate
// through the machine's GPU leases, so together they never hand out more of a GPU than it has.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;

class LabTest : public testing::CliFixture {
 protected:
  // Each run appends "start|end <ns> <gpu> <store> <run>" to one file shared by both stores.
  std::string SpecFor(const std::string& log, const std::string& tag, int runs) {
    std::string values;
    for (int i = 0; i < runs; ++i) values += (i ? ", " : "") + std::to_string(i);
    fs::create_directories(dir_ / ("code-" + tag));
    Write("code-" + tag + "/mark.sh",
          "echo start $(date +%s%N) $CUDA_VISIBLE_DEVICES $2 $DROVER_RUN_ID >> $1\n"
          "sleep 0.$(( $3 % 3 + 2 ))\n"
          "echo end $(date +%s%N) $CUDA_VISIBLE_DEVICES $2 $DROVER_RUN_ID >> $1\n");
    return "name: share-" + tag + "\n" + "command: sh mark.sh " + log + " " + tag + " {i}\n" +
           "params: {i: [" + values + "]}\n" + "resources: {gpus: 1, gpu_memory: 5GiB}\n";
  }

  // The most GiB of one GPU held at once by runs of both stores, from the runs' own records.
  static int MaxConcurrentGiB(const std::string& log, int* runs_seen) {
    struct Mark {
      long long t;
      int delta;
      std::string gpu;
    };
    std::vector<Mark> marks;
    std::istringstream in(ReadFile(log));
    std::string line;
    *runs_seen = 0;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string what, gpu, tag, run;
      long long t = 0;
      f >> what >> t >> gpu >> tag >> run;
      marks.push_back({t, what == "start" ? 5 : -5, gpu});
      if (what == "start") ++*runs_seen;
    }
    // Ends before starts at the same instant.
    std::sort(marks.begin(), marks.end(),
              [](const Mark& a, const Mark& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
    std::map<std::string, int> held;
    int most = 0;
    for (const Mark& m : marks) {
      held[m.gpu] += m.delta;
      most = std::max(most, held[m.gpu]);
    }
    return most;
  }

  // Runs `drover run` on two stores at once on the same fake GPUs (2 x 16 GiB).
  int RunTwoStores(const std::string& leases_flag, int* runs_seen) {
    const std::string log = (dir_ / "marks.txt").string();
    std::vector<pid_t> pids;
    for (const std::string tag : {"a", "b"}) {
      std::string spec = Write("code-" + tag + "/spec.yaml", SpecFor(log, tag, 12));
      pids.push_back(testing::SpawnDrover(
          {"--store", (dir_ / ("store-" + tag)).string(), "run", spec, "--fake-gpus", "2x16GiB",
           "--gpu-leases", leases_flag, "--cpus", "8", "--quiet"},
          (dir_ / ("out-" + tag)).string(), (dir_ / ("err-" + tag)).string(),
          (dir_ / ("code-" + tag)).string()));
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      const std::string tag = i == 0 ? "a" : "b";
      EXPECT_EQ(testing::WaitExit(pids[i]), 0) << ReadFile((dir_ / ("err-" + tag)).string());
    }
    return MaxConcurrentGiB(log, runs_seen);
  }
};

TEST_F(LabTest, TwoStoresOnTheSameGpusNeverExceedAGpusMemoryTogether) {
  const std::string leases = (dir_ / "leases").string();
  int runs = 0;
  const int most = RunTwoStores(leases, &runs);
  EXPECT_EQ(runs, 24);
  // Three runs of 5 GiB fit a 16 GiB GPU, four do not.
  EXPECT_LE(most, 15) << ReadFile((dir_ / "marks.txt").string());
  EXPECT_GE(most, 10);  // and they did share
  // Both engines have ended: nothing is held any more.
  for (const auto& e : fs::directory_iterator(leases)) {
    EXPECT_NE(e.path().extension(), ".json") << e.path() << " left behind";
  }
}

TEST_F(LabTest, WithoutLeasesTwoStoresDoubleBookAGpu) {
  // The control: each engine alone believes it owns both GPUs, so together they overbook one
  // (what the test above would catch).
  int runs = 0;
  const int most = RunTwoStores("off", &runs);
  EXPECT_EQ(runs, 24);
  EXPECT_GT(most, 15);
}

}  // namespace
}  // namespace drover
