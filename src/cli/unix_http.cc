#include "cli/unix_http.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/unix_socket.h"
#include "protocol/api.h"

namespace drover::cli {
namespace {

constexpr size_t kMaxReply = 256u << 20;

using SteadyClock = std::chrono::steady_clock;

int LeftMs(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

Status SendAll(int fd, const std::string& data, SteadyClock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, LeftMs(deadline)) <= 0) return Unavailable("the daemon did not take the request in time");
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(std::string("sending the request: ") + ErrnoText(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The body of a chunked reply.
Result<std::string> Dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return Internal("a chunked reply ended early");
    const std::string size_text = raw.substr(pos, eol - pos);
    char* end = nullptr;
    const unsigned long long n = std::strtoull(size_text.c_str(), &end, 16);
    if (end == size_text.c_str()) return Internal("a chunked reply has a malformed chunk size");
    pos = eol + 2;
    if (n == 0) return out;
    if (n > kMaxReply || pos + n > raw.size()) return Internal("a chunked reply ended early");
    out.append(raw, pos, n);
    pos += n + 2;
  }
}

}  // namespace

Result<HttpReply> UnixHttpRequest(const std::string& socket_path, const std::string& method,
                                  const std::string& target, const std::string& body,
                                  int timeout_s) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(timeout_s);
  auto connected = ConnectUnix(socket_path, 5000);
  // Not reached at all (nothing was sent): NotFound, so the caller may try elsewhere.
  if (!connected.ok()) return NotFound(connected.status().message());
  const int fd = *connected;
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n" +
                        "Connection: close\r\nAccept: application/json\r\n";
  if (!body.empty() || (method != "GET" && method != "HEAD")) {
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n";
  }
  request += "\r\n" + body;
  if (Status st = SendAll(fd, request, deadline); !st.ok()) {
    ::close(fd);
    return st;
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, LeftMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      return Unavailable("the daemon did not answer within " + std::to_string(timeout_s) + " s");
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Unavailable(std::string("reading the daemon's reply: ") + ErrnoText(errno));
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > kMaxReply) {
      ::close(fd);
      return Internal("the daemon's reply is over 256 MiB");
    }
  }
  ::close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || !raw.starts_with("HTTP/1.")) {
    return Unavailable("the daemon's socket answered with something that is not HTTP");
  }
  HttpReply reply;
  reply.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  const std::string head = Lower(raw.substr(0, head_end));
  std::string payload = raw.substr(head_end + 4);
  if (head.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
    DROVER_ASSIGN_OR_RETURN(reply.body, Dechunk(payload));
  } else if (size_t cl = head.find("\r\ncontent-length:"); cl != std::string::npos) {
    const size_t len = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
    if (len > payload.size()) return Unavailable("the daemon's reply ended early");
    payload.resize(len);
    reply.body = std::move(payload);
  } else {
    reply.body = std::move(payload);
  }
  return reply;
}

Status UnixHttpStream(const std::string& socket_path, const std::string& target,
                      const std::function<bool(std::string_view)>& on_data, int idle_timeout_s,
                      std::string* headers) {
  auto connected = ConnectUnix(socket_path, 5000);
  if (!connected.ok()) return NotFound(connected.status().message());
  const int fd = *connected;
  const std::string request =
      "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  Status st = SendAll(fd, request, SteadyClock::now() + std::chrono::seconds(5));
  std::string head;
  bool in_body = false;
  char buf[16384];
  while (st.ok()) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, idle_timeout_s * 1000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // quiet for too long: the caller asks again
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view got(buf, static_cast<size_t>(n));
    if (!in_body) {
      head.append(got);
      const size_t end = head.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (head.size() > 65536) st = Unavailable("the daemon's reply headers are too long");
        continue;
      }
      const int status = head.starts_with("HTTP/1.") ? std::atoi(head.c_str() + head.find(' ') + 1) : 0;
      if (status < 200 || status > 299) {
        // The daemon's error, as its JSON says it ({"error": "..."}), read to a bound.
        std::string body = head.substr(end + 4);
        for (ssize_t m; body.size() < 65536 && (m = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
          body.append(buf, static_cast<size_t>(m));
        }
        Json j;
        try {
          j = Json::parse(body);
        } catch (const Json::exception&) {
        }
        st = j.is_object() ? protocol::StatusFromErrorJson(j, status)
                           : Unavailable("the daemon answered " + std::to_string(status) +
                                         " for " + target);
        break;
      }
      if (headers != nullptr) *headers = head.substr(0, end);
      in_body = true;
      got = std::string_view(head).substr(end + 4);
      if (got.empty()) continue;
      if (!on_data(got)) break;
      continue;
    }
    if (!on_data(got)) break;
  }
  ::close(fd);
  return st;
}

}  // namespace drover::cli
