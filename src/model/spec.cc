#include "model/spec.h"

namespace drover {

Json SpecToJson(const Spec& s) {
  Json j;
  j["name"] = s.name;
  j["command"] = s.command;
  j["shell"] = s.shell;
  j["workdir"] = s.workdir;
  j["params"] = Json::parse(s.params.dump());
  j["resources"] = {{"gpus", s.resources.gpus},
                    {"gpu_memory", s.resources.gpu_memory},
                    {"cpus", s.resources.cpus}};
  j["priority"] = s.priority;
  j["max_parallel"] = s.max_parallel;
  j["retries"] = s.retries;
  j["retry_backoff_ms"] = s.retry_backoff_ms;
  j["timeout_ms"] = s.timeout_ms;
  j["env"] = s.env;
  if (s.objective) {
    j["objective"] = {{"metric", s.objective->metric},
                      {"mode", s.objective->maximize ? "max" : "min"}};
  }
  if (s.oom.enabled()) {
    j["oom"] = {{"param", s.oom.param}, {"min", s.oom.min}, {"accumulate", s.oom.accumulate}};
  }
  return j;
}

}  // namespace drover
