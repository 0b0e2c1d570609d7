#include "slurm/executor.h"

#include <fmt/format.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common/hash.h"
#include "exec/working_copy.h"
#include "slurm/cluster.h"
#include "slurm/launcher.h"
#include "slurm/probe.h"

namespace drover::slurm {
namespace {

namespace fs = std::filesystem;

// The store's runs/, logs/ and checkpoints/ as links into `shared` (executor.shared_dir), made
// where missing; an error says what to move where.
Status LinkSharedFolders(const std::string& store_dir, const std::string& shared) {
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
  struct statfs st;
  if (statfs(dir.c_str(), &st) != 0) return "";
  switch (static_cast<unsigned long>(st.f_type)) {
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

// The cluster's command runner, made before the launcher that uses it and gone after it.
struct ClusterHolder {
  std::unique_ptr<CommandCluster> cluster;
};

class OwningLauncher final : private ClusterHolder, public SlurmLauncher {
 public:
  OwningLauncher(std::unique_ptr<CommandCluster> c, ProcessLauncher& local, Clock& clock,
                 std::string store_id, ExecutorSpec defaults)
      : ClusterHolder{std::move(c)},
        SlurmLauncher(*cluster, local, clock, std::move(store_id), std::move(defaults)) {}
};

// Where a job goes: the spec's target over the config's, its sbatch flags after the config's.
Target TargetOf(const ExecutorSpec& spec, const ExecutorSpec& daemon) {
  Target target;
  target.partition = !spec.partition.empty() ? spec.partition : daemon.partition;
  target.account = !spec.account.empty() ? spec.account : daemon.account;
  target.qos = !spec.qos.empty() ? spec.qos : daemon.qos;
  target.sbatch = daemon.sbatch;
  target.sbatch.insert(target.sbatch.end(), spec.sbatch.begin(), spec.sbatch.end());
  return target;
}

}  // namespace

Status WouldAccept(const Spec& spec, const ExecutorConfig& config) {
  const Target target = TargetOf(spec.executor, config.spec);
  CommandClusterOptions co;
  co.accounting = config.accounting;
  CommandCluster cluster(co);
  auto check = [&](const Resources& r, Millis timeout, const std::string& what) -> Status {
    Submission s;
    s.job_name = "drover-dry-run";
    s.workdir = "/tmp";
    s.stdout_path = "/dev/null";
    s.stderr_path = "/dev/null";
    s.gpus = r.gpus;
    s.cpus = std::max(1, r.cpus);
    s.memory_bytes = r.memory;
    s.time_limit_ms = timeout;
    Status st = cluster.WouldAccept(target, s);
    return st.ok() || what.empty() ? st : Status(st.code(), what + ": " + st.message());
  };
  if (spec.stages.empty()) return check(spec.resources, spec.timeout_ms, "");
  for (const StageSpec& st : spec.stages) {
    DROVER_RETURN_IF_ERROR(check(st.resources, st.timeout_ms, "stage " + st.name));
  }
  return Status::Ok();
}

Result<Executor> MakeExecutor(const ExecutorContext& context) {
  const ExecutorConfig& config = context.config;
  const ExecutorSpec& daemon = config.spec;
  CommandClusterOptions co;
  co.accounting = config.accounting;
  auto cluster = std::make_unique<CommandCluster>(co);
  // Where the first job goes.
  const Target target = TargetOf(context.spec, daemon);
  std::error_code ec;
  const std::string store = fs::absolute(context.store_dir, ec).string();
  if (!config.shared_dir.empty()) {
    DROVER_RETURN_IF_ERROR(LinkSharedFolders(store, config.shared_dir));
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
  fs::create_directories(runs, ec);
  Status shared = ProbeSharedFolder(*cluster, target, runs, 120'000);
  if (!shared.ok()) return shared.WithContext("checking that Slurm's nodes see the store");
  Executor out;
  out.launcher = std::make_unique<OwningLauncher>(std::move(cluster), context.local, context.clock,
                                                  StoreId(context.store_dir), daemon);
  out.max_jobs = config.max_jobs;
  out.banner = fmt::format("slurm (at most {} jobs at once; the store's folders are seen by the "
                           "nodes)",
                           out.max_jobs);
  return out;
}

}  // namespace drover::slurm
