#pragma once
// What `drover run` and `drover serve` both prepare before an engine starts: the GPU probe (real,
// or fake GPUs with optional scripted telemetry) and the daemon config (config/daemon_config.h:
// watch, alert sinks, scheduler, environment).
#include <memory>
#include <string>

#include "cli/common.h"
#include "gpu/gpu_probe.h"
#include "gpu/leases.h"
#include "config/daemon_config.h"
#include "container/launcher.h"
#include "exec/process_launcher.h"
#include "exec/executor.h"

namespace drover::cli {

// The flags `drover run` and `drover serve` share for the engine they start.
struct EngineFlags {
  std::string fake_telemetry;  // --fake-telemetry FILE (needs fake GPUs)
  std::string config;          // --config FILE; default <store>/config.yaml when it exists
  std::string policy;          // --policy NAME: overrides the config's scheduler.policy
  // --gpu-leases DIR|off: the machine-wide folder where engines publish the GPUs they hold
  // (gpu/leases.h); else $DROVER_GPU_LEASES; else /tmp/drover-gpu-leases for real GPUs and none
  // for fake ones (so tests on one machine do not wait on each other unless they ask to).
  std::string gpu_leases;
  // --executor local|slurm (serve only): where the daemon's attempts run, over the config's
  // executor.kind. A daemon `drover run` starts for a spec that says executor: {kind: slurm}
  // is started with it, so the documented command submits to Slurm.
  std::string executor;
};
void AddEngineFlags(CLI::App* app, EngineFlags& flags);

struct EngineSetup {
  std::unique_ptr<GpuProbe> probe;
  config::DaemonConfig config;
  std::string config_path;  // "" when the defaults apply
  std::unique_ptr<watch::FanOutSink> sinks;
  std::string gpu_lease_dir;          // "" when this engine coordinates with no other
  std::unique_ptr<GpuLedger> ledger;  // opened by OpenGpuLedger, once the engine lock is held
};

// `fake_gpus` from the flag or $DROVER_FAKE_GPUS ("" for real GPUs).
Result<EngineSetup> PrepareEngine(const Globals& g, const std::string& fake_gpus,
                                  const EngineFlags& flags);

// Opens the machine's GPU leases the setup names (a no-op when it names none), under the store's
// id: call once the store's engine lock is held.
Status OpenGpuLedger(const Globals& g, EngineSetup& setup);

// Where the engine's attempts run: on this machine (`local` itself), or through the executor the
// config's executor.kind (or, for `drover run --foreground`, the spec's) names (cli/executors.h;
// Slurm: docs/slurm.md). Containers wrap either.
struct ExecutorSetup {
  ExecutorKind kind = ExecutorKind::kLocal;
  std::unique_ptr<ProcessLauncher> executor;  // what the executor made (null: local)
  std::unique_ptr<container::ContainerLauncher> containers;  // over the executor's launcher
  ProcessLauncher* launcher = nullptr;  // what the engine gets
  int max_jobs = 0;                     // EngineOptions::executor_max_jobs
  std::string banner;                   // the executor's line for the daemon's banner
};
Result<ExecutorSetup> PrepareExecutor(const config::DaemonConfig& config,
                                      const ExecutorSpec& spec_executor, ProcessLauncher& local,
                                      Clock& clock, const std::string& store_dir);

}  // namespace drover::cli
