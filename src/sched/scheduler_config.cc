#include "sched/scheduler_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace drover::sched {

namespace {

using yaml::Describe;
using yaml::Field;
using yaml::Find;
using YAML::Node;

const std::vector<std::string> kSchedulerKeys = {
    "policy", "min_runtime", "preempt_above", "grace", "gpu_reserve", "las_threshold", "groups"};
const std::vector<std::string> kGroupKeys = {"weight", "quota"};
constexpr int64_t kIntMax = std::numeric_limits<int>::max();

yaml::MapRules Rules(const std::vector<std::string>* valid, std::string_view example) {
  yaml::MapRules rules;
  rules.valid = valid;
  rules.example = example;
  return rules;
}

Status ParseGroups(const yaml::Reader& r, const Field& f, SchedulerConfig& s) {
  if (f.value.IsNull()) return Status::Ok();
  if (!f.value.IsMap()) {
    return r.Err(f.at(), fmt::format("scheduler.groups must be a mapping of group names, got {}; "
                                   "write e.g. groups: {{vision: {{weight: 2, quota: 4}}}}",
                                   Describe(f.value)));
  }
  for (auto it = f.value.begin(); it != f.value.end(); ++it) {
    const Node key = it->first;
    std::string name = key.IsScalar() ? key.Scalar() : "";
    bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
    });
    if (!plain) {
      return r.Err(key, fmt::format("a group name may only hold letters, digits, '.', '_' and '-', "
                                  "got {}; write the name a spec gives as group:, such as vision",
                                  Describe(key)));
    }
    if (s.groups.count(name)) {
      return r.Err(key,
                 fmt::format("duplicate key 'scheduler.groups.{}'; keep only one of them", name));
    }
    std::string path = "scheduler.groups." + name;
    // A copy: it->second belongs to a proxy that is gone at the end of this statement.
    const Node value = it->second;
    const Node& at = value.IsNull() ? key : value;
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                            r.ReadMap(at, value, path, Rules(&kGroupKeys, "{weight: 2, quota: 4}")));
    GroupShare share;
    if (const Field* x = Find(fields, "weight")) {
      DROVER_ASSIGN_OR_RETURN(share.weight,
                              r.Real(*x, 0, std::numeric_limits<double>::infinity(), true, false,
                                   "write the group's share relative to others (1 each by "
                                   "default), such as 2"));
    }
    if (const Field* x = Find(fields, "quota")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, r.Int(*x, 0, kIntMax, "an integer >= 0",
                                             "write the most GPUs the group may hold, 0 for no "
                                             "cap"));
      share.quota_gpus = static_cast<int>(v);
    }
    s.groups[name] = share;
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& SchedulerKeys() { return kSchedulerKeys; }

Status ParseSchedulerSection(const yaml::Reader& r, const Field& f, SchedulerConfig* out) {
  SchedulerConfig& s = *out;
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          r.ReadMap(f.at(), f.value, "scheduler", Rules(&kSchedulerKeys, "scheduler: {policy: default, grace: 30s}")));
  if (const Field* x = Find(fields, "policy")) {
    if (!x->value.IsScalar()) {
      return r.Err(x->at(), fmt::format("scheduler.policy must be a policy's name, got {}; write "
                                      "e.g. policy: las",
                                      Describe(x->value)));
    }
    const std::string& name = x->value.Scalar();
    Result<PolicyKind> kind = ParsePolicy(name);
    if (!kind.ok()) return r.Err(x->at(), "scheduler.policy: " + kind.status().message());
    s.policy = *kind;
  }
  if (const Field* x = Find(fields, "min_runtime")) {
    DROVER_ASSIGN_OR_RETURN(s.min_runtime_ms, r.Duration(*x, 0));
  }
  if (const Field* x = Find(fields, "preempt_above")) {
    DROVER_ASSIGN_OR_RETURN(s.preempt_above,
                            r.Real(*x, 0, 1, false, false,
                                 "write the share of GPUs that must be allocated before a run is "
                                 "preempted, such as 0.8"));
  }
  if (const Field* x = Find(fields, "grace")) {
    DROVER_ASSIGN_OR_RETURN(s.grace_ms, r.Duration(*x, 0));
  }
  if (const Field* x = Find(fields, "gpu_reserve")) {
    DROVER_ASSIGN_OR_RETURN(s.gpu_reserve, r.Bytes(*x));
  }
  if (const Field* x = Find(fields, "las_threshold")) {
    DROVER_ASSIGN_OR_RETURN(s.las_threshold_gpu_ms, r.Duration(*x, 1));
  }
  if (const Field* x = Find(fields, "groups")) DROVER_RETURN_IF_ERROR(ParseGroups(r, *x, s));
  return Status::Ok();
}

PolicyConfig SchedulerConfig::Policy() const {
  sched::PolicyConfig p = ForPolicy(policy);
  if (min_runtime_ms) p.min_runtime_ms = *min_runtime_ms;
  if (preempt_above) p.preempt_above_allocated = *preempt_above;
  if (las_threshold_gpu_ms) p.las_threshold_gpu_ms = *las_threshold_gpu_ms;
  return p;
}

}  // namespace drover::sched
