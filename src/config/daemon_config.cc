#include "config/daemon_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>


#include "common/files.h"
#include "spec/yaml_fields.h"

namespace drover::config {

namespace {

using yaml::Describe;
using yaml::Field;
using yaml::Find;

const std::vector<std::string> kTopKeys = {"telemetry",   "alerts",   "detectors", "scheduler",
                                           "environment", "executor", "lab"};
const std::vector<std::string> kLabKeys = {"admin_group", "teams"};

Status ParseLabSection(const yaml::Reader& r, const Field& f, LabConfig* out) {
  yaml::MapRules rules;
  rules.valid = &kLabKeys;
  rules.example = "lab: {admin_group: drover-admins}";
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, r.ReadMap(f.at(), f.value, "lab", rules));
  if (const Field* g = Find(fields, "admin_group")) {
    DROVER_ASSIGN_OR_RETURN(out->admin_group, r.Text(*g, "the name of a Unix group"));
  }
  if (const Field* t = Find(fields, "teams")) {
    if (!t->value.IsSequence()) {
      return r.Err(t->value, "lab.teams is a list of Unix group names, e.g. [vision, nlp]");
    }
    for (const YAML::Node& item : t->value) {
      if (!item.IsScalar() || item.Scalar().empty() || item.Scalar().size() > 64) {
        return r.Err(item, "a team is the name of a Unix group (1-64 characters)");
      }
      out->teams.push_back(item.Scalar());
    }
  }
  return Status::Ok();
}

Result<DaemonConfig> Parse(const std::string& text, const std::string& source) {
  yaml::Reader r(source);
  DROVER_ASSIGN_OR_RETURN(YAML::Node root, yaml::Load(text, source));
  DROVER_RETURN_IF_ERROR(yaml::CheckScalarsUtf8(root, source));
  DaemonConfig c;
  if (!root.IsDefined() || root.IsNull()) return c;  // an empty file: all defaults
  if (!root.IsMap()) {
    return r.Err(root, fmt::format("the config must be a mapping with telemetry:, alerts:, "
                                   "detectors: and scheduler: sections, got {}; write one "
                                   "'key: value' per line",
                                   Describe(root)));
  }
  // Each section's keys, so one written at the top is pointed home.
  const yaml::Sections sections = {{"telemetry", &watch::TelemetryKeys()},
                                   {"alerts", &watch::AlertKeys()},
                                   {"detectors", &watch::DetectorKeys()},
                                   {"scheduler", &sched::SchedulerKeys()},
                                   {"environment", &EnvironmentKeys()},
                                   {"executor", &ExecutorKeys(true)},
                                   {"lab", &kLabKeys}};
  yaml::MapRules rules;
  rules.valid = &kTopKeys;
  rules.sections = &sections;
  rules.example = "alerts: {silence: 30m}";
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> top, r.ReadMap(root, root, "", rules));
  for (const char* watch_section : {"telemetry", "alerts", "detectors"}) {
    if (const Field* f = Find(top, watch_section)) {
      DROVER_RETURN_IF_ERROR(watch::ParseWatchSection(r, *f, &c.watch));
    }
  }
  if (const Field* f = Find(top, "scheduler")) {
    DROVER_RETURN_IF_ERROR(sched::ParseSchedulerSection(r, *f, &c.scheduler));
  }
  if (const Field* f = Find(top, "environment")) {
    DROVER_RETURN_IF_ERROR(ParseEnvironmentSection(r, *f, &c.environment));
  }
  if (const Field* f = Find(top, "executor")) {
    DROVER_RETURN_IF_ERROR(ParseExecutorSection(r, *f, /*daemon=*/true, &c.executor));
  }
  if (const Field* f = Find(top, "lab")) DROVER_RETURN_IF_ERROR(ParseLabSection(r, *f, &c.lab));
  return c;
}

}  // namespace

Result<DaemonConfig> ParseDaemonConfig(const std::string& yaml_text, const std::string& source) {
  DROVER_RETURN_IF_ERROR(yaml::CheckUtf8(yaml_text, source, "the config"));
  try {
    return Parse(yaml_text, source);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws for conditions its parser does not report as syntax errors (deep nesting,
    // bad aliases); they are still the user's input.
    return InvalidArgument(fmt::format("{}:{}:{}: YAML error: {}; fix the YAML at this position",
                                       source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  Result<std::string> text =
      ReadBoundedFile(path, kMaxConfigBytes, "config file", "give the YAML file to --config");
  if (!text.ok() && text.status().code() == Code::kNotFound) {
    return NotFound(
        fmt::format("config file '{}' not found; check the path given to --config, or leave "
                    "--config out to use the defaults",
                    path));
  }
  if (!text.ok()) return text.status();
  return ParseDaemonConfig(*text, path);
}

}  // namespace drover::config
