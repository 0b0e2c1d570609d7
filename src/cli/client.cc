#include "cli/client.h"

#include <httplib.h>
#include <signal.h>

#include <fmt/format.h>
#include <fstream>
#include <sstream>

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
  // A daemon killed with SIGKILL leaves its file behind: only a live pid counts.
  if (info.port <= 0 || info.pid <= 0 || (::kill(info.pid, 0) != 0 && errno == ESRCH)) {
    return std::nullopt;
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

Result<Json> Decode(const httplib::Result& res, const std::string& what, const DaemonInfo& info) {
  if (!res) {
    return Unavailable(fmt::format("cannot reach the drover daemon at {}:{} ({}) for {}; is "
                                   "`drover serve` still running?",
                                   info.host, info.port, httplib::to_string(res.error()), what));
  }
  Json body = Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status >= 400) {
    return protocol::StatusFromErrorJson(body.is_discarded() ? Json() : body, res->status);
  }
  if (body.is_discarded()) {
    return Internal(fmt::format("the daemon answered {} with something that is not JSON", what));
  }
  return body;
}

}  // namespace

Result<Json> ApiClient::Get(const std::string& path, int timeout_s) {
  http_->set_read_timeout(timeout_s, 0);
  return Decode(http_->Get((std::string(protocol::kApiPrefix) + path).c_str()), "GET " + path,
                info_);
}

Result<Json> ApiClient::Post(const std::string& path, const Json& body) {
  http_->set_read_timeout(300, 0);  // a submit snapshots the code first
  return Decode(http_->Post((std::string(protocol::kApiPrefix) + path).c_str(), body.dump(),
                            "application/json"),
                "POST " + path, info_);
}

Result<Json> ApiClient::Delete(const std::string& path) {
  http_->set_read_timeout(300, 0);  // a removal moves its files aside first
  return Decode(http_->Delete((std::string(protocol::kApiPrefix) + path).c_str()),
                "DELETE " + path, info_);
}

}  // namespace drover::cli
