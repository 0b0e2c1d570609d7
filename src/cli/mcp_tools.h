#pragma once
// drover's MCP tools (gpu_status, plan, submit, list_runs, get_run, get_metrics, compare, wait,
// logs, cancel, alerts), over the daemon's HTTP API. docs/mcp.md describes each.
#include <string>

#include "cli/client.h"
#include "mcp/tools.h"

namespace drover::cli {

struct McpToolOptions {
  std::string project_dir;  // where plan looks for drover.yaml, and submit resolves a workdir
};

// What the server tells the model about how the tools fit together (initialize's instructions).
std::string McpInstructions();

// The handlers keep `api`: it must outlive the registry.
mcp::ToolRegistry MakeDroverTools(ApiClient& api, const McpToolOptions& options);

}  // namespace drover::cli
