#pragma once
// drover's MCP tools (gpu_status, plan, submit, list_runs, get_run, get_metrics, compare, wait,
// logs, cancel, alerts), over the daemon's HTTP API. docs/mcp.md describes each.
#include <string>
#include <vector>

#include "cli/client.h"
#include "mcp/tools.h"

namespace drover::cli {

struct McpToolOptions {
  std::string project_dir;  // where plan looks for drover.yaml, and submit resolves a workdir
  // `drover serve --recipe DIR...`: the folders whose recipe plan uses first (the first that
  // has one), before looking from project_dir.
  std::vector<std::string> recipe_dirs;
};

// What the server tells the model about how the tools fit together (initialize's instructions).
std::string McpInstructions();

// Each call opens its own client to the daemon `info` names (calls under /mcp come from several
// HTTP threads at once).
mcp::ToolRegistry MakeDroverTools(const DaemonInfo& info, const McpToolOptions& options);

}  // namespace drover::cli
