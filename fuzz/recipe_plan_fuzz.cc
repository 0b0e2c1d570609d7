// The recipe parser and the planner. An input "RECIPE\n%%\nINSTRUCTION" plans the instruction
// against that recipe; without "%%" the whole input is an instruction for the test recipe
// (tests/data/planner/recipe.yaml). A plan the planner returns must be a spec that parses (or one
// over max_runs, which the parser refuses with the count): what `drover plan` shows would run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "plan/planner.h"
#include "plan/recipe.h"

namespace {

const char* kRecipe = R"(command: /usr/bin/python3 train.py --model {model} --batch-size {batch_size} --lr {lr} --epochs {epochs} --seed {seed}
params:
  model: {choices: [mlp, cnn, resnet50, efficientnet], aliases: [模型, arch, architecture, network]}
  batch_size: {type: int, default: 64, min: 1, max: 65536, aliases: [bs, batch size, 批大小, 批量大小]}
  lr: {type: float, default: 0.001, min: 1e-7, max: 10, aliases: [learning rate, 学习率]}
  epochs: {type: int, default: 5, min: 1, max: 100000, aliases: [epoch, 轮, 轮数]}
  seed: {type: int, default: 0, aliases: [随机种子, 种子]}
metrics:
  val_acc: {mode: max, aliases: [accuracy, 准确率, 验证准确率]}
  loss: {mode: min, aliases: [training curve, 训练曲线, 损失]}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover;
  static const Recipe kDefault = [] {
    Result<Recipe> r = ParseRecipe(kRecipe, "recipe.yaml", "/tmp");
    if (!r.ok()) std::abort();
    return *r;
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  Recipe recipe = kDefault;
  std::string instruction = text;
  if (size_t cut = text.find("\n%%\n"); cut != std::string::npos) {
    Result<Recipe> r = ParseRecipe(text.substr(0, cut), "recipe.yaml", "/tmp");
    if (!r.ok()) return 0;
    recipe = *r;
    instruction = text.substr(cut + 4);
  }
  Result<Plan> plan = PlanInstruction(recipe, instruction);
  if (!plan.ok()) return 0;
  Result<int> runs = PlannedRuns(*plan, recipe);
  // Too many runs is what a submit would say too, and `drover plan` shows it: not a defect.
  if (!runs.ok() && runs.status().message().find("over the limit of") == std::string::npos) {
    std::fprintf(stderr, "a plan that does not parse: %s\n%s\n", runs.status().message().c_str(),
                 plan->spec_yaml.c_str());
    std::abort();
  }
  return 0;
}
