#include "protocol/json_codec.h"

#include "protocol/api.h"

namespace drover::protocol {

Json ToJson(const Experiment& e) {
  return {{"id", e.id},
          {"name", e.name},
          {"status", ToString(e.status)},
          {"snapshot", e.snapshot_hash},
          {"git_commit", e.git_commit},
          {"git_dirty", !e.git_diff.empty()},
          {"created_ms", e.created_ms},
          {"user", e.user},
          {"spec", e.spec}};
}

Json ToJson(const RunCounts& c) {
  Json j = Json::object();
  for (RunState s : kAllRunStates) j[std::string(ToString(s))] = c.Of(s);
  return j;
}

Json ToJson(const Run& r) {
  Json j = {{"id", r.id},
          {"experiment_id", r.experiment_id},
          {"user", r.user},
          {"index", r.index},
          {"state", ToString(r.state)},
          {"params", r.params},
          {"current_params", r.current_params},
          {"fingerprint", r.fingerprint},
          {"priority", r.priority},
          {"resources",
           {{"gpus", r.resources.gpus},
            {"gpu_memory", r.resources.gpu_memory},
            {"cpus", r.resources.cpus}}},
          {"attempts", r.attempts},
          {"retries_used", r.retries_used},
          {"reason", r.reason},
          {"created_ms", r.created_ms},
          {"started_ms", r.started_ms},
          {"ended_ms", r.ended_ms},
          {"metrics", r.final_metrics}};
  // Pipelines only: a plain run's JSON stays as it was.
  if (!r.stage.empty()) {
    j["stage"] = r.stage;
    j["needs"] = r.needs;
  }
  if (r.cached_from != 0) j["cached_from"] = r.cached_from;
  if (!r.snapshot_hash.empty()) {
    j["snapshot_hash"] = r.snapshot_hash;
    j["snapshot_from"] = r.snapshot_from;
  }
  // A search's trials only: how its parameters were chosen.
  if (r.origin != TrialOrigin::kNone) j["origin"] = ToString(r.origin);
  return j;
}

Json ToJson(const RunArtifacts& a) {
  Json files = Json::array();
  for (const Artifact& f : a.files) {
    files.push_back({{"path", f.path}, {"sha256", f.hash}, {"bytes", f.bytes}, {"mode", f.mode}});
  }
  return {{"run_id", a.run_id}, {"source_run", a.source_run}, {"dir", a.dir}, {"files", files}};
}

namespace {
Json EventFilesJson(const Attempt& a) {
  Json j = Json::object();
  for (const auto& [path, f] : a.event_files) {
    j[path] = {{"offset", f.offset}, {"corrupt", f.corrupt}};
  }
  return j;
}
}  // namespace

Json ToJson(const Attempt& a) {
  return {{"id", a.id},
          {"run_id", a.run_id},
          {"number", a.number},
          {"ended", a.ended},
          {"reason", a.reason},
          {"stopping", a.stopping ? Json(std::string(ToString(*a.stopping))) : Json(nullptr)},
          {"exit_code", a.exit_code},
          {"signal", a.signal},
          {"pid", a.pid},
          {"gpus", a.gpus},
          {"cuda_visible_devices", a.cuda_visible_devices},
          {"params", a.params},
          {"argv", a.argv},
          {"workdir", a.workdir},
          {"pid_start", a.pid_start},
          {"exit_path", a.exit_path},
          {"error", a.error},
          {"started_ms", a.started_ms},
          {"ended_ms", a.ended_ms},
          {"stdout_path", a.stdout_path},
          {"stderr_path", a.stderr_path},
          {"hostname", a.hostname},
          {"drover_version", a.drover_version},
          {"executor", a.executor},
          {"placement", DescribePlacement(a.executor)},
          {"hparams", a.hparams},
          {"checkpoint", a.checkpoint ? Json{{"step", a.checkpoint->step},
                                             {"t_ms", a.checkpoint->t_ms}}
                                      : Json(nullptr)},
          {"event_files", EventFilesJson(a)}};
}

Json ToJson(const MetricPoint& p) {
  // NaN and infinities as NumberJson spells them (not null): +Inf is a value, not a missing one.
  return {{"attempt_id", p.attempt_id},
          {"step", p.step},
          {"name", p.name},
          {"value", NumberJson(p.value)},
          {"t_ms", p.t_ms}};
}

Json ToJson(const Snapshot& s) {
  return {{"hash", s.hash},
          {"path", s.path},
          {"git", s.git},
          {"git_commit", s.git_commit},
          {"git_dirty", !s.git_diff.empty()},
          {"bytes", s.bytes},
          {"files", s.files},
          {"created_ms", s.created_ms}};
}

Json ToJson(const Environment& e) {
  return {{"interpreter", e.interpreter},
          {"packages", e.packages},
          {"hostname", e.hostname},
          {"gpu_info", e.gpu_info}};
}

Json ToJson(const Alert& a) {
  Json j = {{"id", a.id},           {"kind", a.kind},       {"severity", a.severity},
            {"key", a.key},         {"message", a.message}, {"first_ms", a.first_ms},
            {"last_ms", a.last_ms}, {"count", a.count},     {"data", a.data}};
  j["experiment_id"] = a.experiment_id > 0 ? Json(a.experiment_id) : Json(nullptr);
  j["run_id"] = a.run_id > 0 ? Json(a.run_id) : Json(nullptr);
  j["gpu"] = a.gpu >= 0 ? Json(a.gpu) : Json(nullptr);
  return j;
}

}  // namespace drover::protocol
