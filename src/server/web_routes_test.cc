// The web UI's server side: sign-in, cookies, CSRF, static files, the runs table, recipes and
// plans, against a real HttpServer and store.
#include <cstdlib>

#include "server/run_table.h"
#include "spec/spec_parser.h"
#include "server/server_test_util.h"
#include "server/web_auth.h"

namespace drover::server {
namespace {

using testing::kToken;
using testing::Reply;
using testing::ServerTest;
namespace fs = std::filesystem;

TEST(WebAuth, SessionCookieIsAnHmacThatExpires) {
  const Millis now = 1'764'460'800'000;
  std::string c = MakeSessionCookie("tok", now);
  EXPECT_TRUE(c.starts_with("v1.1764460800000."));
  EXPECT_TRUE(SessionValid("tok", c, now));
  EXPECT_TRUE(SessionValid("tok", c, now + kSessionMaxAgeS * 1000));
  EXPECT_FALSE(SessionValid("tok", c, now + kSessionMaxAgeS * 1000 + 1));  // expired
  EXPECT_FALSE(SessionValid("other-token", c, now));                     // token changed
  EXPECT_FALSE(SessionValid("", c, now));
  std::string forged = c;
  forged[5] = forged[5] == '1' ? '2' : '1';  // another issue time, same MAC
  EXPECT_FALSE(SessionValid("tok", forged, now));
  EXPECT_FALSE(SessionValid("tok", "v1.x.abc", now));
  EXPECT_FALSE(SessionValid("tok", "v1..", now));
  EXPECT_FALSE(SessionValid("tok", "", now));
  EXPECT_FALSE(SessionValid("tok", MakeSessionCookie("tok", now + 3'600'000), now));  // future
  EXPECT_NE(CsrfFor("tok", c), CsrfFor("tok", MakeSessionCookie("tok", now + 1)));
  EXPECT_EQ(CsrfFor("tok", c).size(), 64u);
}

TEST(WebAuth, CookieHeaders) {
  using V = std::vector<std::string>;
  EXPECT_EQ(CookieValues("a=1; drover_session=v1.2.x ; b=3", "drover_session"), V{"v1.2.x"});
  EXPECT_EQ(CookieValues("drover_session=abc; drover_session=def", "drover_session"),
            (V{"abc", "def"}));
  EXPECT_EQ(CookieValues("xdrover_session=abc", "drover_session"), V{});
  EXPECT_EQ(CookieValues("", "drover_session"), V{});
  EXPECT_EQ(SessionCookieName(7070), "drover_session_7070");
  // A junk cookie of the same name (planted by a page on another port) does not hide the real one.
  const Millis now = 1'764'460'800'000;
  std::string good = MakeSessionCookie("tok", now);
  EXPECT_EQ(ValidSessionCookie("tok", "drover_session_7070=junk; drover_session_7070=" + good, 7070, now),
            good);
  EXPECT_EQ(ValidSessionCookie("tok", "drover_session_7071=" + good, 7070, now), "");
  std::string set = SessionSetCookie(7070, "v1.1.ab");
  EXPECT_TRUE(set.starts_with("drover_session_7070=v1.1.ab;")) << set;
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(set.find("Path=/"), std::string::npos);
  EXPECT_NE(SessionSetCookie(7070, "").find("Max-Age=0"), std::string::npos);
  EXPECT_TRUE(SecretsEqual("abc", "abc"));
  EXPECT_FALSE(SecretsEqual("abc", "abd"));
  EXPECT_FALSE(SecretsEqual("abc", "abcd"));
  EXPECT_FALSE(SecretsEqual("", "a"));
}

class WebRoutesTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    // The UI's pages from a folder of the test's own, so the test does not depend on web/.
    web_ = dir_ / "web";
    fs::create_directories(web_ / "js");
    fs::create_directories(web_ / "node_modules/uplot/dist");
    Write(web_ / "index.html", "<meta name=\"drover-csrf\" content=\"{{csrf}}\">app");
    Write(web_ / "login.html", "<form method=post action=/login><p>{{error}}</p></form>");
    Write(web_ / "js/app.js", "console.log('hi')");
    Write(web_ / "node_modules/uplot/dist/uPlot.iife.min.js", "var uPlot=1");
    Write(dir_ / "secret.txt", "do not serve");
    setenv("DROVER_WEB_DIR", web_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("DROVER_WEB_DIR");
    ServerTest::TearDown();
  }
  static void Write(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  // A client with no token and no cookie, which does not follow redirects.
  std::unique_ptr<httplib::Client> Anonymous() { return Client(/*with_token=*/false); }
  // Signs in through the form; returns the cookie ("drover_session=...").
  std::string SignIn() {
    auto c = Anonymous();
    auto r = c->Post("/login", "token=" + std::string(kToken), "application/x-www-form-urlencoded");
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 303);
    EXPECT_EQ(r->get_header_value("Location"), "/");
    std::string set = r->get_header_value("Set-Cookie");
    return set.substr(0, set.find(';'));
  }
  fs::path web_;
};

TEST_F(WebRoutesTest, SignInSetsAnHttpOnlyStrictCookieThatOpensTheApp) {
  StartServer();
  auto anon = Anonymous();
  auto root = anon->Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 303);
  EXPECT_EQ(root->get_header_value("Location"), "/login");
  auto login = anon->Get("/login");
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 200);
  EXPECT_NE(login->body.find("<form"), std::string::npos);
  EXPECT_EQ(login->body.find("{{error}}"), std::string::npos);
  EXPECT_EQ(login->get_header_value("X-Frame-Options"), "DENY");
  // Not no-referrer, which makes Chromium send "Origin: null" on the form's POST.
  EXPECT_EQ(login->get_header_value("Referrer-Policy"), "same-origin");
  auto icon = anon->Get("/favicon.ico");
  ASSERT_TRUE(icon);
  EXPECT_EQ(icon->status, 204);

  auto wrong = anon->Post("/login", "token=nope", "application/x-www-form-urlencoded");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_NE(wrong->body.find("not a token of this daemon"), std::string::npos) << wrong->body;
  EXPECT_FALSE(wrong->has_header("Set-Cookie"));

  auto right = anon->Post("/login", "token=" + std::string(kToken), "application/x-www-form-urlencoded");
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 303);
  std::string set = right->get_header_value("Set-Cookie");
  EXPECT_TRUE(set.starts_with("drover_session_" + std::to_string(Port()) + "=v1.")) << set;
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  std::string cookie = set.substr(0, set.find(';'));

  auto app = anon->Get("/", {{"Cookie", cookie}});
  ASSERT_TRUE(app);
  EXPECT_EQ(app->status, 200);
  std::string csrf = CsrfFor(kToken, cookie.substr(cookie.find('=') + 1));
  EXPECT_NE(app->body.find("content=\"" + csrf + "\""), std::string::npos) << app->body;
  EXPECT_EQ(app->get_header_value("Cache-Control"), "no-store");
  EXPECT_NE(app->get_header_value("Content-Security-Policy").find("script-src 'self'"),
            std::string::npos);

  // The API takes the cookie as it takes the token.
  auto runs = anon->Get("/api/v1/runs", {{"Cookie", cookie}});
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200) << runs->body;
  auto session = anon->Get("/api/v1/session", {{"Cookie", cookie}});
  ASSERT_TRUE(session);
  Json s = Json::parse(session->body);
  EXPECT_EQ(s["auth"], "cookie");
  EXPECT_EQ(s["csrf"], csrf);

  // A forged or stale cookie is nobody.
  std::string name = SessionCookieName(Port());
  auto forged = anon->Get("/api/v1/runs", {{"Cookie", name + "=v1.1.abc"}});
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 401);
  auto forged_root = anon->Get("/", {{"Cookie", name + "=v1.1.abc"}});
  ASSERT_TRUE(forged_root);
  EXPECT_EQ(forged_root->status, 303);
  // A junk cookie of the same name first does not sign the browser out.
  auto planted = anon->Get("/api/v1/runs", {{"Cookie", name + "=junk; " + cookie}});
  ASSERT_TRUE(planted);
  EXPECT_EQ(planted->status, 200);

  // The sign-in page asks whether it is signed in already (a link from another site comes
  // without the SameSite=Strict cookie); public, 200 either way.
  auto status = anon->Get("/login/status", {{"Cookie", cookie}});
  ASSERT_TRUE(status);
  EXPECT_EQ(Json::parse(status->body)["signed_in"], true);
  status = anon->Get("/login/status");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 200);
  EXPECT_EQ(Json::parse(status->body)["signed_in"], false);
}

TEST_F(WebRoutesTest, SignInWorksOnTheAddressTheDaemonListensOn) {
  // A lab daemon on a non-default address: its page's Origin is that address.
  ServerOptions o;
  o.host = "127.0.0.2";
  o.store_path = StorePath();
  o.port = 0;
  o.token = kToken;
  server_ = std::make_unique<HttpServer>(o, engine_, clock_);
  ASSERT_TRUE(server_->Bind().ok());
  thread_ = std::thread([this] { server_->Run(); });
  httplib::Client c("127.0.0.2", Port());
  std::string origin = "http://127.0.0.2:" + std::to_string(Port());
  auto r = c.Post("/login", {{"Origin", origin}}, "token=" + std::string(kToken),
                  "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 303) << r->body;
  auto other = c.Post("/login", {{"Origin", "http://127.0.0.3:" + std::to_string(Port())}},
                      "token=" + std::string(kToken), "application/x-www-form-urlencoded");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403);
}

TEST_F(WebRoutesTest, WithoutCookieOrTokenTheApiRefuses) {
  StartServer();
  auto anon = Anonymous();
  for (const char* path : {"/api/v1/runs", "/api/v1/experiments", "/api/v1/events", "/metrics",
                           "/api/v1/recipes", "/api/v1/session"}) {
    auto r = anon->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
  }
  auto post = anon->Post("/api/v1/runs/1/cancel", "", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  EXPECT_TRUE(engine_.Locked([&] { return engine_.cancelled_runs.empty(); }));
}

TEST_F(WebRoutesTest, ChangesByCookieNeedTheCsrfToken) {
  Experiment e = AddExperiment("alpha");
  drover::Run r = AddRun(e.id, RunState::kQueued);
  StartServer();
  std::string cookie = SignIn();
  std::string csrf = CsrfFor(kToken, cookie.substr(cookie.find('=') + 1));
  auto anon = Anonymous();
  std::string path = "/api/v1/runs/" + std::to_string(r.id) + "/cancel";
  auto bare = anon->Post(path, {{"Cookie", cookie}}, "", "application/json");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 403);
  EXPECT_NE(bare->body.find("CSRF"), std::string::npos);
  auto wrong = anon->Post(path, {{"Cookie", cookie}, {"X-Drover-Csrf", "00"}}, "", "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 403);
  // Another session's token does not fit this cookie.
  std::string other = CsrfFor(kToken, MakeSessionCookie(kToken, 1));
  auto foreign = anon->Post(path, {{"Cookie", cookie}, {"X-Drover-Csrf", other}}, "", "application/json");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
  EXPECT_TRUE(engine_.Locked([&] { return engine_.cancelled_runs.empty(); }));
  auto ok = anon->Post(path, {{"Cookie", cookie}, {"X-Drover-Csrf", csrf}}, "", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(engine_.Locked([&] { return engine_.cancelled_runs; }), std::vector<int64_t>{r.id});
  // A page of another origin is refused before the cookie is even looked at.
  auto cross = anon->Post(path, {{"Cookie", cookie}, {"X-Drover-Csrf", csrf}, {"Origin", "http://evil.example"}},
                          "", "application/json");
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 403);
  // Signing out clears the cookie.
  auto out = anon->Post("/logout", {{"Cookie", cookie}, {"X-Drover-Csrf", csrf}}, "", "text/plain");
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status, 303);
  EXPECT_NE(out->get_header_value("Set-Cookie").find("Max-Age=0"), std::string::npos);
}

TEST_F(WebRoutesTest, StaticFilesArePublicButOnlyTheUisOwn) {
  StartServer();
  auto anon = Anonymous();
  auto js = anon->Get("/static/js/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->body, "console.log('hi')");
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  // Revalidation by ETag answers 304 without the body.
  std::string etag = js->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = anon->Get("/static/js/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto changed = anon->Get("/static/js/app.js", {{"If-None-Match", "\"other\""}});
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->status, 200);
  auto uplot = anon->Get("/static/uPlot.iife.min.js");
  ASSERT_TRUE(uplot);
  EXPECT_EQ(uplot->status, 200);
  EXPECT_EQ(uplot->body, "var uPlot=1");
  // A symlink inside the folder is followed to a file inside it, never out of it (these are
  // served without a token).
  fs::create_symlink(dir_ / "secret.txt", web_ / "js" / "leak.js");
  fs::create_symlink(web_ / "js" / "app.js", web_ / "js" / "alias.js");
  auto alias = anon->Get("/static/js/alias.js");
  ASSERT_TRUE(alias);
  EXPECT_EQ(alias->status, 200);
  EXPECT_EQ(alias->body, "console.log('hi')");
  for (const char* path : {"/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/nope.js",
                           "/static/index.html", "/static/.hidden", "/static/js/leak.js"}) {
    auto r = anon->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path << " " << r->body;
    EXPECT_EQ(r->body.find("do not serve"), std::string::npos);
  }
}

TEST_F(WebRoutesTest, NothingIsCompressedOnLoopback) {
  // Brotli at httplib's setting costs more time than loopback saves.
  StartServer();
  auto anon = Anonymous();
  anon->set_decompress(false);
  auto r = anon->Get("/static/js/app.js", {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->has_header("Content-Encoding")) << r->get_header_value("Content-Encoding");
  EXPECT_EQ(r->body, "console.log('hi')");
}

TEST_F(WebRoutesTest, CompiledInFilesServeWithoutAFolder) {
  unsetenv("DROVER_WEB_DIR");
  StartServer();
  auto anon = Anonymous();
  auto uplot = anon->Get("/static/uPlot.iife.min.js");
  ASSERT_TRUE(uplot);
  EXPECT_EQ(uplot->status, 200);
  EXPECT_GT(uplot->body.size(), 20'000u);  // the real uPlot, from web/node_modules at build time
  EXPECT_NE(uplot->body.find("uPlot"), std::string::npos);
  auto css = anon->Get("/static/uPlot.min.css");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->status, 200);
  EXPECT_EQ(css->get_header_value("Content-Type"), "text/css; charset=utf-8");
}

// --- the runs table

class RunTableTest : public ServerTest {
 protected:
  // "sweep" (objective acc, max) with 5 runs; run i has params lr and model, acc points.
  void Fill() {
    Experiment e;
    e.name = "sweep";
    e.spec = {{"name", "sweep"},
              {"params", {{"lr", {0.1, 0.01}}, {"model", {"mlp", "cnn"}}}},
              {"objective", {{"metric", "acc"}, {"mode", "max"}, {"summary", "best"}}}};
    e.created_ms = 1'700'000'000'000;
    ASSERT_TRUE(store_->InsertExperiment(e).ok());
    exp_ = e;
    const double best[] = {0.5, 0.9, 0.7, 0.95, 0.0};
    const RunState states[] = {RunState::kSucceeded, RunState::kSucceeded, RunState::kFailed,
                               RunState::kRunning, RunState::kQueued};
    for (int i = 0; i < 5; ++i) {
      drover::Run r;
      r.experiment_id = e.id;
      r.index = i;
      r.params = {{"lr", i % 2 ? 0.01 : 0.1}, {"model", i < 2 ? "mlp" : "cnn"}};
      r.current_params = r.params;
      r.state = states[i];
      r.attempts = i == 2 ? 3 : (i == 4 ? 0 : 1);
      r.reason = i == 2 ? "cuda_oom" : "";
      r.started_ms = i == 4 ? 0 : 1'000'000;
      r.ended_ms = i < 3 ? 1'000'000 + 1000 * (i + 1) : 0;
      if (i < 4) r.final_metrics = {{"acc", best[i] - 0.1}, {"loss", 1.0 / (i + 1)}};
      ASSERT_TRUE(store_->InsertRun(r).ok());
      ids_.push_back(r.id);
      if (i < 4) {
        Attempt a;
        a.run_id = r.id;
        a.number = 1;
        ASSERT_TRUE(store_->InsertAttempt(a).ok());
        ASSERT_TRUE(store_
                        ->InsertMetrics({{r.id, a.id, 1, "acc", best[i] - 0.2, 1},
                                         {r.id, a.id, 2, "acc", best[i], 2},
                                         {r.id, a.id, 3, "acc", best[i] - 0.1, 3}})
                        .ok());
      }
    }
  }
  std::vector<int64_t> RowIds(const Json& t) {
    std::vector<int64_t> out;
    for (const auto& r : t["rows"]) out.push_back(r["id"].get<int64_t>());
    return out;
  }
  Experiment exp_;
  std::vector<int64_t> ids_;
};

TEST_F(RunTableTest, SortsByScoreFiltersAndPages) {
  Fill();
  StartServer();
  Reply r = Get("/api/v1/experiments/sweep/table?sort=score&order=desc&limit=2");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["objective"], Json({{"metric", "acc"},
                                       {"mode", "max"},
                                       {"summary", "best"},
                                       {"describe", "acc (max, best value)"}}));
  EXPECT_EQ(r.body["total"], 5);
  EXPECT_EQ(r.body["matched"], 5);
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[3], ids_[1]}));
  // The best run is the best succeeded one, as in every view (the running run scores higher).
  EXPECT_EQ(r.body["best_run_id"], ids_[1]);
  EXPECT_DOUBLE_EQ(r.body["rows"][0]["score"].get<double>(), 0.95);
  // Ranked by the last value instead, on request.
  r = Get("/api/v1/experiments/sweep/table?sort=score&order=desc&limit=2&summary=last");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_DOUBLE_EQ(r.body["rows"][0]["score"].get<double>(), 0.85);
  EXPECT_EQ(Get("/api/v1/experiments/sweep/table?summary=peak").status, 400);
  EXPECT_EQ(r.body["params"], Json({"lr", "model"}));
  EXPECT_EQ(r.body["constant"], Json::object());  // both vary
  EXPECT_EQ(r.body["metrics"], Json({"acc", "loss"}));
  EXPECT_EQ(r.body["counts"]["succeeded"], 2);
  EXPECT_FALSE(r.body.contains("scatter"));

  // The run without a value sorts last in both orders.
  r = Get("/api/v1/experiments/sweep/table?sort=best&order=asc&offset=3");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[3], ids_[4]}));
  EXPECT_TRUE(r.body["rows"][1]["score"].is_null());

  r = Get("/api/v1/experiments/" + std::to_string(exp_.id) + "/table?q=cnn%20LR%3D0.01");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[3]}));
  EXPECT_EQ(r.body["matched"], 1);
  EXPECT_EQ(r.body["total"], 5);

  r = Get("/api/v1/experiments/sweep/table?q=oom");
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[2]}));
  EXPECT_EQ(r.body["rows"][0]["attempts"], 3);
  EXPECT_EQ(r.body["rows"][0]["duration_ms"], 3000);

  r = Get("/api/v1/experiments/sweep/table?state=succeeded&sort=param:lr");
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[1], ids_[0]}));
  r = Get("/api/v1/experiments/sweep/table?sort=metric:loss&order=desc");
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[0], ids_[1], ids_[2], ids_[3], ids_[4]}));
  // The queued run never started: no duration, last in both orders.
  r = Get("/api/v1/experiments/sweep/table?sort=duration");
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[0], ids_[1], ids_[2], ids_[3], ids_[4]}));
  r = Get("/api/v1/experiments/sweep/table?sort=duration&order=desc");
  // The running run's duration runs to now: the longest.
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[3], ids_[2], ids_[1], ids_[0], ids_[4]}));
  r = Get("/api/v1/experiments/sweep/table?sort=param:model");
  EXPECT_EQ(RowIds(r.body), (std::vector<int64_t>{ids_[2], ids_[3], ids_[4], ids_[0], ids_[1]}));
}

TEST_F(RunTableTest, ScatterHasEveryMatchedRun) {
  Fill();
  StartServer();
  Reply r = Get("/api/v1/experiments/sweep/table?scatter=1&limit=1");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["rows"].size(), 1u);
  EXPECT_EQ(r.body["scatter"]["params"], Json({"lr", "model"}));
  ASSERT_EQ(r.body["scatter"]["rows"].size(), 5u);
  EXPECT_EQ(r.body["scatter"]["rows"][1], Json({ids_[1], 0.9, 0.01, "mlp"}));
  EXPECT_TRUE(r.body["scatter"]["rows"][4][1].is_null());
}

TEST_F(RunTableTest, BadQueriesSayWhatIsAccepted) {
  Fill();
  StartServer();
  Reply r = Get("/api/v1/experiments/sweep/table?sort=color");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("sort must be id, state"), std::string::npos);
  EXPECT_EQ(Get("/api/v1/experiments/sweep/table?order=up").status, 400);
  EXPECT_EQ(Get("/api/v1/experiments/sweep/table?state=done").status, 400);
  EXPECT_EQ(Get("/api/v1/experiments/sweep/table?limit=0").status, 400);
  EXPECT_EQ(Get("/api/v1/experiments/nope/table").status, 404);
}

TEST(RunTable, ScoresAndTheBestRunAreTheRankingsOwn) {
  Experiment e;
  e.id = 1;
  std::vector<drover::Run> runs(3);
  for (int i = 0; i < 3; ++i) {
    runs[i].id = i + 1;
    runs[i].state = RunState::kSucceeded;
  }
  runs[0].final_metrics = {{"loss", 0.3}};
  runs[1].final_metrics = {{"loss", 0.2}};
  runs[2].final_metrics = {{"loss", nullptr}};
  Result<report::RankRule> rule = report::RuleFor(e, report::ReportedMetrics(runs), {});
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->metric, "loss");
  CurveSummary one, two, three;
  one.points = two.points = three.points = 2;
  one.last = 0.3;
  two.last = 0.2;
  three.last = -std::numeric_limits<double>::infinity();
  report::Comparison c = report::Rank(runs, *rule, {{1, one}, {2, two}, {3, three}});
  TableQuery q;
  q.sort = "score";
  auto t = RunTable(e, runs, c, q, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["best_run_id"], 2);
  EXPECT_EQ((*t)["objective"]["metric"], "loss");
  EXPECT_EQ((*t)["objective"]["summary"], "last");
  EXPECT_NE((*t)["objective"]["note"].get<std::string>().find("no objective"), std::string::npos);
  const Json& rows = (*t)["rows"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["id"], 2);
  EXPECT_EQ(rows[1]["id"], 1);
  EXPECT_EQ(rows[2]["id"], 3);  // -inf never wins, in either order
  EXPECT_EQ(rows[2]["score"], "-Infinity");
  q.desc = true;
  t = RunTable(e, runs, c, q, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["rows"][2]["id"], 3);
  q.sort = "best";  // the old name of the column still sorts it
  EXPECT_TRUE(RunTable(e, runs, c, q, 0).ok());
}

TEST(RunTable, ParamsWithOneValueInEveryRunAreNamedConstant) {
  Experiment e;
  e.id = 1;
  std::vector<drover::Run> runs(3);
  for (int i = 0; i < 3; ++i) {
    runs[i].id = i + 1;
    runs[i].params = {{"python", "/usr/bin/python3"}, {"lr", 0.1 * (i + 1)}, {"epochs", 5}};
  }
  runs[2].params.erase("epochs");  // missing in one run: it varies
  report::Comparison c = report::Rank(runs, report::RankRule{}, {});
  auto t = RunTable(e, runs, c, TableQuery{}, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["constant"], Json({{"python", "/usr/bin/python3"}}));
  EXPECT_EQ((*t)["params"].size(), 3u);  // every column is still there for the asking
  // One run: nothing to compare, nothing hidden.
  runs.resize(1);
  t = RunTable(e, runs, report::Rank(runs, report::RankRule{}, {}), TableQuery{}, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["constant"], Json::object());
}

// A pipeline's table: its stages as a graph (needs, depth, runs by state, cached, waiting), its
// runs by stage in the spec's order unless asked otherwise, and only one stage's on request.
TEST(RunTable, APipelinesStagesRunsByStageAndOneStagesRuns) {
  Experiment e;
  e.id = 1;
  e.spec = {{"stages",
             {{{"name", "prep"}, {"outputs", {"data"}}},
              {{"name", "train"}, {"needs", {"prep"}}},
              {{"name", "report"}, {"needs", {"train", "prep"}}, {"gather", true}}}}};
  // Made in an order that is not the stages': report first.
  const std::vector<std::pair<std::string, RunState>> made = {
      {"report", RunState::kQueued}, {"train", RunState::kSucceeded},
      {"prep", RunState::kSucceeded}, {"train", RunState::kRunning}};
  std::vector<drover::Run> runs(made.size());
  for (size_t i = 0; i < made.size(); ++i) {
    runs[i].id = static_cast<int64_t>(i + 1);
    runs[i].stage = made[i].first;
    runs[i].state = made[i].second;
    runs[i].fingerprint = made[i].first == "report" ? "" : "f";
  }
  runs[2].cached_from = 9;
  report::Comparison c = report::Rank(runs, report::RankRule{}, {});
  auto t = RunTable(e, runs, c, TableQuery{}, 0);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<std::string> order;
  for (const Json& r : (*t)["rows"]) order.push_back(r["stage"]);
  EXPECT_EQ(order, (std::vector<std::string>{"prep", "train", "train", "report"}));
  EXPECT_EQ((*t)["rows"][0]["cached_from"], 9);
  const Json& stages = (*t)["pipeline"]["stages"];
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0]["depth"], 0);
  EXPECT_EQ(stages[1]["depth"], 1);
  EXPECT_EQ(stages[2]["depth"], 2);  // after train, which is after prep
  EXPECT_EQ(stages[2]["needs"], Json({"train", "prep"}));
  EXPECT_EQ(stages[2]["gather"], true);
  EXPECT_EQ(stages[2]["waiting"], 1);
  EXPECT_EQ(stages[0]["cached"], 1);
  EXPECT_EQ(stages[1]["runs"], 2);
  EXPECT_EQ(stages[1]["counts"]["running"], 1);
  EXPECT_EQ(stages[1]["counts"]["succeeded"], 1);
  EXPECT_EQ(stages[1]["shown"].size(), 2u);

  TableQuery q;
  q.stage = "train";
  t = RunTable(e, runs, c, q, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)["matched"], 2);
  EXPECT_EQ((*t)["stage"], "train");
  q.stage = "trian";
  t = RunTable(e, runs, c, q, 0);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("prep, report, train"), std::string::npos)
      << t.status().message();
  q.stage.clear();
  q.sort = "id";  // asked for: by id
  t = RunTable(e, runs, c, q, 0);
  EXPECT_EQ((*t)["rows"][0]["id"], 1);
  // Not a pipeline: no stages, and a stage filter is an error.
  Experiment plain;
  q.stage = "train";
  EXPECT_FALSE(RunTable(plain, runs, c, q, 0).ok());
  q.stage.clear();
  EXPECT_FALSE(RunTable(plain, runs, c, q, 0)->contains("pipeline"));
}

// --- recipes and plans

class RecipesRoutesTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    project_ = dir_ / "proj";
    fs::create_directories(project_);
    std::ofstream(project_ / "drover.yaml")
        << "command: /usr/bin/python3 train.py --model {model} --batch-size {batch_size}\n"
           "params:\n"
           "  model: {choices: [mlp, cnn], aliases: [arch]}\n"
           "  batch_size: {type: int, default: 64, aliases: [bs]}\n"
           "metrics:\n"
           "  val_acc: {mode: max, aliases: [accuracy]}\n"
           "env: {OMP_NUM_THREADS: \"2\"}\n"
           "resources: {gpu_memory: 8GiB}\n";
  }
  void Start() {
    ServerOptions o;
    o.recipe_dirs = {project_.string()};
    StartServer(o);
  }
  fs::path project_;
};

TEST_F(RecipesRoutesTest, ListsAndShowsRecipesWithValuesToTick) {
  Start();
  Reply list = Get("/api/v1/recipes");
  ASSERT_EQ(list.status, 200) << list.raw;
  bool found = false;
  for (const auto& r : list.body["recipes"]) {
    if (r["dir"] == fs::weakly_canonical(project_).string()) {
      found = true;
      EXPECT_EQ(r["name"], "proj");
    }
  }
  EXPECT_TRUE(found) << list.raw;

  Reply show = Get("/api/v1/recipes/show?path=" + project_.string());
  ASSERT_EQ(show.status, 200) << show.raw;
  ASSERT_EQ(show.body["params"].size(), 2u);
  EXPECT_EQ(show.body["params"][0]["name"], "model");
  EXPECT_EQ(show.body["params"][0]["choices"], Json({"mlp", "cnn"}));
  EXPECT_EQ(show.body["params"][0]["suggested"], Json({"mlp", "cnn"}));
  EXPECT_EQ(show.body["params"][1]["suggested"], Json({16, 32, 64, 128, 256}));
  EXPECT_EQ(show.body["metrics"][0], Json({{"name", "val_acc"}, {"mode", "max"}, {"aliases", {"accuracy"}}}));

  Reply missing = Get("/api/v1/recipes/show?path=" + (dir_ / "nowhere").string());
  EXPECT_EQ(missing.status, 404) << missing.raw;
  EXPECT_EQ(Get("/api/v1/recipes/show").status, 400);
}

TEST_F(RecipesRoutesTest, PlansTickedValuesAndInstructions) {
  Start();
  Json ticked = {{"recipe", project_.string()},
                 {"params", {{"model", {"mlp", "cnn"}}, {"batch_size", {"32", 64}}}},
                 {"objective", "accuracy"}};
  Reply r = Post("/api/v1/plan", ticked.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["runs"], 4);
  EXPECT_EQ(r.body["spec"]["params"]["batch_size"], Json({32, 64}));
  EXPECT_EQ(r.body["spec"]["objective"], Json({{"metric", "val_acc"}, {"mode", "max"}}));
  EXPECT_EQ(r.body["base_dir"], project_.string());
  EXPECT_NE(r.body["spec_yaml"].get<std::string>().find("batch_size: [32, 64]"), std::string::npos)
      << r.body["spec_yaml"];
  // The recipe's env and GPU memory are in what the form shows and submits.
  EXPECT_EQ(r.body["spec"]["env"], Json({{"OMP_NUM_THREADS", "2"}}));
  EXPECT_EQ(r.body["spec"]["resources"]["gpu_memory"], "8GiB");
  {
    Result<Spec> planned =
        ParseSpecString(r.body["spec_yaml"].get<std::string>(), "web.yaml", project_.string());
    ASSERT_TRUE(planned.ok()) << planned.status().message();
    EXPECT_EQ(planned->env.at("OMP_NUM_THREADS"), "2");
    EXPECT_EQ(planned->resources.gpu_memory, 8LL << 30);
  }

  Json said = {{"recipe", (project_ / "drover.yaml").string()},
               {"instruction", "compare mlp and cnn with bs 32 and 64 urgently please"}};
  r = Post("/api/v1/plan", said.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["runs"], 4);
  EXPECT_FALSE(r.body["understood"].empty());

  r = Post("/api/v1/plan", Json({{"recipe", project_.string()}, {"params", {{"modle", {"cnn"}}}}}).dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("did you mean 'model'"), std::string::npos) << r.raw;
  r = Post("/api/v1/plan", Json({{"recipe", project_.string()}, {"instruction", "hello there"}}).dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("knows the parameters"), std::string::npos) << r.raw;
  r = Post("/api/v1/plan", Json({{"recipe", 5}}).dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("recipe must be a path"), std::string::npos) << r.raw;
  r = Post("/api/v1/plan", Json({{"recipe", project_.string()}, {"colour", 1}}).dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("unknown field"), std::string::npos);
  // A count past an int is refused, not wrapped into range (2^32 + 1 read as an int is 1).
  for (const char* big : {"4294967297", "18446744073709551615", "-4294967297"}) {
    r = Post("/api/v1/plan", "{\"recipe\": \"" + project_.string() + "\", \"gpus\": " + big + "}");
    EXPECT_EQ(r.status, 400) << big;
    EXPECT_NE(r.raw.find("gpus must be an integer from -2147483648 to 2147483647"),
              std::string::npos)
        << r.raw;
  }
  // Nothing was submitted.
  EXPECT_TRUE(engine_.Locked([&] { return engine_.submits.empty(); }));
}

}  // namespace
}  // namespace drover::server
