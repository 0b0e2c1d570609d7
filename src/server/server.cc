// HttpServer: construction, listening, stopping, and the checks every request passes before it
// reaches a route (Host, Origin, token, body size) with errors mapped to JSON bodies.
#include "server/connection_gate.h"
#include "server/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "server/audit.h"
#include "server/identity.h"
#include "server/routes.h"
#include "common/unix_socket.h"
#include "server/web_auth.h"

namespace drover::server {
namespace {

// The connection a worker serves now: over the Unix socket, the kernel's word for who is at the
// other end (SO_PEERCRED, taken when the connection is served).
struct Peer {
  bool unix_socket = false;
  int64_t uid = -1;
  int64_t gid = -1;
  int64_t pid = 0;
};
thread_local Peer t_peer;
// The request being served was told to go on by the gate already (its `100 Continue` is not sent
// twice), or was refused before its body was invited (the connection is closed after the
// answer: the client may still send the body).
thread_local bool t_continue_sent = false;
thread_local bool t_refused_before_body = false;

Peer PeerOf(int fd) {
  Peer p;
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.ss_family != AF_UNIX) {
    return p;
  }
  p.unix_socket = true;
  ucred cr{};
  socklen_t cl = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
    p.uid = cr.uid;
    p.gid = cr.gid;
    p.pid = cr.pid;
  }
  return p;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsIpv6(const std::string& host) { return host.find(':') != std::string::npos; }

// The Host values a browser or client uses to reach this server. A page on evil.example that
// rebinds its name to 127.0.0.1 still sends "Host: evil.example:PORT", so it is refused.
std::vector<std::string> AllowedHosts(const std::string& host, int port) {
  std::string p = ":" + std::to_string(port);
  std::vector<std::string> out = {"localhost" + p};
  if (host == "127.0.0.1" || host == "localhost") out.push_back("127.0.0.1" + p);
  if (host == "::1") out.push_back("[::1]" + p);
  // Some clients (older httplib among them) leave an IPv6 literal unbracketed.
  if (IsIpv6(host)) out.push_back(Lower(host) + p);
  std::string self = IsIpv6(host) ? "[" + host + "]" + p : host + p;
  if (std::find(out.begin(), out.end(), Lower(self)) == out.end()) out.push_back(Lower(self));
  if (port == 80) {  // the default port may be left out
    size_t n = out.size();
    for (size_t i = 0; i < n; ++i) out.push_back(out[i].substr(0, out[i].size() - p.size()));
  }
  return out;
}

std::vector<std::string> AllowedOrigins(const std::string& host, int port) {
  std::string p = ":" + std::to_string(port);
  std::vector<std::string> out = {"http://127.0.0.1" + p, "http://localhost" + p};
  if (host == "::1") out.push_back("http://[::1]" + p);
  if (port == 80) {
    size_t n = out.size();
    for (size_t i = 0; i < n; ++i) out.push_back(out[i].substr(0, out[i].size() - p.size()));
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Fills the body of an error reply that has none (unknown route, body too large, a request
// httplib could not parse), so every error a client sees is {"error": {...}}.
httplib::Server::HandlerResponse FillErrorBody(const httplib::Request& req,
                                               httplib::Response& res) {
  if (!res.body.empty() || res.status < 400) return httplib::Server::HandlerResponse::Unhandled;
  switch (res.status) {
    case 404:
      SendErrorCode(res, 404, "not_found",
                    "no route " + req.method + " " + req.path + "; docs/http-api.md lists them");
      break;
    case 413:
      SendErrorCode(res, 413, std::string(CodeName(Code::kInvalidArgument)),
                    "request body too large: the limit is " +
                        std::to_string(protocol::kMaxBodyBytes) + " bytes");
      break;
    case 400:
      SendErrorCode(
          res, 400, std::string(CodeName(Code::kInvalidArgument)),
          "malformed request or unsupported method (" + req.method + " " + req.path + ")");
      break;
    case 503:
      SendErrorCode(res, 503, std::string(CodeName(Code::kUnavailable)), "server is busy");
      break;
    default:
      SendErrorCode(
          res, res.status,
          std::string(CodeName(res.status >= 500 ? Code::kInternal : Code::kInvalidArgument)),
          "HTTP " + std::to_string(res.status));
  }
  return httplib::Server::HandlerResponse::Handled;
}

// httplib compresses a reply in the first encoding the request accepts, preferring brotli, at
// brotli's slowest setting: 80 ms more for a 94 KB metrics reply and 50 ms for uPlot, on every
// request. On loopback compression buys nothing; elsewhere gzip is fast and nearly as small. The
// request is the server's own object (const only in the handler's signature), so its
// Accept-Encoding is narrowed here, before any route sees it.
void ChooseCompression(httplib::Request& req) {
  auto it = req.headers.find("Accept-Encoding");
  if (it == req.headers.end()) return;
  bool loopback = req.remote_addr.starts_with("127.") || req.remote_addr == "::1" ||
                  req.remote_addr.starts_with("::ffff:127.");
  bool gzip = !loopback && it->second.find("gzip") != std::string::npos;
  req.headers.erase("Accept-Encoding");
  if (gzip) req.headers.emplace("Accept-Encoding", "gzip");
}

// The caller the store's token or the web session stands for: the daemon's own user, an admin.
Caller OwnerCaller(int64_t owner_uid, const std::string& via, const httplib::Request& req) {
  Caller c;
  c.user = LookupUser(owner_uid, static_cast<int64_t>(::getegid()));
  c.via = via;
  c.from = req.remote_addr + ":" + std::to_string(req.remote_port);
  c.admin = true;
  return c;
}

bool StateChanging(const std::string& method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

// Who may go on: the sign-in page and the UI's static files are public; everything else needs
// the Bearer token, or the web UI's session cookie (docs/web.md) plus, for a request that changes
// something, the session's CSRF token. Answers the refusal itself and returns false.
// A person the kernel or a personal token names: an admin when root, the daemon's own user or
// a member of lab.admin_group.
Caller PersonCaller(const ServerContext& ctx, int64_t uid, int64_t gid, std::string via,
                    std::string from) {
  Caller c;
  c.user = LookupUser(uid, gid);
  c.via = std::move(via);
  c.from = std::move(from);
  c.admin = uid == 0 || uid == ctx.options.owner_uid ||
            (ctx.admin_gid >= 0 && InGroup(c.user, ctx.admin_gid));
  return c;
}

bool Authorized(ServerContext& ctx, int port, const httplib::Request& req,
                httplib::Response& res, Caller* who) {
  const std::string& token = ctx.options.token;
  const std::string from = req.remote_addr + ":" + std::to_string(req.remote_port);
  if (req.path == "/login" || req.path == "/login/status" || req.path == "/favicon.ico" ||
      req.path.starts_with("/static/")) {
    return true;
  }
  std::string auth = req.get_header_value("Authorization");
  std::string given;
  if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") given = auth.substr(7);
  // MCP clients configured with a bare URL (no header option) may carry the token in it:
  // /mcp?token=... (only there; the API wants the header).
  if (given.empty() && req.path == "/mcp") given = req.get_param_value("token");
  const Millis now = ctx.clock.Now();
  if (!given.empty() && SecretsEqual(given, token)) {
    *who = OwnerCaller(ctx.options.owner_uid, "token", req);
    return true;
  }
  if (!given.empty()) {
    // A personal token acts as its user (docs/lab-server.md, "Tokens").
    if (auto t = ctx.tokens.Check(given, now)) {
      *who = PersonCaller(ctx, t->uid, t->gid, "token", from);
      return true;
    }
  }
  std::string cookie = ValidSessionCookie(token, req.get_header_value("Cookie"), port, now);
  if (const int64_t id = PersonSessionTokenId(token, cookie, now); id > 0) {
    // A person's session lasts while the token it was opened with is in force.
    if (auto t = ctx.tokens.Live(id)) {
      *who = PersonCaller(ctx, t->uid, t->gid, "session", from);
    } else {
      cookie.clear();
    }
  } else if (!cookie.empty()) {
    *who = OwnerCaller(ctx.options.owner_uid, "session", req);
  }
  if (given.empty() && !cookie.empty()) {
    if (req.method == "GET" || req.method == "HEAD") return true;
    if (SecretsEqual(req.get_header_value(kCsrfHeader), CsrfFor(token, cookie))) return true;
    SendErrorCode(res, 403, "permission_denied",
                  std::string("a request signed in by cookie that changes something must carry "
                              "the page's CSRF token in the ") +
                      kCsrfHeader + " header (reload the page to get one)");
    return false;
  }
  if (req.method == "GET" && (req.path == "/" || req.path == "/index.html")) {
    res.set_redirect("/login", 303);
    return false;
  }
  SendErrorCode(res, 401, "unauthenticated",
                "missing or wrong token; the CLI reads it from <store>/token, send it as "
                "Authorization: Bearer <token> (the web UI signs in at /login)");
  res.set_header("WWW-Authenticate", "Bearer");
  return false;
}

// Who a request is, for the gate's turns and per-caller cap on workers (connection_gate.h): the
// Unix socket's peer uid, else the user a personal token or web session in its headers names
// ("owner" for the store's token and its sessions), else its address. Root and the daemon's own
// user are not capped. On the gate's thread: only in-memory lookups here.
CallerKey ClassifyRequest(ServerContext& ctx, std::string_view head, const CallerKey& peer) {
  const int64_t owner = ctx.options.owner_uid;
  auto person = [owner](int64_t uid) {
    CallerKey k;
    k.key = "uid " + std::to_string(uid);
    k.uid = uid;
    k.capped = uid != 0 && uid != owner;
    k.known = true;
    return k;
  };
  if (peer.uid >= 0) {
    CallerKey k = person(peer.uid);
    // Another user on a daemon that is not shared is refused (403) before a body is invited.
    k.known = ctx.options.shared || !k.capped;
    return k;
  }
  if (peer.key.starts_with("uid ")) return peer;  // a socket whose peer is unknown: refused
  const CallerKey daemons_own{"owner", -1, false, true};
  const Millis now = ctx.clock.Now();
  const std::string auth = ConnectionGate::HeaderValue(head, "Authorization");
  if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") {
    const std::string given = auth.substr(7);
    if (SecretsEqual(given, ctx.options.token)) return daemons_own;
    if (auto t = ctx.tokens.Check(given, now)) return person(t->uid);
    return peer;
  }
  const std::string cookie = ValidSessionCookie(
      ctx.options.token, ConnectionGate::HeaderValue(head, "Cookie"), ctx.port.load(), now);
  if (cookie.empty()) return peer;
  if (const int64_t id = PersonSessionTokenId(ctx.options.token, cookie, now); id > 0) {
    if (auto t = ctx.tokens.Live(id)) return person(t->uid);
    return peer;
  }
  return daemons_own;
}

// A read or a write that makes no progress for this long ends the request.
constexpr int kReadTimeoutMs = 5'000;
constexpr int kWriteTimeoutMs = 5'000;
// How long a worker waits for a kept-alive client's next request before the gate takes over.
constexpr int kKeepServingMs = 20;
// Connections the kernel holds for accept() (capped by net.core.somaxconn).
constexpr int kListenBacklog = 1024;

// One connection as httplib's request processing reads and writes it: reads are buffered (the
// header parser reads a byte at a time) and never go past what arrived; each read and write waits
// at most the server's timeouts.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int fd, int read_ms, int write_ms)
      : fd_(fd), read_ms_(read_ms), write_ms_(write_ms) {}
  bool is_readable() const override { return begin_ < end_ || Poll(POLLIN, read_ms_); }
  bool is_writable() const override { return Poll(POLLOUT, write_ms_); }
  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!Poll(POLLIN, read_ms_)) return -1;
      ssize_t n;
      do {
        n = recv(fd_, buf_, sizeof buf_, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    // httplib tells a request with `Expect: 100-continue` to go on; the gate already did.
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    if (t_continue_sent && std::string_view(ptr, size) == kContinue) {
      t_continue_sent = false;
      return static_cast<ssize_t>(size);
    }
    size_t done = 0;
    while (done < size) {
      if (!Poll(POLLOUT, write_ms_)) return done > 0 ? static_cast<ssize_t>(done) : -1;
      ssize_t n = send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }
  bool buffered() const { return begin_ < end_; }
  // Whether what is buffered (and what waits in the socket) holds a whole request: its headers
  // and all of its body (one still coming, or one to be invited, must not be read on a worker
  // the gate did not count among those reading a body).
  bool BufferedRequestComplete() const {
    std::string head(buf_ + begin_, end_ - begin_);
    char more[ConnectionGate::kMaxHeaderBytes];
    ssize_t n = recv(fd_, more, sizeof more, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) head.append(more, static_cast<size_t>(n));
    size_t whole = 0;
    const size_t need = ConnectionGate::RequestBytes(head, &whole);
    if (need == 0) return false;
    if (whole > need && ConnectionGate::ExpectsContinue(head)) return false;
    int queued = 0;
    if (ioctl(fd_, FIONREAD, &queued) != 0 || queued < 0) queued = 0;
    return (end_ - begin_) + static_cast<size_t>(queued) >= whole;
  }

 private:
  bool Poll(short what, int ms) const {
    pollfd p{fd_, what, 0};
    int r;
    do {
      r = poll(&p, 1, ms);
    } while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & what);
  }
  template <typename F>
  void Address(F get, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char host[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&a);
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      port = ntohs(in6->sin6_port);
    }
    ip = host;
  }
  int fd_;
  int read_ms_;
  int write_ms_;
  char buf_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

// httplib's server with its connections passed through a ConnectionGate: the accept loop hands
// each new connection to the gate at once (InlineQueue runs the accept loop's task where it is),
// the gate gives it a worker once a request's headers are in, and the worker serves that request
// (httplib's own parsing, routing and writing) and hands a kept-alive connection back to the gate
// for its next one: no worker waits on a client.
class GatedServer : public httplib::Server {
 public:
  GatedServer(size_t workers, ConnectionLimits limits, int read_ms, int write_ms,
              ConnectionGate::Classifier classify)
      : read_ms_(read_ms),
        write_ms_(write_ms),
        gate_(workers, limits, [this](int fd) { ServeOne(fd); }, std::move(classify)) {
    new_task_queue = [this] { return new InlineQueue(gate_); };
  }
  // httplib listens with a backlog of 5: 50 clients connecting at once overflowed it and waited
  // for SYN retransmissions (1, 3, 7 s). A second listen() on the bound socket raises it.
  void RaiseBacklog() { ::listen(svr_sock_, kListenBacklog); }
  // A connection accepted on the Unix socket: to the gate like any other.
  void AdmitUnix(int fd) { gate_.Admit(fd); }

 private:
  bool process_and_close_socket(socket_t sock) override {
    // Headers and body go out in two writes: without TCP_NODELAY, Nagle holds the body until the
    // client acknowledges the headers, which a delayed ACK makes ~40 ms on every kept-alive reply.
    int yes = 1;
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    gate_.Admit(sock);
    return true;
  }
  void ServeOne(int fd) {
    t_peer = PeerOf(fd);
    ConnectionStream strm(fd, read_ms_, write_ms_);
    // The next request of a busy kept-alive client usually comes at once (or came with this one):
    // it is served here, once it has arrived (its headers, and its body up to the gate's
    // kBodyAtGateBytes). One that takes longer, or comes in pieces, waits at the gate, not on a
    // worker; so does every client after 1,000 requests in a row.
    for (int served = 1;; ++served) {
      bool closed = false;
      t_continue_sent = served == 1 && ConnectionGate::ContinueSent();
      t_refused_before_body = false;
      const bool ok = process_request(strm, /*close_connection=*/false, closed, {});
      t_continue_sent = false;
      if (!ok || closed || t_refused_before_body || !is_running()) break;
      if (strm.buffered()) {
        // Bytes of a next request came with this one: served only if all of it is here (a
        // client that sends a piece and then trickles must not hold the worker).
        if (strm.BufferedRequestComplete()) continue;
        break;
      }
      if (served < 1000 && ConnectionGate::RequestWaiting(fd, kKeepServingMs)) continue;
      ConnectionGate::Unbounded();  // this worker is done with it
      gate_.Admit(fd, /*kept_alive=*/true);
      return;
    }
    shutdown(fd, SHUT_RDWR);
    close(fd);
  }

  class InlineQueue : public httplib::TaskQueue {
   public:
    explicit InlineQueue(ConnectionGate& gate) : gate_(gate) {}
    void enqueue(std::function<void()> fn) override { fn(); }
    // The accept loop has ended: what waits is closed and running requests are waited for.
    void shutdown() override { gate_.Shutdown(); }

   private:
    ConnectionGate& gate_;
  };
  int read_ms_;
  int write_ms_;
  ConnectionGate gate_;
};

}  // namespace


HttpServer::HttpServer(ServerOptions options, EngineControl& engine, const Clock& clock)
    : options_(std::move(options)),
      ctx_(std::make_unique<ServerContext>(options_, engine, clock)),
      http_(std::make_unique<GatedServer>(
          static_cast<size_t>(std::max(options_.threads, 9)), options_.limits, kReadTimeoutMs,
          kWriteTimeoutMs, [ctx = ctx_.get()](std::string_view head, const CallerKey& peer) {
            return ClassifyRequest(*ctx, head, peer);
          })) {
  if (options_.owner_uid < 0) options_.owner_uid = static_cast<int64_t>(::geteuid());
  if (!options_.admin_group.empty()) {
    if (auto gid = LookupGroup(options_.admin_group)) ctx_->admin_gid = *gid;
  }
  // httplib reads and discards a larger body, then answers 413 (FillErrorBody writes the JSON).
  http_->set_payload_max_length(protocol::kMaxBodyBytes);
  // An idle keep-alive connection holds a worker; Stop() waits for it to notice, so keep it short.
  http_->set_keep_alive_timeout(2);
  // Headers and body go out in two writes: without TCP_NODELAY, Nagle holds the body until the
  // client acknowledges the headers, which a delayed ACK makes ~40 ms on every kept-alive reply.
  http_->set_tcp_nodelay(true);
  // httplib's default also sets SO_REUSEPORT, which would let a second daemon share the port
  // (and split the requests) instead of failing to bind: keep only SO_REUSEADDR.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  auto pre_routing = [this](const httplib::Request& req, httplib::Response& res) {
    ConnectionGate::HeadersRead();  // the body, if any, has limits.body_ms from here
    ctx_->last_request_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
    ChooseCompression(const_cast<httplib::Request&>(req));
    SetCurrentCaller(Caller{});
    if (t_peer.unix_socket) {
      // The kernel says who this is; a browser cannot reach a Unix socket, so neither Host nor
      // Origin matters, and no token is needed.
      Caller c = PersonCaller(*ctx_, t_peer.uid, t_peer.gid, "socket",
                              "unix pid " + std::to_string(t_peer.pid));
      SetCurrentCaller(c);
      if (t_peer.uid < 0 ||
          (!options_.shared && t_peer.uid != 0 && t_peer.uid != options_.owner_uid)) {
        SendErrorCode(res, 403, "permission_denied",
                      DisplayName(c.user) + " may not use this daemon: it runs as " +
                          DisplayName(LookupUser(options_.owner_uid, -1)) +
                          " and serves only that user (a lab's shared daemon is started with "
                          "drover serve --shared: docs/lab-server.md)");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (req.has_header("Transfer-Encoding")) {
        SendErrorCode(res, 411, std::string(CodeName(Code::kInvalidArgument)),
                      "chunked request bodies are not accepted; send Content-Length");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (!req.has_header("Content-Length") && StateChanging(req.method)) {
        const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
      }
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string p = ":" + std::to_string(port_);
    std::string host = Lower(req.get_header_value("Host"));
    if (!Contains(AllowedHosts(options_.host, port_), host)) {
      SendErrorCode(res, 403, "permission_denied",
                    "Host header '" + req.get_header_value("Host") + "' is not this server (" +
                        AllowedHosts(options_.host, port_)[0] +
                        "); requests through other names are refused (DNS rebinding)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Origin")) {
      std::string origin = Lower(req.get_header_value("Origin"));
      // The page's own origin is the Host it was loaded through (checked above), so a daemon
      // listening on a lab address takes its web UI's requests too.
      if (!Contains(AllowedOrigins(options_.host, port_), origin) && origin != "http://" + host) {
        SendErrorCode(res, 403, "permission_denied",
                      "requests from web pages of origin '" + req.get_header_value("Origin") +
                          "' are refused; only http://127.0.0.1" + p + " and http://localhost" + p +
                          " may call this API");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    Caller who;
    if (!Authorized(*ctx_, port_, req, res, &who)) {
      return httplib::Server::HandlerResponse::Handled;
    }
    SetCurrentCaller(who);
    // httplib 0.11 does not bound chunked request bodies; every client we serve sends a length.
    if (req.has_header("Transfer-Encoding")) {
      SendErrorCode(res, 411, std::string(CodeName(Code::kInvalidArgument)),
                    "chunked request bodies are not accepted; send Content-Length");
      return httplib::Server::HandlerResponse::Handled;
    }
    // A POST with no body and no Content-Length (`curl -X POST`) would be read until the client
    // gives up: it has no body.
    if (!req.has_header("Content-Length") &&
        (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
         req.method == "DELETE")) {
      const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  };
  http_->set_pre_routing_handler(pre_routing);
  // `Expect: 100-continue`: the caller is judged (token, Host, Origin, the socket's user) before
  // its body is invited, so a refusal goes out at once and no body comes for it; a caller the
  // gate knew was told to go on there already (the stream drops httplib's second `100`).
  http_->set_expect_100_continue_handler(
      [pre_routing](const httplib::Request& req, httplib::Response& res) {
        if (t_continue_sent) return 100;
        if (pre_routing(req, res) == httplib::Server::HandlerResponse::Handled) {
          t_refused_before_body = true;
          return res.status > 0 && res.status != 100 && res.status != 417 ? res.status : 403;
        }
        return 100;
      });

  // The response goes out within limits.response_ms.
  // Then every request that changes something, and every refusal, goes to the audit log.
  http_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    ConnectionGate::HandlerDone();
    if (!StateChanging(req.method) && res.status != 401 && res.status != 403) return;
    const Caller& c = CurrentCaller();
    AuditEntry e;
    e.t_ms = ctx_->clock.Now();
    e.user = c.user.uid >= 0 || !c.user.name.empty() ? DisplayName(c.user) : "";
    e.uid = c.user.uid;
    e.via = c.via;
    e.from = !c.from.empty() ? c.from
             : t_peer.unix_socket ? "unix pid " + std::to_string(t_peer.pid)
                                  : req.remote_addr + ":" + std::to_string(req.remote_port);
    e.method = req.method;
    e.path = req.target;  // bounded by the log (server/audit.h)
    e.status = res.status;
    if (res.status >= 400) {
      Json body = Json::parse(res.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_object() && body.contains("error") && body["error"].is_object()) {
        e.error = body["error"].value("message", std::string());
      }
    }
    const std::string who = e.user.empty() ? "ip " + req.remote_addr : e.user;
    ctx_->audit.Record(std::move(e), who);
  });
  http_->set_error_handler(httplib::Server::HandlerWithResponse(FillErrorBody));
  http_->set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                                  std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res,
              Internal("unexpected error handling " + req.method + " " + req.path + ": " + what));
  });

  RegisterExperimentsRoutes(*http_, *ctx_);
  RegisterStoreRoutes(*http_, *ctx_);
  RegisterSearchRoutes(*http_, *ctx_);
  RegisterRunsRoutes(*http_, *ctx_);
  RegisterMetricsRoutes(*http_, *ctx_);
  RegisterLogsRoutes(*http_, *ctx_);
  RegisterGpusRoutes(*http_, *ctx_);
  RegisterEventsRoutes(*http_, *ctx_);
  RegisterAlertsRoutes(*http_, *ctx_);
  RegisterPrometheusRoutes(*http_, *ctx_);
  RegisterMcpRoutes(*http_, *ctx_);
  RegisterWebRoutes(*http_, *ctx_);
  RegisterRecipesRoutes(*http_, *ctx_);
  RegisterTableRoutes(*http_, *ctx_);
  RegisterAuditRoutes(*http_, *ctx_);
  RegisterUsageRoutes(*http_, *ctx_);
  RegisterTokensRoutes(*http_, *ctx_);
}

void HttpServer::SetMcp(const mcp::McpServer* server) { ctx_->mcp = server; }

int64_t HttpServer::last_request_ms() const { return ctx_->last_request_ms.load(); }

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Bind() {
  if (options_.token.empty()) {
    return InvalidArgument(
        "the HTTP server needs a token (<store>/token); refusing to serve without one");
  }
  if (bound_)
    return FailedPrecondition("the HTTP server is already bound to port " + std::to_string(port_));
  DROVER_RETURN_IF_ERROR(ctx_->tokens.Load());
  std::string where = (IsIpv6(options_.host) ? "[" + options_.host + "]" : options_.host) + ":" +
                      std::to_string(options_.port);
  errno = 0;
  if (options_.port == 0) {
    int p = http_->bind_to_any_port(options_.host);
    if (p < 0) {
      return Unavailable("cannot listen on " + where +
                         (errno ? std::string(": ") + ErrnoText(errno) : std::string()));
    }
    port_ = p;
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      return Unavailable("cannot listen on " + where +
                         (errno ? std::string(": ") + ErrnoText(errno) : std::string()) +
                         "; is another drover serve running? pick another --port");
    }
    port_ = options_.port;
  }
  static_cast<GatedServer&>(*http_).RaiseBacklog();
  ctx_->port = port_;
  DROVER_RETURN_IF_ERROR(BindUnix());
  bound_ = true;
  return Status::Ok();
}

Status HttpServer::BindUnix() {
  if (options_.unix_socket.empty()) return Status::Ok();
  auto listener = ListenUnix(options_.unix_socket, options_.shared ? 0666 : 0600, kListenBacklog);
  if (!listener.ok()) return listener.status();
  unix_fd_ = listener->fd;
  unix_ino_ = listener->inode;
  unix_thread_ = std::thread([this] { AcceptUnix(); });
  return Status::Ok();
}

void HttpServer::AcceptUnix() {
  auto& gated = static_cast<GatedServer&>(*http_);
  while (!ctx_->stopping) {
    pollfd p{unix_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 100);
    if (r <= 0) continue;
    int fd = ::accept4(unix_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // out of descriptors: wait
      }
      continue;
    }
    gated.AdmitUnix(fd);
  }
}

void HttpServer::Run() {
  run_entered_ = true;
  if (bound_ && !ctx_->stopping) http_->listen_after_bind();
  run_done_ = true;
}

void HttpServer::Stop() {
  ctx_->stopping = true;
  // The socket's accept loop first (it sees `stopping` within 100 ms), so nothing reaches the
  // gate once it shuts down.
  if (unix_thread_.joinable()) unix_thread_.join();
  if (unix_fd_ >= 0) {
    ::close(unix_fd_);
    unix_fd_ = -1;
    RemoveUnixSocket(options_.unix_socket, unix_ino_);
  }
  if (!run_entered_) return;  // Run() sees `stopping` and returns at once
  // listen may not have started yet when stop() is first called (then it does nothing): repeat.
  while (!run_done_) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace drover::server
