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
#include "cli/daemon_start.h"
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

int Mcp(Globals& g, const McpFlags& f) {
  std::optional<DaemonInfo> daemon = FindDaemon(g);
  if (!daemon) {
    OnDemandDaemon o;
    o.fake_gpus = f.fake_gpus;
    o.cpus = f.cpus;
    o.idle_exit = f.idle_exit;
    auto started = StartDaemonOnDemand(g, o);
    if (!started.ok()) return ReportError(started.status());
    daemon = *started;
  } else {
    OnDemandDaemon asked;
    asked.fake_gpus = f.fake_gpus;
    if (Status st = CheckJoinedDaemon(*daemon, asked); !st.ok()) return ReportError(st);
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
