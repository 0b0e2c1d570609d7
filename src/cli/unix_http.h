#pragma once
// One HTTP/1.1 request to the daemon over its Unix socket (docs/lab-server.md): the kernel tells
// the daemon who the caller is, so no token goes with it. One connection per request.
#include <string>

#include "common/status.h"

namespace drover::cli {

struct HttpReply {
  int status = 0;
  std::string body;
};

// `target` is the path with its query ("/api/v1/runs?limit=5"). The whole exchange is bounded by
// timeout_s and the reply's body by 256 MiB. Fails with NotFound/Unavailable when the socket
// cannot be reached (the caller may try the TCP address instead).
Result<HttpReply> UnixHttpRequest(const std::string& socket_path, const std::string& method,
                                  const std::string& target, const std::string& body,
                                  int timeout_s);

}  // namespace drover::cli
