// drover plan and drover ask with the real binary: the headline instruction on the test
// recipe, and an instruction that is planned, confirmed with --yes and run to the end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

using testing::RunDrover;
using Json = nlohmann::json;

class PlanTest : public testing::CliFixture {};

TEST_F(PlanTest, TheHeadlineInstructionPlansExactlyFourRuns) {
  std::string recipe = std::string(DROVER_SOURCE_DIR) + "/tests/data/planner/recipe.yaml";
  auto r = RunDrover({"plan", "--recipe", recipe, "--json",
                      "对比ResNet50和EfficientNet在batch_size=32,64时的训练曲线"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json plan = Json::parse(r.out);
  EXPECT_EQ(plan["runs"], 4);
  EXPECT_EQ(plan["spec"]["params"]["model"], Json({"resnet50", "efficientnet"}));
  EXPECT_EQ(plan["spec"]["params"]["batch_size"], Json({32, 64}));
  EXPECT_EQ(plan["spec"]["objective"]["metric"], "loss");
  EXPECT_EQ(plan["spec"]["objective"]["mode"], "min");
  EXPECT_TRUE(plan["ignored"].empty()) << plan["ignored"].dump();

  auto none = RunDrover({"plan", "--recipe", recipe, "make it better"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("knows the parameters model"), std::string::npos) << none.err;
}

TEST_F(PlanTest, AskPlansConfirmsAndRuns) {
  Write("code/emit.py",
        "import sys\nprint('{\"step\": 1, \"acc\": %s}' % sys.argv[1])\n");
  std::string recipe = Write("code/drover.yaml",
                             "command: /usr/bin/python3 emit.py {lr}\n"
                             "params:\n  lr: {type: float, default: 0.1, aliases: [学习率]}\n"
                             "gpus: 0\n"
                             "metrics:\n  acc: {mode: max, aliases: [准确率]}\n");
  // Without a terminal and without --yes nothing is submitted.
  auto refused = RunDrover({"ask", "--recipe", recipe, "--store", store_, "学习率0.1和0.5"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("add --yes"), std::string::npos) << refused.err;

  // Words it could not use might have mattered: --yes alone does not submit such a plan.
  auto unsure = RunDrover({"ask", "--yes", "--recipe", recipe, "--store", store_,
                           "学习率0.1和0.5, but not on friday"});
  EXPECT_EQ(unsure.exit_code, 2);
  EXPECT_NE(unsure.err.find("add --force"), std::string::npos) << unsure.err;

  auto r = RunDrover({"ask", "--yes", "--recipe", recipe, "--store", store_,
                      "学习率0.1和0.5, 比较准确率"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("plan: 2 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("* best: run 2 by acc"), std::string::npos) << r.out;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto runs = (*store)->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].final_metrics["acc"], 0.5);

  // It takes the options of drover run: a dry run asks nothing and submits nothing; --set and
  // --fake-gpus apply to the planned spec.
  auto dry = RunDrover({"ask", "--recipe", recipe, "--store", store_, "--dry-run", "--set",
                        "lr=[0.7, 0.8, 0.9]", "--fake-gpus", "1x16GiB", "学习率0.1和0.5"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("3 runs (dry run: nothing was submitted)"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("emit.py 0.9"), std::string::npos) << dry.out;
  auto more = RunDrover({"ask", "--yes", "--recipe", recipe, "--store", store_, "--set",
                         "lr=0.25", "--cpus", "1", "--quiet", "学习率0.1"});
  ASSERT_EQ(more.exit_code, 0) << more.err;
  runs = (*store)->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].final_metrics["acc"], 0.25);
}

// "search lr between 0.01 and 0.9 for 6 trials on 2 GPUs", as a researcher says it: drover ask
// writes a search (lr sampled on a log scale), runs its 6 trials on one GPU each, two at a time on
// the machine's two GPUs, and says how the search spent its trials.
TEST_F(PlanTest, AskWritesASearchOnTheGpusItIsGiven) {
  Write("code/emit.py",
        "import sys, time\nlr = float(sys.argv[1])\ntime.sleep(0.3)\n"
        "print('{\"step\": 1, \"acc\": %f}' % (1 - abs(lr - 0.3)))\n");
  std::string recipe = Write("code/drover.yaml",
                             "command: /usr/bin/python3 emit.py {lr}\n"
                             "params:\n  lr: {type: float, default: 0.1, aliases: [learning rate]}\n"
                             "metrics:\n  acc: {mode: max}\n");
  auto r = RunDrover({"ask", "--yes", "--recipe", recipe, "--store", store_, "--fake-gpus",
                      "2x16GiB", "search lr between 0.01 and 0.9 for 6 trials on 2 GPUs"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("plan: 6 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lr: 0.01 to 0.9 (searched on a log scale"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPUs: 2 in all, 1 per run, up to 2 runs at once"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("how the budget went: 6 trials: "), std::string::npos) << r.out;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto exps = (*store)->ListExperiments(10).value();
  ASSERT_EQ(exps.size(), 1u);
  EXPECT_EQ(exps[0].spec["search"]["trials"], 6);
  EXPECT_EQ(exps[0].spec["search"]["parallel"], 2);
  EXPECT_EQ(exps[0].spec["params"]["lr"], Json({{"log_uniform", {0.01, 0.9}}}));
  auto runs = (*store)->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 6u);
  std::set<std::string> gpus;
  for (const drover::Run& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded) << run.id;
    EXPECT_EQ(run.resources.gpus, 1) << run.id;
    EXPECT_NE(run.origin, TrialOrigin::kNone) << run.id;
    const double lr = run.params["lr"].get<double>();
    EXPECT_GE(lr, 0.01);
    EXPECT_LE(lr, 0.9);
    auto attempts = (*store)->ListAttempts(run.id).value();
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(attempts[0].cuda_visible_devices.find(','), std::string::npos)
        << "one GPU per trial: " << attempts[0].cuda_visible_devices;
    gpus.insert(attempts[0].cuda_visible_devices);
  }
  EXPECT_EQ(gpus.size(), 2u) << "the two GPUs were both used";
}

}  // namespace
}  // namespace drover
