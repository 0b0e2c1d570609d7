#pragma once
// What `drover run` and `drover serve` both prepare before an engine starts: the GPU probe (real,
// or fake GPUs with optional scripted telemetry) and the daemon config (config/daemon_config.h:
// watch, alert sinks, scheduler, environment).
#include <memory>
#include <string>

#include "cli/common.h"
#include "gpu/gpu_probe.h"
#include "config/daemon_config.h"

namespace drover::cli {

// The flags `drover run` and `drover serve` share for the engine they start.
struct EngineFlags {
  std::string fake_telemetry;  // --fake-telemetry FILE (needs fake GPUs)
  std::string config;          // --config FILE; default <store>/config.yaml when it exists
  std::string policy;          // --policy NAME: overrides the config's scheduler.policy
};
void AddEngineFlags(CLI::App* app, EngineFlags& flags);

struct EngineSetup {
  std::unique_ptr<GpuProbe> probe;
  config::DaemonConfig config;
  std::string config_path;  // "" when the defaults apply
  std::unique_ptr<watch::FanOutSink> sinks;
};

// `fake_gpus` from the flag or $DROVER_FAKE_GPUS ("" for real GPUs).
Result<EngineSetup> PrepareEngine(const Globals& g, const std::string& fake_gpus,
                                  const EngineFlags& flags);

}  // namespace drover::cli
