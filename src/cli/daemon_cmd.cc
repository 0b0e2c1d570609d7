// drover daemon stop: ends the daemon that serves the store (one started by `drover serve` in
// another terminal, or on demand by `drover run` or `drover mcp`). It drains as on SIGTERM: runs
// keep running and the next daemon adopts them, unless it was started with --stop-runs.
// drover daemon status: which daemon serves the store, what keeps it busy, how it exits.
#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <thread>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/daemon_start.h"
#include "common/strings.h"
#include "common/process.h"

namespace drover::cli {
namespace {

struct DaemonStopFlags {
  double timeout_s = 60;
  bool json = false;  // status --json
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
  // Gone, or a zombie its parent has not reaped yet (it has exited all the same): ProcessAlive.
  while (ProcessAlive(daemon->pid)) {
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

// Counted through its API: what keeps it from being idle (docs/lab-server.md).
Result<int64_t> CountRuns(ApiClient& api, RunState state) {
  DROVER_ASSIGN_OR_RETURN(Json j, api.Get(fmt::format("/runs?state={}&limit=1000",
                                                       ToString(state))));
  const Json& list = j.contains("runs") ? j["runs"] : j;
  return list.is_array() ? static_cast<int64_t>(list.size()) : 0;
}

int DaemonStatus(Globals& g, bool json) {
  auto daemon = FindDaemon(g);
  if (!daemon) {
    if (json) {
      std::printf("%s\n", Json({{"serving", false}, {"store", StoreDir(g)}}).dump(2).c_str());
    } else {
      std::printf("no drover daemon serves the store %s (drover run starts one when it needs "
                  "it; drover serve starts one yourself)\n",
                  StoreDir(g).c_str());
    }
    return kExitOk;
  }
  ApiClient api(*daemon);
  std::map<std::string, int64_t> counts;
  for (RunState s : {RunState::kRunning, RunState::kQueued, RunState::kRetrying}) {
    auto n = CountRuns(api, s);
    if (!n.ok()) {
      return ReportError(Unavailable(fmt::format(
          "the daemon named in {} (pid {}) does not answer: {}", DaemonInfoPath(g), daemon->pid,
          n.status().message())));
    }
    counts[std::string(ToString(s))] = *n;
  }
  const int64_t busy = counts["running"] + counts["queued"] + counts["retrying"];
  if (json) {
    Json out = {{"serving", true},         {"store", StoreDir(g)},
                {"pid", daemon->pid},      {"url", fmt::format("http://{}:{}/", daemon->host, daemon->port)},
                {"socket", daemon->socket}, {"idle_exit_ms", daemon->idle_exit_ms},
                {"runs", counts}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("drover daemon (pid %d) serves %s at http://%s:%d/%s\n", daemon->pid,
              StoreDir(g).c_str(), daemon->host.c_str(), daemon->port,
              daemon->socket.empty() ? "" : (" and " + daemon->socket).c_str());
  std::printf("%s\n", busy == 0 ? "nothing queued or running"
                                : fmt::format("{} running, {} queued, {} waiting to retry",
                                              counts["running"], counts["queued"],
                                              counts["retrying"])
                                      .c_str());
  const std::string exits = HowItExits(*daemon);
  if (!exits.empty()) std::printf("%s\n", exits.c_str());
  std::printf("stop it with: drover daemon stop --store %s\n", StoreDir(g).c_str());
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
  CLI::App* status = app->add_subcommand(
      "status", "Which daemon serves the store, what it runs, and how it exits");
  status->add_flag("--json", f->json, "Print it as JSON");
  return {app, [&g, f, status] {
            return status->parsed() ? DaemonStatus(g, f->json) : StopDaemon(g, *f);
          }};
}

}  // namespace drover::cli
