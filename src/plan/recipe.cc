#include "plan/recipe.h"

#include "common/files.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <sstream>

#include "common/strings.h"
#include "spec/expand.h"
#include "spec/spec_parser.h"
#include "spec/yaml_fields.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using YAML::Node;
using yaml::Contains;
using yaml::Describe;
using yaml::Field;
using yaml::Find;

// Spec keys a recipe may set for every planned spec (the planner writes the others).
const std::vector<std::string> kSpecDefaultKeys = {
    "shell",   "resources",     "priority", "group", "preemptible", "max_parallel", "max_runs",
    "retries", "retry_backoff", "timeout",  "env",   "oom",         "monitor", "data",
    "checkpoint", "tensorboard", "fail_fast"};
const std::vector<std::string> kTopKeys = [] {
  std::vector<std::string> keys = {"command", "gpus", "params", "metrics"};
  keys.insert(keys.end(), kSpecDefaultKeys.begin(), kSpecDefaultKeys.end());
  return keys;
}();
const std::vector<std::string> kParamKeys = {"type", "choices", "default", "aliases",
                                             "min",  "max",     "scale"};
const std::vector<std::string> kMetricKeys = {"mode", "aliases"};
const std::vector<std::string> kTypes = {"int", "float", "string", "choice"};


bool IsName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// The recipe's parser: the shared field reader (spec/yaml_fields.h) and one method per part.
class RecipeParser : public yaml::Reader {
 public:
  explicit RecipeParser(std::string source) : yaml::Reader(std::move(source)) {}
  Result<Recipe> Parse(const std::string& yaml, const std::string& dir);

 private:
  Result<std::vector<Field>> ReadMap(const Node& map, const std::string& section,
                                     const std::vector<std::string>* valid) const;
  Result<Json> Scalar(const Node& n, const std::string& path) const;
  Result<std::vector<std::string>> Aliases(const Field& f) const;
  Result<RecipeParam> Param(const Field& f) const;
  Result<RecipeMetric> Metric(const Field& f) const;
};

Result<std::vector<Field>> RecipeParser::ReadMap(const Node& map, const std::string& section,
                                                 const std::vector<std::string>* valid) const {
  if (!map.IsMap()) return std::vector<Field>{};  // callers say what a non-mapping should be
  yaml::MapRules rules;
  rules.valid = valid;
  rules.in = " under ";
  rules.key_hint = "";
  return yaml::Reader::ReadMap(map, map, section, rules);
}

// A YAML scalar as JSON, typed like the spec parser does (YAML 1.2 core schema: quoted text is a
// string, plain 5 an int, 0.001 and 1e-5 floats, true/false booleans).
Result<Json> RecipeParser::Scalar(const Node& n, const std::string& path) const {
  if (!n.IsScalar()) {
    return Err(n, fmt::format("{} must be a string or a number, got {}", path, Describe(n)));
  }
  yaml::Scalar s = yaml::Resolve(n);
  switch (s.kind) {
    case yaml::ScalarKind::kBool:
      return Json(s.b);
    case yaml::ScalarKind::kInt:
      return Json(s.i);
    case yaml::ScalarKind::kFloat:
      // JSON has no NaN or infinity: such a value stays the text it was written as.
      if (std::isfinite(s.d)) return Json(s.d);
      return Json(n.Scalar());
    default:
      return Json(n.Scalar());
  }
}

Result<std::vector<std::string>> RecipeParser::Aliases(const Field& f) const {
  std::vector<std::string> out;
  auto add = [&](const Node& n) -> Status {
    if (!n.IsScalar() || n.Scalar().empty()) {
      return Err(n.IsNull() ? f.at() : n,
                 fmt::format("{} must be words or a list of words, got {}", f.path, Describe(n)));
    }
    out.push_back(n.Scalar());
    return Status::Ok();
  };
  if (f.value.IsSequence()) {
    for (const Node& n : f.value) DROVER_RETURN_IF_ERROR(add(n));
  } else {
    DROVER_RETURN_IF_ERROR(add(f.value));
  }
  return out;
}

Result<RecipeParam> RecipeParser::Param(const Field& f) const {
  RecipeParam p;
  p.name = f.name;
  if (!IsName(p.name)) {
    return Err(f.key, fmt::format("parameter name '{}' may only hold letters, digits, '_' and '-', "
                                  "starting with a letter",
                                  p.name));
  }
  const Node* default_node = nullptr;
  const Node* choices_node = nullptr;
  const Field* type_field = nullptr;
  const Field* min_field = nullptr;
  const Field* max_field = nullptr;
  std::vector<Field> fields;
  if (f.value.IsMap()) {
    DROVER_ASSIGN_OR_RETURN(fields, ReadMap(f.value, f.path, &kParamKeys));
    if (const Field* d = Find(fields, "default")) default_node = &d->value;
    if (const Field* c = Find(fields, "choices")) choices_node = &c->value;
    type_field = Find(fields, "type");
    min_field = Find(fields, "min");
    max_field = Find(fields, "max");
    if (const Field* a = Find(fields, "aliases")) {
      DROVER_ASSIGN_OR_RETURN(p.aliases, Aliases(*a));
    }
  } else if (f.value.IsSequence()) {
    choices_node = &f.value;  // shorthand: model: [mlp, cnn]
  } else if (f.value.IsScalar()) {
    default_node = &f.value;  // shorthand: seed: 0
  } else {
    return Err(f.at(), fmt::format("{} is empty; give a default (seed: 0) or a mapping such as "
                                   "{{type: int, default: 0, aliases: [...]}}",
                                   f.path));
  }

  if (choices_node) {
    if (!choices_node->IsSequence() || choices_node->size() == 0) {
      return Err(*choices_node, fmt::format("{}.choices must be a non-empty list, got {}", f.path,
                                            Describe(*choices_node)));
    }
    for (const Node& c : *choices_node) {
      DROVER_ASSIGN_OR_RETURN(Json v, Scalar(c, f.path + ".choices"));
      p.choices.push_back(std::move(v));
    }
  }
  if (default_node) {
    DROVER_ASSIGN_OR_RETURN(p.default_value, Scalar(*default_node, f.path + ".default"));
  }

  if (type_field) {
    p.type = type_field->value.IsScalar() ? type_field->value.Scalar() : "";
    if (!Contains(kTypes, p.type)) {
      std::optional<std::string> close = ClosestMatch(p.type, kTypes);
      return Err(type_field->at(),
                 fmt::format("{}.type {} is not a type; {}", f.path, Describe(type_field->value),
                             close ? fmt::format("did you mean '{}'?", *close)
                                   : "use int, float, string or choice"));
    }
  } else if (!p.choices.empty()) {
    p.type = "choice";
  } else if (p.default_value.is_number_integer()) {
    p.type = "int";
  } else if (p.default_value.is_number()) {
    p.type = "float";
  } else {
    p.type = "string";
  }

  if (p.type == "choice" && p.choices.empty()) {
    return Err(type_field ? type_field->at() : f.key,
               fmt::format("{} is a choice without choices; add choices: [a, b]", f.path));
  }
  if (p.type != "choice" && !p.choices.empty()) {
    return Err(type_field->at(), fmt::format("{} has choices, so its type is choice, not {}; "
                                             "remove type: or the choices",
                                             f.path, p.type));
  }
  if (!p.default_value.is_null()) {
    const Node& at = *default_node;
    if (p.type == "choice" &&
        std::find(p.choices.begin(), p.choices.end(), p.default_value) == p.choices.end()) {
      return Err(at, fmt::format("{}.default {} is not one of the choices ({})", f.path,
                                 p.default_value.dump(), Describe(*choices_node)));
    }
    if (p.type == "int" && !p.default_value.is_number_integer()) {
      return Err(at, fmt::format("{}.default {} is not an integer", f.path, Describe(at)));
    }
    if (p.type == "float") {
      if (!p.default_value.is_number()) {
        return Err(at, fmt::format("{}.default {} is not a number", f.path, Describe(at)));
      }
      p.default_value = p.default_value.get<double>();
    }
    if (p.type == "string" && !p.default_value.is_string()) {
      p.default_value = at.Scalar();  // a string parameter keeps the text as written
    }
  }
  for (const Field* bound : {min_field, max_field}) {
    if (!bound) continue;
    if (p.type != "int" && p.type != "float") {
      return Err(bound->key, fmt::format("{}.{} bounds a number, but {} is a {} parameter; "
                                         "remove it",
                                         f.path, bound->name, p.name, p.type));
    }
    DROVER_ASSIGN_OR_RETURN(Json v, Scalar(bound->value, bound->path));
    if (!v.is_number()) {
      return Err(bound->at(), fmt::format("{} must be a number, got {}", bound->path,
                                          Describe(bound->value)));
    }
    (bound == min_field ? p.min : p.max) = v.get<double>();
  }
  if (const Field* scale = Find(fields, "scale")) {
    if (p.type != "int" && p.type != "float") {
      return Err(scale->key, fmt::format("{}.scale spaces a range of numbers, but {} is a {} "
                                         "parameter; remove it",
                                         f.path, p.name, p.type));
    }
    p.scale = scale->value.IsScalar() ? scale->value.Scalar() : "";
    if (p.scale != "log" && p.scale != "linear") {
      return Err(scale->at(), fmt::format("{}.scale must be log or linear, got {}", f.path,
                                          Describe(scale->value)));
    }
  }
  if (p.min && p.max && *p.min > *p.max) {
    return Err(max_field->at(), fmt::format("{}.max {} is below its min {}", f.path,
                                            max_field->value.Scalar(), min_field->value.Scalar()));
  }
  if (p.default_value.is_number()) {
    double d = p.default_value.get<double>();
    if ((p.min && d < *p.min) || (p.max && d > *p.max)) {
      return Err(*default_node, fmt::format("{}.default {} is outside its range [{}, {}]", f.path,
                                            p.default_value.dump(),
                                            p.min ? fmt::format("{}", *p.min) : "-inf",
                                            p.max ? fmt::format("{}", *p.max) : "inf"));
    }
  }
  return p;
}

Result<RecipeMetric> RecipeParser::Metric(const Field& f) const {
  RecipeMetric m;
  m.name = f.name;
  if (f.value.IsNull()) return m;  // val_acc:  (max, no aliases)
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("{} must be a mapping such as {{mode: max, aliases: [...]}}, "
                                   "got {}",
                                   f.path, Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, f.path, &kMetricKeys));
  if (const Field* mode = Find(fields, "mode")) {
    std::string v = mode->value.IsScalar() ? mode->value.Scalar() : "";
    if (v != "max" && v != "min") {
      return Err(mode->at(), fmt::format("{}.mode must be max or min, got {}", f.path,
                                         Describe(mode->value)));
    }
    m.maximize = v == "max";
  }
  if (const Field* a = Find(fields, "aliases")) {
    DROVER_ASSIGN_OR_RETURN(m.aliases, Aliases(*a));
  }
  return m;
}

Result<Recipe> RecipeParser::Parse(const std::string& yaml, const std::string& dir) {
  DROVER_ASSIGN_OR_RETURN(Node root, yaml::Load(yaml, source()));
  DROVER_RETURN_IF_ERROR(yaml::CheckScalarsUtf8(root, source()));
  if (root.IsNull()) {
    return InvalidArgument(fmt::format("{}:1:1: the recipe is empty; add command: and params:",
                                       source()));
  }
  if (!root.IsMap()) {
    return Err(root, fmt::format("the recipe must be a mapping (command:, params:, metrics:), got "
                                 "{}",
                                 Describe(root)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> top, ReadMap(root, "", &kTopKeys));

  Recipe r;
  r.source = source();
  r.dir = dir;
  const Field* command = Find(top, "command");
  if (!command) {
    return InvalidArgument(fmt::format("{}:1:1: missing required key 'command'; add the command "
                                       "template, such as 'command: python train.py --lr {{lr}}'",
                                       source()));
  }
  if (!command->value.IsScalar() || command->value.Scalar().empty()) {
    return Err(command->at(), fmt::format("command must be one line of text with {{param}} "
                                          "placeholders, got {}",
                                          Describe(command->value)));
  }
  r.command = command->value.Scalar();

  if (const Field* g = Find(top, "gpus")) {
    DROVER_ASSIGN_OR_RETURN(Json v, Scalar(g->value, "gpus"));
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1024) {
      return Err(g->at(), fmt::format("gpus must be a whole number >= 0, got {}",
                                      Describe(g->value)));
    }
    r.gpus = v.get<int>();
  }


  if (const Field* params = Find(top, "params")) {
    if (!params->value.IsMap()) {
      return Err(params->at(), fmt::format("params must be a mapping of parameter names, got {}",
                                           Describe(params->value)));
    }
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(params->value, "params", nullptr));
    for (const Field& f : fields) {
      DROVER_ASSIGN_OR_RETURN(RecipeParam p, Param(f));
      r.params.push_back(std::move(p));
    }
  }
  if (const Field* metrics = Find(top, "metrics")) {
    if (!metrics->value.IsMap()) {
      return Err(metrics->at(), fmt::format("metrics must be a mapping of metric names, got {}",
                                            Describe(metrics->value)));
    }
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                            ReadMap(metrics->value, "metrics", nullptr));
    for (const Field& f : fields) {
      DROVER_ASSIGN_OR_RETURN(RecipeMetric m, Metric(f));
      r.metrics.push_back(std::move(m));
    }
  }

  // Every placeholder must be a parameter, checked here so a planned spec always parses.
  std::vector<std::string> names;
  for (const RecipeParam& p : r.params) names.push_back(p.name);
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> used, PlaceholderNames(r.command));
  for (const std::string& u : used) {
    if (Contains(names, u)) continue;
    std::optional<std::string> close = ClosestMatch(u, names);
    return Err(command->value,
               fmt::format("command uses {{{}}} but params has no '{}'; {}", u, u,
                           close ? fmt::format("did you mean '{{{}}}'?", *close)
                                 : fmt::format("add it under params:")));
  }
  // Spec keys: each checked by the spec parser (in a spec with the recipe's parameters, which
  // oom.param names), its error placed at the key in the recipe.
  std::string probe_params;
  if (!r.params.empty()) {
    probe_params = "params: {";
    for (size_t i = 0; i < r.params.size(); ++i) {
      probe_params += (i ? ", " : "") + r.params[i].name + ": 1";
    }
    probe_params += "}\n";
  }
  for (const Field& f : top) {
    if (!Contains(kSpecDefaultKeys, f.name)) continue;
    YAML::Emitter e;
    e << YAML::Flow << f.value;
    const std::string text = e.c_str();
    std::string probe_text = text;
    if (f.name == "resources" && f.value.IsMap() && !f.value["gpus"]) {
      // Checked with the GPUs a planned run gets (gpu_memory needs some).
      YAML::Node with_gpus = YAML::Clone(f.value);
      with_gpus["gpus"] = r.gpus;
      YAML::Emitter eg;
      eg << YAML::Flow << with_gpus;
      probe_text = eg.c_str();
    }
    const std::string probe = "name: recipe-check\ncommand: \"true\"\n" + probe_params +
                              f.name + ": " + probe_text + "\n";
    auto checked = ParseSpecString(probe, "\x01", dir);
    if (!checked.ok()) {
      std::string msg = checked.status().message();
      // "\x01:line:col: message": the message alone, at the key's place in the recipe.
      if (msg.rfind("\x01:", 0) == 0) {
        size_t colon = msg.find(": ");
        msg = colon == std::string::npos ? msg : msg.substr(colon + 2);
      }
      return Err(f.at(), msg);
    }
    if (f.name == "resources" && f.value.IsMap() && f.value["gpus"]) {
      if (Find(top, "gpus")) {
        return Err(f.at(), "resources.gpus and gpus both say how many GPUs a run gets; keep one");
      }
      r.gpus = static_cast<int>(checked->resources.gpus);
    }
    r.spec_defaults.emplace_back(f.name, text);
  }
  return r;
}

}  // namespace

Result<Recipe> ParseRecipe(const std::string& yaml, const std::string& source,
                           const std::string& dir) {
  DROVER_RETURN_IF_ERROR(yaml::CheckUtf8(yaml, source, "the recipe"));
  return RecipeParser(source).Parse(yaml, dir);
}

Result<Recipe> LoadRecipe(const std::string& path, std::optional<int64_t> owner) {
  DROVER_ASSIGN_OR_RETURN(std::string text,
                          ReadBoundedFile(path, kMaxRecipeBytes, "recipe",
                                          "give the project's drover.yaml", owner));
  std::string dir = fs::absolute(fs::path(path)).parent_path().lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return ParseRecipe(text, path, dir);
}

Result<std::string> FindRecipe(const std::string& start_dir) {
  std::error_code ec;
  fs::path dir = fs::absolute(fs::path(start_dir), ec).lexically_normal();
  if (ec) return ErrnoStatus(fmt::format("resolving {}", start_dir), ec.value());
  for (fs::path d = dir;; d = d.parent_path()) {
    fs::path candidate = d / "drover.yaml";
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    if (d == d.root_path() || d.parent_path() == d) break;
  }
  return NotFound(fmt::format(
      "no drover.yaml in {} or any folder above it; write one at the project's root that says "
      "how the project runs, such as:\n"
      "  command: python train.py --model {{model}} --lr {{lr}}\n"
      "  params:\n"
      "    model: {{choices: [mlp, cnn], aliases: [arch]}}\n"
      "    lr: {{type: float, default: 0.001, aliases: [learning rate]}}\n"
      "  metrics:\n"
      "    val_acc: {{mode: max, aliases: [accuracy]}}",
      dir.string()));
}

}  // namespace drover
