#include "cli/engine_setup.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "common/strings.h"

#include "gpu/background_probe.h"
#include "slurm/probe.h"

namespace drover::cli {

void AddEngineFlags(CLI::App* app, EngineFlags& flags) {
  app->add_option("--config", flags.config,
                  "Config file: telemetry period, alert sinks (webhooks), detector thresholds "
                  "(docs/metrics.md), the scheduler (docs/scheduling.md); default "
                  "<store>/config.yaml when it exists");
  app->add_option("--policy", flags.policy,
                  "Scheduling policy: fifo, priority, las, srtf, gittins or default (overrides the "
                  "config's scheduler.policy; docs/scheduling.md)");
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

Result<ExecutorSetup> PrepareExecutor(const config::DaemonConfig& config,
                                      const ExecutorSpec& spec_executor, ProcessLauncher& local,
                                      Clock& clock, const std::string& store_dir) {
  ExecutorSetup out;
  out.launcher = &local;
  const ExecutorSpec& daemon = config.executor.spec;
  const bool slurm = spec_executor.given ? spec_executor.kind == ExecutorKind::kSlurm
                                         : daemon.kind == ExecutorKind::kSlurm;
  if (!slurm) return out;
  slurm::CommandClusterOptions co;
  co.accounting = config.executor.accounting;
  out.cluster = std::make_unique<slurm::CommandCluster>(co);
  // Where the first job goes: the spec's target over the config's.
  slurm::Target target;
  target.partition = !spec_executor.partition.empty() ? spec_executor.partition : daemon.partition;
  target.account = !spec_executor.account.empty() ? spec_executor.account : daemon.account;
  target.qos = !spec_executor.qos.empty() ? spec_executor.qos : daemon.qos;
  target.sbatch = daemon.sbatch;
  target.sbatch.insert(target.sbatch.end(), spec_executor.sbatch.begin(),
                       spec_executor.sbatch.end());
  std::error_code ec;
  const std::string runs = (std::filesystem::absolute(store_dir, ec) / "runs").string();
  std::filesystem::create_directories(runs, ec);
  Status shared = slurm::ProbeSharedFolder(*out.cluster, target, runs, 120'000);
  if (!shared.ok()) return shared.WithContext("checking that Slurm's nodes see the store");
  out.slurm = std::make_unique<slurm::SlurmLauncher>(*out.cluster, local, clock,
                                                     slurm::StoreId(store_dir), daemon);
  out.launcher = out.slurm.get();
  out.max_jobs = config.executor.max_jobs;
  return out;
}

}  // namespace drover::cli
