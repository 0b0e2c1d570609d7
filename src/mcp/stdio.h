#pragma once
// The stdio transport: newline-delimited JSON-RPC, one message per line, for an MCP client that
// starts drover as a subprocess. Nothing but JSON-RPC is written to `out` (logs go to stderr).
#include <istream>
#include <ostream>

#include "common/status.h"
#include "mcp/server.h"

namespace drover::mcp {

// Serves one client until `in` ends (the client closed stdin). Empty lines are skipped; every
// response is flushed as soon as it is written, since the client waits for it. Errors only when
// reading or writing fails.
Status RunStdio(const McpServer& server, std::istream& in, std::ostream& out);

}  // namespace drover::mcp
