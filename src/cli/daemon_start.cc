#include "cli/daemon_start.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "common/strings.h"
#include "gpu/gpu_probe.h"

extern char** environ;

namespace drover::cli {

Status CheckJoinedDaemon(const DaemonInfo& daemon, const OnDemandDaemon& o) {
  if (o.fake_gpus.empty()) return Status::Ok();
  DROVER_ASSIGN_OR_RETURN(std::vector<GpuDevice> wanted, ParseFakeGpus(o.fake_gpus));
  ApiClient api(daemon);
  DROVER_ASSIGN_OR_RETURN(Json body, api.Get("/gpus"));
  if (!body.is_object() || !body.contains("gpus") || !body["gpus"].is_array()) {
    return Internal("the daemon's answer to GET /gpus has no GPU list");
  }
  std::vector<int64_t> have;
  for (const Json& gpu : body["gpus"]) {
    const Json* mem = gpu.is_object() && gpu.contains("memory_total") ? &gpu["memory_total"] : nullptr;
    have.push_back(mem != nullptr && mem->is_number_integer() ? mem->get<int64_t>() : 0);
  }
  std::vector<int64_t> want;
  for (const GpuDevice& d : wanted) want.push_back(d.memory_total);
  if (have == want) return Status::Ok();
  const std::string has =
      have.empty() ? "no GPUs" : fmt::format("{} GPU{}", have.size(), have.size() == 1 ? "" : "s");
  return FailedPrecondition(fmt::format(
      "the daemon serving this store (pid {}) has {}, not the --fake-gpus {} asked for; stop it "
      "with `drover daemon stop` and run the command again (a daemon is started with what it "
      "asks for), or leave --fake-gpus out to use that daemon",
      daemon.pid, has, o.fake_gpus));
}

std::string HowItExits(const DaemonInfo& daemon) {
  if (daemon.idle_exit_ms > 0) {
    return "it exits after " + FormatDuration(daemon.idle_exit_ms) +
           " with nothing queued or running and no request";
  }
  return daemon.idle_exit_ms == 0 ? "it runs until stopped" : "";
}

Status ADaemonServesTheStore(const Globals& g, Status refusal) {
  std::optional<DaemonInfo> d = FindDaemon(g);
  if (!d || refusal.code() != Code::kFailedPrecondition) return refusal;
  const std::string exits = HowItExits(*d);
  return FailedPrecondition(fmt::format(
      "a drover daemon (pid {}) already serves the store {}{}: submit to it (drover run, drover "
      "submit; drover daemon status shows what it runs), or stop it with `drover daemon stop "
      "--store {}` and run this again",
      d->pid, StoreDir(g), exits.empty() ? "" : " (" + exits + ")", StoreDir(g)));
}

Result<DaemonInfo> StartDaemonOnDemand(const Globals& g, const OnDemandDaemon& f) {
  std::error_code ec;
  std::filesystem::create_directories(StoreDir(g), ec);
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Internal("cannot find drover's own binary: " + ec.message());
  std::vector<std::string> args = {self, "serve", "--store", StoreDir(g), "--listen",
                                   "127.0.0.1:0"};
  if (!f.fake_gpus.empty()) args.insert(args.end(), {"--fake-gpus", f.fake_gpus});
  if (f.cpus > 0) args.insert(args.end(), {"--cpus", std::to_string(f.cpus)});
  if (!f.idle_exit.empty() && f.idle_exit != "0") {
    args.insert(args.end(), {"--idle-exit", f.idle_exit});
  }
  if (!f.engine.config.empty()) {
    args.insert(args.end(), {"--config", std::filesystem::absolute(f.engine.config, ec).string()});
  }
  if (!f.engine.policy.empty()) args.insert(args.end(), {"--policy", f.engine.policy});
  if (!f.engine.executor.empty()) args.insert(args.end(), {"--executor", f.engine.executor});
  if (!f.engine.gpu_leases.empty()) args.insert(args.end(), {"--gpu-leases", f.engine.gpu_leases});
  if (!f.engine.fake_telemetry.empty()) {
    args.insert(args.end(), {"--fake-telemetry",
                             std::filesystem::absolute(f.engine.fake_telemetry, ec).string()});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = StoreDir(g) + "/serve.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // Its output goes to its log, never to ours (stdout is an MCP client's channel).
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);  // not stopped with the agent's session
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Internal(std::string("cannot start drover serve: ") + ErrnoText(rc));
  // Looked for every 5 ms (a failed open of daemon.json and a waitpid: nothing a starting
  // daemon would miss), so the command goes on within 5 ms of the daemon serving; a look every
  // 50 ms kept `drover run` waiting 25 ms on average for nothing.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto d = FindDaemon(g)) {
      // From now on the daemon is on its own: should it end while we run, the kernel reaps it
      // (no zombie that would look alive to the next drover).
      std::signal(SIGCHLD, SIG_IGN);
      return *d;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      // Another drover may have won the race to own the store: use its daemon.
      if (auto d = FindDaemon(g)) return *d;
      return Unavailable("drover serve for the store " + StoreDir(g) + " exited at start; see " +
                         log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Unavailable("started drover serve for the store " + StoreDir(g) +
                     " but it did not come up within 10 s; see " + log);
}

}  // namespace drover::cli
