#pragma once
// One HTTP/1.1 request to the daemon over its Unix socket (docs/lab-server.md): the kernel tells
// the daemon who the caller is, so no token goes with it. One connection per request.
#include <functional>
#include <string>
#include <string_view>

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

// A GET whose reply streams (the event stream): `on_data` gets what arrives after the headers, as
// it arrives (chunk framing included), until it returns false, the daemon ends the reply, or
// nothing arrives for idle_timeout_s. An error status (not 2xx) is returned as a failure with
// the daemon's message. `headers`, when given, gets the reply's status line and headers.
Status UnixHttpStream(const std::string& socket_path, const std::string& target,
                      const std::function<bool(std::string_view)>& on_data, int idle_timeout_s,
                      std::string* headers = nullptr);

}  // namespace drover::cli
