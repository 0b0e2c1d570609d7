// drover mcp: an MCP server on stdin/stdout for agents that start drover as a subprocess. It
// talks to the daemon of the store; when none runs it starts one (`drover serve`, detached, so
// the runs an agent submits outlive the agent's session) and waits for it.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/mcp_tools.h"
#include "drover_version.h"
#include "mcp/server.h"
#include "mcp/stdio.h"

extern char** environ;

namespace drover::cli {
namespace {

struct McpFlags {
  std::string fake_gpus;  // for the daemon it starts
  int cpus = 0;
  std::string idle_exit = "30m";  // the daemon it starts exits after this long idle
};

Result<DaemonInfo> StartDaemon(const Globals& g, const McpFlags& f) {
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
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = StoreDir(g) + "/serve.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // stdout is the MCP channel: the daemon must never write to it.
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
  if (rc != 0) return Internal(std::string("cannot start drover serve: ") + std::strerror(rc));
  for (int i = 0; i < 200; ++i) {
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
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Unavailable("started drover serve for the store " + StoreDir(g) +
                     " but it did not come up within 10 s; see " + log);
}

int Mcp(Globals& g, const McpFlags& f) {
  std::optional<DaemonInfo> daemon = FindDaemon(g);
  if (!daemon) {
    auto started = StartDaemon(g, f);
    if (!started.ok()) return ReportError(started.status());
    daemon = *started;
  }
  McpToolOptions options;
  options.project_dir = std::filesystem::current_path().string();
  mcp::ToolRegistry tools = MakeDroverTools(*daemon, options);
  mcp::McpServer server({"drover", DROVER_VERSION, "drover: GPU experiments"}, tools,
                        McpInstructions());
  Status st = mcp::RunStdio(server, std::cin, std::cout);
  if (!st.ok()) return ReportError(st);
  return kExitOk;
}

}  // namespace

Command RegisterMcp(CLI::App& root, Globals& g) {
  auto f = std::make_shared<McpFlags>();
  CLI::App* app = root.add_subcommand(
      "mcp", "Serve MCP on stdin/stdout for an AI agent (starts the daemon when none runs)");
  app->add_option("--fake-gpus", f->fake_gpus,
                  "GPUs for the daemon it starts, e.g. 2x16GiB (ignored when one runs)");
  app->add_option("--cpus", f->cpus, "CPU slots for the daemon it starts")->check(CLI::PositiveNumber);
  app->add_option("--idle-exit", f->idle_exit,
                  "The daemon it starts exits after this long with nothing queued or running and "
                  "no request (default 30m; 0: never)");
  return {app, [&g, f] { return Mcp(g, *f); }};
}

}  // namespace drover::cli
