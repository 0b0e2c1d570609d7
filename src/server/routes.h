#pragma once
// What the route files share: the server's context, one Store per worker thread, and the helpers
// that turn query parameters, bodies and Status values into HTTP. One file per API resource
// registers its routes (docs/http-api.md lists them).
#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "mcp/server.h"
#include "mcp/sessions.h"
#include "protocol/api.h"
#include "server/audit.h"
#include "server/engine_control.h"
#include "server/identity.h"
#include "server/connection_gate.h"
#include "server/server.h"
#include "server/tokens.h"
#include "store/store.h"

namespace drover::server {

struct ServerContext {
  ServerContext(const ServerOptions& o, EngineControl& e, const Clock& c)
      : options(o), engine(e), clock(c), audit(o.audit_path), tokens(o.tokens_path) {}

  const ServerOptions& options;
  EngineControl& engine;
  const Clock& clock;  // the daemon's one time source (wall time of sessions, tokens, tables)
  AuditLog audit;
  TokenBook tokens;  // personal tokens (server/tokens.h)
  int64_t admin_gid = -1;  // options.admin_group's id (-1: none)
  std::atomic<bool> stopping{false};
  // MCP over streamable HTTP at /mcp, once the daemon has set it up (mcp_routes.cc).
  std::atomic<const mcp::McpServer*> mcp{nullptr};
  mcp::SessionStore mcp_sessions;
  std::atomic<int> long_polls{0};  // event streams and following log requests now open
  std::mutex long_polls_mu;                  // guards long_polls_by_user
  std::map<int64_t, int> long_polls_by_user;  // on a shared daemon: each user's open ones
  std::atomic<int> port{0};        // the bound port (names the web UI's session cookie)
  std::atomic<int64_t> last_request_ms{0};  // steady clock: when the last request came

  // This thread's connection to the store (opened on first use; SQLite connections are not
  // shared across threads). Dropped after an error so the next request reopens it.
  Result<Store*> ThreadStore();
  void DropThreadStore();

  // Reserves a slot for a long-lived request; nullptr when too many are open. The slot is freed
  // when the returned handle is destroyed.
  std::shared_ptr<void> AcquireLongPoll();
  int MaxLongPolls() const;
};

// --- responses
std::string DumpJson(const Json& j);  // compact; invalid UTF-8 replaced, never throws
void SendJson(httplib::Response& res, int http_status, const Json& body);
void SendError(httplib::Response& res, const Status& st);  // status from HttpStatusFor
// For errors outside common/status.h's codes (unauthenticated, permission_denied).
void SendErrorCode(httplib::Response& res, int http_status, const std::string& code,
                   const std::string& message);

// --- requests
// A whole decimal integer ("12"; not "12x", "", "+1"), or nothing.
std::optional<int64_t> ParseInt64(const std::string& text);
// A positive integer id from a path segment: "run id must be a positive integer, got 'x'".
Result<int64_t> ParseId(const std::string& text, const char* what);
// An optional integer query parameter within [lo, hi].
Result<std::optional<int64_t>> QueryInt(const httplib::Request& req, const char* name, int64_t lo,
                                        int64_t hi);
// An optional boolean query parameter: 1/0, true/false.
Result<bool> QueryBool(const httplib::Request& req, const char* name);
// The body as JSON; malformed JSON names the line and column.
Result<Json> ParseJsonBody(const httplib::Request& req);

// A route handler that returns a Status: a failure becomes the JSON error reply.
using RouteFn = Status (*)(ServerContext&, const httplib::Request&, httplib::Response&);
inline httplib::Server::Handler Route(ServerContext& ctx, RouteFn fn) {
  return [&ctx, fn](const httplib::Request& req, httplib::Response& res) {
    // The body is in by now: the handler bounds its own time (the engine's replies, SQLite's busy
    // timeout), and the response has its deadline once it returns.
    ConnectionGate::Unbounded();
    Status st = fn(ctx, req, res);
    if (st.ok()) return;
    // A broken connection (I/O error, corrupt page, locked) is reopened by the next request.
    if (st.code() == Code::kInternal || st.code() == Code::kIo || st.code() == Code::kUnavailable) {
      ctx.DropThreadStore();
    }
    SendError(res, st);
  };
}

// --- shared lookups
Result<Run> LoadRun(ServerContext& ctx, int64_t run_id);  // not_found when absent
// By id, or the newest with that name; not_found when absent.
Result<Experiment> LoadExperiment(ServerContext& ctx, const std::string& id_or_name);


void RegisterExperimentsRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterRunsRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterMetricsRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterLogsRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterGpusRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterEventsRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterAlertsRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterPrometheusRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterMcpRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterWebRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterRecipesRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterTableRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterStoreRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterAuditRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterUsageRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterTokensRoutes(httplib::Server& http, ServerContext& ctx);
// Ask/tell on a search: suggest, tell, trials (search_routes.cc).
void RegisterSearchRoutes(httplib::Server& http, ServerContext& ctx);

// What another user (not an admin) is shown of an experiment on a shared daemon: its record,
// not its secrets: the spec as RedactedSpec shows it, not its YAML text nor the uncommitted diff.
Experiment RedactedFor(const Caller& caller, Experiment e);
// A stored spec (SpecToJson) as another user sees it: an allowlist of what was asked for (params,
// resources, objective, stages' names and needs); the command, env values, data: and inputs:
// paths, folders and anything not on the list "(hidden)", at the top and in every stage (a list
// of stages or a mapping).
Json RedactedSpec(const Json& spec);
// An event of the stream (`kind`, its data) about another user's run: ids, states, the reason
// code, and for metrics its points; never a note (a failure's stderr line, paths) nor the words of
// an alert the run raised itself.
Json RedactedEvent(const std::string& kind, const Json& data);
// What of an attempt another user is not shown: its command line and its stderr's last lines.
void RedactAttempt(Attempt& a);

// The web UI's valid session cookie in a request, or "" (web_routes.cc).
std::string SessionCookieOf(const ServerContext& ctx, const httplib::Request& req);

}  // namespace drover::server
