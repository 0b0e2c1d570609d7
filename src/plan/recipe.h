#pragma once
// A recipe (drover.yaml at a project's root) says how the project runs, in words the planner can
// match: the command template, each parameter's type, choices, default and aliases (in any
// language), and the metrics with their direction and aliases:
//
//   command: /usr/bin/python3 train.py --model {model} --lr {lr}
//   gpus: 1                      # optional: GPUs per run unless the instruction says otherwise
//   params:
//     model: {choices: [mlp, cnn], aliases: [模型, arch]}
//     lr: {type: float, default: 0.001, aliases: [learning rate, 学习率]}
//     seed: 0                    # shorthand: a default (the type follows it)
//     epochs: {type: int, default: 5, min: 1, max: 1000}   # planned values must lie in the range
//     batch_size: {type: int, default: 64, scale: log}       # ranges with a count: geometric
//   metrics:
//     val_acc: {mode: max, aliases: [accuracy, 准确率]}
//   timeout: 2h                  # optional: any spec key but name, workdir, command, params and
//   retries: 2                   # objective is a default of every planned spec
//   resources: {gpu_memory: 8GiB}
//
// Errors point at file:line:column and suggest the key that was meant, like the spec parser.
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/spec.h"

namespace drover {

struct RecipeParam {
  std::string name;
  std::string type;  // int | float | string | choice
  std::vector<Json> choices;  // only for type choice
  // null when the recipe gives none; a choice parameter then defaults to its first choice, and
  // any other parameter must be named by the instruction.
  Json default_value;
  std::vector<std::string> aliases;  // as written; the planner normalises them
  // The range a planned value of an int or float parameter must lie in (inclusive), from the
  // recipe's `min:`/`max:`. Without `min:` a value may not be negative (a "-5 epochs" is a slip far
  // more often than meant), unless the default is; without `max:` there is no upper bound.
  std::optional<double> min;
  std::optional<double> max;
  // How a range with a count is spaced, from the recipe's `scale:`: "log" (geometric, when both
  // ends are above 0), "linear", or "" for the planner's rule (a float range spanning 10x or more
  // is geometric, anything else linear). The instruction's own "log"/"linear" wins.
  std::string scale;
};

struct RecipeMetric {
  std::string name;
  bool maximize = true;  // mode: max (default) or min
  std::vector<std::string> aliases;
};

struct Recipe {
  std::string command;  // a spec command template: {name} placeholders, each a parameter
  std::vector<RecipeParam> params;    // in file order (the grid order of planned specs)
  std::vector<RecipeMetric> metrics;  // in file order
  int gpus = 1;        // GPUs per run when the instruction does not say
  // Spec keys the recipe sets for every planned spec (timeout, retries, env, resources, ...), in
  // file order: each key with its value as YAML text, checked as the spec parser checks it.
  std::vector<std::pair<std::string, std::string>> spec_defaults;
  std::string source;  // the file, for messages
  std::string dir;     // the project folder: the workdir of planned specs
};

// `source` names the recipe in errors; `dir` becomes Recipe::dir.
Result<Recipe> ParseRecipe(const std::string& yaml, const std::string& source,
                           const std::string& dir);
// Reads and parses a drover.yaml; its folder is the project's folder.
// The largest recipe read: a regular file of at most this many bytes (common/files.h).
inline constexpr size_t kMaxRecipeBytes = 1 << 20;
// `owner`, when set: only a file of that uid is read (checked on the descriptor read; a daemon
// reading a recipe a user named, docs/security.md).
Result<Recipe> LoadRecipe(const std::string& path, std::optional<int64_t> owner = std::nullopt);
// The path of drover.yaml in start_dir or the nearest folder above it. NotFound says how to
// write one.
Result<std::string> FindRecipe(const std::string& start_dir);

}  // namespace drover
