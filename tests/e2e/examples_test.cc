// End to end: the drover binary runs the digits examples for real (PyTorch on CPU), on fake GPUs,
// into a real SQLite store, and the listing commands read them back.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "store/store.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::RunDrover;
using Json = nlohmann::json;

std::string Examples() { return std::string(DROVER_SOURCE_DIR) + "/examples/digits/"; }

class ExamplesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    store_dir_ = (fs::temp_directory_path() / ("drover-e2e-" + std::to_string(getpid()))).string();
    fs::remove_all(store_dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(store_dir_); }
  static std::string store_dir_;
};
std::string ExamplesTest::store_dir_;

TEST_F(ExamplesTest, CompareOnTwoFakeGpus) {
  auto r = RunDrover({"run", Examples() + "compare.yaml", "--fake-gpus", "2x16GiB", "--cpus", "4",
                      "--store", store_dir_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("* best: run"), std::string::npos) << r.out;

  auto store = Store::Open(store_dir_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto exp = (*store)->FindExperiment("digits-compare").value();
  ASSERT_TRUE(exp);
  RunFilter f;
  f.experiment_id = exp->id;
  auto runs = (*store)->ListRuns(f).value();
  ASSERT_EQ(runs.size(), 4u);
  struct Span {
    Millis start, end;
    std::string gpu;
  };
  std::vector<Span> spans;
  for (const auto& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded);
    auto attempts = (*store)->ListAttempts(run.id).value();
    ASSERT_EQ(attempts.size(), 1u);
    const auto& a = attempts[0];
    EXPECT_TRUE(a.cuda_visible_devices == "0" || a.cuda_visible_devices == "1")
        << a.cuda_visible_devices;
    spans.push_back({a.started_ms, a.ended_ms, a.cuda_visible_devices});
    EXPECT_GE((*store)->GetMetrics(run.id, "val_acc").value().size(), 1u);
    // train.py reports through the Python client (on the run's PYTHONPATH under drover), whose
    // PyTorch helper logs the gradient norm every 10 optimizer steps.
    EXPECT_GE((*store)->GetMetrics(run.id, "grad_norm").value().size(), 2u);
  }
  // With four CPU slots all four start at once, two per GPU (6GiB each on 16GiB), and at no
  // moment are there more than two on one GPU.
  std::map<std::string, int> per_gpu;
  for (const auto& s : spans) per_gpu[s.gpu]++;
  EXPECT_EQ(per_gpu["0"], 2);
  EXPECT_EQ(per_gpu["1"], 2);
  for (const auto& s : spans) {
    std::map<std::string, int> at;
    for (const auto& o : spans) {
      if (o.start <= s.start && s.start < o.end) at[o.gpu]++;
    }
    for (auto [gpu, n] : at) EXPECT_LE(n, 2) << "GPU " << gpu;
  }

  auto cmp = RunDrover({"compare", "digits-compare", "--json", "--store", store_dir_});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  Json j = Json::parse(cmp.out);
  EXPECT_EQ(j["metric"], "val_acc");
  ASSERT_EQ(j["runs"].size(), 4u);
  for (const auto& run : j["runs"]) {
    ASSERT_TRUE(run["metrics"].contains("val_acc"));
    EXPECT_GT(run["metrics"]["val_acc"].get<double>(), 0.5);
  }
  EXPECT_EQ(j["best_run"], j["runs"][0]["id"]);

  auto table =
      RunDrover({"compare", "digits-compare", "--metric", "val_loss", "--store", store_dir_});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("val_loss (min, last)"), std::string::npos) << table.out;

  int64_t first = runs[0].id;
  auto show = RunDrover({"show", std::to_string(first), "--json", "--store", store_dir_});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  Json s = Json::parse(show.out);
  EXPECT_EQ(s["attempt_list"].size(), 1u);
  EXPECT_FALSE(s["fingerprint"].get<std::string>().empty());
  ASSERT_EQ(s["environments"].size(), 1u);
  EXPECT_NE(s["environments"][0]["packages"].get<std::string>().find("torch=="), std::string::npos);
  EXPECT_TRUE(s["snapshot"]["git"].get<bool>());

  auto logs = RunDrover({"logs", std::to_string(first), "--store", store_dir_});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("\"val_acc\""), std::string::npos) << logs.out;

  auto ls = RunDrover({"ls", "--json", "--store", store_dir_});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_GE(Json::parse(ls.out).size(), 4u);
}

TEST_F(ExamplesTest, OomHalvesBatchUntilItSucceeds) {
  auto r = RunDrover({"run", Examples() + "oom.yaml", "--store", store_dir_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The progress lines say why each attempt after the first runs, and with what (the engine's
  // note as it requeues the run; a follower of a daemon says "retried after" it).
  EXPECT_NE(r.out.find("CUDA OOM: batch_size 512 -> 256, grad_accum 1 -> 2"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("attempt 4"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("on CPU: on CPU"), std::string::npos) << r.out;  // nothing said twice
  auto store = Store::Open(store_dir_ + "/drover.db");
  auto exp = (*store)->FindExperiment("digits-oom").value();
  ASSERT_TRUE(exp);
  RunFilter f;
  f.experiment_id = exp->id;
  auto runs = (*store)->ListRuns(f).value();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::kSucceeded);
  EXPECT_EQ(runs[0].current_params["batch_size"], 64);
  auto attempts = (*store)->ListAttempts(runs[0].id).value();
  ASSERT_EQ(attempts.size(), 4u);
  int expected[] = {512, 256, 128, 64};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(attempts[i].params["batch_size"], expected[i]);
    EXPECT_EQ(attempts[i].reason, i < 3 ? "cuda_oom" : "succeeded");
  }
  auto err = RunDrover(
      {"logs", std::to_string(runs[0].id), "--attempt", "1", "--stderr", "--store", store_dir_});
  EXPECT_NE(err.out.find("torch.cuda.OutOfMemoryError"), std::string::npos) << err.out;
}

}  // namespace
}  // namespace drover
