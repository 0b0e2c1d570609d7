#pragma once
// The daemon's HTTP/JSON API (docs/http-api.md): routes under /api/v1 over cpp-httplib, reading
// the store through one connection per worker thread and sending commands to the engine through
// EngineControl. Every request must carry the store's token and name this server in its Host
// header, so neither another local user nor a web page (DNS rebinding) can drive the daemon.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "mcp/server.h"
#include "server/connection_gate.h"
#include "server/engine_control.h"

namespace httplib {
class Server;
}

namespace drover::server {

struct ServerContext;

struct ServerOptions {
  std::string store_path;  // <store>/drover.db, opened read-only-in-practice by each worker
  std::string host = "127.0.0.1";
  int port = 7070;    // 0 = pick a free port (see HttpServer::port())
  std::string token;  // required; compared in constant time with the Bearer token
  // Worker threads. Each open event stream and each following log request holds one; at most
  // threads - 8 of those are allowed at once (the rest answer 503), so plain requests always
  // find a thread.
  int threads = 32;
  int64_t follow_timeout_ms = 25'000;  // how long GET .../logs?follow=1 waits for new bytes
  int64_t keepalive_ms = 15'000;       // ": keepalive" comment interval on the event stream
  // Folders (or drover.yaml files) whose recipes the web UI offers, besides the daemon's working
  // folder and the folders of submitted experiments (GET /api/v1/recipes).
  std::vector<std::string> recipe_dirs;
  // How long a client may take to send a request and to take its response, and how many may
  // wait (server/connection_gate.h).
  ConnectionLimits limits;
  // The Unix socket local clients use ("" for none): the kernel names each caller, so no token
  // is needed (docs/lab-server.md). A stale socket file is replaced; anything else there is not.
  std::string unix_socket;
  // Whether users other than the daemon's own (and root) may use the socket: a shared daemon
  // (`drover serve --shared`). The socket is then 0666, else 0600.
  bool shared = false;
  int64_t owner_uid = -1;   // the daemon's user (default: the process's effective uid)
  std::string admin_group;  // members act on any experiment (the config's lab.admin_group)
  std::string tokens_path;  // the personal tokens' book (server/tokens.h; "" keeps none)
  std::string audit_path;   // where state-changing requests are logged ("" for nowhere)
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, EngineControl& engine, const Clock& clock);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket. Fails on an empty token or when the address cannot be bound.
  Status Bind();
  int port() const { return port_; }  // the bound port, after Bind()
  // When the last request came (steady clock, ms; 0: none yet): an idle daemon may exit.
  int64_t last_request_ms() const;
  // Serves MCP over streamable HTTP at /mcp with this server (which must outlive Stop()); until
  // then /mcp answers 404.
  void SetMcp(const mcp::McpServer* server);
  // Serves until Stop(); call from its own thread, after Bind().
  void Run();
  // Ends Run(): closes the listening socket, tells long polls and event streams to finish (they
  // check every ~100-250 ms), and waits until Run() has returned, so no handler runs and no call
  // reaches the EngineControl afterwards. Safe from any thread except a request handler; safe
  // before Run() (Run() then returns at once) and more than once.
  void Stop();

 private:
  Status BindUnix();
  void AcceptUnix();
  ServerOptions options_;
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  bool bound_ = false;
  int unix_fd_ = -1;
  int64_t unix_ino_ = 0;  // the socket file's inode, removed at Stop() only while it is still ours
  std::thread unix_thread_;
  std::atomic<bool> run_entered_{false};
  std::atomic<bool> run_done_{false};
};

}  // namespace drover::server
