#pragma once
// The daemon's config file (`drover serve --config FILE`, `drover run --config FILE`, or
// <store>/config.yaml): one YAML mapping whose sections are each read by what they configure:
//
//   telemetry:, alerts:, detectors:   watch/config.h (docs/metrics.md)
//   scheduler:                        sched/scheduler_config.h (docs/scheduling.md, "In the daemon")
//   environment:                      engine/environment_capture.h (docs/execution.md)
//   executor:                         spec/executor_section.h (docs/slurm.md)
//   lab:                              who administers a shared daemon (docs/lab-server.md)
//
// Every section and field is optional. Errors carry file:line:column, a did-you-mean for a
// misspelt key (and, for a section's key written at the top, the section it belongs under), and
// say the accepted range or form of a bad value.
#include <string>

#include "common/status.h"
#include "config/lab.h"
#include "engine/environment_capture.h"
#include "sched/scheduler_config.h"
#include "spec/executor_section.h"
#include "watch/config.h"

namespace drover::config {

struct DaemonConfig {
  watch::WatchConfig watch;
  sched::SchedulerConfig scheduler;
  EnvironmentConfig environment;
  ExecutorConfig executor;  // where the daemon's attempts run (local unless kind: slurm)
  LabConfig lab;
};

// The largest config file read: a config is a few hundred bytes; a path to something else (a
// device, a huge file) is refused before it is read.
inline constexpr size_t kMaxConfigBytes = 1 << 20;

Result<DaemonConfig> ParseDaemonConfig(const std::string& yaml_text, const std::string& source);
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

}  // namespace drover::config
