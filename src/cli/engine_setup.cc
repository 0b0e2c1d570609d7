#include "cli/engine_setup.h"

#include "common/hash.h"

#include <fmt/format.h>

#include <sys/vfs.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "common/strings.h"
#include "container/runtime.h"

#include "gpu/background_probe.h"
#include "exec/working_copy.h"
#include "cli/executors.h"

namespace drover::cli {

void AddEngineFlags(CLI::App* app, EngineFlags& flags) {
  app->add_option("--config", flags.config,
                  "Config file: telemetry period, alert sinks (webhooks), detector thresholds "
                  "(docs/metrics.md), the scheduler (docs/scheduling.md); default "
                  "<store>/config.yaml when it exists");
  app->add_option("--policy", flags.policy,
                  "Scheduling policy: fifo, priority, las, srtf, gittins or default (overrides the "
                  "config's scheduler.policy; docs/scheduling.md)");
  app->add_option("--gpu-leases", flags.gpu_leases,
                  "Machine-wide folder where drover engines publish the GPUs they hold, so two "
                  "stores never double-book a GPU (default $DROVER_GPU_LEASES, else "
                  "/tmp/drover-gpu-leases for real GPUs; 'off': this engine owns every GPU; "
                  "docs/lab-server.md)");
  app->add_option("--fake-telemetry", flags.fake_telemetry,
                  "Scripted utilisation/memory/temperature for the fake GPUs (docs/metrics.md)");
}

Result<EngineSetup> PrepareEngine(const Globals& g, const std::string& fake_gpus,
                                  const EngineFlags& flags) {
  EngineSetup setup;
  if (!flags.fake_telemetry.empty() && fake_gpus.empty()) {
    return InvalidArgument(
        "--fake-telemetry replays telemetry for fake GPUs: add --fake-gpus (e.g. 2x16GiB), or "
        "drop it to read the real GPUs");
  }
  DROVER_ASSIGN_OR_RETURN(setup.probe, MakeGpuProbe(fake_gpus));
  if (!flags.fake_telemetry.empty()) {
    DROVER_ASSIGN_OR_RETURN(auto script, LoadTelemetryScript(flags.fake_telemetry));
    // MakeGpuProbe made a FakeGpuProbe: fake_gpus is set.
    static_cast<FakeGpuProbe*>(setup.probe.get())->SetScript(std::move(script));
  }
  std::string leases = flags.gpu_leases;
  if (leases.empty()) {
    if (const char* env = std::getenv("DROVER_GPU_LEASES")) leases = env;
  }
  if (leases.empty() && fake_gpus.empty()) leases = kDefaultGpuLeaseDir;
  if (leases == "off") leases.clear();
  setup.gpu_lease_dir = leases;
  std::string path = flags.config;
  // (The probe is wrapped below, once the config says how often to read it.)
  if (path.empty()) {
    std::string fallback = StoreDir(g) + "/config.yaml";
    std::error_code ec;
    if (std::filesystem::exists(fallback, ec)) path = fallback;
  }
  if (!path.empty()) {
    DROVER_ASSIGN_OR_RETURN(setup.config, config::LoadDaemonConfig(path));
    setup.config_path = path;
  }
  if (!flags.executor.empty()) {
    std::optional<ExecutorKind> kind = ParseExecutorKind(flags.executor);
    if (!kind) {
      return InvalidArgument("--executor: '" + flags.executor + "' is not an executor (" +
                             Join(ExecutorKindNames(), ", ") + ")");
    }
    setup.config.executor.spec.kind = *kind;
  }
  if (!flags.policy.empty()) {
    Result<sched::PolicyKind> kind = sched::ParsePolicy(flags.policy);
    if (!kind.ok()) return InvalidArgument("--policy: " + kind.status().message());
    setup.config.scheduler.policy = *kind;
  }
  DROVER_ASSIGN_OR_RETURN(setup.sinks, watch::MakeSinks(setup.config.watch));
  if (setup.probe->Kind() == "nvml" || setup.probe->Kind() == "nvidia-smi") {
    // Real drivers are slow to read: keep that off the engine's loop.
    static RealClock clock;
    setup.probe = std::make_unique<BackgroundGpuProbe>(std::move(setup.probe), clock,
                                                       setup.config.watch.telemetry_period_ms);
  }
  return setup;
}


Status OpenGpuLedger(const Globals& g, EngineSetup& setup) {
  if (setup.gpu_lease_dir.empty() || setup.probe->Kind() == "none") return Status::Ok();
  auto ledger = FileGpuLedger::Open(setup.gpu_lease_dir, StoreId(StoreDir(g)));
  if (!ledger.ok()) {
    return Status(ledger.status().code(),
                  ledger.status().message() +
                      " (engines on one machine share GPUs through this folder; --gpu-leases off "
                      "runs without, owning every GPU)");
  }
  setup.ledger = std::move(*ledger);
  return Status::Ok();
}

Result<ExecutorSetup> PrepareExecutor(const config::DaemonConfig& config,
                                      const ExecutorSpec& spec_executor, ProcessLauncher& local,
                                      Clock& clock, const std::string& store_dir) {
  ExecutorSetup out;
  out.kind = spec_executor.given ? spec_executor.kind : config.executor.spec.kind;
  out.launcher = &local;
  if (ExecutorFactory make = ExecutorOf(out.kind).make) {
    DROVER_ASSIGN_OR_RETURN(Executor made,
                            make(ExecutorContext{config.executor, spec_executor, local, clock,
                                                 store_dir}));
    out.executor = std::move(made.launcher);
    out.launcher = out.executor.get();
    out.max_jobs = made.max_jobs;
    out.banner = std::move(made.banner);
  }
  // Attempts whose spec has container: run in their image (docs/containers.md), wherever the
  // executor runs them; the others pass through as they are.
  out.containers = std::make_unique<container::ContainerLauncher>(
      *out.launcher, StoreId(store_dir), container::NoContainersMarkerPath(store_dir));
  out.launcher = out.containers.get();
  return out;
}

}  // namespace drover::cli
