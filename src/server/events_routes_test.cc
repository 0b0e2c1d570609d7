// /api/v1/events: server-sent events fed by the engine.
#include <chrono>
#include <future>

#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::ServerTest;

struct SseEvent {
  std::string id;
  std::string event;
  std::string data;
};

// Reads the stream until `want` events (frames with data) came, or the server ends it. Comment
// lines are counted in `comments`.
struct SseReader {
  std::vector<SseEvent> events;
  int comments = 0;
  int status = 0;
  std::string content_type;

  void Read(httplib::Client& c, const std::string& path, const httplib::Headers& headers,
            size_t want) {
    std::string buf;
    auto r = c.Get(
        path.c_str(), headers,
        [&](const httplib::Response& res) {
          status = res.status;
          content_type = res.get_header_value("Content-Type");
          return true;
        },
        [&](const char* data, size_t n) {
          buf.append(data, n);
          size_t end;
          while ((end = buf.find("\n\n")) != std::string::npos) {
            std::string frame = buf.substr(0, end);
            buf.erase(0, end + 2);
            SseEvent e;
            for (const auto& line : Split(frame)) {
              if (line.rfind(":", 0) == 0) ++comments;
              if (line.rfind("id: ", 0) == 0) e.id = line.substr(4);
              if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
              if (line.rfind("data: ", 0) == 0) e.data = line.substr(6);
            }
            if (!e.data.empty()) events.push_back(e);
            if (events.size() >= want) return false;
          }
          return true;
        });
    (void)r;
  }

  static std::vector<std::string> Split(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
      size_t nl = s.find('\n', start);
      out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return out;
  }
};

TEST_F(ServerTest, EventsStreamPushedEventsWithIds) {
  StartServer();
  engine_.Push("run_state", {{"run_id", 1}, {"state", "queued"}});  // before connecting: not sent
  SseReader reader;
  auto done = std::async(std::launch::async, [&] {
    auto c = Client();
    reader.Read(*c, "/api/v1/events", {}, 3);
  });
  ASSERT_TRUE(engine_.WaitForWaitCalls(1));
  engine_.Push("run_state", {{"run_id", 1}, {"state", "running"}});
  engine_.Push("metrics", {{"run_id", 1}, {"points", 3}});
  engine_.Push("gpu", {{"index", 0}, {"util", 93}});
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(reader.status, 200);
  EXPECT_EQ(reader.content_type, "text/event-stream");
  ASSERT_EQ(reader.events.size(), 3u);
  EXPECT_EQ(reader.events[0].id, "2");
  EXPECT_EQ(reader.events[0].event, "run_state");
  EXPECT_EQ(Json::parse(reader.events[0].data), Json::parse(R"({"run_id":1,"state":"running"})"));
  EXPECT_EQ(reader.events[1].id, "3");
  EXPECT_EQ(reader.events[1].event, "metrics");
  EXPECT_EQ(reader.events[2].id, "4");
  EXPECT_EQ(reader.events[2].event, "gpu");
}

TEST_F(ServerTest, EventsResumeAfterLastEventId) {
  for (int i = 1; i <= 5; ++i) engine_.Push("run_state", {{"n", i}});
  StartServer();
  SseReader reader;
  auto c = Client();
  reader.Read(*c, "/api/v1/events", {{"Last-Event-ID", "3"}}, 2);
  ASSERT_EQ(reader.events.size(), 2u);
  EXPECT_EQ(reader.events[0].id, "4");
  EXPECT_EQ(reader.events[1].id, "5");
  EXPECT_EQ(Json::parse(reader.events[1].data)["n"], 5);

  SseReader from_query;
  from_query.Read(*c, "/api/v1/events?after=0", {}, 5);
  ASSERT_EQ(from_query.events.size(), 5u);
  EXPECT_EQ(from_query.events[0].id, "1");
}

TEST_F(ServerTest, EventsReportAGap) {
  for (int i = 1; i <= 5; ++i) engine_.Push("run_state", {{"n", i}});
  engine_.Forget(3);  // the buffer lost 1..3
  StartServer();
  SseReader reader;
  auto c = Client();
  reader.Read(*c, "/api/v1/events?after=1", {}, 3);
  ASSERT_EQ(reader.events.size(), 3u);
  EXPECT_EQ(reader.events[0].event, "gap");
  EXPECT_EQ(reader.events[0].id, "");
  EXPECT_EQ(Json::parse(reader.events[0].data), Json::parse(R"({"after": 1, "next": 4})"));
  EXPECT_EQ(reader.events[1].id, "4");
}

TEST_F(ServerTest, EventsKeepalive) {
  ServerOptions o;
  o.keepalive_ms = 100;
  StartServer(o);
  SseReader reader;
  auto done = std::async(std::launch::async, [&] {
    auto c = Client();
    reader.Read(*c, "/api/v1/events", {}, 1);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  engine_.Push("run_state", {{"n", 1}});
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_GE(reader.comments, 3);  // the opening comment and keepalives
}

TEST_F(ServerTest, EventsBadCursor) {
  StartServer();
  EXPECT_EQ(Get("/api/v1/events", {{"Last-Event-ID", "abc"}}).status, 400);
  EXPECT_EQ(Get("/api/v1/events?after=-1").status, 400);
}

TEST_F(ServerTest, StopEndsOpenStreams) {
  StartServer();
  SseReader reader;
  auto done = std::async(std::launch::async, [&] {
    auto c = Client();
    reader.Read(*c, "/api/v1/events", {}, 100);
  });
  ASSERT_TRUE(engine_.WaitForWaitCalls(1));
  auto t0 = std::chrono::steady_clock::now();
  StopServer();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
}

TEST_F(ServerTest, ClientGoingAwayFreesTheStream) {
  ServerOptions o;
  o.keepalive_ms = 50;
  o.threads = 9;  // one long-lived request at a time
  StartServer(o);
  for (int i = 0; i < 3; ++i) {
    SseReader reader;
    auto done = std::async(std::launch::async, [&] {
      auto c = Client();
      reader.Read(*c, "/api/v1/events?after=0", {}, 1);
    });
    engine_.Push("run_state", {{"n", i}});
    ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ASSERT_EQ(reader.events.size(), 1u) << "stream " << i;
    // The client closed; within a couple of keepalives the server notices and frees the slot.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

TEST_F(ServerTest, TooManyStreamsIs503) {
  ServerOptions o;
  o.threads = 9;  // one long-lived request at a time
  StartServer(o);
  auto done = std::async(std::launch::async, [&] {
    SseReader reader;
    auto c = Client();
    reader.Read(*c, "/api/v1/events", {}, 1);
  });
  ASSERT_TRUE(engine_.WaitForWaitCalls(1));
  auto r = Get("/api/v1/events");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body["error"]["code"], "unavailable");
  engine_.Push("run_state", {{"n", 1}});
  done.wait();
}

}  // namespace
}  // namespace drover::server
