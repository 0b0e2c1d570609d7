// /mcp: MCP over the streamable HTTP transport. One endpoint: POST carries one JSON-RPC message
// (or a batch) and is answered with JSON (202 and no body when it held only notifications or
// responses); initialize opens a session whose id comes back in Mcp-Session-Id and must come with
// every later request (400 without it, 404 when unknown or ended); DELETE ends it; GET, which
// would open a server-to-client stream, is 405 (drover sends no requests or notifications).
// Host, Origin and the token are checked for /mcp as for every route (server.cc).
#include "server/connection_gate.h"
#include "server/routes.h"

namespace drover::server {
namespace {

constexpr const char* kSessionHeader = "Mcp-Session-Id";

// Transport errors are JSON-RPC error objects too, so an MCP client can read them.
void SendRpcError(httplib::Response& res, int http_status, int code, const std::string& message) {
  res.status = http_status;
  res.set_content(
      DumpJson({{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}}),
      "application/json");
}

const mcp::McpServer* Enabled(ServerContext& ctx, httplib::Response& res) {
  const mcp::McpServer* server = ctx.mcp.load();
  if (!server) {
    SendRpcError(res, 404, -32601, "MCP is not served here");
    return nullptr;
  }
  // The tools at /mcp act with the daemon's own token, so only its admins may use them; anyone
  // else runs `drover mcp` (stdio), whose tools act as them through the socket.
  if (!CurrentCaller().admin) {
    SendRpcError(res, 403, -32600,
                 DisplayName(CurrentCaller().user) +
                     " may not use this daemon's /mcp (its tools act as the daemon's admin); run "
                     "`drover mcp`, whose tools act as you");
    return nullptr;
  }
  return server;
}

bool IsInitialize(const Json& j) {
  return j.is_object() && j.contains("method") && j["method"] == "initialize";
}

// Methods that change the session's own state; everything else reads a copy of it, so a long
// tools/call (wait blocks up to 45 s) never holds up the session's other requests.
bool ChangesSession(const Json& j) {
  return j.is_object() && j.contains("method") && j["method"] == "notifications/initialized";
}

void Post(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ConnectionGate::Unbounded();  // a tool may submit (a snapshot) or plan
  const mcp::McpServer* server = Enabled(ctx, res);
  if (!server) return;
  Json message = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    mcp::McpSession scratch;
    auto reply = server->HandleText(req.body, scratch);  // -32700 with the parser's position
    res.status = 400;
    res.set_content(DumpJson(reply ? *reply : Json()), "application/json");
    return;
  }
  std::shared_ptr<mcp::McpSessionEntry> entry;
  std::optional<Json> reply;
  if (IsInitialize(message)) {
    entry = ctx.mcp_sessions.Create();
    std::lock_guard<std::mutex> lock(entry->mu);
    reply = server->Handle(message, entry->session);
    if (reply && reply->contains("result")) {
      res.set_header(kSessionHeader, entry->id);
    } else {
      ctx.mcp_sessions.Remove(entry->id);  // a refused initialize opens nothing
    }
  } else {
    std::string id = req.get_header_value(kSessionHeader);
    if (id.empty()) {
      return SendRpcError(res, 400, -32600,
                          "no Mcp-Session-Id header: send initialize first and then the session "
                          "id it answers with on every request");
    }
    entry = ctx.mcp_sessions.Find(id);
    if (!entry) {
      return SendRpcError(res, 404, -32600,
                          "unknown or ended MCP session; start over with initialize");
    }
    if (auto bad = mcp::CheckProtocolVersionHeader(req.get_header_value("MCP-Protocol-Version"))) {
      return SendRpcError(res, 400, -32600, *bad);
    }
    // A tool call can take long (wait blocks up to 45 s): it holds a slot like an event stream,
    // so plain API requests always find a worker thread.
    std::shared_ptr<void> slot;
    if (message.is_object() && message.value("method", "") == "tools/call") {
      slot = ctx.AcquireLongPoll();
      if (!slot) {
        return SendRpcError(res, 503, -32000,
                            "too many MCP tool calls and streams at once; retry in a few seconds");
      }
    }
    if (ChangesSession(message)) {
      std::lock_guard<std::mutex> lock(entry->mu);
      reply = server->Handle(message, entry->session);
    } else {
      mcp::McpSession copy;
      {
        std::lock_guard<std::mutex> lock(entry->mu);
        copy = entry->session;
      }
      reply = server->Handle(message, copy);
    }
  }
  if (!reply) {
    res.status = 202;  // notifications and responses: accepted, nothing to say
    return;
  }
  res.status = 200;
  res.set_content(DumpJson(*reply), "application/json");
}

void Delete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!Enabled(ctx, res)) return;
  std::string id = req.get_header_value(kSessionHeader);
  if (id.empty()) return SendRpcError(res, 400, -32600, "no Mcp-Session-Id header: which session?");
  if (!ctx.mcp_sessions.Remove(id)) {
    return SendRpcError(res, 404, -32600, "unknown or already ended MCP session");
  }
  res.status = 200;
}

void Get(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  if (!Enabled(ctx, res)) return;
  res.set_header("Allow", "POST, DELETE");
  SendRpcError(res, 405, -32600,
               "drover sends no server-initiated messages: there is no stream to open; POST "
               "requests to /mcp");
}

}  // namespace

void RegisterMcpRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/mcp", [&ctx](const httplib::Request& req, httplib::Response& res) { Post(ctx, req, res); });
  http.Delete("/mcp",
              [&ctx](const httplib::Request& req, httplib::Response& res) { Delete(ctx, req, res); });
  http.Get("/mcp", [&ctx](const httplib::Request& req, httplib::Response& res) { Get(ctx, req, res); });
}

}  // namespace drover::server
