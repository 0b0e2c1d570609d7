#include "spec/container_section.h"
#include "spec/executor_section.h"
#include "spec/yaml_fields.h"
#include "spec/spec_parser.h"
#include "spec/derived_metrics.h"

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <limits>
#include <optional>
#include <sstream>

#include "common/files.h"
#include "common/strings.h"
#include "search/space.h"
#include "spec/expand.h"
#include "spec/pipeline.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using YAML::Node;
using yaml::Contains;
using yaml::Describe;
using yaml::Field;
using yaml::Find;

const std::vector<std::string> kTopKeys = {
    "name",          "workdir", "command", "shell",     "params", "resources",
    "priority",      "group",   "preemptible", "max_parallel", "max_runs",    "retries",
    "retry_backoff", "timeout", "env",     "objective", "oom",    "monitor", "data",
    "search",        "prune",   "stages",      "force", "rerun", "executor", "container",
    "checkpoint",    "tensorboard", "metrics", "fail_fast"};
const std::vector<std::string> kStageKeys = {"command", "shell",     "needs",   "inputs",
                                             "outputs", "gather",    "resources", "retries",
                                             "timeout", "monitor",   "env"};
// The highest max_runs a spec may set: each run is a row in the store and in memory.
constexpr int64_t kMaxRunsLimit = 10'000'000;
const std::vector<std::string> kResourceKeys = {"gpus", "gpu_memory", "cpus", "memory"};
const std::vector<std::string> kObjectiveKeys = {"metric", "mode", "summary"};
const std::vector<std::string> kOomKeys = {"param", "min", "accumulate"};
const std::vector<std::string> kMonitorKeys = {"watch", "on_nan", "stall"};
const std::vector<std::string> kSearchKeys = {"sampler", "trials", "parallel", "seed",
                                              "multivariate"};
const std::vector<std::string> kPruneKeys = {"rule",      "metric",    "mode",
                                             "resource",  "min_steps", "reduction",
                                             "max_steps", "startup_trials"};
// The keys of a searched parameter's mapping: one distribution, and an optional condition.
const std::vector<std::string> kDistributionKeys = {"uniform", "log_uniform", "int", "int_log",
                                                    "choice",  "when"};
// Top-level keys that are mappings with a fixed set of keys, for --set paths and for pointing a
// misplaced key (gpus: at the top) at its section.
const yaml::Sections kSections = {
    {"resources", &kResourceKeys},
    {"objective", &kObjectiveKeys},
    {"oom", &kOomKeys},
    {"monitor", &kMonitorKeys},
    {"search", &kSearchKeys},
    {"prune", &kPruneKeys},
    {"executor", &ExecutorKeys(false)},
    {"container", &ContainerKeys()}};

using yaml::kStrTag;

// ---------------------------------------------------------------------------------------------
// Scalars are typed by the YAML 1.2 core schema: quoted text is always a string, and plain text
// is a bool only when it is true/false (so `no` and `yes` stay strings).

using yaml::Resolve;
using yaml::Scalar;
using Kind = yaml::ScalarKind;

// const lookup, so a missing key is not inserted.
Node Get(const Node& map, const std::string& key) { return map[key]; }

// Emits a node so that it parses back to the same values: yaml-cpp's own emitter drops the
// quotes of '5', which would turn the string into a number.
void Emit(YAML::Emitter& out, const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      if (n.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
      out << YAML::BeginMap;
      for (auto it = n.begin(); it != n.end(); ++it) {
        out << YAML::Key;
        Emit(out, it->first);
        out << YAML::Value;
        Emit(out, it->second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      if (n.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const Node& e : n) Emit(out, e);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      if (n.Tag() == "!" || n.Tag() == kStrTag) {
        out << YAML::DoubleQuoted << n.Scalar();
      } else {
        if (!n.Tag().empty() && n.Tag() != "?") out << YAML::VerbatimTag(n.Tag());
        out << n.Scalar();
      }
      break;
    default:
      out << YAML::Null;
      break;
  }
}

bool IsSpecName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool IsParamName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string Normalize(const fs::path& p) {
  std::string s = fs::absolute(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// ---------------------------------------------------------------------------------------------

class SpecParser : public yaml::Reader {
 public:
  SpecParser(std::string display, std::string base_dir)
      : yaml::Reader(display), display_(std::move(display)), base_dir_(std::move(base_dir)) {}

  Result<Spec> Parse(const std::string& yaml, const std::vector<std::string>& overrides);

 private:
  // Nodes that came from --set are named by the override instead of a file position.
  std::string Where(const Node& n) const override;
  Status ErrAtStart(std::string_view msg) const {
    return InvalidArgument(fmt::format("{}:1:1: {}", display_, msg));
  }

  Status ApplyOverride(Node& root, const std::string& text);
  void Track(const Node& n, const std::string& text);

  Result<std::vector<Field>> ReadMap(const Node& map, const std::string& section,
                                     const std::vector<std::string>* valid) const;
  Result<OrderedJson> ParamValue(const Node& n, const Field& f) const;

  Status ParseCommand(const Field& f, const std::vector<Field>& params, Spec& spec) const;
  Status ParseParams(const Field& f, Spec& spec, std::vector<Field>& out) const;
  // A searched parameter: {log_uniform: [1e-5, 0.1]}, {choice: [a, b], when: {model: cnn}}.
  Status ParseDistribution(const Field& p, Spec& spec) const;
  Status ParseSearch(const Field& f, Spec& spec) const;
  Status ParsePrune(const Field& f, Spec& spec) const;
  // search:, prune: and the searched parameters agree with each other and with the command.
  Status CheckSearch(const Node& root, const std::vector<Field>& top,
                     const std::vector<Field>& params, const Spec& spec) const;
  Status ParseWorkdir(const Field* f, Spec& spec) const;
  Status ParseResources(const Field& f, Spec& spec) const;
  Status ParseData(const Field& f, Spec& spec) const;
  Status ParseEnv(const Field& f, Spec& spec) const;
  Status ParseDerivedMetrics(const Field& f, Spec& spec) const;
  Status ParseObjective(const Field& f, Spec& spec) const;
  Status ParseOom(const Field& f, const std::vector<Field>& params, Spec& spec) const;
  Status ParseMonitor(const Field& f, Spec& spec) const;
  Status CheckIntegerParam(const Field& ref, const std::vector<Field>& params,
                           std::string_view role) const;
  // stages: each stage's command and settings over the pipeline's (docs/pipelines.md).
  Status ParseStages(const Field& f, const std::vector<Field>& top,
                     const std::vector<Field>& params, Spec& spec) const;
  Result<std::vector<std::string>> ParsePaths(const Field& f, bool outputs) const;

  std::string display_;
  std::string base_dir_;
  // Nodes that came from --set, so their errors name the override instead of a file position.
  std::vector<std::pair<Node, std::string>> override_nodes_;
};

std::string SpecParser::Where(const Node& n) const {
  for (const auto& [node, text] : override_nodes_) {
    if (n.is(node)) return fmt::format("--set '{}'", text);
  }
  YAML::Mark m = n.Mark();
  if (m.is_null()) return "--set";
  return fmt::format("{}:{}:{}", display_, m.line + 1, m.column + 1);
}

void SpecParser::Track(const Node& n, const std::string& text) {
  override_nodes_.emplace_back(n, text);
  if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      Track(it->first, text);
      Track(it->second, text);
    }
  } else if (n.IsSequence()) {
    for (const Node& e : n) Track(e, text);
  }
}

Status SpecParser::ApplyOverride(Node& root, const std::string& text) {
  auto fail = [&](std::string_view msg) {
    return InvalidArgument(fmt::format("--set '{}': {}", text, msg));
  };
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return fail(
        "expected key=value, such as retries=2, resources.gpus=1 or params.lr=[0.1,0.01]; add "
        "'=' and a value");
  }
  std::string key(Trim(std::string_view(text).substr(0, eq)));
  std::string value = text.substr(eq + 1);
  if (key.empty()) return fail("the key before '=' is empty; write key=value, such as retries=2");
  std::vector<std::string> segs = Split(key, '.');
  if (std::any_of(segs.begin(), segs.end(), [](const std::string& s) { return s.empty(); })) {
    return fail(
        fmt::format("'{}' has an empty part; write a dotted path such as resources.gpus", key));
  }

  const Node params = Get(root, "params");
  std::vector<std::string> param_names;
  // A missing key gives an invalid node, which throws on anything but IsDefined().
  if (params.IsDefined() && params.IsMap()) {
    for (auto it = params.begin(); it != params.end(); ++it) {
      if (it->first.IsScalar()) param_names.push_back(it->first.Scalar());
    }
  }

  std::vector<std::string> path;
  const std::string& first = segs[0];
  if (Contains(kTopKeys, first)) {
    const std::vector<std::string>* sub = nullptr;
    for (const auto& [section, keys] : kSections) {
      if (section == first) sub = keys;
    }
    bool free_keys = first == "params" || first == "env" || first == "data";
    if (segs.size() > 2 || (segs.size() == 2 && !sub && !free_keys)) {
      if (free_keys) {
        return fail(fmt::format("{} entries are not nested; write --set {}.{}=VALUE", first, first,
                                segs[1]));
      }
      if (sub) {
        return fail(fmt::format("{}.{} has no sub-keys; write --set {}.{}=VALUE", first, segs[1],
                                first, segs[1]));
      }
      return fail(fmt::format("'{}' has no sub-keys; write --set {}=VALUE", first, first));
    }
    if (segs.size() == 2 && sub && !Contains(*sub, segs[1])) {
      std::optional<std::string> close = ClosestMatch(segs[1], *sub);
      return fail(close ? fmt::format("unknown key '{}'; did you mean '{}.{}'?", key, first, *close)
                        : fmt::format("unknown key '{}'; {} has {}", key, first, Join(*sub, ", ")));
    }
    path = segs;
  } else if (segs.size() == 1 && Contains(param_names, first)) {
    path = {"params", first};
  } else {
    std::vector<std::string> candidates = kTopKeys;
    candidates.insert(candidates.end(), param_names.begin(), param_names.end());
    std::optional<std::string> close = ClosestMatch(first, candidates);
    std::string add = fmt::format("to add a parameter, write --set params.{}=VALUE", key);
    if (close)
      return fail(fmt::format("unknown key '{}'; did you mean '{}'? ({})", key, *close, add));
    return fail(fmt::format(
        "unknown key '{}': not a spec key nor a parameter; use a spec key such as retries or "
        "resources.gpus, a parameter name, or {}",
        key, add));
  }

  Node v;
  try {
    v = YAML::Load(value);
  } catch (const YAML::ParserException& e) {
    return fail(fmt::format("the value is not valid YAML ({}); quote it, e.g. --set '{}=\"...\"'",
                            e.msg, key));
  }
  if (Status st = yaml::CheckScalarsUtf8(v, "--set " + key); !st.ok()) return st;
  Track(v, text);

  Node parent;
  parent.reset(root);
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    Node child = Get(parent, path[i]);
    if (!child.IsDefined()) {
      Node key_node(path[i]);
      Node map(YAML::NodeType::Map);
      parent.force_insert(key_node, map);
      Track(key_node, text);
      Track(map, text);
      parent.reset(map);
    } else if (child.IsNull()) {
      Node map(YAML::NodeType::Map);
      parent[path[i]] = map;
      Track(map, text);
      parent.reset(map);
    } else if (!child.IsMap()) {
      return fail(fmt::format("{} in the spec is {}, not a mapping; fix it in the file first",
                              path[i], Describe(child)));
    } else {
      parent.reset(child);
    }
  }
  const std::string& last = path.back();
  if (Get(parent, last).IsDefined()) {
    parent[last] = v;
  } else {
    Node key_node(last);
    parent.force_insert(key_node, v);
    Track(key_node, text);
  }
  return Status::Ok();
}

Result<std::vector<Field>> SpecParser::ReadMap(const Node& map, const std::string& section,
                                               const std::vector<std::string>* valid) const {
  if (!map.IsMap()) return std::vector<Field>{};  // callers say what a non-mapping should be
  yaml::MapRules rules;
  rules.valid = valid;
  rules.in = " under ";
  rules.sections = &kSections;
  rules.top_hint = " (parameters go under params:)";
  return yaml::Reader::ReadMap(map, map, section, rules);
}


Result<OrderedJson> SpecParser::ParamValue(const Node& n, const Field& f) const {
  const Node& at = n.IsNull() ? f.at() : n;
  if (!n.IsScalar() && !n.IsNull()) {
    return Err(at, fmt::format("{}: a list value must be a string, number or true/false, got {}; "
                               "nested values are not supported",
                               f.path, Describe(n)));
  }
  Scalar s = Resolve(n);
  switch (s.kind) {
    case Kind::kNull:
      return Err(at, fmt::format("{} has an empty value; give a value, or a list of values to "
                                 "sweep",
                                 f.path));
    case Kind::kBool:
      return OrderedJson(s.b);
    case Kind::kInt:
      return OrderedJson(s.i);
    case Kind::kFloat:
      if (!std::isfinite(s.d)) {
        return Err(at, fmt::format("{}: '{}' is not a finite number; use a finite value, or "
                                   "quote it to pass it as text",
                                   f.path, n.Scalar()));
      }
      return OrderedJson(s.d);
    case Kind::kString:
      return OrderedJson(n.Scalar());
  }
  return OrderedJson();
}

Status SpecParser::ParseParams(const Field& f, Spec& spec, std::vector<Field>& out) const {
  if (f.value.IsNull()) return Status::Ok();
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("params must be a mapping of name: value, got {}; write one "
                                   "parameter per line, such as 'lr: [0.1, 0.01]'",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(out, ReadMap(f.value, "params", nullptr));
  for (const Field& p : out) {
    if (!IsParamName(p.name)) {
      return Err(p.key, fmt::format("parameter name '{}' is not valid; use letters, digits, '_' "
                                    "and '-', starting with a letter or '_'",
                                    p.name));
    }
    if (p.value.IsMap()) {
      DROVER_RETURN_IF_ERROR(ParseDistribution(p, spec));
      continue;
    }
    if (p.value.IsSequence()) {
      if (p.value.size() == 0) {
        return Err(p.at(), fmt::format("{} is an empty list; give at least one value, or remove "
                                       "the parameter",
                                       p.path));
      }
      OrderedJson axis = OrderedJson::array();
      for (const Node& e : p.value) {
        DROVER_ASSIGN_OR_RETURN(OrderedJson v, ParamValue(e, p));
        axis.push_back(std::move(v));
      }
      spec.params[p.name] = std::move(axis);
    } else {
      DROVER_ASSIGN_OR_RETURN(spec.params[p.name], ParamValue(p.value, p));
    }
  }
  return Status::Ok();
}

Status SpecParser::ParseDistribution(const Field& p, Spec& spec) const {
  bool known = false;
  for (auto it = p.value.begin(); it != p.value.end(); ++it) {
    known = known || (it->first.IsScalar() && Contains(kDistributionKeys, it->first.Scalar()));
  }
  if (!known) {
    return Err(p.at(), fmt::format("{} must be a value, a list of values (a grid axis) or a "
                                   "distribution to search such as {{log_uniform: [1e-5, 0.1]}}, "
                                   "got another mapping; nested parameters are not supported, "
                                   "flatten them into names such as optim_lr",
                                   p.path));
  }
  yaml::MapRules rules;
  rules.valid = &kDistributionKeys;
  rules.in = " under ";
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          yaml::Reader::ReadMap(p.value, p.value, p.path, rules));
  const Field* dist = nullptr;
  for (const Field& f : fields) {
    if (f.name == "when") continue;
    if (dist) {
      return Err(f.key, fmt::format("{} has two distributions ({} and {}); give one", p.path,
                                    dist->name, f.name));
    }
    dist = &f;
  }
  if (!dist) {
    return Err(p.at(), fmt::format("{} is a mapping without a distribution; write one of "
                                   "{{uniform: [low, high]}}, {{log_uniform: [low, high]}}, "
                                   "{{int: [low, high]}}, {{int_log: [low, high]}} or "
                                   "{{choice: [a, b]}} (a list of values is a grid axis)",
                                   p.path));
  }
  OrderedJson out = OrderedJson::object();
  if (!dist->value.IsSequence() || dist->value.size() == 0) {
    return Err(dist->at(), fmt::format("{} must be a non-empty list, got {}; write e.g. {}",
                                       dist->path, Describe(dist->value),
                                       dist->name == "choice" ? "[relu, gelu]" : "[1, 8]"));
  }
  if (dist->name == "choice") {
    OrderedJson values = OrderedJson::array();
    for (const Node& e : dist->value) {
      DROVER_ASSIGN_OR_RETURN(OrderedJson v, ParamValue(e, *dist));
      if (std::find(values.begin(), values.end(), v) != values.end()) {
        return Err(e, fmt::format("{} lists {} twice; list each value once", dist->path,
                                  v.dump()));
      }
      values.push_back(std::move(v));
    }
    out["choice"] = std::move(values);
  } else {
    const bool integer = dist->name == "int" || dist->name == "int_log";
    const bool log = dist->name == "log_uniform" || dist->name == "int_log";
    if (dist->value.size() != 2) {
      return Err(dist->at(), fmt::format("{} must be [low, high], got {} values; write e.g. {}",
                                         dist->path, dist->value.size(),
                                         integer ? "[1, 8]" : "[1e-5, 0.1]"));
    }
    double ends[2];
    for (size_t i = 0; i < 2; ++i) {
      Field e{dist->key, dist->value[i], dist->name, fmt::format("{}[{}]", dist->path, i)};
      if (integer) {
        DROVER_ASSIGN_OR_RETURN(int64_t v, Int(e, -(int64_t{1} << 53), int64_t{1} << 53,
                                               "an integer", "the ends of int ranges are whole "
                                               "numbers; use uniform for real numbers"));
        ends[i] = static_cast<double>(v);
      } else {
        DROVER_ASSIGN_OR_RETURN(ends[i], Real(e, -1e300, 1e300, false, false,
                                              "write a finite number such as 1e-4"));
      }
    }
    if (!(ends[0] < ends[1])) {
      return Err(dist->at(), fmt::format("{}: low ({}) must be below high ({}); write [low, "
                                         "high], or a fixed value instead of a range",
                                         dist->path, ends[0], ends[1]));
    }
    if (log && ends[0] < (integer ? 1.0 : std::numeric_limits<double>::min())) {
      return Err(dist->value[0],
                 fmt::format("{}: a log scale needs low {} 0, got {}; use {} for ranges that "
                             "reach 0",
                             dist->path, integer ? ">=" : ">", ends[0],
                             integer ? "int" : "uniform"));
    }
    if (integer) {
      out[dist->name] = {static_cast<int64_t>(ends[0]), static_cast<int64_t>(ends[1])};
    } else {
      out[dist->name] = {ends[0], ends[1]};
    }
  }
  if (const Field* when = Find(fields, "when")) {
    if (!when->value.IsMap() || when->value.size() == 0) {
      return Err(when->at(), fmt::format("{} must be a mapping of parameter: value, got {}; "
                                         "write e.g. when: {{model: cnn}}",
                                         when->path, Describe(when->value)));
    }
    OrderedJson conditions = OrderedJson::object();
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> conds, ReadMap(when->value, when->path, nullptr));
    for (const Field& c : conds) {
      OrderedJson values = OrderedJson::array();
      if (c.value.IsSequence()) {
        for (const Node& e : c.value) {
          DROVER_ASSIGN_OR_RETURN(OrderedJson v, ParamValue(e, c));
          values.push_back(std::move(v));
        }
      } else {
        DROVER_ASSIGN_OR_RETURN(OrderedJson v, ParamValue(c.value, c));
        values.push_back(std::move(v));
      }
      conditions[c.name] = std::move(values);
    }
    out["when"] = std::move(conditions);
  }
  spec.params[p.name] = std::move(out);
  return Status::Ok();
}

Status SpecParser::ParseSearch(const Field& f, Spec& spec) const {
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("search must be a mapping, got {}; write e.g. search: "
                                   "{{trials: 30, parallel: 4}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "search", &kSearchKeys));
  SearchSpec search;
  if (const Field* x = Find(fields, "sampler")) {
    DROVER_ASSIGN_OR_RETURN(std::string name,
                            Choice(*x, {"auto", "tpe", "gp", "random", "grid"}));
    search.sampler = *ParseSamplerKind(name);
  }
  if (const Field* x = Find(fields, "trials")) {
    DROVER_ASSIGN_OR_RETURN(search.trials,
                            Int(*x, 1, kMaxTrials, fmt::format("an integer from 1 to {}",
                                                               kMaxTrials),
                                "write how many configs to try, such as 30"));
  } else if (search.sampler != SamplerKind::kGrid) {
    return Err(f.value, "search needs trials: N, the number of configs to try (such as 30)");
  }
  if (const Field* x = Find(fields, "parallel")) {
    DROVER_ASSIGN_OR_RETURN(int64_t n, Int(*x, 1, 10'000, "an integer from 1 to 10000",
                                           "write how many trials may run at once, such as 4"));
    search.parallel = static_cast<int>(n);
  }
  if (const Field* x = Find(fields, "seed")) {
    DROVER_ASSIGN_OR_RETURN(int64_t seed, Int(*x, 0, (int64_t{1} << 53) - 1,
                                              "a non-negative integer",
                                              "write any whole number; the same seed proposes "
                                              "the same configs for the same results"));
    search.seed = static_cast<uint64_t>(seed);
    search.seeded = true;
  }
  if (const Field* x = Find(fields, "multivariate")) {
    Scalar s = Resolve(x->value);
    if (s.kind != Kind::kBool) {
      return Err(x->at(), fmt::format("search.multivariate must be true or false, got {}",
                                      Describe(x->value)));
    }
    search.multivariate = s.b;
  }
  spec.search = search;
  return Status::Ok();
}

Status SpecParser::ParsePrune(const Field& f, Spec& spec) const {
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("prune must be a mapping, got {}; write e.g. prune: {{rule: "
                                   "asha, metric: val_acc, min_steps: 1}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "prune", &kPruneKeys));
  PruneSpec prune;
  const Field* rule = Find(fields, "rule");
  if (!rule) return Err(f.value, "prune needs a rule: asha, median or hyperband");
  DROVER_ASSIGN_OR_RETURN(std::string name, Choice(*rule, {"asha", "median", "hyperband"}));
  prune.rule = *ParsePruneRule(name);
  if (const Field* m = Find(fields, "metric")) {
    DROVER_ASSIGN_OR_RETURN(prune.metric, Text(*m, "write the metric the runs log, such as val_acc"));
  } else if (spec.objective) {
    prune.metric = spec.objective->metric;
  } else {
    return Err(f.value, "prune needs a metric (or an objective: its metric is used); add "
                        "metric: NAME");
  }
  if (prune.metric.empty()) return Err(f.value, "prune.metric is empty; write the metric name");
  if (const Field* m = Find(fields, "mode")) {
    DROVER_ASSIGN_OR_RETURN(std::string mode, Choice(*m, {"max", "min"}));
    prune.maximize = mode == "max";
  } else if (spec.objective && spec.objective->metric == prune.metric) {
    prune.maximize = spec.objective->maximize;
  } else if (spec.objective || !Find(fields, "metric")) {
    prune.maximize = true;
  }
  if (const Field* x = Find(fields, "resource")) {
    DROVER_ASSIGN_OR_RETURN(prune.resource,
                            Text(*x, "write what rungs count: step, or a metric the runs report "
                                     "beside the pruned one, such as epoch"));
    if (prune.resource.empty()) {
      return Err(x->at(), "prune.resource is empty; write step, or a metric such as epoch");
    }
    if (prune.resource == prune.metric) {
      return Err(x->at(), fmt::format("prune.resource is the pruned metric {} itself; write step, "
                                      "or a metric that counts progress, such as epoch",
                                      prune.metric));
    }
  }
  if (const Field* x = Find(fields, "min_steps")) {
    DROVER_ASSIGN_OR_RETURN(prune.min_steps, Int(*x, 1, int64_t{1} << 40, "a positive integer",
                                                 "write where the first check is, in the "
                                                 "resource's units (epochs, steps), such as 1"));
  }
  if (const Field* x = Find(fields, "reduction")) {
    DROVER_ASSIGN_OR_RETURN(int64_t r, Int(*x, 2, 100, "an integer from 2 to 100",
                                           "write how much each rung thins the runs, such as 3"));
    prune.reduction = static_cast<int>(r);
  }
  if (const Field* x = Find(fields, "startup_trials")) {
    DROVER_ASSIGN_OR_RETURN(int64_t n, Int(*x, 1, 1000, "an integer from 1 to 1000",
                                           "write how many runs must reach a step before the "
                                           "median rule stops anyone there, such as 5"));
    prune.startup_trials = static_cast<int>(n);
  }
  if (const Field* x = Find(fields, "max_steps")) {
    DROVER_ASSIGN_OR_RETURN(prune.max_steps, Int(*x, 1, int64_t{1} << 40, "a positive integer",
                                                 "write what a full run takes, in the resource's units (epochs, steps), such as 27"));
    if (prune.max_steps <= prune.min_steps) {
      return Err(x->at(), fmt::format("prune.max_steps ({}) must be above min_steps ({})",
                                      prune.max_steps, prune.min_steps));
    }
  } else if (prune.rule == PruneRule::kHyperband) {
    return Err(f.value, "hyperband needs max_steps: what a full run takes, in the resource's "
                        "units (its brackets' last rung), such as 27");
  }
  spec.prune = prune;
  return Status::Ok();
}

Status SpecParser::CheckSearch(const Node& root, const std::vector<Field>& top,
                               const std::vector<Field>& params, const Spec& spec) const {
  const Field* first_dist = nullptr;
  for (const Field& p : params) {
    if (search::IsDistribution(Json::parse(spec.params[p.name].dump()))) {
      first_dist = first_dist ? first_dist : &p;
    }
  }
  const Field* search = Find(top, "search");
  if (first_dist && !search) {
    return Err(first_dist->at(),
               fmt::format("{} is a distribution, which only a search samples; add search: "
                           "{{trials: 30}} (or write a list of values to sweep a grid)",
                           first_dist->path));
  }
  if (!spec.search) return Status::Ok();
  if (spec.search->sampler == SamplerKind::kGrid && first_dist) {
    return Err(first_dist->at(), fmt::format("search.sampler grid runs the lists of params; {} "
                                             "is a distribution: write a list of values, or use "
                                             "another sampler",
                                             first_dist->path));
  }
  if (spec.search->sampler != SamplerKind::kGrid && !first_dist) {
    return Err(search->key, "search needs a parameter to search: give one a distribution, such "
                            "as lr: {log_uniform: [1e-5, 1e-1]} (lists are grid axes)");
  }
  if (!spec.objective && spec.search->sampler != SamplerKind::kGrid) {
    return Err(search->key, "a search needs an objective, the metric it improves: add "
                            "objective: {metric: val_acc, mode: max}");
  }
  if (spec.search->trials > spec.max_runs) {
    return Err(search->value, fmt::format("search.trials ({}) is over max_runs ({}); raise "
                                          "max_runs or try fewer",
                                          spec.search->trials, spec.max_runs));
  }
  Result<search::Space> space = search::SpaceOf(spec);
  if (!space.ok()) return Err(Find(top, "params")->key, space.status().message());
  // A condition names values its parameter can take.
  for (const search::Dimension& d : space->dims) {
    const Field* at = Find(params, d.name);
    for (const search::Condition& c : d.when) {
      const OrderedJson& other = spec.params[c.param];
      std::vector<Json> possible;
      if (other.is_array()) {
        for (const auto& v : other) possible.push_back(Json::parse(v.dump()));
      } else if (other.is_object() && other.contains("choice")) {
        for (const auto& v : other["choice"]) possible.push_back(Json::parse(v.dump()));
      } else if (!other.is_object()) {
        possible.push_back(Json::parse(other.dump()));
      } else {
        return Err(at->at(), fmt::format("{}.when names {}, a range; a condition names a grid "
                                         "axis, a fixed value or a choice",
                                         at->path, c.param));
      }
      bool any = false;
      for (const Json& v : c.values) {
        for (const Json& q : possible) {
          any = any || v == q || (v.is_number() && q.is_number() && v.get<double>() == q.get<double>());
        }
      }
      if (!any) {
        return Err(at->at(), fmt::format("{}.when: {} never takes {}, so {} would never be "
                                         "sampled",
                                         at->path, c.param, Json(c.values).dump(), d.name));
      }
    }
  }
  // A conditional parameter does not exist in every trial: the command cannot name it.
  for (const search::Dimension& d : space->dims) {
    if (d.when.empty()) continue;
    for (const std::string& word : spec.command) {
      Result<std::vector<std::string>> used = PlaceholderNames(word);
      if (!used.ok() || !Contains(*used, d.name)) continue;
      return Err(Find(top, "command")->at(),
                 fmt::format("command uses {{{}}}, which exists only in some trials (when: {}); "
                             "read it from $DROVER_PARAMS (JSON) in the script, or drop when:",
                             d.name, Json::parse(spec.params[d.name]["when"].dump()).dump()));
    }
  }
  (void)root;
  return Status::Ok();
}

Status SpecParser::ParseCommand(const Field& f, const std::vector<Field>& params,
                                Spec& spec) const {
  // Each word with the node it came from, so a bad placeholder points at its list element.
  std::vector<std::pair<std::string, Node>> words;
  if (f.value.IsSequence()) {
    if (spec.shell) {
      return Err(f.at(),
                 "shell: true needs command as one string (a script for /bin/sh -c), got "
                 "a list; join the words into one string, or set shell: false");
    }
    if (f.value.size() == 0) {
      return Err(f.at(),
                 "command is an empty list; give the program and its arguments, such as "
                 "[python, train.py, --lr, '{lr}']");
    }
    for (const Node& e : f.value) {
      if (!e.IsScalar()) {
        return Err(
            e.IsNull() ? f.at() : e,
            fmt::format("each command word must be a string, got {}; quote the word", Describe(e)));
      }
      words.emplace_back(e.Scalar(), e);
    }
  } else if (f.value.IsScalar()) {
    const std::string& text = f.value.Scalar();
    if (Trim(text).empty()) {
      return Err(f.at(), "command is empty; give the program to run, such as 'python train.py'");
    }
    if (spec.shell) {
      words.emplace_back(text, f.value);
    } else {
      Result<std::vector<std::string>> split = SplitCommandLine(text);
      if (!split.ok()) return Err(f.at(), split.status().message());
      for (std::string& w : *split) words.emplace_back(std::move(w), f.value);
    }
  } else {
    return Err(f.at(), fmt::format("command must be a string or a list of words, got {}; write "
                                   "e.g. command: \"python train.py --lr {{lr}}\"",
                                   Describe(f.value)));
  }

  std::vector<std::string> names;
  for (const Field& p : params) names.push_back(p.name);
  for (const auto& [word, node] : words) {
    Result<std::vector<std::string>> used = PlaceholderNames(word);
    if (!used.ok()) return Err(node, fmt::format("command: {}", used.status().message()));
    for (const std::string& name : *used) {
      if (Contains(names, name)) continue;
      std::optional<std::string> close = ClosestMatch(name, names);
      if (close) {
        return Err(node, fmt::format("command uses {{{}}} but params has no '{}'; did you mean "
                                     "'{}'? (add it under params or remove the placeholder)",
                                     name, name, *close));
      }
      return Err(node, fmt::format("command uses {{{}}} but params has no '{}'; add it under "
                                   "params or remove the placeholder",
                                   name, name));
    }
    spec.command.push_back(word);
  }
  return Status::Ok();
}

namespace {
// The first of `inputs` that names an entry of the metrics: mapping after entry `index`.
std::optional<std::string> DerivedReadsBelow(const YAML::Node& metrics, size_t index,
                                             const std::vector<std::string>& inputs) {
  size_t i = 0;
  for (const auto& kv : metrics) {
    if (i++ <= index) continue;
    const std::string later = kv.first.as<std::string>("");
    if (std::find(inputs.begin(), inputs.end(), later) != inputs.end()) return later;
  }
  return std::nullopt;
}
}  // namespace

Status SpecParser::ParseDerivedMetrics(const Field& f, Spec& spec) const {
  if (f.value.IsNull()) return Status::Ok();
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("metrics must be a mapping of name: expression, got {}; write "
                                   "for example metrics: {{err: 1 - val_acc}}",
                                   Describe(f.value)));
  }
  if (f.value.size() > kMaxDerivedMetrics) {
    return Err(f.at(), fmt::format("metrics has {} entries, more than {}; keep the ones you rank "
                                   "or plot by",
                                   f.value.size(), kMaxDerivedMetrics));
  }
  for (const auto& kv : f.value) {
    const YAML::Node& at = kv.first;
    const std::string name = kv.first.as<std::string>("");
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
        }) || std::isdigit(static_cast<unsigned char>(name[0]))) {
      return Err(at, fmt::format("metrics: '{}' is not a metric name; use letters, digits, '_' "
                                 "and '.', starting with a letter",
                                 name));
    }
    if (!kv.second.IsScalar()) {
      return Err(kv.second, fmt::format("metrics.{} must be an expression such as "
                                               "1 - val_acc, got {}",
                                               name, Describe(kv.second)));
    }
    DerivedMetricSpec d;
    d.name = name;
    d.expression = kv.second.Scalar();
    auto inputs = ExpressionInputs(d.expression);
    if (!inputs.ok()) {
      return Err(kv.second,
                 fmt::format("metrics.{}: '{}' is not an expression over metrics ({}); write "
                             "for example 1 - val_acc or samples / time_s",
                             name, d.expression, inputs.status().message()));
    }
    d.inputs = *inputs;
    if (std::find(d.inputs.begin(), d.inputs.end(), name) != d.inputs.end()) {
      return Err(kv.second, fmt::format("metrics.{} reads itself; a derived metric "
                                               "reads logged metrics and those above it",
                                               name));
    }
    for (const auto& other : spec.metrics) {
      if (other.name == name) {
        return Err(at, fmt::format("metrics: '{}' is defined twice", name));
      }
    }
    // Each is computed after those above it: one that reads a derived metric written below it
    // would never have that value (a: b, b: a + x is a cycle neither side of which is computed).
    if (auto below = DerivedReadsBelow(f.value, spec.metrics.size(), d.inputs)) {
      return Err(kv.second, fmt::format("metrics.{} reads {}, a derived metric defined below it; "
                                        "a derived metric reads logged metrics and those above "
                                        "it: move {} above {}, and make sure no two read each "
                                        "other",
                                        name, *below, *below, name));
    }
    spec.metrics.push_back(std::move(d));
  }
  return Status::Ok();
}

Status SpecParser::ParseWorkdir(const Field* f, Spec& spec) const {
  spec.project_dir = base_dir_.empty() ? std::string() : Normalize(base_dir_);
  if (!f) {
    spec.workdir = Normalize(base_dir_);
    if (!fs::is_directory(spec.workdir)) {
      return ErrAtStart(
          fmt::format("the spec's folder '{}' is not a directory; set workdir: to "
                      "an existing folder",
                      spec.workdir));
    }
    return Status::Ok();
  }
  DROVER_ASSIGN_OR_RETURN(std::string given,
                          Text(*f, "write the folder to run in, such as workdir: ."));
  if (given.empty()) return Err(f->at(), "workdir is empty; write a folder, such as workdir: .");
  fs::path p(given);
  spec.workdir = Normalize(p.is_absolute() ? p : fs::path(base_dir_) / p);
  std::error_code ec;
  if (!fs::exists(spec.workdir, ec)) {
    return Err(f->at(), fmt::format("workdir '{}' does not exist (looked for {}); create it or fix "
                                    "the path (relative paths start at the spec file's folder)",
                                    given, spec.workdir));
  }
  if (!fs::is_directory(spec.workdir, ec)) {
    return Err(f->at(),
               fmt::format("workdir '{}' is not a directory; point it at a folder", given));
  }
  return Status::Ok();
}

Status SpecParser::ParseResources(const Field& f, Spec& spec) const {
  if (f.value.IsNull()) return Status::Ok();
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("resources must be a mapping, got {}; write e.g. resources: "
                                   "{{gpus: 1, gpu_memory: 6GiB}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "resources", &kResourceKeys));
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (const Field* g = Find(fields, "gpus")) {
    spec.gpus_given = true;
    DROVER_ASSIGN_OR_RETURN(spec.resources.gpus,
                            Int(*g, 0, kIntMax, "a non-negative integer",
                                "write the number of GPUs per run, 0 for CPU only"));
  }
  if (const Field* c = Find(fields, "cpus")) {
    DROVER_ASSIGN_OR_RETURN(spec.resources.cpus, Int(*c, 0, kIntMax, "a non-negative integer",
                                                     "write the number of CPU slots per run"));
  }
  // A size in bytes ("6GiB"); `hint` says what to write instead.
  auto size = [&](const Field& m, std::string_view hint) -> Result<int64_t> {
    if (!m.value.IsScalar()) {
      return Err(m.at(), fmt::format("{} must be a size, got {}; {}", m.path, Describe(m.value),
                                     hint));
    }
    Result<int64_t> bytes = ParseBytes(m.value.Scalar());
    if (!bytes.ok()) return Err(m.at(), fmt::format("{}: {}", m.path, bytes.status().message()));
    return *bytes;
  };
  if (const Field* m = Find(fields, "gpu_memory")) {
    DROVER_ASSIGN_OR_RETURN(
        int64_t bytes, size(*m, "write a number with a unit, such as 6GiB, 512MiB or 8GB"));
    if (spec.resources.gpus == 0) {
      return Err(m->at(),
                 "resources.gpu_memory needs resources.gpus of 1 or more (it is 0, a "
                 "CPU-only run); set resources.gpus, or remove gpu_memory");
    }
    spec.resources.gpu_memory = bytes;
  }
  if (const Field* m = Find(fields, "memory")) {
    DROVER_ASSIGN_OR_RETURN(spec.resources.memory,
                            size(*m, "write the host memory per run, such as 16GiB"));
  }
  return Status::Ok();
}

Status SpecParser::ParseEnv(const Field& f, Spec& spec) const {
  if (f.value.IsNull()) return Status::Ok();
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("env must be a mapping of NAME: value, got {}; write e.g. env: "
                                   "{{OMP_NUM_THREADS: 1}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "env", nullptr));
  for (const Field& e : fields) {
    if (e.name.empty() || e.name.find('=') != std::string::npos ||
        e.name.find('\0') != std::string::npos) {
      return Err(e.key, fmt::format("'{}' is not an environment variable name; use a name "
                                    "without '=', such as OMP_NUM_THREADS",
                                    e.name));
    }
    if (e.value.IsNull()) {
      return Err(e.key,
                 fmt::format("{} has no value; write {}: \"\" for an empty value", e.path, e.name));
    }
    if (!e.value.IsScalar()) {
      return Err(e.at(), fmt::format("{} must be a string, number or true/false, got {}; quote "
                                     "the value",
                                     e.path, Describe(e.value)));
    }
    spec.env[e.name] = e.value.Scalar();
  }
  return Status::Ok();
}

Status SpecParser::ParseData(const Field& f, Spec& spec) const {
  if (f.value.IsNull()) return Status::Ok();
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("data must be a mapping of name: path, got {}; write e.g. data: "
                                   "{{imagenet: /datasets/imagenet, raw: data/raw}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "data", nullptr));
  if (fields.size() > kMaxDataMounts) {
    return Err(f.at(), fmt::format("data names {} paths; at most {}", fields.size(), kMaxDataMounts));
  }
  for (const Field& d : fields) {
    const bool name_ok =
        !d.name.empty() && d.name.size() <= 64 && d.name[0] != '.' &&
        std::all_of(d.name.begin(), d.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
        });
    if (!name_ok) {
      return Err(d.key, fmt::format("'{}' cannot name data: it becomes a folder of the working "
                                    "copy; use letters, digits, '_', '-' or '.' (not first), such "
                                    "as imagenet",
                                    d.name));
    }
    if (!d.value.IsScalar() || d.value.Scalar().empty()) {
      return Err(d.at(), fmt::format("{} must be a path, got {}; write e.g. {}: data/{}", d.path,
                                     Describe(d.value), d.name, d.name));
    }
    fs::path p(d.value.Scalar());
    const std::string path = Normalize(p.is_absolute() ? p : fs::path(base_dir_) / p);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return Err(d.at(), fmt::format("{} '{}' does not exist (looked for {}); fix the path (a "
                                     "relative one starts at the spec's folder)",
                                     d.path, d.value.Scalar(), path));
    }
    if (path.find_first_of(",:\\") != std::string::npos) {
      return Err(d.at(), fmt::format("{}: '{}' holds ',', ':' or '\\', which the mount cannot "
                                     "carry; use a path without them (a symlink to it)",
                                     d.path, path));
    }
    spec.data[d.name] = path;
  }
  return Status::Ok();
}

Status SpecParser::ParseObjective(const Field& f, Spec& spec) const {
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("objective must be a mapping, got {}; write e.g. objective: "
                                   "{{metric: val_acc, mode: max}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          ReadMap(f.value, "objective", &kObjectiveKeys));
  Objective obj;
  const Field* metric = Find(fields, "metric");
  if (!metric) {
    return Err(f.value,
               "objective needs a metric; add metric: NAME (the metric to optimise, as "
               "the run logs it)");
  }
  DROVER_ASSIGN_OR_RETURN(obj.metric, Text(*metric, "write the metric name, such as val_acc"));
  if (obj.metric.empty()) {
    return Err(metric->at(), "objective.metric is empty; write the metric name, such as val_acc");
  }
  if (const Field* mode = Find(fields, "mode")) {
    std::string m = mode->value.IsScalar() ? mode->value.Scalar() : "";
    if (m != "min" && m != "max") {
      return Err(mode->at(), fmt::format("objective.mode must be min or max, got {}; write max "
                                         "when higher is better",
                                         Describe(mode->value)));
    }
    obj.maximize = m == "max";
  }
  if (const Field* summary = Find(fields, "summary")) {
    Result<SummaryRule> rule = ParseScoreSummary(
        summary->value.IsScalar() ? summary->value.Scalar() : Describe(summary->value));
    if (!rule.ok()) return Err(summary->at(), "objective.summary: " + rule.status().message());
    obj.summary = rule->summary;
    obj.last_k = rule->last_k;
  }
  spec.objective = obj;
  return Status::Ok();
}

Status SpecParser::CheckIntegerParam(const Field& ref, const std::vector<Field>& params,
                                     std::string_view role) const {
  const std::string& name = ref.value.Scalar();
  const Field* p = Find(params, name);
  if (!p) {
    std::vector<std::string> names;
    for (const Field& q : params) names.push_back(q.name);
    std::optional<std::string> close = ClosestMatch(name, names);
    return Err(ref.at(), fmt::format("{} '{}' is not a parameter{}; name one of the parameters "
                                     "under params ({})",
                                     ref.path, name,
                                     close ? fmt::format(" (did you mean '{}'?)", *close) : "",
                                     names.empty() ? "there are none" : Join(names, ", ")));
  }
  std::vector<Node> values;
  if (p->value.IsSequence()) {
    for (const Node& e : p->value) values.push_back(e);
  } else {
    values.push_back(p->value);
  }
  for (const Node& v : values) {
    Scalar s = Resolve(v);
    if (s.kind != Kind::kInt || s.i < 1) {
      return Err(ref.at(), fmt::format("{} '{}' must have whole-number values of 1 or more ({}), "
                                       "but it has {}; point {} at an integer parameter",
                                       ref.path, name, role, Describe(v), ref.path));
    }
  }
  return Status::Ok();
}

Status SpecParser::ParseMonitor(const Field& f, Spec& spec) const {
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("monitor must be a mapping, got {}; write e.g. monitor: "
                                   "{{watch: [loss], on_nan: stop, stall: 10m}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "monitor", &kMonitorKeys));
  if (const Field* watch = Find(fields, "watch")) {
    std::vector<const Node*> items;
    std::vector<Node> seq;
    if (watch->value.IsSequence()) {
      for (const Node& n : watch->value) seq.push_back(n);
    } else {
      seq.push_back(watch->value);
    }
    for (const Node& n : seq) {
      Scalar v = Resolve(n);
      if (!n.IsScalar() || v.kind != Kind::kString || n.Scalar().empty()) {
        return Err(n.IsDefined() ? n : watch->value,
                   fmt::format("monitor.watch must list metric names, got {}; write e.g. "
                               "watch: [loss, val_loss]",
                               Describe(n)));
      }
      spec.monitor.watch.push_back(n.Scalar());
    }
  }
  if (const Field* on_nan = Find(fields, "on_nan")) {
    DROVER_ASSIGN_OR_RETURN(std::string v, Text(*on_nan, "write stop or ignore"));
    if (v != "stop" && v != "ignore") {
      return Err(on_nan->at(),
                 fmt::format("monitor.on_nan must be stop or ignore, got '{}'; stop ends the run "
                             "as diverged",
                             v));
    }
    spec.monitor.stop_on_nan = v == "stop";
  }
  if (const Field* stall = Find(fields, "stall")) {
    DROVER_ASSIGN_OR_RETURN(spec.monitor.stall_ms, Duration(*stall));
  }
  return Status::Ok();
}

Status SpecParser::ParseOom(const Field& f, const std::vector<Field>& params, Spec& spec) const {
  if (!f.value.IsMap()) {
    return Err(f.at(), fmt::format("oom must be a mapping, got {}; write e.g. oom: {{param: "
                                   "batch_size, min: 8}}",
                                   Describe(f.value)));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "oom", &kOomKeys));
  const Field* param = Find(fields, "param");
  if (!param) {
    return Err(f.value,
               "oom needs a param: the parameter to halve after a CUDA out-of-memory "
               "error; add param: batch_size (or your batch parameter)");
  }
  DROVER_ASSIGN_OR_RETURN(spec.oom.param,
                          Text(*param, "write the name of the batch-size parameter"));
  DROVER_RETURN_IF_ERROR(CheckIntegerParam(*param, params, "it is halved after an OOM"));
  if (const Field* min = Find(fields, "min")) {
    DROVER_ASSIGN_OR_RETURN(spec.oom.min,
                            Int(*min, 1, std::numeric_limits<int64_t>::max(), "an integer >= 1",
                                "write the smallest value to try, such as 8"));
  }
  if (const Field* acc = Find(fields, "accumulate")) {
    DROVER_ASSIGN_OR_RETURN(spec.oom.accumulate,
                            Text(*acc, "write the name of the gradient-accumulation parameter"));
    if (spec.oom.accumulate == spec.oom.param) {
      return Err(acc->at(),
                 "oom.accumulate must differ from oom.param; name the "
                 "gradient-accumulation parameter");
    }
    DROVER_RETURN_IF_ERROR(
        CheckIntegerParam(*acc, params, "it is doubled when oom.param is halved"));
  }
  return Status::Ok();
}

Result<Spec> SpecParser::Parse(const std::string& yaml, const std::vector<std::string>& overrides) {
  // Text that is not UTF-8 cannot be carried (the store, JSON and the API speak UTF-8): refused
  // where it is, with what to do (docs/spec.md, "Text").
  DROVER_RETURN_IF_ERROR(yaml::CheckUtf8(yaml, display_, "the spec"));
  for (const std::string& o : overrides) {
    if (size_t bad = FirstInvalidUtf8(o); bad != std::string::npos) {
      return InvalidArgument(fmt::format(
          "--set: byte 0x{:02x} at offset {} of the override is not UTF-8 text; give key=value "
          "as UTF-8",
          static_cast<unsigned char>(o[bad]), bad));
    }
  }
  DROVER_ASSIGN_OR_RETURN(Node root, yaml::Load(yaml, display_));
  DROVER_RETURN_IF_ERROR(yaml::CheckScalarsUtf8(root, display_));
  if (root.IsNull()) {
    return ErrAtStart("the spec is empty; add at least name: and command:");
  }
  if (!root.IsMap()) {
    return Err(root, fmt::format("the spec must be a mapping of keys (name:, command:, ...), got "
                                 "{}; write one 'key: value' per line",
                                 Describe(root)));
  }

  Spec spec;
  spec.source_text = yaml;
  if (!overrides.empty()) {
    for (const std::string& o : overrides) DROVER_RETURN_IF_ERROR(ApplyOverride(root, o));
    YAML::Emitter out;
    Emit(out, root);
    spec.source_text = std::string(out.c_str()) + "\n";
  }

  DROVER_ASSIGN_OR_RETURN(std::vector<Field> top, ReadMap(root, "", &kTopKeys));
  const Field* name = Find(top, "name");
  if (!name) {
    return ErrAtStart(
        "missing required key 'name'; add a name for the experiment, such as "
        "'name: digits-compare'");
  }
  const Field* command = Find(top, "command");
  const Field* stages = Find(top, "stages");
  if (command && stages) {
    return Err(command->key, "a spec with stages: has no command: of its own (each stage has "
                             "one); move it into a stage");
  }
  if (!command && !stages) {
    return ErrAtStart(
        "missing required key 'command'; add the command to run, such as "
        "'command: \"python train.py --lr {lr}\"'");
  }

  DROVER_ASSIGN_OR_RETURN(spec.name, Text(*name, "write a name such as digits-compare"));
  if (!IsSpecName(spec.name)) {
    std::string fixed = spec.name;
    for (char& c : fixed) {
      if (!IsSpecName(std::string_view(&c, 1))) c = '-';
    }
    return Err(name->at(), spec.name.empty()
                               ? std::string("name is empty; write a name such as digits-compare")
                               : fmt::format("name '{}' may only hold letters, digits, '.', '_' "
                                             "and '-'; rename it, e.g. '{}'",
                                             spec.name, fixed));
  }

  if (const Field* shell = Find(top, "shell")) {
    Scalar s = Resolve(shell->value);
    if (s.kind != Kind::kBool) {
      return Err(shell->at(), fmt::format("shell must be true or false, got {}; write true to run "
                                          "the command with /bin/sh -c",
                                          Describe(shell->value)));
    }
    spec.shell = s.b;
  }

  if (const Field* rerun = Find(top, "rerun")) {
    Scalar s = Resolve(rerun->value);
    if (s.kind != Kind::kBool) {
      return Err(rerun->at(), fmt::format("rerun must be true or false, got {}; write true (or "
                                          "pass --rerun) to run runs that succeeded before "
                                          "with the same command, params and code again",
                                          Describe(rerun->value)));
    }
    spec.rerun = s.b;
  }

  std::vector<Field> params;
  if (const Field* p = Find(top, "params")) DROVER_RETURN_IF_ERROR(ParseParams(*p, spec, params));
  if (command) DROVER_RETURN_IF_ERROR(ParseCommand(*command, params, spec));
  DROVER_RETURN_IF_ERROR(ParseWorkdir(Find(top, "workdir"), spec));
  if (const Field* r = Find(top, "resources")) DROVER_RETURN_IF_ERROR(ParseResources(*r, spec));
  if (const Field* x = Find(top, "executor")) {
    ExecutorConfig executor;
    DROVER_RETURN_IF_ERROR(ParseExecutorSection(*this, *x, /*daemon=*/false, &executor));
    spec.executor = executor.spec;
  }
  if (const Field* c = Find(top, "container"); c && !c->value.IsNull()) {
    ContainerSpec container;
    DROVER_RETURN_IF_ERROR(ParseContainerSection(*this, *c, &container));
    if (container.runtime == ContainerRuntime::kPyxis &&
        spec.executor.kind != ExecutorKind::kSlurm && spec.executor.given) {
      return Err(c->at(), "container.runtime pyxis runs containers through Slurm's srun; write "
                          "executor: {kind: slurm} or runtime: podman");
    }
    spec.container = container;
  }

  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (const Field* f = Find(top, "priority")) {
    DROVER_ASSIGN_OR_RETURN(spec.priority,
                            Int(*f, std::numeric_limits<int>::min(), kIntMax, "an integer",
                                "write a whole number; higher runs first"));
  }
  if (const Field* f = Find(top, "group")) {
    DROVER_ASSIGN_OR_RETURN(spec.group,
                            Text(*f, "write the fair-share group of the runs, such as vision"));
    if (!IsSpecName(spec.group)) {
      return Err(f->at(), spec.group.empty()
                              ? std::string("group is empty; write a group name such as vision, "
                                            "or leave group out")
                              : fmt::format("group '{}' may only hold letters, digits, '.', '_' "
                                            "and '-'; write a group name such as vision",
                                            spec.group));
    }
  }
  if (const Field* f = Find(top, "preemptible")) {
    Scalar s = Resolve(f->value);
    if (s.kind != Kind::kBool) {
      return Err(f->at(), fmt::format("preemptible must be true or false, got {}; write false so "
                                      "no scheduling policy stops these runs to make room",
                                      Describe(f->value)));
    }
    spec.preemptible = s.b;
  }
  if (const Field* f = Find(top, "checkpoint")) {
    Scalar s = Resolve(f->value);
    if (s.kind != Kind::kBool) {
      return Err(f->at(), fmt::format("checkpoint must be true or false, got {}; write true when "
                                      "the runs save checkpoints and resume from the latest "
                                      "(drover.Checkpointer)",
                                      Describe(f->value)));
    }
    spec.checkpoint = s.b;
  }
  // A run that cannot resume loses all its work when stopped: preempted only if the spec says so.
  if (!Find(top, "preemptible")) spec.preemptible = spec.checkpoint;
  if (const Field* f = Find(top, "tensorboard")) {
    Scalar s = Resolve(f->value);
    if (s.kind == Kind::kBool) {
      if (s.b) {
        return Err(f->at(), "tensorboard: true is the default; write a folder inside the "
                            "working copy (such as lightning_logs), or false to read none");
      }
      spec.tensorboard_off = true;
    } else {
      DROVER_ASSIGN_OR_RETURN(spec.tensorboard,
                              Text(*f, "write the folder the runs' TensorBoard logs go to, "
                                       "such as runs or lightning_logs"));
      fs::path t(spec.tensorboard);
      bool up = false;
      for (const auto& part : t) up = up || part == "..";
      if (spec.tensorboard.empty() || t.is_absolute() || up) {
        return Err(f->at(), fmt::format("tensorboard '{}' must be a folder inside the working "
                                        "copy, such as runs or lightning_logs (relative, no ..)",
                                        spec.tensorboard));
      }
      spec.tensorboard = t.lexically_normal().string();
      while (!spec.tensorboard.empty() && spec.tensorboard.back() == '/') {
        spec.tensorboard.pop_back();
      }
    }
  }
  if (const Field* f = Find(top, "metrics")) DROVER_RETURN_IF_ERROR(ParseDerivedMetrics(*f, spec));
  if (const Field* f = Find(top, "max_parallel")) {
    DROVER_ASSIGN_OR_RETURN(spec.max_parallel,
                            Int(*f, 0, kIntMax, "a non-negative integer",
                                "write how many runs may run at once, 0 for no limit"));
  }
  if (const Field* f = Find(top, "fail_fast")) {
    DROVER_ASSIGN_OR_RETURN(spec.fail_fast,
                            Int(*f, 0, 1000, "an integer from 0 to 1000",
                                "write after how many runs that all failed the same way the "
                                "experiment stops, such as 3, or 0 for never"));
  }
  if (const Field* f = Find(top, "retries")) {
    DROVER_ASSIGN_OR_RETURN(spec.retries, Int(*f, 0, kIntMax, "a non-negative integer",
                                              "write how many times to retry, such as 2"));
    spec.retries_given = true;
  }
  if (const Field* f = Find(top, "max_runs")) {
    DROVER_ASSIGN_OR_RETURN(spec.max_runs,
                            Int(*f, 1, kMaxRunsLimit, fmt::format("an integer from 1 to {}",
                                                                  kMaxRunsLimit),
                                "write the most runs this spec may expand to, such as 200000"));
  }
  // Counted by multiplication before anything is expanded (every face expands the grid).
  if (const int64_t runs = CountGrid(spec); runs > spec.max_runs) {
    std::vector<std::string> sizes;
    for (const auto& [name, value] : spec.params.items()) {
      if (value.is_array()) sizes.push_back(fmt::format("{} {}", value.size(), name));
    }
    const Field* at = Find(top, "params");
    std::string count = runs == std::numeric_limits<int64_t>::max()
                            ? std::string("more than 9.2e18")
                            : fmt::format("{}", runs);
    return Err(at ? at->key : root,
               fmt::format("params expand to {} runs ({}), over the limit of {} runs per "
                           "experiment; use fewer values, or raise the limit with max_runs: N "
                           "(at most {})",
                           count, Join(sizes, " x "), spec.max_runs, kMaxRunsLimit));
  }
  if (const Field* f = Find(top, "retry_backoff")) {
    DROVER_ASSIGN_OR_RETURN(spec.retry_backoff_ms, Duration(*f));
  }
  if (const Field* f = Find(top, "timeout")) {
    DROVER_ASSIGN_OR_RETURN(spec.timeout_ms, Duration(*f));
  }
  if (const Field* f = Find(top, "env")) DROVER_RETURN_IF_ERROR(ParseEnv(*f, spec));
  if (const Field* f = Find(top, "data")) DROVER_RETURN_IF_ERROR(ParseData(*f, spec));
  if (const Field* f = Find(top, "objective")) DROVER_RETURN_IF_ERROR(ParseObjective(*f, spec));
  if (const Field* f = Find(top, "oom")) DROVER_RETURN_IF_ERROR(ParseOom(*f, params, spec));
  if (const Field* f = Find(top, "monitor")) DROVER_RETURN_IF_ERROR(ParseMonitor(*f, spec));
  if (const Field* f = Find(top, "search")) DROVER_RETURN_IF_ERROR(ParseSearch(*f, spec));
  if (const Field* f = Find(top, "prune")) DROVER_RETURN_IF_ERROR(ParsePrune(*f, spec));
  if (stages && (spec.search || spec.prune)) {
    const Field* at = Find(top, spec.search ? "search" : "prune");
    return Err(at->key, fmt::format("{} and stages: do not go together yet; sweep a pipeline "
                                    "with lists under params:, or search in a spec of its own",
                                    at->name));
  }
  DROVER_RETURN_IF_ERROR(CheckSearch(root, top, params, spec));
  if (stages) {
    DROVER_RETURN_IF_ERROR(ParseStages(*stages, top, params, spec));
    // Counted before anything is expanded, as a grid is.
    if (const int64_t runs = CountPipelineRuns(spec); runs > spec.max_runs) {
      return Err(stages->key,
                 fmt::format("the stages make {} runs over params' values, over the limit of {} "
                             "runs per experiment; use fewer values, or raise max_runs (at most "
                             "{})",
                             runs == std::numeric_limits<int64_t>::max() ? std::string("more than 9.2e18")
                                                                          : std::to_string(runs),
                             spec.max_runs, kMaxRunsLimit));
    }
  }
  if (const Field* f = Find(top, "force")) {
    std::vector<std::string> names = {"all"};
    for (const StageSpec& st : spec.stages) names.push_back(st.name);
    std::vector<Node> items;
    if (f->value.IsScalar()) items.push_back(f->value);
    else if (f->value.IsSequence()) for (const Node& e : f->value) items.push_back(e);
    for (const Node& e : items) {
      const std::string name = e.IsScalar() ? e.Scalar() : std::string();
      if (spec.stages.empty()) {
        return Err(f->key, "force (--force) names stages to run again; this spec has no "
                           "stages:");
      }
      if (!Contains(names, name)) {
        std::optional<std::string> close = ClosestMatch(name, names);
        return Err(e, fmt::format("force: no stage '{}'{}; name a stage ({}) or all", name,
                                  close ? fmt::format(" (did you mean '{}'?)", *close) : "",
                                  Join(names, ", ")));
      }
      if (!Contains(spec.force, name)) spec.force.push_back(name);
    }
  }
  return spec;
}

Result<std::vector<std::string>> SpecParser::ParsePaths(const Field& f, bool outputs) const {
  const char* example = outputs ? "[data/, ckpt/model.pt]" : "[raw/, labels.csv]";
  std::vector<Node> items;
  if (f.value.IsScalar()) {
    items.push_back(f.value);
  } else if (f.value.IsSequence()) {
    for (const Node& e : f.value) items.push_back(e);
  } else {
    return Err(f.at(), fmt::format("{} must be a list of paths, got {}; write e.g. {}: {}", f.path,
                                   Describe(f.value), f.name, example));
  }
  if (items.size() > kMaxStagePaths) {
    return Err(f.at(), fmt::format("{} names {} paths; at most {} (name a folder that holds them)",
                                   f.path, items.size(), kMaxStagePaths));
  }
  std::vector<std::string> out;
  for (const Node& e : items) {
    if (!e.IsScalar() || Trim(e.Scalar()).empty()) {
      return Err(e.IsNull() ? f.at() : e,
                 fmt::format("each of {} must be a path, got {}; write e.g. {}: {}", f.path,
                             Describe(e), f.name, example));
    }
    fs::path p(e.Scalar());
    std::string norm = p.lexically_normal().string();
    while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
    if (outputs) {
      // Inside the working copy, where the stage writes and where its needers see it.
      if (p.is_absolute() || norm == "." || norm == ".." || norm.rfind("../", 0) == 0 ||
          norm.find_first_of(",:\\") != std::string::npos) {
        return Err(e, fmt::format("{}: '{}' must be a path inside the working copy, such as "
                                  "data/ or ckpt/model.pt (not absolute, not '.', no '..', no "
                                  "',', ':' or '\\')",
                                  f.path, e.Scalar()));
      }
    } else {
      const std::string abs = Normalize(p.is_absolute() ? p : fs::path(base_dir_) / p);
      std::error_code ec;
      if (!fs::exists(abs, ec)) {
        return Err(e, fmt::format("{}: '{}' does not exist (looked for {}); fix the path (a "
                                  "relative one starts at the spec's folder)",
                                  f.path, e.Scalar(), abs));
      }
      norm = e.Scalar();
    }
    if (std::find(out.begin(), out.end(), norm) != out.end()) {
      return Err(e, fmt::format("{} names '{}' twice; name it once", f.path, norm));
    }
    out.push_back(norm);
  }
  return out;
}

Status SpecParser::ParseStages(const Field& f, const std::vector<Field>& top,
                               const std::vector<Field>& params, Spec& spec) const {
  const char* example = "stages: {prepare: {command: \"python prepare.py\", outputs: [data/]}}";
  if (!f.value.IsMap() || f.value.size() == 0) {
    return Err(f.at(), fmt::format("stages must be a mapping of stage name: settings, got {}; "
                                   "write e.g. {}",
                                   Describe(f.value), example));
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, ReadMap(f.value, "stages", nullptr));
  if (fields.size() > kMaxStages) {
    return Err(f.at(), fmt::format("stages has {} stages; at most {}", fields.size(), kMaxStages));
  }
  std::vector<std::string> names;
  for (const Field& st : fields) names.push_back(st.name);
  std::vector<std::vector<const Field*>> need_nodes;
  for (const Field& st : fields) {
    if (!IsParamName(st.name)) {
      return Err(st.key, fmt::format("'{}' cannot name a stage; use letters, digits and '_', "
                                     "starting with a letter, such as train",
                                     st.name));
    }
    if (!st.value.IsMap()) {
      return Err(st.at(), fmt::format("{} must be a mapping with a command, got {}; write e.g. "
                                      "{}: {{command: \"python {}.py\"}}",
                                      st.path, Describe(st.value), st.name, st.name));
    }
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> sf, ReadMap(st.value, st.path, &kStageKeys));
    const Field* command = Find(sf, "command");
    if (!command) {
      return Err(st.key, fmt::format("{} has no command; add one, such as command: \"python "
                                     "{}.py\"",
                                     st.path, st.name));
    }
    // The stage's settings start from the pipeline's.
    Spec view = spec;
    view.command.clear();
    view.stages.clear();
    if (const Field* sh = Find(sf, "shell")) {
      Scalar b = Resolve(sh->value);
      if (b.kind != Kind::kBool) {
        return Err(sh->at(), fmt::format("{} must be true or false, got {}", sh->path,
                                         Describe(sh->value)));
      }
      view.shell = b.b;
    }
    DROVER_RETURN_IF_ERROR(ParseCommand(*command, params, view));
    if (const Field* r = Find(sf, "resources")) DROVER_RETURN_IF_ERROR(ParseResources(*r, view));
    if (const Field* x = Find(sf, "retries")) {
      DROVER_ASSIGN_OR_RETURN(view.retries,
                              Int(*x, 0, std::numeric_limits<int>::max(), "a non-negative integer",
                                  "write how many times to retry, such as 2"));
      view.retries_given = true;
    }
    if (const Field* x = Find(sf, "timeout")) {
      DROVER_ASSIGN_OR_RETURN(view.timeout_ms, Duration(*x));
    }
    if (const Field* x = Find(sf, "monitor")) DROVER_RETURN_IF_ERROR(ParseMonitor(*x, view));
    if (const Field* x = Find(sf, "env")) DROVER_RETURN_IF_ERROR(ParseEnv(*x, view));
    StageSpec stage;
    stage.name = st.name;
    CopyStageSettings(view, stage);
    if (const Field* x = Find(sf, "gather")) {
      Scalar b = Resolve(x->value);
      if (b.kind != Kind::kBool) {
        return Err(x->at(), fmt::format("{} must be true or false, got {}", x->path,
                                        Describe(x->value)));
      }
      stage.gather = b.b;
    }
    if (const Field* x = Find(sf, "inputs")) {
      DROVER_ASSIGN_OR_RETURN(stage.inputs, ParsePaths(*x, false));
    }
    if (const Field* x = Find(sf, "outputs")) {
      DROVER_ASSIGN_OR_RETURN(stage.outputs, ParsePaths(*x, true));
    }
    need_nodes.emplace_back();
    if (const Field* x = Find(sf, "needs")) {
      std::vector<Node> items;
      if (x->value.IsScalar()) items.push_back(x->value);
      else if (x->value.IsSequence()) for (const Node& e : x->value) items.push_back(e);
      else {
        return Err(x->at(), fmt::format("{} must be a list of stage names, got {}; write e.g. "
                                        "needs: [prepare]",
                                        x->path, Describe(x->value)));
      }
      for (const Node& e : items) {
        const std::string need = e.IsScalar() ? e.Scalar() : std::string();
        if (need == st.name) {
          return Err(e, fmt::format("{} needs itself; name the stages it comes after", x->path));
        }
        if (!Contains(names, need)) {
          std::optional<std::string> close = ClosestMatch(need, names);
          return Err(e, fmt::format("{}: no stage '{}'{}; the stages are {}", x->path, need,
                                    close ? fmt::format(" (did you mean '{}'?)", *close) : "",
                                    Join(names, ", ")));
        }
        if (Contains(stage.needs, need)) {
          return Err(e, fmt::format("{} names '{}' twice; name it once", x->path, need));
        }
        stage.needs.push_back(need);
      }
    }
    if (stage.gather && stage.needs.empty()) {
      return Err(st.key, fmt::format("{} gathers but needs nothing; name the stages whose runs "
                                     "it gathers, such as needs: [validate]",
                                     st.path));
    }
    spec.stages.push_back(std::move(stage));
  }
  // No cycle: each stage's needs come first in some order (depth-first, colours).
  std::map<std::string, int> colour;
  std::function<Status(const StageSpec&)> visit = [&](const StageSpec& s) -> Status {
    colour[s.name] = 1;
    for (const std::string& n : s.needs) {
      if (colour[n] == 1) {
        return Err(f.key, fmt::format("stages {} and {} need each other (a cycle); a stage can "
                                      "only need stages that can run before it",
                                      s.name, n));
      }
      if (colour[n] == 0) DROVER_RETURN_IF_ERROR(visit(*FindStage(spec, n)));
    }
    colour[s.name] = 2;
    return Status::Ok();
  };
  for (const StageSpec& s : spec.stages) {
    if (colour[s.name] == 0) DROVER_RETURN_IF_ERROR(visit(s));
  }
  // A stage that runs once per need's run sees their outputs in its working copy: two needs may
  // not put theirs at the same place or one inside the other, nor over one of its own.
  if (std::string clash = OutputsClash(spec); !clash.empty()) return Err(f.key, clash);
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadSpecFile(const std::string& path) {
  if (path != kSpecFromStdin) {
    return ReadBoundedFile(path, kMaxSpecBytes, "spec file", "give the YAML file");
  }
  // `-`: the spec is piped in (a generated spec, a heredoc), read to its end within the limit,
  // once: a later call (drover run parses it, then hands it to a daemon) gets the same text.
  static std::optional<std::string> read_once;
  if (read_once) return *read_once;
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot read the spec from standard input");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxSpecBytes) {
      return InvalidArgument(fmt::format(
          "the spec on standard input is over {}; a spec is a short YAML file (put data in "
          "files the run reads)",
          FormatBytes(static_cast<int64_t>(kMaxSpecBytes))));
    }
  }
  read_once = text;
  return text;
}

Result<Spec> ParseSpecFile(const std::string& path, const std::vector<std::string>& overrides) {
  if (path == kSpecFromStdin) {
    // Relative paths in it (workdir) are taken from the current folder.
    DROVER_ASSIGN_OR_RETURN(std::string text, ReadSpecFile(path));
    std::error_code ec;
    return ParseSpecString(text, "<stdin>", fs::current_path(ec).string(), overrides);
  }
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec).lexically_normal();
  DROVER_ASSIGN_OR_RETURN(std::string text, ReadSpecFile(abs.string()));
  Result<Spec> spec = ParseSpecString(text, path, abs.parent_path().string(), overrides);
  if (spec.ok()) spec->source_path = abs.string();
  return spec;
}

Result<Spec> ParseSpecString(const std::string& yaml, const std::string& display_name,
                             const std::string& base_dir,
                             const std::vector<std::string>& overrides) {
  try {
    return SpecParser(display_name, base_dir).Parse(yaml, overrides);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws for conditions its parser does not report as syntax errors (deep nesting,
    // bad aliases); they are still the user's input.
    return InvalidArgument(fmt::format("{}:{}:{}: YAML error: {}; fix the YAML at this position",
                                       display_name, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

}  // namespace drover
