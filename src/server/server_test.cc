// HttpServer: the checks every request passes (token, Host, Origin, body size), error bodies,
// binding and stopping.
#include "server/server.h"

#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::kToken;
using testing::ServerTest;

void ExpectError(const testing::Reply& r, int status, const std::string& code,
                 const std::string& needle = "") {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  ASSERT_TRUE(r.body.contains("error")) << r.raw;
  EXPECT_EQ(r.body["error"]["code"], code) << r.raw;
  EXPECT_TRUE(r.body["error"]["message"].is_string());
  if (!needle.empty()) {
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(needle), std::string::npos)
        << r.raw;
  }
}


TEST_F(ServerTest, MissingTokenIs401) {
  StartServer();
  auto c = Client(false);
  auto r = Wrap(c->Get("/api/v1/experiments"));
  ExpectError(r, 401, "unauthenticated", "Authorization: Bearer <token>");
  EXPECT_NE(r.raw.find("<store>/token"), std::string::npos);
}

TEST_F(ServerTest, WrongTokenIs401) {
  StartServer();
  auto c = Client(false);
  ExpectError(Wrap(c->Get("/api/v1/experiments", {{"Authorization", "Bearer nope"}})), 401,
              "unauthenticated");
  // The right token with a byte more, or under another scheme, is still wrong.
  ExpectError(Wrap(c->Get("/api/v1/experiments",
                          {{"Authorization", std::string("Bearer ") + kToken + "x"}})),
              401, "unauthenticated");
  ExpectError(
      Wrap(c->Get("/api/v1/experiments", {{"Authorization", std::string("Basic ") + kToken}})), 401,
      "unauthenticated");
  // Even unknown routes answer 401 first: nothing is revealed without the token.
  ExpectError(Wrap(c->Get("/api/v1/nothing-here")), 401, "unauthenticated");
  ExpectError(Wrap(c->Post("/api/v1/experiments", "{}", "application/json")), 401,
              "unauthenticated");
}

TEST_F(ServerTest, RightTokenPasses) {
  StartServer();
  auto r = Get("/api/v1/experiments");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, Json::parse(R"({"experiments": []})"));
  // The scheme is case-insensitive.
  auto c = Client(false);
  auto r2 =
      Wrap(c->Get("/api/v1/experiments", {{"Authorization", std::string("bearer ") + kToken}}));
  EXPECT_EQ(r2.status, 200);
}

TEST_F(ServerTest, ForeignHostIs403) {
  StartServer();
  std::string port = std::to_string(Port());
  ExpectError(Get("/api/v1/experiments", {{"Host", "evil.example:" + port}}), 403,
              "permission_denied", "DNS rebinding");
  ExpectError(Get("/api/v1/experiments", {{"Host", "127.0.0.1:1"}}), 403, "permission_denied");
  ExpectError(Get("/api/v1/experiments", {{"Host", "127.0.0.1"}}), 403, "permission_denied");
  EXPECT_EQ(Get("/api/v1/experiments", {{"Host", "localhost:" + port}}).status, 200);
  EXPECT_EQ(Get("/api/v1/experiments", {{"Host", "LocalHost:" + port}}).status, 200);
  EXPECT_EQ(Get("/api/v1/experiments", {{"Host", "127.0.0.1:" + port}}).status, 200);
}

TEST_F(ServerTest, ForeignOriginIs403) {
  StartServer();
  std::string port = std::to_string(Port());
  ExpectError(Get("/api/v1/experiments", {{"Origin", "http://evil.example"}}), 403,
              "permission_denied", "evil.example");
  ExpectError(Get("/api/v1/experiments", {{"Origin", "http://127.0.0.1:1"}}), 403,
              "permission_denied");
  ExpectError(Get("/api/v1/experiments", {{"Origin", "null"}}), 403, "permission_denied");
  EXPECT_EQ(Get("/api/v1/experiments", {{"Origin", "http://127.0.0.1:" + port}}).status, 200);
  EXPECT_EQ(Get("/api/v1/experiments", {{"Origin", "http://localhost:" + port}}).status, 200);
}

TEST_F(ServerTest, TenMegabyteBodyIs413) {
  StartServer();
  std::string body(10 * 1024 * 1024, 'x');
  auto r = Post("/api/v1/experiments", body);
  ExpectError(r, 413, "invalid_argument", std::to_string(protocol::kMaxBodyBytes));
  EXPECT_TRUE(engine_.Locked([&] { return engine_.submits.empty(); }));
  // The server is still fine afterwards.
  EXPECT_EQ(Get("/api/v1/experiments").status, 200);
}

TEST_F(ServerTest, MalformedJsonIs400WithPosition) {
  StartServer();
  auto r = Post("/api/v1/experiments", "{\"spec_yaml\": \"x\",\n  \"overrides\": [1,}");
  ExpectError(r, 400, "invalid_argument", "line 2, column");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("malformed JSON"),
            std::string::npos);
  ExpectError(Post("/api/v1/experiments", ""), 400, "invalid_argument", "empty");
  ExpectError(Post("/api/v1/runs/1/priority", "[1,2"), 400, "invalid_argument", "column");
}

TEST_F(ServerTest, UnknownRouteIs404Json) {
  StartServer();
  ExpectError(Get("/api/v1/nothing-here"), 404, "not_found", "GET /api/v1/nothing-here");
  ExpectError(Get("/nothing-here"), 404, "not_found");
  ExpectError(Post("/api/v1/gpus", "{}"), 404, "not_found");
  auto c = Client();
  auto r = Wrap(c->Delete("/api/v1/runs/1"));
  ExpectError(r, 404, "not_found");
}

TEST_F(ServerTest, ErrorsHaveJsonContentType) {
  StartServer();
  auto r = Get("/api/v1/runs/abc");
  EXPECT_EQ(r.status, 400);
  auto ct = r.headers.find("Content-Type");
  ASSERT_NE(ct, r.headers.end());
  EXPECT_EQ(ct->second, "application/json");
}

TEST_F(ServerTest, ExceptionsBecome500Json) {
  engine_.throw_in_gpus = true;
  StartServer();
  ExpectError(Get("/api/v1/gpus"), 500, "internal", "boom");
  EXPECT_EQ(Get("/api/v1/experiments").status, 200);  // and the server carries on
}

TEST_F(ServerTest, ListensOnIpv6Loopback) {
  ServerOptions o;
  o.store_path = StorePath();
  o.host = "::1";
  o.port = 0;
  o.token = kToken;
  HttpServer s(o, engine_, clock_);
  if (!s.Bind().ok()) GTEST_SKIP() << "no IPv6 loopback here";
  std::thread t([&] { s.Run(); });
  httplib::Client c("::1", s.port());
  c.set_default_headers({{"Authorization", std::string("Bearer ") + kToken}});
  std::string p = std::to_string(s.port());
  auto ok = c.Get("/api/v1/gpus", {{"Host", "[::1]:" + p}, {"Origin", "http://[::1]:" + p}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto foreign = c.Get("/api/v1/gpus", {{"Host", "127.0.0.2:" + p}});
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
  s.Stop();
  t.join();
}

TEST_F(ServerTest, BindRefusesEmptyToken) {
  ServerOptions o;
  o.store_path = StorePath();
  o.port = 0;
  HttpServer s(o, engine_, clock_);
  Status st = s.Bind();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("token"), std::string::npos);
}

TEST_F(ServerTest, BindReportsPortInUse) {
  StartServer();
  ServerOptions o;
  o.store_path = StorePath();
  o.port = Port();
  o.token = kToken;
  HttpServer second(o, engine_, clock_);
  Status st = second.Bind();
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find(std::to_string(Port())), std::string::npos) << st.message();
}

TEST_F(ServerTest, StopBeforeRunAndTwice) {
  ServerOptions o;
  o.store_path = StorePath();
  o.port = 0;
  o.token = kToken;
  HttpServer s(o, engine_, clock_);
  ASSERT_TRUE(s.Bind().ok());
  s.Stop();
  std::thread t([&] { s.Run(); });  // returns at once: already stopped
  t.join();
  s.Stop();
}

TEST_F(ServerTest, StopRightAfterRunStarts) {
  for (int i = 0; i < 5; ++i) {
    StartServer();
    StopServer();  // must not hang even if listen has not begun
  }
}

TEST_F(ServerTest, ServesConcurrentClients) {
  AddExperiment("a");
  StartServer();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 10; ++j) {
        auto c = Client();
        auto r = c->Get("/api/v1/experiments");
        if (r && r->status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

}  // namespace
}  // namespace drover::server
