#include "plan/planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/strings.h"
#include "spec/expand.h"
#include "spec/spec_parser.h"

namespace drover {
namespace {

const std::string kDataDir = std::string(DROVER_SOURCE_DIR) + "/tests/data/planner";

Recipe LoadTestRecipe() {
  Result<Recipe> r = LoadRecipe(kDataDir + "/recipe.yaml");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Recipe{};
}

// The spec a plan's YAML gives, which must parse.
Result<Spec> ParsePlan(const Plan& plan) {
  return ParseSpecString(plan.spec_yaml, "planned.yaml", "/tmp");
}

// Compares one case of cases.jsonl; returns what was wrong, or "" when it passed.
std::string Check(const Recipe& recipe, const Json& c) {
  const std::string instruction = c.at("instruction");
  Result<Plan> r = PlanInstruction(recipe, instruction);
  if (c.contains("error")) {
    if (r.ok()) return "expected an error, got spec " + r->spec.dump();
    const std::string want = c.at("error");
    if (r.status().message().find(want) == std::string::npos) {
      return "error '" + r.status().message() + "' does not contain '" + want + "'";
    }
    return "";
  }
  if (!r.ok()) return "error: " + r.status().message();
  const Plan& plan = *r;
  const Json& expect = c.at("expect");
  std::vector<std::string> wrong;
  size_t runs = 1;
  for (const RecipeParam& p : recipe.params) {
    Json want = Json::array({p.default_value.is_null() ? p.choices.front() : p.default_value});
    if (expect.contains("params") && expect["params"].contains(p.name)) {
      want = expect["params"][p.name];
      if (!want.is_array()) want = Json::array({want});
    }
    const Json& got = plan.spec["params"][p.name];
    if (got != want) wrong.push_back(p.name + " " + got.dump() + " != " + want.dump());
    runs *= got.size();
  }
  // A case that names no objective gets the recipe's first metric, in its direction.
  Json objective = expect.contains("objective") ? expect["objective"]
                   : recipe.metrics.empty()
                       ? Json()
                       : Json({{"metric", recipe.metrics[0].name},
                               {"mode", recipe.metrics[0].maximize ? "max" : "min"}});
  Json got_objective = plan.spec.contains("objective") ? plan.spec["objective"] : Json();
  if (got_objective != objective) {
    wrong.push_back("objective " + got_objective.dump() + " != " + objective.dump());
  }
  int gpus = expect.contains("gpus") ? expect["gpus"].get<int>() : recipe.gpus;
  if (plan.spec["resources"]["gpus"] != gpus) {
    wrong.push_back("gpus " + plan.spec["resources"]["gpus"].dump() + " != " + std::to_string(gpus));
  }
  int priority = expect.contains("priority") ? expect["priority"].get<int>() : 0;
  if (plan.spec["priority"] != priority) {
    wrong.push_back("priority " + plan.spec["priority"].dump() + " != " + std::to_string(priority));
  }
  if (expect.contains("ignored") && Json(plan.ignored) != expect["ignored"]) {
    wrong.push_back("ignored " + Json(plan.ignored).dump() + " != " + expect["ignored"].dump());
  }
  if (expect.contains("runs") && expect["runs"].get<size_t>() != runs) {
    wrong.push_back("runs " + std::to_string(runs) + " != " + expect["runs"].dump());
  }
  // The YAML must be a spec drover accepts, with the same grid.
  Result<Spec> spec = ParsePlan(plan);
  if (!spec.ok()) {
    wrong.push_back("spec_yaml does not parse: " + spec.status().message() + "\n" + plan.spec_yaml);
  } else if (ExpandGrid(*spec).size() != runs) {
    wrong.push_back("spec_yaml expands to " + std::to_string(ExpandGrid(*spec).size()) + " runs");
  }
  if (wrong.empty()) return "";
  std::string out = Join(wrong, "; ");
  out += "\n    understood: " + Json(plan.understood).dump();
  out += "\n    ignored: " + Json(plan.ignored).dump();
  return out;
}

TEST(PlannerTest, Cases) {
  Recipe recipe = LoadTestRecipe();
  std::ifstream in(kDataDir + "/cases.jsonl");
  ASSERT_TRUE(in) << "cannot read cases.jsonl";
  std::string line;
  int total = 0, passed = 0, english = 0, chinese = 0;
  std::vector<std::string> misses;
  for (int n = 1; std::getline(in, line); ++n) {
    if (Trim(line).empty() || line[0] == '#') continue;
    Json c = Json::parse(line, nullptr, false);
    ASSERT_FALSE(c.is_discarded()) << "cases.jsonl:" << n << ": not JSON";
    ++total;
    const std::string instruction = c.at("instruction");
    bool has_cjk = std::any_of(instruction.begin(), instruction.end(),
                               [](char ch) { return static_cast<unsigned char>(ch) >= 0xE0; });
    (has_cjk ? chinese : english)++;
    std::string miss = Check(recipe, c);
    if (miss.empty()) {
      ++passed;
    } else {
      misses.push_back(fmt::format("cases.jsonl:{}: {}\n    {}", n, instruction, miss));
    }
  }
  std::cout << fmt::format("planner accuracy: {}/{} ({} with CJK, {} without)\n", passed, total,
                           chinese, english);
  for (const std::string& m : misses) std::cout << m << "\n";
  EXPECT_GE(total, 60);
  EXPECT_EQ(passed, total);
}

// "search lr between 1e-4 and 0.1 for 20 trials": the range is sampled (log-uniform: it spans
// three decades), the search makes 20 trials ranked by the recipe's first metric; Chinese alike.
TEST(PlannerTest, ASearchSamplesItsRanges) {
  Recipe recipe = LoadTestRecipe();
  Result<Plan> r = PlanInstruction(recipe, "search lr between 1e-4 and 0.1 for 20 trials");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["lr"], Json({{"log_uniform", {0.0001, 0.1}}}));
  EXPECT_EQ(r->spec["search"], Json({{"trials", 20}}));
  EXPECT_TRUE(r->ignored.empty()) << Json(r->ignored).dump();
  Result<Spec> spec = ParsePlan(*r);
  ASSERT_TRUE(spec.ok()) << spec.status().message() << "\n" << r->spec_yaml;
  ASSERT_TRUE(spec->search);
  EXPECT_EQ(spec->search->trials, 20);
  EXPECT_EQ(PlannedRuns(*r, recipe).value(), 20);
  EXPECT_NE(Join(r->understood, "\n").find("search: 20 trials (from '20 trials')"),
            std::string::npos)
      << Join(r->understood, "\n");

  // An int range, a count of trials after the word, and a model left as values (a grid axis).
  r = PlanInstruction(recipe, "tune cnn with batch size from 16 to 256, trials=12");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["batch_size"], Json({{"int_log", {16, 256}}}));
  EXPECT_EQ(r->spec["params"]["model"], Json({"cnn"}));
  EXPECT_EQ(r->spec["search"]["trials"], 12);
  ASSERT_TRUE(ParsePlan(*r).ok()) << r->spec_yaml;

  r = PlanInstruction(recipe, "调参：学习率在0.001到0.1之间，20次试验");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["lr"], Json({{"log_uniform", {0.001, 0.1}}}));
  EXPECT_EQ(r->spec["search"]["trials"], 20);

  // No number of trials: the default, said.
  r = PlanInstruction(recipe, "search lr from 0.001 to 0.01");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["search"]["trials"], 20);
  EXPECT_NE(Join(r->understood, "\n").find("the default"), std::string::npos);

  // Trials with nothing to search, and a range without a count or a search word: errors that
  // say what to write.
  r = PlanInstruction(recipe, "search mlp and cnn for 20 trials");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nothing in the instruction is a range to search"),
            std::string::npos)
      << r.status().message();
  r = PlanInstruction(recipe, "lr between 1e-4 and 0.1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("search lr between"), std::string::npos)
      << r.status().message();
  // Without a search word, "3 trials" are still repeats; "grid search" is a grid.
  r = PlanInstruction(recipe, "cnn, 3 trials");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["seed"], Json({0, 1, 2}));
  EXPECT_FALSE(r->spec.contains("search"));
}

// "on 2 GPUs" with several runs is the GPUs they share: one each, two at once. With one run, or
// "2 GPUs each", it is the GPUs of each run.
TEST(PlannerTest, OnTwoGpusIsWhatTheRunsShare) {
  Recipe recipe = LoadTestRecipe();
  Result<Plan> r = PlanInstruction(recipe, "compare mlp and cnn on 2 GPUs");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["resources"]["gpus"], 1);
  EXPECT_EQ(r->spec["max_parallel"], 2);
  EXPECT_NE(Join(r->understood, "\n").find("GPUs: 2 in all, 1 per run, up to 2 runs at once"),
            std::string::npos)
      << Join(r->understood, "\n");
  Result<Spec> spec = ParsePlan(*r);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->max_parallel, 2);

  r = PlanInstruction(recipe, "search lr between 1e-4 and 0.1 for 20 trials on 2 GPUs");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["resources"]["gpus"], 1);
  EXPECT_EQ(r->spec["search"], Json({{"trials", 20}, {"parallel", 2}}));
  EXPECT_TRUE(r->ignored.empty()) << Json(r->ignored).dump();

  r = PlanInstruction(recipe, "compare mlp and cnn on 2 GPUs each");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["resources"]["gpus"], 2);
  EXPECT_FALSE(r->spec.contains("max_parallel"));
  r = PlanInstruction(recipe, "cnn on 4 GPUs");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["resources"]["gpus"], 4);
  r = PlanInstruction(recipe, "对比mlp和cnn，用2张卡");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["resources"]["gpus"], 1);
  EXPECT_EQ(r->spec["max_parallel"], 2);
}

TEST(PlannerTest, HeadlineExample) {
  Recipe recipe = LoadTestRecipe();
  Result<Plan> r = PlanInstruction(recipe, "对比ResNet50和EfficientNet在batch_size=32,64时的训练曲线");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["model"], Json({"resnet50", "efficientnet"}));
  EXPECT_EQ(r->spec["params"]["batch_size"], Json({32, 64}));
  EXPECT_EQ(r->spec["objective"], Json({{"metric", "loss"}, {"mode", "min"}}));
  EXPECT_EQ(r->spec["name"], "model-resnet50-efficientnet-x-batch_size-32-64");
  EXPECT_TRUE(r->ignored.empty()) << Json(r->ignored).dump();
  ASSERT_GE(r->understood.size(), 3u);
  EXPECT_EQ(r->understood[0], "model: resnet50, efficientnet (from 'ResNet50和EfficientNet')");
  EXPECT_EQ(r->understood[1], "batch_size: 32, 64 (from 'batch_size=32,64')");
  Result<Spec> spec = ParsePlan(*r);
  ASSERT_TRUE(spec.ok()) << spec.status().message() << "\n" << r->spec_yaml;
  EXPECT_EQ(ExpandGrid(*spec).size(), 4u);
  EXPECT_EQ(spec->workdir, kDataDir);
  EXPECT_EQ(spec->objective->metric, "loss");
  EXPECT_FALSE(spec->objective->maximize);
}

TEST(PlannerTest, ReportsWhatItIgnored) {
  Recipe recipe = LoadTestRecipe();
  Result<Plan> r = PlanInstruction(recipe, "please train cnn on the cluster quickly with wandb");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Json(r->ignored), Json({"cluster quickly", "wandb"}));
  EXPECT_EQ(r->spec["params"]["model"], Json({"cnn"}));
}

TEST(PlannerTest, NothingUsableSaysWhatTheRecipeKnows) {
  Recipe recipe = LoadTestRecipe();
  Result<Plan> r = PlanInstruction(recipe, "please run it");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("model (mlp, cnn, resnet50, efficientnet"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("val_acc (max"), std::string::npos);
}

TEST(PlannerTest, ValuesOutsideTheirRangeAreErrorsNeverNullsOrSilentPicks) {
  Recipe recipe = LoadTestRecipe();
  auto error = [&](const char* instruction) {
    Result<Plan> r = PlanInstruction(recipe, instruction);
    EXPECT_FALSE(r.ok()) << instruction << " planned " << (r.ok() ? r->spec_yaml : "");
    return r.ok() ? std::string() : r.status().message();
  };
  // Past a double: once written as lr: "null".
  EXPECT_NE(error("train mlp lr 1e999").find("lr = inf, which is not a finite number"),
            std::string::npos);
  EXPECT_NE(error("train mlp, lr 1e-3 to 1e999, 3 values").find("not a finite number"),
            std::string::npos);
  // The recipe's range.
  EXPECT_EQ(error("train mlp batch size 0"),
            "the instruction gives batch_size = 0, below its min 1 in " + kDataDir +
                "/recipe.yaml (it takes 1 to 65536)");
  EXPECT_NE(error("train mlp for -5 epochs").find("epochs = -5, below its min 1"),
            std::string::npos);
  EXPECT_NE(error("批大小为零").find("batch_size = 0, below its min 1"), std::string::npos);
  EXPECT_NE(error("训练二十万轮").find("epochs = 200000, above its max 100000"), std::string::npos);
  EXPECT_NE(error("train mlp lr 50").find("lr = 50.0, above its max 10"), std::string::npos);
  // No declared min: not negative.
  EXPECT_NE(error("train mlp seed -3").find("seed = -3, a negative value; the recipe"),
            std::string::npos);
  // Contradictions name both.
  EXPECT_EQ(error("train mlp, urgent, low priority"),
            "the instruction sets the priority twice: 10 (from 'urgent') and -10 (from 'low priority'); "
            "keep one");
  EXPECT_NE(error("train mlp on cpu with 2 gpus each").find("sets the GPUs per run twice: 0"),
            std::string::npos);
  EXPECT_NE(error("train mlp priority 99999999999999999999")
                .find("a priority is a whole number from -1000000 to 1000000"),
            std::string::npos);
  // Found by fuzz_recipe_plan: a count past int64 was cast (undefined behaviour).
  EXPECT_NE(error("train mlp, 666666666666666666666666666666666666666666 seeds").find("the number of repeats must be 1 to 100"),
            std::string::npos);
  EXPECT_NE(error("train mlp, repeat 888888888888888888888888888888 times")
                .find("the number of repeats must be 1 to 100"),
            std::string::npos);
  // Found by fuzz_recipe_plan: a range end past 2^64 was cast to check for a power of two.
  EXPECT_FALSE(PlanInstruction(recipe, "train mlp, batch size 16 to 1e72").ok());
  // Saying the same thing twice is no contradiction.
  Result<Plan> twice = PlanInstruction(recipe, "train mlp urgent, asap");
  ASSERT_TRUE(twice.ok()) << twice.status().message();
  EXPECT_EQ(twice->spec["priority"], 10);
  EXPECT_TRUE(twice->ignored.empty()) << Json(twice->ignored).dump();
}

// The values a plan gives a parameter, or the error's message.
std::string Values(const Recipe& recipe, const std::string& instruction, const std::string& param) {
  Result<Plan> r = PlanInstruction(recipe, instruction);
  if (!r.ok()) return "error: " + r.status().message();
  return r->spec["params"][param].dump();
}

TEST(PlannerTest, GeometricSequences) {
  Recipe recipe = LoadTestRecipe();
  // A start, a factor, and an end or a count; the factor before, in or after the sequence.
  EXPECT_EQ(Values(recipe, "lr: start at 0.1 and divide by 10, 3 values", "lr"),
            "[0.1,0.01,0.001]");
  EXPECT_EQ(Values(recipe, "学习率从0.1开始每次除以10，取3个值", "lr"), "[0.1,0.01,0.001]");
  EXPECT_EQ(Values(recipe, "double the batch size from 32 to 256", "batch_size"),
            "[32,64,128,256]");
  EXPECT_EQ(Values(recipe, "batch size: double from 32 to 256", "batch_size"), "[32,64,128,256]");
  EXPECT_EQ(Values(recipe, "批大小从32开始每次乘以2，直到256", "batch_size"), "[32,64,128,256]");
  EXPECT_EQ(Values(recipe, "批大小从32开始每次×2，到256", "batch_size"), "[32,64,128,256]");
  EXPECT_EQ(Values(recipe, "批大小从32开始每次2倍，取3个值", "batch_size"), "[32,64,128]");
  EXPECT_EQ(Values(recipe, "学习率0.4起，每次减半，取4个", "lr"), "[0.4,0.2,0.1,0.05]");
  EXPECT_EQ(Values(recipe, "lr from 1, decrease by a factor of 10, 3 values", "lr"),
            "[1.0,0.1,0.01]");
  // An end that is not hit exactly stops before it, like a step.
  EXPECT_EQ(Values(recipe, "batch size from 32 doubling up to 200", "batch_size"), "[32,64,128]");
  // An additive step with a count or an end.
  EXPECT_EQ(Values(recipe, "epochs from 10, step 5, 3 values", "epochs"), "[10,15,20]");
  EXPECT_EQ(Values(recipe, "轮数从10开始每次加10，直到30", "epochs"), "[10,20,30]");
  // "每次×2" is a factor, never two repeats.
  EXPECT_EQ(Values(recipe, "批大小从32开始每次×2，到256", "seed"), "[0]");

  auto error = [&](const std::string& instruction) {
    Result<Plan> r = PlanInstruction(recipe, instruction);
    EXPECT_FALSE(r.ok()) << instruction << " planned " << (r.ok() ? r->spec_yaml : "");
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(error("lr: start at 0.1 and divide by 10").find("say how many values"),
            std::string::npos);
  EXPECT_NE(error("batch size: double from 256 to 32").find("never reaches 32 from 256"),
            std::string::npos);
  EXPECT_NE(error("batch size: double from 32 to 256, 3 values").find("gives 4 values, not 3"),
            std::string::npos);
  EXPECT_NE(error("lr from 0.1, multiply by 1, 3 values").find("a factor of 1"), std::string::npos);
  EXPECT_NE(error("lr from 0.1, step 0.1, divide by 2, 3 values").find("both a step and a factor"),
            std::string::npos);
  EXPECT_NE(error("epochs from 0, double, 3 values").find("cannot start at 0"), std::string::npos);
  // Values past the recipe's range are errors, not clipped.
  EXPECT_NE(error("lr: start at 0.1, divide by 10, 9 values")
                .find("lr = 1e-08, below its min 1e-07"),
            std::string::npos);
  EXPECT_NE(error("batch size from 1024, double, 8 values").find("above its max 65536"),
            std::string::npos);
}

TEST(PlannerTest, ACountBeforeARange) {
  Recipe recipe = LoadTestRecipe();
  const std::string want = "[0.0001,0.001,0.01]";
  for (const char* text : {"3 values from 1e-4 to 1e-2 for lr", "lr: 3 values from 1e-4 to 1e-2",
                           "3 learning rates from 1e-4 to 1e-2", "3 values of lr from 1e-4 to 1e-2",
                           "学习率取3个值，从1e-4到1e-2", "在1e-4到1e-2之间取3个学习率",
                           "三档学习率，从1e-4到1e-2", "学习率在1e-4和1e-2之间取三个值"}) {
    EXPECT_EQ(Values(recipe, text, "lr"), want) << text;
  }
  // A bare number before a parameter is a value ("32 bs"), not a count, unless a plural says so.
  EXPECT_EQ(Values(recipe, "bs 32 lr from 1e-4 to 1e-2", "lr"),
            "error: 'from 1e-4 to 1e-2' is a range for lr; say how many values ('from 1e-4 to "
            "1e-2, 3 values', '取3个值') or the step ('step 10'), or search it ('search lr between "
            "... for 20 trials')");
  EXPECT_NE(Values(recipe, "3 learning rates from 1e-4 to 1e-2, 4 values", "lr")
                .find("asks for 4 values and for 3"),
            std::string::npos);
}

TEST(PlannerTest, RangeSpacingFollowsTheRecipesScale) {
  Result<Recipe> recipe = ParseRecipe(
      "command: echo {a} {b} {c} {d}\nparams:\n  a: 1.0\n  b: {default: 1.0, scale: linear}\n"
      "  c: {default: 2, scale: log}\n  d: 2\n",
      "drover.yaml", "/tmp");
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  // Without a scale: a float range spanning 10x or more is log-spaced, anything else linear.
  EXPECT_EQ(Values(*recipe, "a from 1 to 100, 3 values", "a"), "[1.0,10.0,100.0]");
  EXPECT_EQ(Values(*recipe, "a from 1 to 5, 3 values", "a"), "[1.0,3.0,5.0]");
  EXPECT_EQ(Values(*recipe, "d from 2 to 32, 3 values", "d"), "[2,17,32]");
  // scale: linear and scale: log decide; the instruction's own word wins over both.
  EXPECT_EQ(Values(*recipe, "b from 1 to 100, 3 values", "b"), "[1.0,50.5,100.0]");
  EXPECT_EQ(Values(*recipe, "b from 1 to 100, 3 log-spaced values", "b"), "[1.0,10.0,100.0]");
  EXPECT_EQ(Values(*recipe, "c from 2 to 32, 3 values", "c"), "[2,8,32]");
  EXPECT_EQ(Values(*recipe, "c from 2 to 32, 3 linear values", "c"), "[2,17,32]");
  // A log scale with an end at 0 or below is spaced evenly.
  EXPECT_EQ(Values(*recipe, "c from 0 to 10, 3 values", "c"), "[0,5,10]");

  for (auto [yaml, want] : std::vector<std::pair<std::string, std::string>>{
           {"command: x {a}\nparams:\n  a: {default: 1.0, scale: cubic}\n",
            "drover.yaml:3:28: params.a.scale must be log or linear, got 'cubic'"},
           {"command: x {a}\nparams:\n  a: {choices: [p, q], scale: log}\n",
            "params.a.scale spaces a range of numbers, but a is a choice parameter"}}) {
    Result<Recipe> bad = ParseRecipe(yaml, "drover.yaml", "/tmp");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(want), std::string::npos) << bad.status().message();
  }
}

TEST(PlannerTest, NegationLeavesChoicesOut) {
  Recipe recipe = LoadTestRecipe();
  for (auto [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"every model except mlp", R"(["cnn","resnet50","efficientnet"])"},
           {"all models but mlp and cnn", R"(["resnet50","efficientnet"])"},
           {"cnn and resnet50 but not resnet50", R"(["cnn"])"},
           {"everything other than efficientnet", R"(["mlp","cnn","resnet50"])"},
           {"除了mlp以外的所有模型", R"(["cnn","resnet50","efficientnet"])"},
           {"除mlp外所有模型", R"(["cnn","resnet50","efficientnet"])"},
           {"mlp、cnn除外", R"(["resnet50","efficientnet"])"},
           {"不要cnn", R"(["mlp","resnet50","efficientnet"])"},
           // 除了 ... 还/也 is "besides", and "the others" with a named one is every choice.
           {"除了cnn以外，还要跑mlp", R"(["cnn","mlp"])"},
           {"除了cnn，其他模型也跑", R"(["mlp","cnn","resnet50","efficientnet"])"},
           {"all models", R"(["mlp","cnn","resnet50","efficientnet"])"},
           {"每个模型跑2次", R"(["mlp","cnn","resnet50","efficientnet"])"},
       }) {
    EXPECT_EQ(Values(recipe, text, "model"), want) << text;
  }
  Result<Plan> r = PlanInstruction(recipe, "every model except mlp and cnn");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->understood[0],
            "model: resnet50, efficientnet (all but mlp, cnn, from 'every model except mlp and "
            "cnn')");
  // A word after "except" that is no choice is reported, never dropped.
  r = PlanInstruction(recipe, "every model except vgg");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Json(r->ignored), Json({"except vgg"}));
  // "but" before no choice is just a word it could not use.
  r = PlanInstruction(recipe, "cnn, but faster");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Json(r->ignored), Json({"but faster"}));
  EXPECT_NE(Values(recipe, "all models except mlp, cnn, resnet50 and efficientnet", "model")
                .find("leaves no model to run"),
            std::string::npos);
}

TEST(PlannerTest, MeasureWordsAreCountsNotValues) {
  Recipe recipe = LoadTestRecipe();
  EXPECT_EQ(Values(recipe, "三档学习率：0.1、0.01、0.001", "lr"), "[0.1,0.01,0.001]");
  EXPECT_EQ(Values(recipe, "两组批大小：32和64", "batch_size"), "[32,64]");
  EXPECT_EQ(Values(recipe, "3 levels of learning rate: 0.1, 0.01, 0.001", "lr"),
            "[0.1,0.01,0.001]");
  EXPECT_EQ(Values(recipe, "lr 0.1, 0.01, 0.001 (3 values)", "lr"), "[0.1,0.01,0.001]");
  EXPECT_EQ(Values(recipe, "五个种子", "seed"), "[0,1,2,3,4]");
  EXPECT_EQ(Values(recipe, "比较三种模型：mlp、cnn和resnet50", "model"), R"(["mlp","cnn","resnet50"])");
  // A unit-like count with nothing else to give values stays a value: "训练5个epoch" is 5 epochs.
  EXPECT_EQ(Values(recipe, "训练5个epoch", "epochs"), "[5]");
  // The count is checked against the values given.
  EXPECT_EQ(Values(recipe, "两组批大小：32、64和128", "batch_size"),
            "error: '两组批大小' asks for 2 values of batch_size, but the instruction gives 3 (32, "
            "64, 128)");
  EXPECT_NE(Values(recipe, "三档学习率", "lr").find("asks for 3 values of lr, but the instruction "
                                                    "gives none"),
            std::string::npos);
  EXPECT_NE(Values(recipe, "对比两种模型", "model").find("names none; model is one of mlp"),
            std::string::npos);
}

TEST(PlannerTest, RunsAreRepeats) {
  Recipe recipe = LoadTestRecipe();
  for (const char* text : {"5 runs of cnn", "cnn, 5 repeats", "run cnn 5 times", "cnn跑五次",
                           "cnn重复5次", "cnn做5次重复", "cnn, 5 independent runs", "5个重复，cnn"}) {
    EXPECT_EQ(Values(recipe, text, "seed"), "[0,1,2,3,4]") << text;
  }
  // "runs" without a count is a plain word, as before.
  Result<Plan> r = PlanInstruction(recipe, "compare the runs of mlp and cnn");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["seed"], Json::array({0}));
  EXPECT_TRUE(r->ignored.empty()) << Json(r->ignored).dump();
}

TEST(PlannerTest, IsDeterministic) {
  Recipe recipe = LoadTestRecipe();
  const char* text = "compare mlp vs cnn, lr 1e-4 to 1e-2 (3 values), 3 seeds, urgent";
  Result<Plan> a = PlanInstruction(recipe, text);
  Result<Plan> b = PlanInstruction(recipe, text);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->spec_yaml, b->spec_yaml);
  EXPECT_EQ(a->spec["name"], "model-mlp-cnn-x-lr-0.0001-0.001-0.01-x-seed-0-1-2");
}

TEST(PlannerTest, RepeatsNeedASeedParameter) {
  Result<Recipe> recipe = ParseRecipe("command: echo {x}\nparams:\n  x: {type: int, default: 1}\n",
                                      "drover.yaml", "/tmp");
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  Result<Plan> r = PlanInstruction(*recipe, "x=1,2, repeat 3 times");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no seed parameter"), std::string::npos)
      << r.status().message();
}

TEST(PlannerTest, StringParametersTakeWordsAfterAnEqualsSign) {
  Result<Recipe> recipe = ParseRecipe(
      "command: echo {optim} {steps}\nparams:\n  optim: {default: adam, aliases: [optimizer, 优化器]}\n"
      "  steps: 100\n",
      "drover.yaml", "/tmp");
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  Result<Plan> r = PlanInstruction(*recipe, "optimizer=sgd,adamw for 200 steps");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["optim"], Json({"sgd", "adamw"}));
  EXPECT_EQ(r->spec["params"]["steps"], Json({200}));
  Result<Spec> spec = ParsePlan(*r);
  ASSERT_TRUE(spec.ok()) << spec.status().message() << "\n" << r->spec_yaml;
  EXPECT_EQ(ExpandGrid(*spec).size(), 2u);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(PlanSelectionTest, TickedValuesMakeTheSameSpecAsTheInstruction) {
  Recipe recipe = LoadTestRecipe();
  Selection sel;
  sel.params["model"] = {"ResNet50", "efficientnet", "resnet50"};  // any case; duplicates dropped
  sel.params["batch_size"] = {32, "64"};                          // typed text is a number too
  sel.objective = "训练曲线";                                         // an alias
  Result<Plan> ticked = PlanSelection(recipe, sel);
  ASSERT_TRUE(ticked.ok()) << ticked.status().message();
  Result<Plan> said = PlanInstruction(recipe, "对比ResNet50和EfficientNet在batch_size=32,64时的训练曲线");
  ASSERT_TRUE(said.ok());
  EXPECT_EQ(ticked->spec, said->spec);
  EXPECT_EQ(ticked->spec_yaml, said->spec_yaml);
  EXPECT_EQ(ticked->understood,
            (std::vector<std::string>{"model: resnet50, efficientnet", "batch_size: 32, 64",
                                      "objective: loss min"}));
  Result<Spec> spec = ParsePlan(*ticked);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(ExpandGrid(*spec).size(), 4u);
}

TEST(PlanSelectionTest, BadValuesNameTheParameterAndWhatItTakes) {
  Recipe recipe = LoadTestRecipe();
  Selection sel;
  sel.params["modle"] = {"cnn"};
  Result<Plan> r = PlanSelection(recipe, sel);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no parameter 'modle' (did you mean 'model'?)"),
            std::string::npos)
      << r.status().message();
  sel.params.clear();
  sel.params["batch_size"] = {"32.5"};
  r = PlanSelection(recipe, sel);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "batch_size takes whole numbers; '32.5' is not one");
  sel.params.clear();
  sel.params["model"] = {"vgg"};
  r = PlanSelection(recipe, sel);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "model is one of mlp, cnn, resnet50, efficientnet; 'vgg' is not");
  sel.params.clear();
  sel.params["lr"] = {"1e999"};
  r = PlanSelection(recipe, sel);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "lr takes numbers; '1e999' is not one");
  sel.params["lr"] = {100};
  r = PlanSelection(recipe, sel);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the form gives lr = 100.0, above its max 10"),
            std::string::npos)
      << r.status().message();
  sel.params.clear();
  sel.objective = "speed";
  r = PlanSelection(recipe, sel);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no metric 'speed'; it has val_acc, loss"), std::string::npos);
}

TEST(PlanSelectionTest, NothingTickedIsTheRecipesDefaults) {
  Recipe recipe = LoadTestRecipe();
  Result<Plan> r = PlanSelection(recipe, Selection{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec["params"]["model"], Json({"mlp"}));
  EXPECT_EQ(r->spec["params"]["batch_size"], Json({64}));
  EXPECT_TRUE(r->understood.empty());
}

TEST(SuggestedValuesTest, AroundTheDefault) {
  Recipe recipe = LoadTestRecipe();
  auto by_name = [&](const std::string& n) {
    for (const auto& p : recipe.params) {
      if (p.name == n) return SuggestedValues(p);
    }
    return std::vector<Json>{};
  };
  EXPECT_EQ(Json(by_name("model")), Json({"mlp", "cnn", "resnet50", "efficientnet"}));
  EXPECT_EQ(Json(by_name("batch_size")), Json({16, 32, 64, 128, 256}));
  EXPECT_EQ(Json(by_name("lr")), Json({0.0001, 0.0003, 0.001, 0.003, 0.01}));
  EXPECT_EQ(Json(by_name("epochs")), Json({2, 5, 10}));
  EXPECT_EQ(Json(by_name("seed")), Json({0, 1, 2, 3}));
}

TEST(PlannerTest, TheRecipesSpecKeysAreDefaultsOfEveryPlannedSpec) {
  Result<Recipe> recipe = ParseRecipe(
      "command: python3 t.py --lr {lr} --bs {bs}\nparams:\n  lr: 0.1\n  bs: 64\ngpus: 1\n"
      "timeout: 2h\nretries: 3\nretry_backoff: 30s\nenv: {OMP_NUM_THREADS: \"4\", TAG: x}\n"
      "resources: {gpu_memory: 6GiB, cpus: 2}\npriority: 5\nmonitor: {stall: 10m}\n"
      "oom: {param: bs}\nmax_parallel: 2\n",
      "drover.yaml", "/tmp");
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  Result<Plan> plan = PlanInstruction(*recipe, "lr 0.1 and 0.01");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  Result<Spec> spec = ParsePlan(*plan);
  ASSERT_TRUE(spec.ok()) << spec.status().message() << "\n" << plan->spec_yaml;
  EXPECT_EQ(spec->timeout_ms, 2 * 3600 * 1000);
  EXPECT_EQ(spec->retries, 3);
  EXPECT_TRUE(spec->retries_given);
  EXPECT_EQ(spec->retry_backoff_ms, 30'000);
  EXPECT_EQ(spec->env.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(spec->env.at("TAG"), "x");
  EXPECT_EQ(spec->resources.gpus, 1);
  EXPECT_EQ(spec->resources.gpu_memory, 6LL << 30);
  EXPECT_EQ(spec->resources.cpus, 2);
  EXPECT_EQ(spec->priority, 5);
  EXPECT_EQ(spec->max_parallel, 2);
  EXPECT_EQ(spec->monitor.stall_ms, 10 * 60 * 1000);
  // The same in the plan's JSON (what MCP's plan returns and submit takes back).
  EXPECT_EQ(plan->spec["retries"], 3);
  EXPECT_EQ(plan->spec["timeout"], "2h");
  EXPECT_EQ(plan->spec["resources"]["gpu_memory"], "6GiB");
  EXPECT_EQ(plan->spec["resources"]["gpus"], 1);
  // What the instruction says wins over the recipe.
  Result<Plan> urgent = PlanInstruction(*recipe, "lr 0.1 on 2 gpus, priority 9");
  ASSERT_TRUE(urgent.ok()) << urgent.status().message();
  EXPECT_EQ(urgent->spec["resources"]["gpus"], 2);
  EXPECT_EQ(urgent->spec["priority"], 9);
  // "on 4 gpus" for several runs sets max_parallel over the recipe's, once.
  Result<Plan> shared = PlanInstruction(*recipe, "lr 0.1 and 0.01 on 4 gpus");
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  Result<Spec> shared_spec = ParsePlan(*shared);
  ASSERT_TRUE(shared_spec.ok()) << shared_spec.status().message() << "\n" << shared->spec_yaml;
  EXPECT_EQ(shared_spec->max_parallel, 4);
  EXPECT_EQ(shared_spec->resources.gpus, 1);
  EXPECT_EQ(shared_spec->env.at("OMP_NUM_THREADS"), "4");  // the recipe's env stays
  EXPECT_EQ(shared_spec->resources.gpu_memory, 6LL << 30);
}

TEST(PlannerTest, ARecipesBadSpecKeyIsAnErrorAtItsPlace) {
  for (auto [yaml, want] : std::vector<std::pair<std::string, std::string>>{
           {"command: x\nretries: three\n",
            "drover.yaml:2:10: retries must be a non-negative integer, got 'three'"},
           {"command: x\ntimeout: {a: 1}\n", "drover.yaml:2:10: timeout must be a duration"},
           {"command: x\ngpus: 1\nresources: {gpus: 2}\n",
            "drover.yaml:3:12: resources.gpus and gpus both say how many GPUs a run gets"},
           {"command: x\nretires: 2\n", "drover.yaml:2:1: unknown key 'retires'"},
           {"command: x\nname: other\n", "drover.yaml:2:1: unknown key 'name'"}}) {
    Result<Recipe> recipe = ParseRecipe(yaml, "drover.yaml", "/tmp");
    ASSERT_FALSE(recipe.ok()) << yaml;
    EXPECT_NE(recipe.status().message().find(want), std::string::npos)
        << yaml << " -> " << recipe.status().message();
  }
}

TEST(PlannerTest, ANameWithOverridesSaysThem) {
  EXPECT_EQ(NameWithOverrides("model-mlp-cnn", {"epochs=3"}), "model-mlp-cnn-epochs-3");
  EXPECT_EQ(NameWithOverrides("lr", {"lr=[0.1,0.01]", "resources.gpus=0"}),
            "lr-lr-0.1-0.01-resources.gpus-0");
  EXPECT_EQ(NameWithOverrides("x", {}), std::nullopt);
  EXPECT_EQ(NameWithOverrides("x", {"rerun=true"}), std::nullopt);
  EXPECT_EQ(NameWithOverrides("x", {"force=all", "epochs=3"}), "x-epochs-3");
  EXPECT_EQ(NameWithOverrides("x", {"epochs=3", "name=mine"}), std::nullopt);
  // Long ones stay at most 80 characters and distinct.
  auto a = NameWithOverrides("x", {std::string(200, 'a') + "=1"});
  auto b = NameWithOverrides("x", {std::string(200, 'a') + "=2"});
  ASSERT_TRUE(a && b);
  EXPECT_LE(a->size(), 80u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace drover
