#pragma once
// What `drover run` and `drover serve` both prepare before an engine starts: the GPU probe (real,
// or fake GPUs with optional scripted telemetry) and the config (watch, alert sinks, scheduler).
#include <memory>
#include <string>

#include "cli/common.h"
#include "gpu/gpu_probe.h"
#include "watch/config.h"

namespace drover::cli {

struct WatchFlags {
  std::string fake_telemetry;  // --fake-telemetry FILE (needs fake GPUs)
  std::string config;          // --config FILE; default <store>/config.yaml when it exists
  std::string policy;          // --policy NAME: overrides the config's scheduler.policy
};
void AddWatchFlags(CLI::App* app, WatchFlags& flags);

struct EngineSetup {
  std::unique_ptr<GpuProbe> probe;
  watch::WatchConfig config;
  std::string config_path;  // "" when the defaults apply
  std::unique_ptr<watch::FanOutSink> sinks;
};

// `fake_gpus` from the flag or $DROVER_FAKE_GPUS ("" for real GPUs).
Result<EngineSetup> PrepareEngine(const Globals& g, const std::string& fake_gpus,
                                  const WatchFlags& flags);

}  // namespace drover::cli
