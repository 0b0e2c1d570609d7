#include "model/spec.h"

#include "model/enum_names.h"
#include "model/run.h"

namespace drover {

std::string InterpreterOf(const std::vector<std::string>& argv, bool shell) {
  if (shell || argv.empty()) return "";
  const std::string& program = argv[0];
  const size_t slash = program.rfind('/');
  const std::string base = slash == std::string::npos ? program : program.substr(slash + 1);
  return base.rfind("python", 0) == 0 ? program : "";
}

Spec StageView(const Spec& spec, const StageSpec& stage) {
  Spec v = spec;
  v.stages.clear();
  CopyStageSettings(stage, v);
  return v;
}

const StageSpec* FindStage(const Spec& spec, const std::string& name) {
  for (const StageSpec& s : spec.stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string_view ToString(ExecutorKind k) {
  switch (k) {
    case ExecutorKind::kLocal: return "local";
    case ExecutorKind::kSlurm: return "slurm";
  }
  return "?";
}

std::optional<ExecutorKind> ParseExecutorKind(std::string_view name) {
  return ParseByName(kAllExecutorKinds, name);
}

std::vector<std::string> ExecutorKindNames() {
  std::vector<std::string> out;
  for (ExecutorKind k : kAllExecutorKinds) out.emplace_back(ToString(k));
  return out;
}

Json ExecutorJson(const ExecutorSpec& e) {
  Json j = {{"kind", ToString(e.kind)}};
  if (!e.partition.empty()) j["partition"] = e.partition;
  if (!e.account.empty()) j["account"] = e.account;
  if (!e.qos.empty()) j["qos"] = e.qos;
  if (!e.sbatch.empty()) j["sbatch"] = e.sbatch;
  return j;
}

ExecutorSpec ExecutorFrom(const Json& j) {
  ExecutorSpec e;
  if (!j.is_object()) return e;
  e.given = true;
  e.kind = ParseExecutorKind(j.value("kind", "local")).value_or(ExecutorKind::kLocal);
  e.partition = j.value("partition", "");
  e.account = j.value("account", "");
  e.qos = j.value("qos", "");
  e.sbatch = j.value("sbatch", std::vector<std::string>{});
  return e;
}

std::string_view ToString(ContainerRuntime r) {
  switch (r) {
    case ContainerRuntime::kDocker: return "docker";
    case ContainerRuntime::kPyxis: return "pyxis";
    case ContainerRuntime::kPodman: break;
  }
  return "podman";
}

Json ContainerJson(const ContainerSpec& c) {
  Json j = {{"image", c.image}, {"runtime", ToString(c.runtime)}, {"network", c.network}};
  if (!c.mounts.empty()) j["mounts"] = c.mounts;
  if (!c.image_id.empty()) j["image_id"] = c.image_id;
  if (!c.digest.empty()) j["digest"] = c.digest;
  return j;
}

ContainerSpec ContainerFrom(const Json& j) {
  ContainerSpec c;
  if (!j.is_object()) return c;
  auto text = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  c.image = text("image");
  const std::string runtime = text("runtime");
  c.runtime = runtime == "docker"  ? ContainerRuntime::kDocker
              : runtime == "pyxis" ? ContainerRuntime::kPyxis
                                   : ContainerRuntime::kPodman;
  c.runtime_given = !runtime.empty();  // a stored spec has the runtime its pin decided
  if (auto it = j.find("mounts"); it != j.end() && it->is_array()) {
    for (const Json& m : *it) {
      if (m.is_string()) c.mounts.push_back(m.get<std::string>());
    }
  }
  auto net = j.find("network");
  c.network = net != j.end() && net->is_boolean() && net->get<bool>();
  c.image_id = text("image_id");
  c.digest = text("digest");
  return c;
}

std::string DescribeContainer(const Json& spec) {
  if (!spec.is_object()) return "";
  auto it = spec.find("container");
  if (it == spec.end() || !it->is_object()) return "";
  const ContainerSpec c = ContainerFrom(*it);
  std::string out = c.image + " (" + std::string(ToString(c.runtime)) + ")";
  if (!c.image_id.empty()) out += ", image " + c.image_id;
  if (!c.digest.empty()) out += ", digest " + c.digest;
  out += c.network ? ", network" : ", no network";
  return out;
}

namespace {

Json ResourcesJson(const Resources& r) {
  Json j = {{"gpus", r.gpus}, {"gpu_memory", r.gpu_memory}, {"cpus", r.cpus}};
  if (r.memory > 0) j["memory"] = r.memory;
  return j;
}
Resources ResourcesFrom(const Json& r) {
  Resources out;
  out.gpus = r.value("gpus", 0);
  out.gpu_memory = r.value("gpu_memory", int64_t{0});
  out.cpus = r.value("cpus", 1);
  out.memory = r.value("memory", int64_t{0});
  return out;
}
Json MonitorJson(const MonitorPolicy& m) {
  return {{"watch", m.watch}, {"on_nan", m.stop_on_nan ? "stop" : "ignore"}, {"stall_ms", m.stall_ms}};
}
MonitorPolicy MonitorFrom(const Json& m) {
  MonitorPolicy out;
  out.watch = m.value("watch", std::vector<std::string>{});
  out.stop_on_nan = m.value("on_nan", "stop") == "stop";
  out.stall_ms = m.value("stall_ms", int64_t{0});
  return out;
}

Json StageJson(const StageSpec& st) {
  Json j;
  j["name"] = st.name;
  j["command"] = st.command;
  j["shell"] = st.shell;
  j["needs"] = st.needs;
  j["inputs"] = st.inputs;
  j["outputs"] = st.outputs;
  j["gather"] = st.gather;
  j["resources"] = ResourcesJson(st.resources);
  j["retries"] = st.retries;
  if (st.retries_given) j["retries_given"] = true;
  j["timeout_ms"] = st.timeout_ms;
  j["monitor"] = MonitorJson(st.monitor);
  j["env"] = st.env;
  if (!st.input_hashes.empty()) j["input_hashes"] = st.input_hashes;
  return j;
}

StageSpec StageFrom(const Json& j) {
  StageSpec st;
  st.name = j.at("name").get<std::string>();
  st.command = j.at("command").get<std::vector<std::string>>();
  st.shell = j.value("shell", false);
  st.needs = j.value("needs", std::vector<std::string>{});
  st.inputs = j.value("inputs", std::vector<std::string>{});
  st.outputs = j.value("outputs", std::vector<std::string>{});
  st.gather = j.value("gather", false);
  st.resources = ResourcesFrom(j.value("resources", Json::object()));
  st.retries = j.value("retries", 0);
  st.retries_given = j.value("retries_given", false);
  st.timeout_ms = j.value("timeout_ms", int64_t{0});
  st.monitor = MonitorFrom(j.value("monitor", Json::object()));
  st.env = j.value("env", std::map<std::string, std::string>{});
  st.input_hashes = j.value("input_hashes", std::map<std::string, std::string>{});
  return st;
}

}  // namespace

Json SpecToJson(const Spec& s) {
  Json j;
  j["name"] = s.name;
  j["command"] = s.command;
  j["shell"] = s.shell;
  j["workdir"] = s.workdir;
  if (!s.project_dir.empty()) j["project_dir"] = s.project_dir;
  j["params"] = Json::parse(s.params.dump());
  // JSON objects here keep no order; the spec's order of params is its grid's and its search's.
  if (s.params.size() > 1) {
    Json order = Json::array();
    for (const auto& [name, value] : s.params.items()) order.push_back(name);
    j["param_order"] = order;
  }
  j["resources"] = ResourcesJson(s.resources);
  if (s.executor.given) j["executor"] = ExecutorJson(s.executor);
  if (s.container) j["container"] = ContainerJson(*s.container);
  j["priority"] = s.priority;
  if (!s.group.empty()) j["group"] = s.group;
  j["preemptible"] = s.preemptible;
  j["checkpoint"] = s.checkpoint;
  if (s.tensorboard_off) {
    j["tensorboard"] = false;
  } else if (!s.tensorboard.empty()) {
    j["tensorboard"] = s.tensorboard;
  }
  if (!s.metrics.empty()) {
    Json m = Json::array();
    for (const auto& d : s.metrics) {
      m.push_back({{"name", d.name}, {"expression", d.expression}, {"inputs", d.inputs}});
    }
    j["metrics"] = std::move(m);
  }
  j["max_parallel"] = s.max_parallel;
  j["fail_fast"] = s.fail_fast;
  j["retries"] = s.retries;
  if (s.retries_given) j["retries_given"] = true;
  j["retry_backoff_ms"] = s.retry_backoff_ms;
  j["timeout_ms"] = s.timeout_ms;
  j["env"] = s.env;
  if (!s.data.empty()) j["data"] = s.data;
  if (s.objective) {
    j["objective"] = {{"metric", s.objective->metric},
                      {"mode", s.objective->maximize ? "max" : "min"},
                      {"summary", ScoreSummaryText(s.objective->summary, s.objective->last_k)}};
  }
  if (s.oom.enabled()) {
    j["oom"] = {{"param", s.oom.param}, {"min", s.oom.min}, {"accumulate", s.oom.accumulate}};
  }
  if (s.search) {
    j["search"] = {{"sampler", ToString(s.search->sampler)},
                   {"trials", s.search->trials},
                   {"parallel", s.search->parallel},
                   {"multivariate", s.search->multivariate}};
    if (s.search->seeded) j["search"]["seed"] = s.search->seed;
  }
  if (s.prune) {
    j["prune"] = {{"rule", ToString(s.prune->rule)},         {"metric", s.prune->metric},
                  {"mode", s.prune->maximize ? "max" : "min"}, {"min_steps", s.prune->min_steps},
                  {"reduction", s.prune->reduction},         {"max_steps", s.prune->max_steps},
                  {"startup_trials", s.prune->startup_trials}};
    if (!s.prune->resource.empty()) j["prune"]["resource"] = s.prune->resource;
  }
  j["monitor"] = MonitorJson(s.monitor);
  if (!s.stages.empty()) {
    j["stages"] = Json::array();
    for (const StageSpec& st : s.stages) j["stages"].push_back(StageJson(st));
  }
  if (!s.force.empty()) j["force"] = s.force;
  if (s.rerun) j["rerun"] = true;
  return j;
}

Result<Spec> SpecFromJson(const Json& j) {
  try {
    Spec s;
    s.name = j.at("name").get<std::string>();
    s.command = j.at("command").get<std::vector<std::string>>();
    s.shell = j.value("shell", false);
    s.workdir = j.value("workdir", "");
    s.project_dir = j.value("project_dir", "");
    const Json params = j.value("params", Json::object());
    s.params = OrderedJson::object();
    // In the order written (param_order), then any the order does not name.
    for (const auto& name : j.value("param_order", Json::array())) {
      if (name.is_string() && params.contains(name.get<std::string>())) {
        s.params[name.get<std::string>()] = OrderedJson::parse(params[name.get<std::string>()].dump());
      }
    }
    for (const auto& [name, value] : params.items()) {
      if (!s.params.contains(name)) s.params[name] = OrderedJson::parse(value.dump());
    }
    s.resources = ResourcesFrom(j.at("resources"));
    if (j.contains("executor")) s.executor = ExecutorFrom(j.at("executor"));
    if (j.contains("container")) s.container = ContainerFrom(j.at("container"));
    s.priority = j.value("priority", 0);
    s.group = j.value("group", "");
    // A spec stored before `checkpoint` existed wrote preemptible: true for every spec (the old
    // default): its runs cannot be known to resume, so they are not preempted now.
    s.checkpoint = j.value("checkpoint", false);
    s.preemptible = j.contains("checkpoint") && j.value("preemptible", false);
    if (auto tb = j.find("tensorboard"); tb != j.end()) {
      if (tb->is_boolean()) s.tensorboard_off = !tb->get<bool>();
      if (tb->is_string()) s.tensorboard = tb->get<std::string>();
    }
    for (const auto& d : j.value("metrics", Json::array())) {
      s.metrics.push_back({d.at("name").get<std::string>(), d.at("expression").get<std::string>(),
                           d.value("inputs", std::vector<std::string>{})});
    }
    s.max_parallel = j.value("max_parallel", 0);
    s.fail_fast = j.value("fail_fast", 3);
    s.retries = j.value("retries", 0);
    s.retries_given = j.value("retries_given", false);
    s.retry_backoff_ms = j.value("retry_backoff_ms", int64_t{1000});
    s.timeout_ms = j.value("timeout_ms", int64_t{0});
    s.env = j.value("env", std::map<std::string, std::string>{});
    s.data = j.value("data", std::map<std::string, std::string>{});
    if (j.contains("objective")) {
      Objective o;
      o.metric = j["objective"].at("metric").get<std::string>();
      o.maximize = j["objective"].value("mode", "max") == "max";
      // Specs stored before objective.summary existed ranked by the last value.
      if (auto rule = ParseScoreSummary(j["objective"].value("summary", "last")); rule.ok()) {
        o.summary = rule->summary;
        o.last_k = rule->last_k;
      }
      s.objective = o;
    }
    if (j.contains("oom")) {
      s.oom.param = j["oom"].at("param").get<std::string>();
      s.oom.min = j["oom"].value("min", int64_t{1});
      s.oom.accumulate = j["oom"].value("accumulate", "");
    }
    if (j.contains("search")) {
      const Json& x = j["search"];
      SearchSpec search;
      if (auto k = ParseSamplerKind(x.value("sampler", "auto"))) search.sampler = *k;
      search.trials = x.at("trials").get<int64_t>();
      search.parallel = x.value("parallel", 4);
      search.seeded = x.contains("seed");
      search.seed = x.value("seed", uint64_t{0});
      search.multivariate = x.value("multivariate", true);
      s.search = search;
    }
    if (j.contains("prune")) {
      const Json& x = j["prune"];
      PruneSpec prune;
      if (auto r = ParsePruneRule(x.value("rule", "asha"))) prune.rule = *r;
      prune.metric = x.at("metric").get<std::string>();
      prune.maximize = x.value("mode", "max") == "max";
      prune.min_steps = x.value("min_steps", int64_t{1});
      prune.reduction = x.value("reduction", 3);
      prune.max_steps = x.value("max_steps", int64_t{0});
      prune.startup_trials = x.value("startup_trials", 5);
      prune.resource = x.value("resource", std::string());
      s.prune = prune;
    }
    if (j.contains("monitor")) s.monitor = MonitorFrom(j["monitor"]);
    for (const Json& st : j.value("stages", Json::array())) s.stages.push_back(StageFrom(st));
    s.force = j.value("force", std::vector<std::string>{});
    s.rerun = j.value("rerun", false);
    return s;
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("stored spec is not readable: ") + e.what());
  }
}

std::string_view ToString(SamplerKind k) {
  switch (k) {
    case SamplerKind::kAuto: return "auto";
    case SamplerKind::kTpe: return "tpe";
    case SamplerKind::kGp: return "gp";
    case SamplerKind::kRandom: return "random";
    case SamplerKind::kGrid: return "grid";
  }
  return "?";
}

std::optional<SamplerKind> ParseSamplerKind(std::string_view text) {
  for (SamplerKind k : {SamplerKind::kAuto, SamplerKind::kTpe, SamplerKind::kGp,
                        SamplerKind::kRandom, SamplerKind::kGrid}) {
    if (ToString(k) == text) return k;
  }
  return std::nullopt;
}

std::string_view ToString(PruneRule r) {
  switch (r) {
    case PruneRule::kMedian: return "median";
    case PruneRule::kAsha: return "asha";
    case PruneRule::kHyperband: return "hyperband";
  }
  return "?";
}

std::optional<PruneRule> ParsePruneRule(std::string_view text) {
  for (PruneRule r : {PruneRule::kMedian, PruneRule::kAsha, PruneRule::kHyperband}) {
    if (ToString(r) == text) return r;
  }
  return std::nullopt;
}

Result<SummaryRule> ParseScoreSummary(std::string_view text) {
  const std::string_view mean = "mean_last:";
  if (text == "last") return SummaryRule{ScoreSummary::kLast, 0};
  if (text == "best") return SummaryRule{ScoreSummary::kBest, 0};
  if (text.substr(0, mean.size()) == mean) {
    std::string_view k = text.substr(mean.size());
    int n = 0;
    bool digits = !k.empty() && k.size() <= 4;
    for (char c : k) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) n = n * 10 + (c - '0');
    }
    if (digits && n >= 1 && n <= kMaxLastK) return SummaryRule{ScoreSummary::kMeanLast, n};
    return InvalidArgument("mean_last:K wants a whole number K from 1 to " +
                           std::to_string(kMaxLastK) + ", got '" + std::string(text) + "'");
  }
  return InvalidArgument("the summary must be last (the last value), best (the highest for max, "
                         "the lowest for min) or mean_last:K (the mean of the last K values), "
                         "got '" + std::string(text) + "'");
}

std::string ScoreSummaryText(ScoreSummary summary, int last_k) {
  switch (summary) {
    case ScoreSummary::kBest:
      return "best";
    case ScoreSummary::kMeanLast:
      return "mean_last:" + std::to_string(last_k);
    case ScoreSummary::kLast:
      break;
  }
  return "last";
}

}  // namespace drover

namespace drover {

std::string PlacementText(const Json& executor, const char* key) {
  if (!executor.is_object()) return "";
  auto it = executor.find(key);
  return it != executor.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string DescribePlacement(const Json& executor) {
  if (PlacementText(executor, "kind") != ToString(ExecutorKind::kSlurm)) return "";
  auto id = executor.find("job_id");
  std::string out = "Slurm job " + (id != executor.end() && id->is_number_integer()
                                        ? std::to_string(id->get<int64_t>())
                                        : std::string("?"));
  const std::string state = PlacementText(executor, "state");
  const std::string node = PlacementText(executor, "node");
  const std::string partition = PlacementText(executor, "partition");
  const std::string reason = PlacementText(executor, "reason");
  if (state == "SUBMITTED" || state == "PENDING") {
    out += ", pending";
    if (!reason.empty()) out += " (" + reason + ")";
    return out;
  }
  if (!node.empty()) out += " on " + node;
  if (!partition.empty()) out += " (partition " + partition + ")";
  if (!state.empty() && state != "RUNNING") out += ", " + state;
  return out;
}

}  // namespace drover
