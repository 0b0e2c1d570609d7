#include "cli/engine_setup.h"

#include "common/hash.h"

#include <fmt/format.h>

#include <sys/vfs.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "common/strings.h"

#include "gpu/background_probe.h"
#include "exec/working_copy.h"
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
    setup.config.executor.spec.kind =
        flags.executor == "slurm" ? ExecutorKind::kSlurm : ExecutorKind::kLocal;
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

namespace {

// The store's runs/, logs/ and checkpoints/ as links into `shared` (the Slurm executor's
// shared_dir), made where missing; an error says what to move where.
Status LinkSharedFolders(const std::string& store_dir, const std::string& shared) {
  namespace fs = std::filesystem;
  for (const char* name : {"runs", "logs", "checkpoints"}) {
    const fs::path target = fs::path(shared) / name;
    const fs::path link = fs::path(store_dir) / name;
    std::error_code ec;
    fs::create_directories(target, ec);
    if (ec) {
      return Status(Code::kIo, fmt::format("cannot make {} (executor.shared_dir): {}",
                                           target.string(), ec.message()));
    }
    if (fs::is_symlink(link, ec)) {
      const fs::path now = fs::read_symlink(link, ec);
      if (!ec && now == target) continue;
      return FailedPrecondition(fmt::format(
          "{} links to {}, and the config's executor.shared_dir puts it at {}: move its "
          "contents there and remove the link (or set shared_dir back)",
          link.string(), now.string(), target.string()));
    }
    if (fs::exists(link, ec)) {
      if (!fs::is_directory(link, ec) || !fs::is_empty(link, ec)) {
        return FailedPrecondition(fmt::format(
            "{} already holds runs' files, and executor.shared_dir wants it in {}: move its "
            "contents there (mv {}/* {}/), remove it, and start again",
            link.string(), target.string(), link.string(), target.string()));
      }
      fs::remove(link, ec);
    }
    fs::create_directory_symlink(target, link, ec);
    if (ec) {
      return Status(Code::kIo, fmt::format("cannot link {} to {}: {}", link.string(),
                                           target.string(), ec.message()));
    }
  }
  return Status::Ok();
}

// The name of a network file system the store's database is on, or "": SQLite's locking is not
// safe there, and the Slurm executor tempts one to put the whole store on one.
std::string NetworkFileSystem(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return "";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x6969: return "NFS";
    case 0xFF534D42: return "CIFS";
    case 0xFE534D42: return "SMB2";
    case 0x517B: return "SMB";
    case 0x0BD00BD0: return "Lustre";
    case 0x47504653: return "GPFS";
    case 0x19830326: return "BeeGFS";
    case 0x00C36400: return "CephFS";
    default: return "";
  }
}

}  // namespace

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
  out.launcher = &local;
  const ExecutorSpec& daemon = config.executor.spec;
  const bool slurm = spec_executor.given ? spec_executor.kind == ExecutorKind::kSlurm
                                         : daemon.kind == ExecutorKind::kSlurm;
  // Attempts whose spec has container: run in their image (docs/containers.md), on this
  // machine or in the Slurm job; the others pass through as they are.
  auto containers = [&]() {
    out.containers =
        std::make_unique<container::ContainerLauncher>(*out.launcher, StoreId(store_dir));
    out.launcher = out.containers.get();
  };
  if (!slurm) {
    containers();
    return out;
  }
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
  const std::string store = std::filesystem::absolute(store_dir, ec).string();
  if (!config.executor.shared_dir.empty()) {
    DROVER_RETURN_IF_ERROR(LinkSharedFolders(store, config.executor.shared_dir));
  }
  if (const std::string net = NetworkFileSystem(store); !net.empty()) {
    std::fprintf(stderr,
                 "drover: warning: the store %s (its database, drover.db) is on %s, where "
                 "SQLite's locking is not safe; keep the store on the daemon's local disk and put "
                 "the runs' folders on the shared file system with executor.shared_dir "
                 "(docs/slurm.md)\n",
                 store.c_str(), net.c_str());
  }
  const std::string runs = RunFiles::Folder(store, "runs");
  std::filesystem::create_directories(runs, ec);
  Status shared = slurm::ProbeSharedFolder(*out.cluster, target, runs, 120'000);
  if (!shared.ok()) return shared.WithContext("checking that Slurm's nodes see the store");
  out.slurm = std::make_unique<slurm::SlurmLauncher>(*out.cluster, local, clock,
                                                     StoreId(store_dir), daemon);
  out.launcher = out.slurm.get();
  out.max_jobs = config.executor.max_jobs;
  containers();
  return out;
}

}  // namespace drover::cli
