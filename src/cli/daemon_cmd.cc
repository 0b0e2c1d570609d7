// drover daemon stop: ends the daemon that serves the store (one started by `drover serve` in
// another terminal, or on demand by `drover mcp`). It drains as on SIGTERM: runs keep running and
// the next daemon adopts them, unless it was started with --stop-runs.
#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "cli/client.h"
#include "cli/common.h"
#include "common/strings.h"
#include "exec/child.h"

namespace drover::cli {
namespace {

struct DaemonStopFlags {
  double timeout_s = 60;
};

int StopDaemon(Globals& g, const DaemonStopFlags& f) {
  auto daemon = FindDaemon(g);
  if (!daemon) {
    std::printf("no drover daemon serves the store %s; nothing to stop\n", StoreDir(g).c_str());
    return kExitOk;
  }
  // Only a daemon that answers with this store's token is signalled: the pid in daemon.json is
  // then its own, not a process that took the number after it died.
  ApiClient api(*daemon);
  Result<Json> running = api.Get("/runs?state=running&limit=1000");
  if (!running.ok()) {
    return ReportError(Unavailable(fmt::format(
        "the daemon named in {} (pid {}) does not answer ({}); it was not signalled. If it is "
        "stuck, stop it with kill {}",
        DaemonInfoPath(g), daemon->pid, running.status().message(), daemon->pid)));
  }
  const size_t n = running->contains("runs") ? (*running)["runs"].size() : 0;
  if (::kill(daemon->pid, SIGTERM) != 0) {
    return ReportError(ErrnoStatus(fmt::format("cannot signal the daemon (pid {})", daemon->pid)));
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  // Gone, or a zombie its parent has not reaped yet (it has exited all the same).
  auto alive = [&] {
    char state = 0;
    int64_t ticks = 0;
    return ReadProcStat(daemon->pid, &state, &ticks) && state != 'Z' && state != 'X';
  };
  while (alive()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return ReportError(Unavailable(fmt::format(
          "the daemon (pid {}) is still stopping after {:g} s (a --stop-runs daemon waits for its "
          "runs to end); wait, or kill {}",
          daemon->pid, f.timeout_s, daemon->pid)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("stopped the drover daemon (pid %d) of %s", daemon->pid, StoreDir(g).c_str());
  if (n > 0) {
    std::printf("; %s it had keep running unless it was started with --stop-runs, and the next "
                "daemon adopts them",
                Count(static_cast<int64_t>(n), "running run").c_str());
  }
  std::printf("\n");
  return kExitOk;
}

}  // namespace

Command RegisterDaemon(CLI::App& root, Globals& g) {
  auto f = std::make_shared<DaemonStopFlags>();
  CLI::App* app = root.add_subcommand("daemon", "Manage the daemon that serves the store");
  app->require_subcommand(1);
  CLI::App* stop = app->add_subcommand(
      "stop", "Stop the daemon serving the store (its runs keep running; the next one adopts them)");
  stop->add_option("--timeout", f->timeout_s, "Seconds to wait for it to exit (default 60)")
      ->check(CLI::Range(0.1, 3600.0));
  return {app, [&g, f] { return StopDaemon(g, *f); }};
}

}  // namespace drover::cli
