// Slow, idle and too many clients against a real HttpServer on loopback, with raw sockets for the
// misbehaving ones and httplib::Client for the authenticated requests that must still be answered.
#include "server/connection_gate.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/server_test_util.h"

namespace drover::server::testing {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void Send(int fd, const std::string& s) { (void)!send(fd, s.data(), s.size(), MSG_NOSIGNAL); }

// What the server sends before it closes the connection, waiting at most `ms`; "" when it says
// nothing; "<open>" when the connection is still open then.
std::string ReadUntilClosed(int fd, int ms) {
  std::string out;
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (left <= 0) return "<open>";
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// ReadUntilClosed, and how long it took.
std::pair<std::string, int64_t> TimedRead(int fd, int ms) {
  const auto t0 = Clock::now();
  std::string said = ReadUntilClosed(fd, ms);
  return {said, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()};
}

class ConnectionGateTest : public ServerTest {};

TEST_F(ConnectionGateTest, TwoHundredSlowClientsDoNotKeepAuthenticatedRequestsWaiting) {
  ServerOptions o;
  o.threads = 16;
  StartServer(o);
  // Each sends a request line and then one header line every 100 ms, never ending its headers:
  // before the gate each held a worker as long as it kept sending.
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    int fd = Connect(Port());
    ASSERT_GE(fd, 0);
    Send(fd, "GET /api/v1/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (int line = 0; !stop; ++line) {
      for (int fd : slow) Send(fd, "X-Slow-" + std::to_string(line) + ": 1\r\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int64_t worst = 0;
  for (int i = 0; i < 30; ++i) {
    const auto t0 = Clock::now();
    Reply r = Get("/api/v1/gpus");
    const int64_t took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    worst = std::max(worst, took);
    EXPECT_EQ(r.status, 200);
  }
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
  // Before the gate they waited over 30 s; 2 s leaves room for a loaded CI machine.
  EXPECT_LT(worst, 2000) << "an authenticated request waited behind the slow clients";
}

TEST_F(ConnectionGateTest, HeadersThatDoNotArriveInTimeAre408AndClosed) {
  ServerOptions o;
  o.limits.header_ms = 300;
  StartServer(o);
  int fd = Connect(Port());
  ASSERT_GE(fd, 0);
  Send(fd, "GET /api/v1/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // no blank line: never done
  const auto [said, took_ms] = TimedRead(fd, 5000);
  close(fd);
  EXPECT_EQ(said.rfind("HTTP/1.1 408", 0), 0u) << said;
  EXPECT_GE(took_ms, 200);
  EXPECT_LT(took_ms, 2000);
  // An idle connection that never says anything goes the same way.
  fd = Connect(Port());
  EXPECT_EQ(ReadUntilClosed(fd, 5000).rfind("HTTP/1.1 408", 0), 0u);
  close(fd);
  EXPECT_EQ(Get("/api/v1/gpus").status, 200);
}

TEST_F(ConnectionGateTest, HeadersOverSixteenKibibytesAre431AtTheGate) {
  // Many short header lines (httplib bounds a line, not their number): refused at the gate, not
  // read on a worker.
  StartServer();
  int fd = Connect(Port());
  ASSERT_GE(fd, 0);
  std::string head = "GET /api/v1/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  while (head.size() < ConnectionGate::kMaxHeaderBytes + 100) head += "X-Pad: 0123456789\r\n";
  Send(fd, head);
  const std::string said = ReadUntilClosed(fd, 5000);
  close(fd);
  EXPECT_EQ(said.rfind("HTTP/1.1 431", 0), 0u) << said.substr(0, 100);
  EXPECT_EQ(Get("/api/v1/gpus").status, 200);
}

TEST_F(ConnectionGateTest, WhenTooManyWaitTheOldestGivesWay) {
  ServerOptions o;
  o.limits.max_waiting = 8;
  StartServer(o);
  std::vector<int> idle;
  for (int i = 0; i < 9; ++i) {
    idle.push_back(Connect(Port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // admitted in this order
  }
  // The ninth pushed the first out; the others still wait.
  EXPECT_EQ(ReadUntilClosed(idle[0], 3000).rfind("HTTP/1.1 408", 0), 0u);
  EXPECT_EQ(ReadUntilClosed(idle[1], 200), "<open>");
  // A new client with a whole request gets through (pushing out another idle one).
  EXPECT_EQ(Get("/api/v1/gpus").status, 200);
  for (int fd : idle) close(fd);
}

TEST_F(ConnectionGateTest, ABodyThatTricklesIsCutAndTheServerGoesOn) {
  ServerOptions o;
  o.limits.body_ms = 300;
  StartServer(o);
  int fd = Connect(Port());
  ASSERT_GE(fd, 0);
  Send(fd, "POST /api/v1/experiments HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(Port()) +
               "\r\nAuthorization: Bearer " + kToken +
               "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"a\":");
  const auto [said, took_ms] = TimedRead(fd, 6000);
  close(fd);
  EXPECT_NE(said, "<open>");
  EXPECT_LT(took_ms, 3000) << "a 5 s read timeout, not the body deadline, ended it";
  EXPECT_TRUE(engine_.Locked([&] { return engine_.submits.empty(); }));
  EXPECT_EQ(Get("/api/v1/gpus").status, 200);
}

TEST_F(ConnectionGateTest, APostWithNoBodyAndNoContentLengthIsAnsweredAtOnce) {
  const int64_t id = AddExperiment("sweep").id;
  StartServer();
  // What `curl -X POST .../cancel` sends: no body, no Content-Length.
  int fd = Connect(Port());
  Send(fd, "POST /api/v1/experiments/" + std::to_string(id) + "/cancel HTTP/1.1\r\nHost: 127.0.0.1:" +
               std::to_string(Port()) + "\r\nAuthorization: Bearer " + kToken +
               "\r\nConnection: close\r\n\r\n");
  const auto [said, took_ms] = TimedRead(fd, 5000);
  close(fd);
  EXPECT_EQ(said.rfind("HTTP/1.1 200", 0), 0u) << said;
  EXPECT_LT(took_ms, 1000);
  EXPECT_EQ(engine_.Locked([&] { return engine_.cancelled_experiments; }),
            std::vector<int64_t>{id});
}

TEST_F(ConnectionGateTest, AKeptAliveConnectionServesRequestAfterRequest) {
  StartServer();
  auto c = Client();
  c->set_keep_alive(true);
  for (int i = 0; i < 50; ++i) {
    auto r = c->Get("/api/v1/gpus");
    ASSERT_TRUE(r) << i << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  // Two requests sent in one go are both answered.
  int fd = Connect(Port());
  const std::string one = "GET /api/v1/gpus HTTP/1.1\r\nHost: 127.0.0.1:" +
                          std::to_string(Port()) + "\r\nAuthorization: Bearer " + kToken +
                          "\r\n\r\n";
  Send(fd, one + one.substr(0, one.size() - 2) + "Connection: close\r\n\r\n");
  const std::string said = ReadUntilClosed(fd, 5000);
  close(fd);
  size_t replies = 0;
  for (size_t at = said.find("HTTP/1.1 200"); at != std::string::npos;
       at = said.find("HTTP/1.1 200", at + 1)) {
    ++replies;
  }
  EXPECT_EQ(replies, 2u) << said;
}

}  // namespace
}  // namespace drover::server::testing
