#include "model/spec.h"

#include "model/run.h"

namespace drover {

std::string InterpreterOf(const std::vector<std::string>& argv, bool shell) {
  if (shell || argv.empty()) return "";
  const std::string& program = argv[0];
  const size_t slash = program.rfind('/');
  const std::string base = slash == std::string::npos ? program : program.substr(slash + 1);
  return base.rfind("python", 0) == 0 ? program : "";
}

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
  j["resources"] = {{"gpus", s.resources.gpus},
                    {"gpu_memory", s.resources.gpu_memory},
                    {"cpus", s.resources.cpus}};
  j["priority"] = s.priority;
  if (!s.group.empty()) j["group"] = s.group;
  j["preemptible"] = s.preemptible;
  j["max_parallel"] = s.max_parallel;
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
  }
  j["monitor"] = {{"watch", s.monitor.watch},
                  {"on_nan", s.monitor.stop_on_nan ? "stop" : "ignore"},
                  {"stall_ms", s.monitor.stall_ms}};
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
    const Json& r = j.at("resources");
    s.resources.gpus = r.value("gpus", 0);
    s.resources.gpu_memory = r.value("gpu_memory", int64_t{0});
    s.resources.cpus = r.value("cpus", 1);
    s.priority = j.value("priority", 0);
    s.group = j.value("group", "");
    s.preemptible = j.value("preemptible", true);
    s.max_parallel = j.value("max_parallel", 0);
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
      s.prune = prune;
    }
    if (j.contains("monitor")) {
      const Json& m = j["monitor"];
      s.monitor.watch = m.value("watch", std::vector<std::string>{});
      s.monitor.stop_on_nan = m.value("on_nan", "stop") == "stop";
      s.monitor.stall_ms = m.value("stall_ms", int64_t{0});
    }
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
