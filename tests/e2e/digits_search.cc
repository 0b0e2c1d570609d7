// End to end, for real (PyTorch on CPU): the digits search (examples/digits/search.yaml: model,
// lr and batch size, 24 trials, ASHA) reaches val_acc >= 0.97 and spends at most 60% of the CPU
// time the same 24 configs take without pruning; pruned runs are shown with their rung. Its own
// executable, run alone (RUN_SERIAL): it keeps both cores of a CI machine busy for a minute.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "store/store.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::ReadFile;
using testing::RunDrover;

std::string Examples() { return std::string(DROVER_SOURCE_DIR) + "/examples/digits/"; }

// Runs drover to its end; the CPU seconds it and every process it waited for used.
double CpuSeconds(const std::vector<std::string>& args, const std::string& dir, int* exit_code) {
  const std::string out = dir + "/out", err = dir + "/err";
  pid_t pid = testing::SpawnDrover(args, out, err);
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

class DigitsSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("drover-search-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DigitsSearch, AshaReachesTheTargetOnLessThanSixtyPercentOfTheCpu) {
  const std::string pruned_store = dir_ + "/pruned";
  int code = 0;
  const double pruned_cpu = CpuSeconds(
      {"run", Examples() + "search.yaml", "--cpus", "2", "--store", pruned_store}, dir_, &code);
  ASSERT_EQ(code, 0) << ReadFile(dir_ + "/out") << ReadFile(dir_ + "/err");
  const std::string shown = ReadFile(dir_ + "/out");

  auto store = std::move(Store::Open(pruned_store + "/drover.db").value());
  auto exp = store->FindExperiment("digits-search").value();
  ASSERT_TRUE(exp);
  RunFilter f;
  f.experiment_id = exp->id;
  const std::vector<drover::Run> runs = store->ListRuns(f).value();
  ASSERT_EQ(runs.size(), 24u);
  double best = 0;
  int pruned = 0;
  Json configs = Json::array();
  int64_t a_pruned_run = 0;
  for (const drover::Run& r : runs) {
    ASSERT_TRUE(r.state == RunState::kSucceeded || r.state == RunState::kPruned)
        << r.id << " " << ToString(r.state);
    if (r.state == RunState::kPruned) {
      ++pruned;
      a_pruned_run = r.id;
    } else {
      const std::vector<MetricPoint> points = store->GetMetrics(r.id, "val_acc").value();
      for (const MetricPoint& p : points) {
        best = std::max(best, p.value);
      }
    }
    configs.push_back(r.params);
  }
  EXPECT_GE(best, 0.97) << shown;
  EXPECT_GE(pruned, 1) << shown;
  // Pruned runs are shown as such, with where they were stopped.
  EXPECT_NE(shown.find("pruned"), std::string::npos) << shown;
  auto show = RunDrover({"show", std::to_string(a_pruned_run), "--store", pruned_store});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("pruned at rung"), std::string::npos) << show.out;

  // The same 24 configs without pruning: one run per config, through a script that runs
  // train.py with that config's arguments.
  const std::string code_dir = dir_ + "/code";
  fs::create_directories(code_dir);
  fs::copy_file(Examples() + "train.py", code_dir + "/train.py");
  std::ofstream(code_dir + "/configs.json") << configs.dump();
  std::ofstream(code_dir + "/one.py") << R"(import json, os, sys
c = json.load(open("configs.json"))[int(sys.argv[1])]
args = [c["python"], "train.py", "--model", c["model"], "--lr", str(c["lr"]),
        "--batch-size", str(c["batch_size"]), "--epochs", "27", "--monitor-every", "0"]
os.execv(args[0], args)
)";
  std::string indices;
  for (int i = 0; i < 24; ++i) indices += (i ? ", " : "") + std::to_string(i);
  std::ofstream(code_dir + "/full.yaml")
      << "name: digits-full\nworkdir: .\ncommand: /usr/bin/python3 one.py {t}\n"
      << "params: {t: [" << indices << "]}\nresources: {gpus: 0, cpus: 1}\n";
  const double full_cpu = CpuSeconds(
      {"run", code_dir + "/full.yaml", "--cpus", "2", "--quiet", "--store", dir_ + "/full"}, dir_,
      &code);
  ASSERT_EQ(code, 0) << ReadFile(dir_ + "/out") << ReadFile(dir_ + "/err");
  std::printf("CPU: search with ASHA %.1f s, the same 24 configs in full %.1f s (%.0f%%); "
              "best val_acc %.4f; %d of 24 pruned\n",
              pruned_cpu, full_cpu, 100 * pruned_cpu / full_cpu, best, pruned);
  EXPECT_LE(pruned_cpu, 0.6 * full_cpu);
}

}  // namespace
}  // namespace drover
