#include "plan/recipe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace drover {
namespace {

namespace fs = std::filesystem;

Result<Recipe> Parse(const std::string& yaml) { return ParseRecipe(yaml, "drover.yaml", "/proj"); }

std::string Error(const std::string& yaml) {
  Result<Recipe> r = Parse(yaml);
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  return r.status().message();
}

TEST(RecipeTest, ReadsTheExample) {
  Result<Recipe> r = LoadRecipe(std::string(DROVER_SOURCE_DIR) + "/tests/data/planner/recipe.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dir, std::string(DROVER_SOURCE_DIR) + "/tests/data/planner");
  ASSERT_EQ(r->params.size(), 5u);
  EXPECT_EQ(r->params[0].name, "model");
  EXPECT_EQ(r->params[0].type, "choice");
  EXPECT_EQ(r->params[0].choices.size(), 4u);
  EXPECT_TRUE(r->params[0].default_value.is_null());
  EXPECT_EQ(r->params[0].aliases[0], "模型");
  EXPECT_EQ(r->params[1].type, "int");
  EXPECT_EQ(r->params[1].default_value, 64);
  EXPECT_EQ(r->params[2].type, "float");
  EXPECT_TRUE(r->params[2].default_value.is_number_float());
  ASSERT_EQ(r->metrics.size(), 2u);
  EXPECT_TRUE(r->metrics[0].maximize);
  EXPECT_FALSE(r->metrics[1].maximize);
  EXPECT_EQ(r->metrics[1].aliases[1], "训练曲线");
  EXPECT_EQ(r->gpus, 1);
}

TEST(RecipeTest, ShorthandsInferTheType) {
  Result<Recipe> r = Parse(
      "command: run {a} {b} {c} {d}\ngpus: 0\nparams:\n  a: 3\n  b: 0.5\n  c: [x, y]\n  d: hello\n"
      "metrics:\n  acc:\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params[0].type, "int");
  EXPECT_EQ(r->params[1].type, "float");
  EXPECT_EQ(r->params[2].type, "choice");
  EXPECT_EQ(r->params[3].type, "string");
  EXPECT_EQ(r->metrics[0].name, "acc");
  EXPECT_TRUE(r->metrics[0].maximize);
  EXPECT_EQ(r->gpus, 0);
}

TEST(RecipeTest, ErrorsPointAtTheSpot) {
  EXPECT_EQ(Error("comand: x\n"), "drover.yaml:1:1: unknown key 'comand'; did you mean 'command'?");
  EXPECT_EQ(Error("params: {}\n"),
            "drover.yaml:1:1: missing required key 'command'; add the command template, such as "
            "'command: python train.py --lr {lr}'");
  EXPECT_EQ(Error("command: run {lr}\nparams:\n  lr: {typ: float}\n"),
            "drover.yaml:3:8: unknown key 'typ' under params.lr; did you mean 'type'?");
  EXPECT_EQ(Error("command: run {lr}\nparams:\n  lr: {type: flaot}\n"),
            "drover.yaml:3:14: params.lr.type 'flaot' is not a type; did you mean 'float'?");
  EXPECT_EQ(Error("command: run {lr}\nparams:\n  lr: {type: int, default: 0.5}\n"),
            "drover.yaml:3:28: params.lr.default '0.5' is not an integer");
  EXPECT_EQ(Error("command: run {m}\nparams:\n  m: {choices: [a, b], default: c}\n"),
            "drover.yaml:3:33: params.m.default \"c\" is not one of the choices (a list)");
  EXPECT_EQ(Error("command: run {lr}\nparams:\n  l: 1\n"),
            "drover.yaml:1:10: command uses {lr} but params has no 'lr'; did you mean '{l}'?");
  EXPECT_EQ(Error("command: run\nmetrics:\n  acc: {mode: up}\n"),
            "drover.yaml:3:15: metrics.acc.mode must be max or min, got 'up'");
  EXPECT_EQ(Error("command: run\nmetrics:\n  acc: {mode: max, alias: [a]}\n"),
            "drover.yaml:3:20: unknown key 'alias' under metrics.acc; did you mean 'aliases'?");
  EXPECT_EQ(Error("command: run\nparams: [a]\n"),
            "drover.yaml:2:9: params must be a mapping of parameter names, got a list");
  EXPECT_EQ(Error("command: [run\n"),
            "drover.yaml:2:1: YAML syntax error: end of sequence flow not found; fix the YAML at "
            "this position");
  EXPECT_EQ(Error(""), "drover.yaml:1:1: the recipe is empty; add command: and params:");
  EXPECT_EQ(Error("command: run\nparams:\n  x: {aliases: {a: b}}\n"),
            "drover.yaml:3:16: params.x.aliases must be words or a list of words, got a mapping");
}

TEST(RecipeTest, NumberParametersMayDeclareARange) {
  Result<Recipe> r = Parse("command: x {lr} {n}\nparams:\n  lr: {default: 0.1, min: 1e-6, max: 1}\n"
                           "  n: {type: int, default: 2, min: 1}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->params[0].min, 1e-6);
  EXPECT_EQ(r->params[0].max, 1.0);
  EXPECT_EQ(r->params[1].min, 1.0);
  EXPECT_FALSE(r->params[1].max.has_value());
  EXPECT_EQ(Error("command: x {lr}\nparams:\n  lr: {default: 0.1, min: 1, max: 0.5}\n"),
            "drover.yaml:3:35: params.lr.max 0.5 is below its min 1");
  EXPECT_EQ(Error("command: x {lr}\nparams:\n  lr: {default: 2, min: 0, max: 1}\n"),
            "drover.yaml:3:17: params.lr.default 2 is outside its range [0, 1]");
  EXPECT_EQ(Error("command: x {m}\nparams:\n  m: {choices: [a, b], min: 0}\n"),
            "drover.yaml:3:24: params.m.min bounds a number, but m is a choice parameter; remove it");
  EXPECT_EQ(Error("command: x {lr}\nparams:\n  lr: {default: 0.1, max: big}\n"),
            "drover.yaml:3:27: params.lr.max must be a number, got 'big'");
}

TEST(RecipeTest, FindsTheRecipeAbove) {
  fs::path root = fs::temp_directory_path() / ("drover-recipe-" + std::to_string(::getpid()));
  fs::create_directories(root / "src" / "deep");
  std::ofstream(root / "drover.yaml") << "command: echo hi\n";
  Result<std::string> found = FindRecipe((root / "src" / "deep").string());
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(*found, (root / "drover.yaml").string());
  fs::remove(root / "drover.yaml");
  Result<std::string> missing = FindRecipe((root / "src").string());
  if (!fs::exists("/drover.yaml") && !fs::exists(fs::temp_directory_path() / "drover.yaml")) {
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), Code::kNotFound);
    EXPECT_NE(missing.status().message().find("write one at the project's root"),
              std::string::npos);
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace drover
