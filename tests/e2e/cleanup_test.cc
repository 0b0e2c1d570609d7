// drover rm and drover gc on a real store, without a daemon (the CLI holds the engine lock) and
// through one (DELETE /experiments/{id}, POST /store/gc): what goes is listed first (--dry-run),
// nothing is deleted without --yes off a terminal, an experiment with unfinished runs is refused,
// and the other experiments' records and files stay whole.
#include <gtest/gtest.h>
#include <signal.h>
#include <utime.h>

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

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::ReadFile;
using testing::RunDrover;

class CleanupTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    testing::StopDaemonOf(store_);
    CliFixture::TearDown();
  }
  std::unique_ptr<Store> OpenStore() { return std::move(Store::Open(store_ + "/drover.db").value()); }
  // Makes a path look `hours` old.
  static void Age(const std::string& path, int hours) {
    const time_t t = time(nullptr) - hours * 3600;
    struct utimbuf times = {t, t};
    ASSERT_EQ(utime(path.c_str(), &times), 0) << path;
  }
};

TEST_F(CleanupTest, RmAndGcWithoutADaemon) {
  Write("code/train.sh",
        "mkdir -p \"$DROVER_CHECKPOINT_DIR\" && echo w > \"$DROVER_CHECKPOINT_DIR/ck\"\n"
        "echo out > result.txt\necho '{\"step\": 1, \"loss\": 0.5}'\n");
  std::string a = Write("a.yaml",
                        "name: a\nworkdir: code\ncommand: sh train.sh {i}\nparams: {i: [1, 2]}\n");
  ASSERT_EQ(RunDrover({"run", a, "--store", store_}).exit_code, 0);
  Write("code/other.txt", "a change, so b has a snapshot of its own\n");
  std::string b = Write("b.yaml", "name: b\nworkdir: code\ncommand: sh train.sh\n");
  ASSERT_EQ(RunDrover({"run", b, "--store", store_}).exit_code, 0);
  ASSERT_TRUE(fs::exists(store_ + "/runs/1"));
  ASSERT_TRUE(fs::exists(store_ + "/checkpoints/1/ck"));
  ASSERT_TRUE(fs::exists(store_ + "/logs/1"));

  auto dry = RunDrover({"rm", "a", "--dry-run", "--store", store_});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("experiment 1 (a): 2 runs"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find(store_ + "/checkpoints/2  (checkpoints of run 2)"), std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("dry run: nothing was deleted"), std::string::npos) << dry.out;
  // Off a terminal, nothing goes without --yes.
  auto asked = RunDrover({"rm", "a", "--store", store_});
  EXPECT_EQ(asked.exit_code, 2) << asked.err;
  EXPECT_NE(asked.err.find("Add --yes"), std::string::npos) << asked.err;
  EXPECT_TRUE(fs::exists(store_ + "/runs/1"));

  auto rm = RunDrover({"rm", "a", "--yes", "--store", store_});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(rm.out.find("deleted experiment 1 (a): 2 runs"), std::string::npos) << rm.out;
  for (const char* gone : {"/runs/1", "/runs/2", "/checkpoints/1", "/logs/1", "/trash"}) {
    EXPECT_FALSE(fs::exists(store_ + gone)) << gone;
  }
  {
    auto store = OpenStore();
    EXPECT_FALSE(store->GetExperiment(1).value().has_value());
    EXPECT_FALSE(store->GetRun(1).value().has_value());
    EXPECT_TRUE(store->GetMetrics(1).value().empty());
    // b is whole.
    EXPECT_TRUE(store->GetRun(3).value().has_value());
    EXPECT_EQ(store->GetMetrics(3).value().size(), 1u);
    EXPECT_TRUE(store->IntegrityOk().value());
    EXPECT_EQ(store->UnreferencedSnapshots().value().size(), 1u);  // a's
  }
  EXPECT_TRUE(fs::exists(store_ + "/runs/3"));
  auto unknown = RunDrover({"rm", "a", "--yes", "--store", store_});
  EXPECT_NE(unknown.exit_code, 0);

  // gc: a's snapshot is collected once it is over an hour old (a submit may be taking a young
  // one); b's run ended just now, so its working copy stays unless --older-than says otherwise.
  std::string a_snapshot;
  for (const auto& e : fs::directory_iterator(store_ + "/snapshots")) {
    if (OpenStore()->GetSnapshot(e.path().filename().string()).value().has_value() &&
        OpenStore()->UnreferencedSnapshots().value()[0] == e.path().filename().string()) {
      a_snapshot = e.path().string();
    }
  }
  ASSERT_FALSE(a_snapshot.empty());
  auto young = RunDrover({"gc", "--dry-run", "--store", store_});
  ASSERT_EQ(young.exit_code, 0) << young.err;
  EXPECT_NE(young.out.find("nothing to collect"), std::string::npos) << young.out;
  Age(a_snapshot, 2);
  auto plan = RunDrover({"gc", "--dry-run", "--json", "--store", store_});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  Json j = Json::parse(plan.out);
  // The snapshot and its file list (what `drover verify` checks it against).
  ASSERT_EQ(j["files"].size(), 2u) << plan.out;
  EXPECT_EQ(j["files"][0]["path"], a_snapshot);
  EXPECT_EQ(j["files"][1]["path"],
            store_ + "/snapshots/.manifests/" + fs::path(a_snapshot).filename().string());
  EXPECT_GT(j["files"][0]["bytes"].get<int64_t>(), 0) << plan.out;  // measured, not left at 0
  EXPECT_EQ(j["bytes"].get<int64_t>(),
            j["files"][0]["bytes"].get<int64_t>() + j["files"][1]["bytes"].get<int64_t>());
  EXPECT_EQ(j["applied"], false);
  auto gc = RunDrover({"gc", "--yes", "--older-than", "0s", "--checkpoints", "--store", store_});
  ASSERT_EQ(gc.exit_code, 0) << gc.out << gc.err;
  EXPECT_FALSE(fs::exists(a_snapshot));
  EXPECT_FALSE(fs::exists(store_ + "/runs/3"));
  EXPECT_FALSE(fs::exists(store_ + "/checkpoints/3"));
  EXPECT_TRUE(fs::exists(store_ + "/logs/2"));  // logs are the record: kept
  auto store = OpenStore();
  EXPECT_TRUE(store->UnreferencedSnapshots().value().empty());
  EXPECT_TRUE(store->GetRun(3).value().has_value());
  // drover show still works for the collected run.
  EXPECT_EQ(RunDrover({"show", "3", "--store", store_}).exit_code, 0);
}

TEST_F(CleanupTest, RmAndGcThroughADaemonSpareWhatItRuns) {
  pid_t daemon = testing::StartDaemon(store_, dir_.string());
  std::string quick = Write("q.yaml", "name: quick\nworkdir: code\ncommand: \"true\"\n");
  ASSERT_EQ(RunDrover({"run", quick, "--store", store_}).exit_code, 0);
  std::string slow = Write("s.yaml", "name: slow\nworkdir: code\ncommand: sleep 300\n");
  auto sub = RunDrover({"submit", slow, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  for (int i = 0; i < 400 && !fs::exists(store_ + "/runs/2"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  auto refused = RunDrover({"rm", "slow", "--yes", "--store", store_});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("experiment 2 (slow) has 1 run unfinished: cancel it first"),
            std::string::npos)
      << refused.err;
  // gc spares the running run's working copy whatever --older-than says.
  auto gc = RunDrover({"gc", "--yes", "--older-than", "0s", "--json", "--store", store_});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  Json j = Json::parse(gc.out);
  EXPECT_EQ(j["applied"], true);
  for (const Json& f : j["files"]) EXPECT_NE(f["path"], store_ + "/runs/2") << gc.out;
  EXPECT_TRUE(fs::exists(store_ + "/runs/2"));
  EXPECT_FALSE(fs::exists(store_ + "/runs/1"));

  ASSERT_EQ(RunDrover({"cancel", "-e", "slow", "--store", store_}).exit_code, 0);
  for (int i = 0; i < 400; ++i) {
    auto run = OpenStore()->GetRun(2).value();
    if (run->state == RunState::kCancelled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  auto rm = RunDrover({"rm", "slow", "--yes", "--store", store_});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(rm.out.find("deleted experiment 2 (slow): 1 run"), std::string::npos) << rm.out;
  EXPECT_FALSE(fs::exists(store_ + "/runs/2"));
  EXPECT_FALSE(fs::exists(store_ + "/trash"));
  auto ls = RunDrover({"ls", "--experiments", "--json", "--store", store_});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out.find("\"slow\""), std::string::npos) << ls.out;
  // The daemon goes on: a new experiment runs.
  ASSERT_EQ(RunDrover({"run", quick, "--store", store_}).exit_code, 0);
  kill(daemon, SIGTERM);
  EXPECT_EQ(testing::WaitExit(daemon), 0);
}

}  // namespace
}  // namespace drover
