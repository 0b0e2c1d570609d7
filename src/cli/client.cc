#include "cli/client.h"

#include <httplib.h>
#include <signal.h>

#include <fmt/format.h>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/unix_http.h"
#include "common/process.h"
#include "common/strings.h"
#include "protocol/api.h"

namespace drover::cli {

std::string DaemonInfoPath(const Globals& g) { return StoreDir(g) + "/daemon.json"; }
std::string TokenPath(const Globals& g) { return StoreDir(g) + "/token"; }

std::optional<DaemonInfo> FindDaemon(const Globals& g) {
  std::ifstream in(DaemonInfoPath(g));
  if (!in) return std::nullopt;
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  DaemonInfo info;
  info.host = j.value("host", "127.0.0.1");
  info.port = j.value("port", 0);
  info.pid = j.value("pid", 0);
  info.socket = j.value("socket", std::string());
  if (j.contains("idle_exit_ms") && j["idle_exit_ms"].is_number_integer()) {
    info.idle_exit_ms = j["idle_exit_ms"].get<int64_t>();
  }
  // A daemon killed with SIGKILL leaves its file behind: only a live pid counts.
  // (A zombie counts as gone: it has exited, though its new parent may never reap it.)
  if (info.port <= 0 || !ProcessAlive(info.pid)) {
    return std::nullopt;
  }
  if (const char* mine = std::getenv("DROVER_TOKEN"); mine != nullptr && *mine != '\0') {
    // A personal token (drover token create): over HTTP, as its user.
    info.token = std::string(Trim(mine));
    info.socket.clear();
    return info;
  }
  std::ifstream tok(TokenPath(g));
  std::stringstream ss;
  ss << tok.rdbuf();
  info.token = std::string(Trim(ss.str()));
  return info;
}

ApiClient::ApiClient(DaemonInfo info)
    : info_(std::move(info)), http_(std::make_unique<httplib::Client>(info_.host, info_.port)) {
  http_->set_bearer_token_auth(info_.token.c_str());
  http_->set_connection_timeout(5, 0);
  http_->set_keep_alive(true);
}

ApiClient::~ApiClient() = default;

namespace {

Result<Json> DecodeBody(int status, const std::string& text, const std::string& what) {
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (status >= 400) {
    return protocol::StatusFromErrorJson(body.is_discarded() ? Json() : body, status);
  }
  if (body.is_discarded()) {
    return Internal(fmt::format("the daemon answered {} with something that is not JSON", what));
  }
  return body;
}

}  // namespace

Result<Json> ApiClient::Call(const std::string& method, const std::string& path,
                             const std::string& body, int timeout_s) {
  const std::string what = method + " " + path;
  const std::string target = std::string(protocol::kApiPrefix) + path;
  if (!info_.socket.empty()) {
    auto reply = UnixHttpRequest(info_.socket, method, target, body, timeout_s);
    if (reply.ok()) return DecodeBody(reply->status, reply->body, what);
    // Only a socket that could not be reached at all (nothing sent) falls back to the token.
    if (reply.status().code() != Code::kNotFound || info_.token.empty()) {
      return Unavailable(fmt::format("cannot reach the drover daemon at {} ({}) for {}; is `drover "
                                     "serve` still running?",
                                     info_.socket, reply.status().message(), what));
    }
  }
  http_->set_read_timeout(timeout_s, 0);
  httplib::Result res = method == "GET"    ? http_->Get(target.c_str())
                        : method == "POST" ? http_->Post(target.c_str(), body, "application/json")
                                           : http_->Delete(target.c_str());
  if (!res) {
    return Unavailable(fmt::format("cannot reach the drover daemon at {}:{} ({}) for {}; is "
                                   "`drover serve` still running?",
                                   info_.host, info_.port, httplib::to_string(res.error()), what));
  }
  return DecodeBody(res->status, res->body, what);
}

Result<Json> ApiClient::Get(const std::string& path, int timeout_s) {
  return Call("GET", path, "", timeout_s);
}

Result<Json> ApiClient::Post(const std::string& path, const Json& body) {
  return Call("POST", path, body.dump(), 300);  // a submit snapshots the code first
}

Result<Json> ApiClient::Delete(const std::string& path) {
  return Call("DELETE", path, "", 300);  // a removal moves its files aside first
}

}  // namespace drover::cli
