// Watching for real: `drover run` with real processes and fake GPUs; a NaN run stopped as
// diverged with its alert delivered to Slack- and Feishu-shaped webhooks on loopback, a silent
// run killed after the stall timeout and retried, a leaking run, a config that fails three times.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::RunDrover;
using Json = nlohmann::json;

// A webhook receiver on a free loopback port that keeps every request body by path.
class Receiver {
 public:
  Receiver() {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.emplace_back(req.path, req.body);
      res.set_content("{\"ok\": true}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Json> Bodies(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Json> out;
    for (const auto& [p, b] : bodies_) {
      if (p == path) out.push_back(Json::parse(b));
    }
    return out;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> bodies_;
};

class WatchTest : public testing::CliFixture {
 protected:
  Json Alerts(const std::vector<std::string>& filter = {}) {
    std::vector<std::string> args = {"alerts", "--json", "--store", store_};
    args.insert(args.end(), filter.begin(), filter.end());
    auto r = RunDrover(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(r.out)["alerts"];
  }
};

TEST_F(WatchTest, NanStopsTheRunAsDivergedAndWebhooksGetSlackAndFeishuPayloads) {
  Receiver hooks;
  std::string config = Write("config.yaml", "alerts:\n  sinks:\n    - type: log\n"
                                            "    - type: webhook\n      format: slack\n"
                                            "      url: " + hooks.Url("/slack") + "\n"
                                            "    - type: webhook\n      format: feishu\n"
                                            "      url: " + hooks.Url("/feishu") + "\n");
  std::string spec = Write("nan.yaml",
                           "name: nan\nworkdir: code\nshell: true\nretries: 2\n"
                           "command: \"echo '{{\\\"step\\\": 1, \\\"loss\\\": 0.7}}'; "
                           "echo '{{\\\"step\\\": 2, \\\"loss\\\": NaN}}'; exec sleep 300\"\n");
  auto r = RunDrover({"run", spec, "--store", store_, "--config", config});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);  // diverged runs are not retried
  EXPECT_EQ(attempts[0].reason, "diverged");

  Json alerts = Alerts({"--kind", "diverged"});
  ASSERT_EQ(alerts.size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts[0]["run_id"], 1);
  EXPECT_EQ(alerts[0]["severity"], "error");
  // The log sink printed it too, on stderr.
  EXPECT_NE(r.err.find("drover: error: alert diverged: run 1 (experiment 1 'nan', submitted by "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("): loss became NaN at step 2"), std::string::npos) << r.err;

  // drover run flushes its webhooks before it exits.
  auto slack = hooks.Bodies("/slack");
  ASSERT_EQ(slack.size(), 1u);
  ASSERT_TRUE(slack[0]["text"].is_string()) << slack[0].dump();
  EXPECT_NE(slack[0]["text"].get<std::string>().find("loss became NaN"), std::string::npos);
  auto feishu = hooks.Bodies("/feishu");
  ASSERT_EQ(feishu.size(), 1u);
  EXPECT_EQ(feishu[0]["msg_type"], "text") << feishu[0].dump();
  EXPECT_NE(feishu[0]["content"]["text"].get<std::string>().find("run 1"), std::string::npos);
}

TEST_F(WatchTest, ASilentRunIsKilledAfterTheStallTimeoutAndRetried) {
  std::string spec = Write("stall.yaml",
                           "name: stall\nworkdir: code\nshell: true\nretries: 1\n"
                           "retry_backoff: 100ms\nmonitor: {stall: 1s}\n"
                           "command: \"echo started; exec sleep 300\"\n");
  auto start = std::chrono::steady_clock::now();
  auto r = RunDrover({"run", spec, "--store", store_});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  auto store = Store::Open(store_ + "/drover.db");
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "stalled");
  EXPECT_EQ(attempts[1].reason, "stalled");
  EXPECT_GE(attempts[0].ended_ms - attempts[0].started_ms, 1000);
  Json alerts = Alerts({"--kind", "stalled"});
  ASSERT_EQ(alerts.size(), 1u) << alerts.dump();  // the second stall is within the window
  EXPECT_EQ(alerts[0]["count"], 2);
}

TEST_F(WatchTest, AGrowingAllocatorRaisesTheLeakAlert) {
  // What drover.torch.TrainingMonitor logs, from a loop that keeps 100 MiB more every step.
  std::string spec = Write(
      "leak.yaml",
      "name: leak\nworkdir: code\nshell: true\n"
      "command: \"for i in $(seq 1 30); do echo "
      "\\\"{{\\\\\\\"step\\\\\\\": $i, \\\\\\\"cuda_allocated_bytes\\\\\\\": $((i * 104857600))}}\\\"; "
      "done\"\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_EQ((*store)->GetMetrics(1, "cuda_allocated_bytes")->size(), 30u);
  Json alerts = Alerts({"--kind", "memory_leak"});
  ASSERT_EQ(alerts.size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts[0]["run_id"], 1);
  EXPECT_NE(alerts[0]["message"].get<std::string>().find("leak"), std::string::npos);
  // A flat allocator does not.
  std::string flat = Write("flat.yaml",
                           "name: flat\nworkdir: code\nshell: true\n"
                           "command: \"for i in $(seq 1 30); do echo "
                           "\\\"{{\\\\\\\"step\\\\\\\": $i, \\\\\\\"cuda_allocated_bytes\\\\\\\": "
                           "1073741824}}\\\"; done\"\n");
  ASSERT_EQ(RunDrover({"run", flat, "--store", store_}).exit_code, 0);
  EXPECT_EQ(Alerts({"--kind", "memory_leak"}).size(), 1u);
}

TEST_F(WatchTest, ThreeFailuresOfOneConfigRaiseOneAlertAndTheSpecsRetriesAreHonoured) {
  std::string spec = Write("broken.yaml",
                           "name: broken\nworkdir: code\nshell: true\nretries: 5\n"
                           "retry_backoff: 50ms\n"
                           "command: \"echo 'KeyError: lr' >&2; exit 3\"\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  EXPECT_EQ((*store)->ListAttempts(1)->size(), 6u);  // retries: 5, as written
  Json alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts[0]["kind"], "repeated_failure");
  EXPECT_EQ(alerts[0]["count"], 4);
  EXPECT_NE(r.out.find("1 alert raised: drover alerts -e 1"), std::string::npos) << r.out;
  auto human = RunDrover({"alerts", "--store", store_});
  EXPECT_NE(human.out.find("repeated_failure"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("3 times in a row"), std::string::npos) << human.out;
  // A misspelt kind gets a suggestion.
  auto bad = RunDrover({"alerts", "--kind", "idle_gpus", "--store", store_});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("did you mean 'idle_gpu'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace drover
