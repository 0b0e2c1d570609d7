#pragma once
// The CLI as a client of the daemon: finding the daemon that serves a store (daemon.json and the
// token file in the store folder, written by `drover serve`) and calling its HTTP API.
#include <memory>
#include <optional>
#include <string>

#include "cli/common.h"
#include "common/status.h"
#include "model/spec.h"
#include "protocol/api.h"

namespace httplib {
class Client;
}

namespace drover::cli {

struct DaemonInfo {
  std::string host = "127.0.0.1";
  int port = 0;
  int pid = 0;
  std::string token;   // "" when the caller may not read it (another user's or the lab's daemon)
  std::string socket;  // the daemon's Unix socket ("" for none): preferred, the kernel names us
  int64_t idle_exit_ms = -1;  // it exits after this long idle (0: never; -1: not said)
};

std::string DaemonInfoPath(const Globals& g);  // <store>/daemon.json
std::string TokenPath(const Globals& g);       // <store>/token

// The daemon serving this store, when one is running (its pid is alive); nothing otherwise.
std::optional<DaemonInfo> FindDaemon(const Globals& g);

class ApiClient {
 public:
  explicit ApiClient(DaemonInfo info);
  ~ApiClient();
  // `path` is below /api/v1 ("/runs?state=running"). Errors carry the server's message.
  Result<Json> Get(const std::string& path, int timeout_s = 30);
  Result<Json> Post(const std::string& path, const Json& body);
  Result<Json> Delete(const std::string& path);
  const DaemonInfo& info() const { return info_; }

 private:
  // One request: over the Unix socket when the daemon has one, else (or when the socket cannot
  // be reached and the token can be read) over HTTP with the token.
  Result<Json> Call(const std::string& method, const std::string& path, const std::string& body,
                    int timeout_s);
  DaemonInfo info_;
  std::unique_ptr<httplib::Client> http_;
};

// Sends a spec file to the daemon (POST /experiments).
Result<protocol::SubmitResponse> SubmitToDaemon(ApiClient& api, const std::string& spec_path,
                                                const std::vector<std::string>& sets);
// Asks the daemon whether the spec's runs could ever start on its pool, submitting nothing (POST
// /experiments/check): `drover run --dry-run` with a daemon serving the store.
Status CheckWithDaemon(ApiClient& api, const std::string& spec_path,
                       const std::vector<std::string>& sets);
// The request for a spec file ("-": standard input) with its --set overrides.
Result<protocol::SubmitRequest> SubmitRequestFor(const std::string& spec_path,
                                                 const std::vector<std::string>& sets);

}  // namespace drover::cli
