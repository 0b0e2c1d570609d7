#pragma once
// The transport-independent core of drover's MCP server (Model Context Protocol): JSON-RPC 2.0
// messages in, responses out. Transports (stdio.h; the streamable HTTP endpoint, later) only move
// lines and bodies and keep one McpSession per client.
//
// Protocol versions 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05 are spoken. The server
// offers tools only (initialize, ping, tools/list, tools/call). Errors follow the spec's split:
// a malformed request, an unknown method or an unknown tool is a JSON-RPC error the client sees;
// bad arguments and failed tool calls are tool results with isError, which the model reads and
// can act on.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcp/tools.h"
#include "model/spec.h"  // Json

namespace drover::mcp {

inline constexpr const char* kLatestProtocolVersion = "2025-11-25";
// Newest first. The answer to initialize is the client's version when it is here, else the latest.
inline const std::vector<std::string>& SupportedProtocolVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                     "2024-11-05"};
  return kVersions;
}
bool IsSupportedProtocolVersion(std::string_view version);

// JSON-RPC 2.0 error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// What the server says about itself in initialize (serverInfo).
struct Implementation {
  std::string name;
  std::string version;
  std::string title;  // sent to clients of 2025-06-18 and later
};

// One client's state: a stdio connection, or one Mcp-Session-Id over HTTP.
struct McpSession {
  bool initialized = false;   // initialize was answered; other requests are served from now on
  bool client_ready = false;  // notifications/initialized arrived (informational)
  std::string protocol_version;  // negotiated; empty before initialize
  Json client_info;              // the client's clientInfo (name, version, ...)
  Json client_capabilities;
};

class McpServer {
 public:
  // `tools` must outlive the server. `instructions` tells the model how the tools fit together.
  McpServer(Implementation info, const ToolRegistry& tools, std::string instructions);

  // Handles one JSON-RPC message (an object) or a batch (an array). Returns the response, the
  // array of responses for a batch, or nothing for notifications and for responses the client
  // sends (the server sends no requests, so those answer nothing).
  std::optional<Json> Handle(const Json& message, McpSession& session) const;
  // The same for raw text (a stdio line, an HTTP body): text that is not JSON is -32700 with id
  // null.
  std::optional<Json> HandleText(std::string_view text, McpSession& session) const;

  const Implementation& info() const { return info_; }

 private:
  std::optional<Json> HandleOne(const Json& message, McpSession& session, bool in_batch) const;
  Json Dispatch(const std::string& method, const Json& params, const Json& id,
                McpSession& session, bool in_batch) const;
  Json Initialize(const Json& params, const Json& id, McpSession& session, bool in_batch) const;
  Json ListTools(const Json& params, const Json& id, const McpSession& session) const;
  Json CallTool(const Json& params, const Json& id, const McpSession& session) const;

  Implementation info_;
  const ToolRegistry& tools_;
  std::string instructions_;
};

// JSON-RPC envelopes.
Json RpcResult(const Json& id, Json result);
Json RpcError(const Json& id, int code, std::string_view message);

// The one way messages become text: compact, one line, and never throwing (invalid UTF-8 from
// a tool's output is replaced, so nothing but valid JSON reaches the transport).
std::string SerializeMessage(const Json& message);

}  // namespace drover::mcp
