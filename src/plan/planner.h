#pragma once
// The planner: an English or Chinese instruction + a recipe -> an experiment spec. Deterministic
// (no model, no network): the instruction is normalised, cut into tokens against the recipe's
// words, and a few patterns read values from them. Nothing it could not use is dropped silently:
// such words come back in Plan::ignored, and the caller shows them.
//
// What it reads (tests/data/planner/cases.jsonl has ~170 examples in both languages;
// docs/planner.md, "Plain words", gives the rules):
//   choices      "ResNet50", "efficient-net", "model=cnn,mlp"  (case- and punctuation-insensitive)
//   value lists  "batch_size=32,64", "bs 32 and 64", "批大小32和64", "32、64", "[32, 64]"
//   ranges       "lr 1e-4 to 1e-2, 3 log-spaced values", "学习率从0.001到0.1取3个值",
//                "3 values from 1e-4 to 1e-2", "在1e-4到1e-2之间取3个学习率",
//                "epochs 10-30 step 10", "batch size 16 to 128" (powers of two)
//                Without "log"/"linear" or the recipe's scale:, a float range spanning 10x or
//                more is log-spaced.
//   sequences    "start at 0.1 and divide by 10, 3 values", "double from 32 to 256", "每次乘以2"
//   leaving out  "every model except mlp", "cnn but not mlp", "除了mlp以外的所有模型", "mlp除外"
//   counts       "三档学习率", "两组batch size", "3 levels of lr": a count checked against the values
//   numerals     32, 1e-4, three, 一百二十八, 三万二千七百六十八, 零点零一, 3万 (plan/numerals.h)
//   units        "for 10 epochs", "训练20轮" (a number right before a parameter's name)
//   repeats      "3 seeds", "repeat 3 times", "5 runs", "重复3次", "跑五次" -> the seed parameter
//                = [0, 1, 2, ...]
//   objective    any metric name or alias: "by accuracy", "比较准确率", "训练曲线" (recipe's mode)
//   GPUs per run "2 GPUs each", "每个用2张卡", "gpus=2", "单卡", "on cpu" (0)
//   priority     "urgent"/"asap"/"紧急"/"加急" -> 10, "low priority"/"不急" -> -10, "priority 5"
// Parameters the instruction does not name keep the recipe's default (one value).
//
// Filler: common words that carry no setting ("please", "run", "the", "with", "for", "请",
// "帮我", "的", "在", "时", "训练", ...) are understood as filler and appear in neither list.
// Every other word the planner could not attach to a setting is listed in `ignored`, as are
// numbers it could not place and parameters named without a value.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/spec.h"
#include "plan/recipe.h"

namespace drover {

struct Plan {
  // {"name", "command", "workdir", "params": {name: [values]}, "objective": {"metric", "mode"}
  // (absent when no metric was named), "resources": {"gpus": N}, "priority": N}
  Json spec;
  // The same spec as YAML that ParseSpecString accepts; parameters in recipe order (the grid's
  // order), single values as scalars.
  std::string spec_yaml;
  // Short phrases, one per setting read: "model: resnet50, efficientnet (from 'ResNet50和
  // EfficientNet')".
  std::vector<std::string> understood;
  // Words (or runs of adjacent words) of the instruction that were not used, as written.
  std::vector<std::string> ignored;
};

// InvalidArgument when the instruction names nothing usable (the message lists the recipe's
// parameters, choices and metrics), names a choice the recipe does not have, or gives a value
// that does not fit its parameter's type.
Result<Plan> PlanInstruction(const Recipe& recipe, std::string_view instruction);

// A name of at most 80 characters: a longer one keeps its first 70 and a hash of the whole, so
// names stay distinct.
std::string CapName(std::string name);
// The name of a planned spec submitted with --set overrides: the plan's name with the overrides
// ("model-mlp-cnn-epochs-3"), so an experiment's name says what it ran. nullopt when there are
// none, or one sets the name itself.
std::optional<std::string> NameWithOverrides(const std::string& name,
                                             const std::vector<std::string>& overrides);

// Values ticked in a form (the web UI's new-experiment page) instead of an instruction.
struct Selection {
  std::map<std::string, std::vector<Json>> params;  // parameter -> values; absent: its default
  std::string objective;            // a metric of the recipe (name or alias); "" = none
  std::optional<int> gpus;          // GPUs per run; the recipe's when absent
  std::optional<int> priority;
};
// The same spec as PlanInstruction would make. Values are checked against their parameter
// ("32" and 32 are both an int; a choice must be one of the recipe's, in any case); duplicates
// are dropped. InvalidArgument names the parameter and what it takes, with did-you-mean for
// unknown names.
Result<Plan> PlanSelection(const Recipe& recipe, const Selection& selection);

// How many runs a plan makes, checked the way a submitted spec would be (so what is shown is what
// would run): the spec's parse error otherwise.
Result<int> PlannedRuns(const Plan& plan, const Recipe& recipe);

// Values worth a checkbox for a parameter: its choices; for numbers, values around the default
// (powers of two around an int batch size, x0.1/x0.3/x1/x3/x10 for a float, 0..3 for a seed);
// else the default alone (or nothing).
std::vector<Json> SuggestedValues(const RecipeParam& param);

}  // namespace drover
