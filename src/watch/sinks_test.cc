#include "watch/sinks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace drover::watch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Alert MakeAlert(std::string kind = "loss_spike", std::string severity = "warning") {
  Alert a;
  a.id = 7;
  a.kind = kind;
  a.severity = severity;
  a.key = "run:12:" + kind + ":loss";
  a.message = "loss spiked to 9.1 at step 420 (median 2.3): possible gradient explosion";
  a.experiment_id = 3;
  a.run_id = 12;
  a.first_ms = a.last_ms = 1'700'000'000'000;
  return a;
}

// A gate a handler can wait on, opened by the test.
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A webhook endpoint on a free loopback port. `reply` decides each answer from the request's
// number (0, 1, ...); it may block (on a Gate), which is how tests hold the sink's worker.
class Receiver {
 public:
  struct Seen {
    std::string path;
    std::string query_token;
    std::string content_type;
    std::string host;
    size_t host_headers = 0;
    Json body;
  };
  using Reply = std::function<void(int n, httplib::Response&)>;

  explicit Receiver(Reply reply = nullptr) : reply_(std::move(reply)) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      int n;
      {
        std::lock_guard<std::mutex> l(mu_);
        n = started_++;
        seen_.push_back({req.path, req.get_param_value("access_token"),
                         req.get_header_value("Content-Type"), req.get_header_value("Host"),
                         req.get_header_value_count("Host"),
                         Json::parse(req.body, nullptr, false)});
        cv_.notify_all();
      }
      res.status = 200;
      res.set_content("ok", "text/plain");
      if (reply_) reply_(n, res);
      std::lock_guard<std::mutex> l(mu_);
      ++done_;
      cv_.notify_all();
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      listen_returned_ = true;
    });
  }
  ~Receiver() {
    // stop() before the listen loop has begun would be lost, and join would wait forever.
    while (!server_.is_running() && !listen_returned_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  std::string Url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // Waits until `n` requests have arrived (their handlers may still run).
  bool WaitStarted(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(20), [&] { return started_ >= n; });
  }
  int started() {
    std::lock_guard<std::mutex> l(mu_);
    return started_;
  }
  int done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }

 private:
  Reply reply_;
  httplib::Server server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_ = false;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0;
  int done_ = 0;
  std::vector<Seen> seen_;
};

// A loopback port nothing listens on: bound, then closed.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

std::unique_ptr<WebhookSink> MustCreate(WebhookOptions options) {
  auto sink = WebhookSink::Create(std::move(options));
  EXPECT_TRUE(sink.ok()) << sink.status().ToString();
  return sink.ok() ? std::move(sink).value() : nullptr;
}

// Flush waits for the worker; generous, since it returns as soon as the queue drains.
constexpr Millis kFlushMs = 20'000;

TEST(WebhookFormat, ParsesAndPrints) {
  for (auto f : {WebhookFormat::kSlack, WebhookFormat::kFeishu, WebhookFormat::kDingTalk,
                 WebhookFormat::kJson}) {
    auto parsed = ParseWebhookFormat(std::string(ToString(f)));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  auto bad = ParseWebhookFormat("slak");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "webhook format 'slak': use slack, feishu, dingtalk or json");
}

TEST(AlertText, SaysSeveritySubjectAndMessage) {
  Alert a = MakeAlert();
  EXPECT_EQ(AlertText(a),
            "[drover] warning: run 12 (experiment 3): loss spiked to 9.1 at step 420 (median "
            "2.3): possible gradient explosion");
  Alert gpu;
  gpu.kind = "idle_gpu";
  gpu.severity = "info";
  gpu.gpu = 1;
  gpu.message = "idle for 5m while 2 runs wait";
  EXPECT_EQ(AlertText(gpu), "[drover] info: GPU 1: idle for 5m while 2 runs wait");
  gpu.run_id = 4;
  EXPECT_EQ(AlertText(gpu), "[drover] info: run 4 on GPU 1: idle for 5m while 2 runs wait");
  Alert exp;
  exp.kind = "repeated_failure";
  exp.severity = "error";
  exp.experiment_id = 9;
  EXPECT_EQ(AlertText(exp), "[drover] error: experiment 9: repeated_failure");
  Alert bare;
  bare.message = "hello";
  EXPECT_EQ(AlertText(bare), "[drover] warning: hello");
  // The engine names the submitter and the experiment: a lab's channel knows whom to ask.
  a.data["user"] = "alice";
  a.data["experiment"] = "sweep";
  EXPECT_EQ(AlertText(a),
            "[drover] warning: run 12 (experiment 3 'sweep', submitted by alice): loss spiked to "
            "9.1 at step 420 (median 2.3): possible gradient explosion");
  EXPECT_EQ(AlertSource(a), "alice");
  EXPECT_EQ(AlertSource(gpu), "");
}

TEST(WebhookPayload, HasEachFormatsShape) {
  Alert a = MakeAlert();
  a.message = "loss > 9 & rising <fast>";
  Json slack = WebhookPayload(WebhookFormat::kSlack, a);
  EXPECT_EQ(slack["text"],
            "[drover] warning: run 12 (experiment 3): loss &gt; 9 &amp; rising "
            "&lt;fast&gt;");
  Json feishu = WebhookPayload(WebhookFormat::kFeishu, a);
  EXPECT_EQ(feishu["msg_type"], "text");
  EXPECT_EQ(feishu["content"]["text"], AlertText(a));  // Feishu shows the text as is
  Json ding = WebhookPayload(WebhookFormat::kDingTalk, a);
  EXPECT_EQ(ding["msgtype"], "text");
  EXPECT_EQ(ding["text"]["content"], AlertText(a));
  Json json = WebhookPayload(WebhookFormat::kJson, a);
  EXPECT_EQ(json["alert"]["kind"], "loss_spike");
  EXPECT_EQ(json["alert"]["run_id"], 12);
}

TEST(LogSink, LogsAtTheAlertsSeverity) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_pattern("%l %v");
  logger->set_level(spdlog::level::trace);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  LogSink sink;
  sink.Notify(MakeAlert("loss_spike", "warning"));
  sink.Notify(MakeAlert("diverged", "error"));
  Alert info = MakeAlert("plateau", "info");
  info.message = "flat for 100 steps";
  sink.Notify(info);
  spdlog::set_default_logger(previous);
  EXPECT_EQ(out.str(),
            "warning alert loss_spike: run 12 (experiment 3): " + MakeAlert().message + "\n" +
                "error alert diverged: run 12 (experiment 3): " + MakeAlert().message + "\n" +
                "info alert plateau: run 12 (experiment 3): flat for 100 steps\n");
}

TEST(WebhookSink, RejectsBadUrlsAndOptions) {
  auto error = [](WebhookOptions o) {
    auto sink = WebhookSink::Create(std::move(o));
    EXPECT_FALSE(sink.ok());
    return sink.ok() ? std::string() : sink.status().message();
  };
  auto with_url = [&](std::string url) {
    WebhookOptions o;
    o.url = std::move(url);
    return error(o);
  };
  std::string form = "use http://host[:port]/path or https://host[:port]/path";
  EXPECT_THAT(with_url("ftp://x"),
              HasSubstr("webhook url 'ftp://x': scheme 'ftp' is not supported"));
  EXPECT_THAT(with_url("ftp://x"), HasSubstr(form));
  EXPECT_THAT(with_url("http://"), HasSubstr("webhook url 'http://': it has no host; " + form));
  EXPECT_THAT(with_url("hooks.slack.com/x"),
              HasSubstr("webhook url 'hooks.slack.com/...': it has no scheme; " + form));
  // The path holds the token: errors never show it.
  EXPECT_THAT(with_url("http://h:99999/services/T000/SECRET"), Not(HasSubstr("SECRET")));
  EXPECT_THAT(with_url(""), HasSubstr("webhook url is empty; " + form));
  EXPECT_THAT(with_url("http://h:99999/x"), HasSubstr("port '99999' is not a number from 1"));
  EXPECT_THAT(with_url("http://h:/x"), HasSubstr("the port is empty"));
  EXPECT_THAT(with_url("http://h/a b"), HasSubstr("a space or a control character"));

  WebhookOptions o;
  o.url = "http://127.0.0.1:9/x";
  o.min_severity = "warn";
  EXPECT_EQ(error(o), "webhook min_severity 'warn': use info, warning or error");
  o.min_severity = "error";
  o.max_attempts = 0;
  EXPECT_THAT(error(o), HasSubstr("max_attempts 0: use 1 or more"));
  o.max_attempts = 1;
  o.max_queue = 0;
  EXPECT_THAT(error(o), HasSubstr("max_queue"));
}

TEST(WebhookSink, AcceptsHttpsAndIpv6Urls) {
  for (std::string url : {"https://hooks.slack.com/services/T000/B000/XXXX",
                          "https://oapi.dingtalk.com/robot/send?access_token=abc",
                          "HTTP://[::1]:8080", "http://localhost"}) {
    WebhookOptions o;
    o.url = url;
    auto sink = WebhookSink::Create(o);
    EXPECT_TRUE(sink.ok()) << url << ": " << sink.status().ToString();
  }
}

TEST(WebhookSink, DeliversEachFormatsPayload) {
  Receiver receiver;
  const std::vector<WebhookFormat> formats = {WebhookFormat::kSlack, WebhookFormat::kFeishu,
                                              WebhookFormat::kDingTalk, WebhookFormat::kJson};
  for (auto format : formats) {
    WebhookOptions o;
    // DingTalk's token rides in the query; it must arrive intact.
    o.url = receiver.Url("/robot/send?access_token=tok%2Ben");
    o.format = format;
    auto sink = MustCreate(o);
    ASSERT_TRUE(sink);
    sink->Notify(MakeAlert());
    ASSERT_TRUE(sink->Flush(kFlushMs));
    EXPECT_EQ(sink->stats().sent, 1);
    EXPECT_EQ(sink->stats().failed, 0);
  }
  auto seen = receiver.seen();
  ASSERT_EQ(seen.size(), 4u);
  const std::string message = MakeAlert().message;
  for (const auto& s : seen) {
    EXPECT_EQ(s.path, "/robot/send");
    EXPECT_EQ(s.query_token, "tok+en");
    EXPECT_EQ(s.content_type, "application/json");
    EXPECT_EQ(s.host_headers, 1u);
    EXPECT_EQ(s.host, "127.0.0.1:" + std::to_string(receiver.port()));
  }
  ASSERT_TRUE(seen[0].body["text"].is_string()) << seen[0].body.dump();
  EXPECT_THAT(seen[0].body["text"].get<std::string>(), HasSubstr(message));
  EXPECT_EQ(seen[1].body["msg_type"], "text");
  ASSERT_TRUE(seen[1].body["content"]["text"].is_string()) << seen[1].body.dump();
  EXPECT_THAT(seen[1].body["content"]["text"].get<std::string>(), HasSubstr(message));
  EXPECT_EQ(seen[2].body["msgtype"], "text");
  ASSERT_TRUE(seen[2].body["text"]["content"].is_string()) << seen[2].body.dump();
  EXPECT_THAT(seen[2].body["text"]["content"].get<std::string>(), HasSubstr(message));
  const Json& alert = seen[3].body["alert"];
  EXPECT_EQ(alert["kind"], "loss_spike");
  EXPECT_EQ(alert["key"], "run:12:loss_spike:loss");
  EXPECT_EQ(alert["run_id"], 12);
  EXPECT_EQ(alert["experiment_id"], 3);
  EXPECT_EQ(alert["message"], message);
}

TEST(WebhookSink, RetriesWithBackoffUntilDelivered) {
  Receiver receiver([](int n, httplib::Response& res) {
    if (n < 2) res.status = 500;
  });
  WebhookOptions o;
  o.url = receiver.Url();
  o.initial_backoff_ms = 20;
  o.max_backoff_ms = 40;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert());
  ASSERT_TRUE(sink->Flush(kFlushMs));
  EXPECT_EQ(receiver.started(), 3);
  auto stats = sink->stats();
  EXPECT_EQ(stats.sent, 1);
  EXPECT_EQ(stats.retries, 2);
  EXPECT_EQ(stats.failed, 0);
}

TEST(WebhookSink, GivesUpAfterMaxAttempts) {
  Receiver receiver([](int, httplib::Response& res) {
    res.status = 503;
    res.set_content("no_service", "text/plain");
  });
  WebhookOptions o;
  o.url = receiver.Url();
  o.max_attempts = 3;
  o.initial_backoff_ms = 1;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert());
  ASSERT_TRUE(sink->Flush(kFlushMs));
  EXPECT_EQ(receiver.started(), 3);
  auto stats = sink->stats();
  EXPECT_EQ(stats.sent, 0);
  EXPECT_EQ(stats.retries, 2);
  EXPECT_EQ(stats.failed, 1);
}

TEST(WebhookSink, GivesUpOnARefusedConnection) {
  WebhookOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/hook";
  o.max_attempts = 2;
  o.initial_backoff_ms = 1;
  o.timeout_ms = 2000;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert());
  ASSERT_TRUE(sink->Flush(kFlushMs));
  auto stats = sink->stats();
  EXPECT_EQ(stats.sent, 0);
  EXPECT_EQ(stats.retries, 1);
  EXPECT_EQ(stats.failed, 1);
}

TEST(WebhookSink, FeishuAndDingTalkErrorsInA200AreFailures) {
  for (auto [format, reply] :
       {std::pair{WebhookFormat::kFeishu, R"({"code":19001,"msg":"param invalid"})"},
        std::pair{WebhookFormat::kDingTalk,
                  R"({"errcode":310000,"errmsg":"keywords not in content"})"}}) {
    std::string body = reply;
    Receiver receiver(
        [body](int, httplib::Response& res) { res.set_content(body, "application/json"); });
    WebhookOptions o;
    o.url = receiver.Url();
    o.format = format;
    o.max_attempts = 2;
    o.initial_backoff_ms = 1;
    auto sink = MustCreate(o);
    ASSERT_TRUE(sink);
    sink->Notify(MakeAlert());
    ASSERT_TRUE(sink->Flush(kFlushMs));
    EXPECT_EQ(sink->stats().sent, 0) << ToString(format);
    EXPECT_EQ(sink->stats().failed, 1) << ToString(format);
  }
  // Their success replies are successes.
  Receiver ok([](int, httplib::Response& res) {
    res.set_content(R"({"errcode":0,"errmsg":"ok","code":0})", "application/json");
  });
  for (auto format : {WebhookFormat::kFeishu, WebhookFormat::kDingTalk}) {
    WebhookOptions o;
    o.url = ok.Url();
    o.format = format;
    auto sink = MustCreate(o);
    ASSERT_TRUE(sink);
    sink->Notify(MakeAlert());
    ASSERT_TRUE(sink->Flush(kFlushMs));
    EXPECT_EQ(sink->stats().sent, 1) << ToString(format);
  }
}

TEST(WebhookSink, NotifyDoesNotWaitForTheReceiver) {
  Gate gate;
  Receiver receiver([&](int, httplib::Response&) { gate.Wait(); });
  WebhookOptions o;
  o.url = receiver.Url();
  o.timeout_ms = 60'000;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  for (int i = 0; i < 10; ++i) sink->Notify(MakeAlert("a" + std::to_string(i)));
  // Every handler is held at the gate, so had Notify waited on a reply it would not be here.
  EXPECT_EQ(receiver.done(), 0);
  EXPECT_FALSE(sink->Flush(0));
  gate.Open();
  ASSERT_TRUE(sink->Flush(kFlushMs));
  EXPECT_EQ(sink->stats().sent, 10);
  EXPECT_EQ(receiver.done(), 10);
}

TEST(WebhookSink, SkipsAlertsBelowMinSeverity) {
  Receiver receiver;
  WebhookOptions o;
  o.url = receiver.Url();
  o.min_severity = "warning";
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert("plateau", "info"));
  sink->Notify(MakeAlert("loss_spike", "warning"));
  sink->Notify(MakeAlert("diverged", "error"));
  ASSERT_TRUE(sink->Flush(kFlushMs));
  auto seen = receiver.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].body["alert"]["kind"], "loss_spike");
  EXPECT_EQ(seen[1].body["alert"]["kind"], "diverged");
  EXPECT_EQ(sink->stats().sent, 2);
  EXPECT_EQ(sink->stats().failed, 0);
}

TEST(WebhookSink, FullQueueDropsTheOldest) {
  Gate gate;
  Receiver receiver([&](int n, httplib::Response&) {
    if (n == 0) gate.Wait();
  });
  WebhookOptions o;
  o.url = receiver.Url();
  o.max_queue = 2;
  o.timeout_ms = 60'000;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert("first"));
  ASSERT_TRUE(receiver.WaitStarted(1));  // "first" is in flight, off the queue
  sink->Notify(MakeAlert("second"));
  sink->Notify(MakeAlert("third"));
  sink->Notify(MakeAlert("fourth"));  // the queue holds two: "second" goes
  EXPECT_EQ(sink->stats().failed, 1);
  gate.Open();
  ASSERT_TRUE(sink->Flush(kFlushMs));
  std::vector<std::string> kinds;
  for (const auto& s : receiver.seen()) kinds.push_back(s.body["alert"]["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"first", "third", "fourth"}));
  EXPECT_EQ(sink->stats().sent, 3);
  EXPECT_EQ(sink->stats().failed, 1);
}

// Issue 39: one run's flood filled the queue and the daemon's real alerts were dropped. A user's
// alerts hold at most a quarter of it; when full, the user with most queued gives way first.
TEST(WebhookSink, OneUserCannotFillTheQueue) {
  Gate gate;
  Receiver receiver([&](int n, httplib::Response&) {
    if (n == 0) gate.Wait();
  });
  WebhookOptions o;
  o.url = receiver.Url();
  o.max_queue = 8;  // a user may hold 2
  o.timeout_ms = 60'000;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert("first"));
  ASSERT_TRUE(receiver.WaitStarted(1));  // in flight: the queue is empty again
  auto from = [](const std::string& user, int i) {
    Alert a = MakeAlert("flood");
    a.key = "run:12:run:" + std::to_string(i);
    a.data["user"] = user;
    return a;
  };
  Alert gpu = MakeAlert("gpu_health", "error");
  gpu.run_id = gpu.experiment_id = 0;
  gpu.gpu = 1;
  for (int i = 0; i < 5; ++i) sink->Notify(gpu);  // the daemon's own, queued first: 5 of 8
  for (int i = 0; i < 300; ++i) sink->Notify(from("mallory", i));
  sink->Notify(from("bob", 0));
  EXPECT_EQ(sink->stats().failed, 298);  // mallory's, all but her newest two
  gate.Open();
  ASSERT_TRUE(sink->Flush(kFlushMs));
  std::map<std::string, int> kinds;
  std::vector<std::string> mallory;
  for (const auto& seen : receiver.seen()) {
    kinds[seen.body["alert"]["kind"]] += 1;
    if (seen.body["alert"]["data"].value("user", "") == "mallory") {
      mallory.push_back(seen.body["alert"]["key"]);
    }
  }
  EXPECT_EQ(kinds["gpu_health"], 5);
  EXPECT_EQ(kinds["flood"], 3);  // mallory's newest two and bob's
  EXPECT_EQ(mallory, (std::vector<std::string>{"run:12:run:298", "run:12:run:299"}));
}

TEST(WebhookSink, BadUtf8InAMessageIsStillSent) {
  Receiver receiver;
  WebhookOptions o;
  o.url = receiver.Url();
  o.format = WebhookFormat::kSlack;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  Alert a = MakeAlert();
  a.message = "loss \xff\xfe spiked";
  sink->Notify(a);
  ASSERT_TRUE(sink->Flush(kFlushMs));
  EXPECT_EQ(sink->stats().sent, 1);
  ASSERT_EQ(receiver.seen().size(), 1u);
  EXPECT_THAT(receiver.seen()[0].body["text"].get<std::string>(), HasSubstr("spiked"));
}

TEST(WebhookSink, DestructorCutsBackoffShortAndTriesQueuedAlertsOnce) {
  Receiver receiver([](int n, httplib::Response& res) {
    if (n == 0) res.status = 500;
  });
  WebhookOptions o;
  o.url = receiver.Url();
  o.initial_backoff_ms = 3'600'000;  // the test would time out had the destructor waited on it
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert("first"));
  ASSERT_TRUE(receiver.WaitStarted(1));
  sink->Notify(MakeAlert("second"));
  sink.reset();
  std::vector<std::string> kinds;
  for (const auto& s : receiver.seen()) kinds.push_back(s.body["alert"]["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"first", "first", "second"}));
}

TEST(WebhookSink, DestructorDoesNotWaitOutASlowReply) {
  Gate gate;
  Receiver receiver([&](int, httplib::Response&) { gate.Wait(); });
  WebhookOptions o;
  o.url = receiver.Url();
  o.timeout_ms = 3'600'000;
  auto sink = MustCreate(o);
  ASSERT_TRUE(sink);
  sink->Notify(MakeAlert());
  ASSERT_TRUE(receiver.WaitStarted(1));
  sink.reset();
  // The receiver never answered: the destructor cut the request (and its last try ran out of the
  // shutdown budget) instead of waiting for the hour-long timeout.
  EXPECT_EQ(receiver.done(), 0);
  gate.Open();
}

}  // namespace
}  // namespace drover::watch
