// The engine's watching with a scripted launcher, scripted GPU telemetry and a fake clock: idle
// GPUs alert once per silence window, a config that keeps failing alerts once and is not retried
// a fourth time, loss spikes and a run's own alerts become alerts, telemetry is stored averaged.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "spec/spec_parser.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::FakeLauncher;
using testing::FakeProcess;

constexpr int64_t GiB = 1024LL * 1024 * 1024;

// Keeps what reached the sink.
class RecordingSink : public watch::AlertSink {
 public:
  void Notify(const Alert& a) override { alerts.push_back(a); }
  std::vector<Alert> alerts;
};

class EngineWatchTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeLauncher& launcher, GpuProbe& probe) {
    EngineOptions o = BaseOptions();
    o.watch = config_;
    o.alert_sink = &sink_;
    return std::make_unique<Engine>(*store_, launcher, probe, clock_, o);
  }

  std::vector<Alert> AlertsOf(const std::string& kind) {
    AlertFilter f;
    f.kind = kind;
    f.newest_first = false;
    return store_->ListAlerts(f).value();
  }

  watch::WatchConfig config_;
  RecordingSink sink_;
};

FakeGpuProbe IdleProbe() {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  auto script = ParseTelemetryScript(R"({"at": "0s", "gpu": 0, "utilization": 4})");
  EXPECT_TRUE(script.ok()) << script.status().ToString();
  probe.SetScript(*script);
  return probe;
}

TEST_F(EngineWatchTest, AnIdleGpuAlertsOnceWithinTheSilenceWindow) {
  config_.telemetry_period_ms = 5000;
  config_.detectors.idle_for_ms = 60'000;
  config_.silence_ms = 30 * 60'000;
  FakeGpuProbe probe = IdleProbe();
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{10 * 60'000}; });
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: idle\ncommand: sleep 600\nresources: {gpus: 1}\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());

  // Sampled every 5 s for 10 minutes, idle from the first sample: it alerts after a minute and
  // every sample after that is a repeat within the window, counted on the one alert.
  auto idle = AlertsOf("idle_gpu");
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].gpu, 0);
  EXPECT_EQ(idle[0].run_id, sub->runs[0].id);
  EXPECT_GE(idle[0].count, 100);
  EXPECT_GT(idle[0].last_ms, idle[0].first_ms);
  EXPECT_NE(idle[0].message.find("GPU 0"), std::string::npos) << idle[0].message;
  ASSERT_EQ(sink_.alerts.size(), 1u);
  EXPECT_EQ(sink_.alerts[0].kind, "idle_gpu");
}

// A run whose GPU works in bursts and idles between them (scripted: 10 s busy, 10 s idle,
// repeating) gets one input_stall alert that names the cause and what to try; an idle GPU alert
// says what to try too.
TEST_F(EngineWatchTest, AGpuWorkingInBurstsIsAStalledInputPipelineWithRemedies) {
  config_.telemetry_period_ms = 5000;
  config_.detectors.idle_for_ms = 60'000;
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  auto script = ParseTelemetryScript(
      "{\"at\": \"0s\", \"gpu\": 0, \"utilization\": 97}\n"
      "{\"at\": \"10s\", \"gpu\": 0, \"utilization\": 1}\n"
      "{\"repeat\": \"20s\"}\n");
  ASSERT_TRUE(script.ok()) << script.status().ToString();
  probe.SetScript(*script);
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{10 * 60'000}; });
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: loader\ncommand: train\nresources: {gpus: 1}\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto stall = AlertsOf("input_stall");
  ASSERT_EQ(stall.size(), 1u);
  EXPECT_EQ(stall[0].run_id, sub->runs[0].id);
  EXPECT_NE(stall[0].message.find("waits for its input data"), std::string::npos)
      << stall[0].message;
  EXPECT_NE(stall[0].data.value("cause", "").find("input pipeline"), std::string::npos)
      << stall[0].data.dump();
  ASSERT_TRUE(stall[0].data.contains("remedies"));
  EXPECT_NE(stall[0].data["remedies"][0].get<std::string>().find("num_workers"),
            std::string::npos);
  EXPECT_TRUE(AlertsOf("idle_gpu").empty());  // it is never idle for a minute
}

TEST_F(EngineWatchTest, AfterTheSilenceWindowTheSameAlertNotifiesAgain) {
  config_.telemetry_period_ms = 5000;
  config_.detectors.idle_for_ms = 60'000;
  config_.silence_ms = 2 * 60'000;
  FakeGpuProbe probe = IdleProbe();
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{10 * 60'000}; });
  auto engine = MakeEngine(launcher, probe);
  ASSERT_TRUE(engine->Submit(ParseSpec("name: idle\ncommand: sleep 600\nresources: {gpus: 1}\n")).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  // Idle from minute 1 to 10, one notification per 2 minutes: 5.
  auto idle = AlertsOf("idle_gpu");
  EXPECT_EQ(idle.size(), 5u);
  EXPECT_EQ(sink_.alerts.size(), idle.size());
}

TEST_F(EngineWatchTest, IdleTimeDoesNotCarryOverToTheNextRunOnTheGpu) {
  config_.telemetry_period_ms = 5000;
  config_.detectors.idle_for_ms = 60'000;
  FakeGpuProbe probe = IdleProbe();
  // Two 52 s runs one after the other on the one GPU (the second starts between two samples):
  // each is idle for less than a minute.
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{52'000}; });
  auto engine = MakeEngine(launcher, probe);
  ASSERT_TRUE(engine->Submit(ParseSpec("name: two\ncommand: sleep {i}\nparams: {i: [1, 2]}\n"
                                       "resources: {gpus: 1}\n"))
                  .ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.max_running, 1);
  EXPECT_TRUE(AlertsOf("idle_gpu").empty());
}

TEST_F(EngineWatchTest, ABusyGpuOrAGpuNobodyHoldsDoesNotAlert) {
  config_.telemetry_period_ms = 5000;
  config_.detectors.idle_for_ms = 60'000;
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}, {1, "GPU-1", "Fake", 16 * GiB, 0}});
  // GPU 0 is busy under the run; GPU 1 is idle but nobody holds it.
  probe.SetScript(*ParseTelemetryScript(
      "{\"at\": \"0s\", \"gpu\": 0, \"utilization\": 97}\n"
      "{\"at\": \"0s\", \"gpu\": 1, \"utilization\": 0}\n"));
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{5 * 60'000}; });
  auto engine = MakeEngine(launcher, probe);
  ASSERT_TRUE(engine->Submit(ParseSpec("name: busy\ncommand: sleep 300\nresources: {gpus: 1}\n")).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_TRUE(AlertsOf("idle_gpu").empty());
}

TEST_F(EngineWatchTest, TelemetryIsStoredOneAveragedRowPerGpuPerPeriod) {
  config_.telemetry_period_ms = 5000;
  config_.telemetry_store_every_ms = 60'000;
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  // 20% for the first half of each minute, 80% for the second: 50% on average.
  probe.SetScript(*ParseTelemetryScript(
      "{\"at\": \"0s\", \"gpu\": 0, \"utilization\": 20, \"temperature\": 40}\n"
      "{\"at\": \"30s\", \"gpu\": 0, \"utilization\": 80, \"temperature\": 60}\n"
      "{\"repeat\": \"60s\"}\n"));
  clock_.Set(1'800'000'000'000);  // a whole minute, so the buckets line up with the script
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{5 * 60'000}; });
  auto engine = MakeEngine(launcher, probe);
  ASSERT_TRUE(engine->Submit(ParseSpec("name: t\ncommand: sleep 300\nresources: {gpus: 1}\n")).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto rows = store_->ListGpuSamples(0, 0).value();
  ASSERT_GE(rows.size(), 5u);
  ASSERT_LE(rows.size(), 6u);
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_EQ(rows[i + 1].t_ms - rows[i].t_ms, 60'000);
    EXPECT_NEAR(rows[i].utilization, 50, 0.01) << i;
    EXPECT_NEAR(rows[i].temperature_c, 50, 0.01) << i;
    EXPECT_EQ(rows[i].memory_total, 16 * GiB);
  }
  EXPECT_EQ(engine->ReadGpus().samples.size(), 1u);
}

// Every attempt exits 1 after 100 ms, saying its config is bad.
FakeProcess ExitsWithABadConfig(const LaunchSpec&) {
  FakeProcess p{100, 1};
  p.stderr_text = "ValueError: bad config\n";
  return p;
}

TEST_F(EngineWatchTest, ThreeFailuresOfOneConfigAlertOnceAndTheSpecsRetriesAreHonoured) {
  FakeGpuProbe probe({});
  FakeLauncher launcher(clock_, ExitsWithABadConfig);
  auto engine = MakeEngine(launcher, probe);
  Spec spec = ParseSpec("name: broken\ncommand: python train.py\nretries: 5\nretry_backoff: 1s\n");
  ASSERT_TRUE(spec.retries_given);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  int64_t run_id = sub->runs[0].id;
  auto run = store_->GetRun(run_id).value();
  EXPECT_EQ(run->state, RunState::kFailed);
  EXPECT_EQ(store_->ListAttempts(run_id)->size(), 6u);  // the 5 retries the spec asked for
  auto alerts = AlertsOf("repeated_failure");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].severity, "error");
  EXPECT_EQ(alerts[0].run_id, run_id);
  EXPECT_NE(alerts[0].message.find("3 times in a row"), std::string::npos) << alerts[0].message;
  EXPECT_EQ(alerts[0].count, 4);  // the 3rd to the 6th failure, one alert

  // The same config submitted again gets all its attempts whatever its history; the alert is
  // counted on the first one (silence window), not sent again.
  auto again = engine->Submit(spec);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(store_->ListAttempts(again->runs[0].id)->size(), 6u);
  alerts = AlertsOf("repeated_failure");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].count, 10);
  EXPECT_EQ(sink_.alerts.size(), 1u);
}

TEST_F(EngineWatchTest, RetriesTheSpecLeftToADefaultStopAfterThreeOwnFailuresInARow) {
  FakeGpuProbe probe({});
  FakeLauncher launcher(clock_, ExitsWithABadConfig);
  auto engine = MakeEngine(launcher, probe);
  Spec spec = ParseSpec("name: broken\ncommand: python train.py\nretry_backoff: 1s\n");
  EXPECT_FALSE(spec.retries_given);
  spec.retries = 5;  // as a default from elsewhere would give them
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  const int64_t run_id = sub->runs[0].id;
  EXPECT_EQ(store_->ListAttempts(run_id)->size(), 3u);
  auto events = store_->ListEvents(0).value();
  bool said = false;
  for (const Event& e : events) {
    if (e.run_id == run_id && e.data.value("state", "") == "failed") {
      said = e.data.value("note", "").find("write retries: N") != std::string::npos;
    }
  }
  EXPECT_TRUE(said) << "the failed run's note says why it was not retried";
  // Resubmitted: its own failures count, not the config's history.
  auto again = engine->Submit(spec);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(store_->ListAttempts(again->runs[0].id)->size(), 3u);
}

TEST_F(EngineWatchTest, AnOomBetweenFailuresNeitherCountsNorBreaksTheStreak) {
  FakeGpuProbe probe({});
  int n = 0;
  FakeLauncher launcher(clock_, [&n](const LaunchSpec&) {
    FakeProcess p{100, 1};
    // exit, OOM, exit, exit: three failures of the config.
    p.stderr_text = ++n == 2 ? "torch.OutOfMemoryError: CUDA out of memory.\n" : "boom\n";
    return p;
  });
  auto engine = MakeEngine(launcher, probe);
  Spec spec = ParseSpec(
      "name: b\ncommand: python train.py {bs}\nparams: {bs: [64]}\nretries: 5\nretry_backoff: 1s\n"
      "oom: {param: bs}\n");
  spec.retries_given = false;  // retries from a default: the streak stops them
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(store_->ListAttempts(sub->runs[0].id)->size(), 4u);
  EXPECT_EQ(AlertsOf("repeated_failure").size(), 1u);
}

TEST_F(EngineWatchTest, LossSpikesAndTheRunsOwnAlertsBecomeAlerts) {
  FakeGpuProbe probe({});
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p{1000, 0};
    for (int step = 0; step < 40; ++step) {
      double loss = 1.0 / (1 + step) + 0.01 * (step % 3);
      p.stdout_text += "{\"step\": " + std::to_string(step) +
                       ", \"loss\": " + std::to_string(loss) + "}\n";
    }
    p.stdout_text += "{\"step\": 40, \"loss\": 57.0}\n";
    p.stdout_text +=
        "{\"drover_alert\": {\"message\": \"validation set is empty\", \"level\": \"error\", "
        "\"key\": \"val\"}}\n";
    return p;
  });
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: s\ncommand: python train.py\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto spikes = AlertsOf("loss_spike");
  ASSERT_EQ(spikes.size(), 1u);
  EXPECT_NE(spikes[0].message.find("possible gradient explosion"), std::string::npos);
  EXPECT_EQ(spikes[0].data["step"], 40);
  auto own = AlertsOf("run");
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].message, "validation set is empty");
  EXPECT_EQ(own[0].severity, "error");
  EXPECT_EQ(own[0].key, "run:" + std::to_string(sub->runs[0].id) + ":run:val");
  // Neither is a metric.
  EXPECT_TRUE(store_->GetMetrics(sub->runs[0].id, "drover_alert")->empty());
}

TEST_F(EngineWatchTest, NanStopsTheRunAsDivergedAndAlerts) {
  FakeGpuProbe probe({});
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p{60'000, 0};
    p.stdout_text = "{\"step\": 1, \"loss\": 0.5}\n{\"step\": 2, \"loss\": NaN}\n";
    return p;
  });
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: n\ncommand: python train.py\nretries: 3\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(store_->GetRun(sub->runs[0].id).value()->reason, "diverged");
  auto d = AlertsOf("diverged");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].severity, "error");
  EXPECT_NE(d[0].message.find("loss became NaN at step 2"), std::string::npos) << d[0].message;
}

// Issue 39: each distinct drover_alert line was an alert, so a run printing 3,000 of them made
// 1,000 Slack posts in seconds and filled the webhook's queue. Through a real webhook to a
// loopback endpoint: the run's own alerts stop at alerts.per_run, one alerts_suppressed alert
// says so, a detector's alert raised after the flood still arrives, and every post names the
// submitter and the experiment.
TEST_F(EngineWatchTest, ARunsOwnAlertsAreCappedAndADetectorsAlertStillArrives) {
  std::mutex mu;
  std::vector<Json> posts;
  httplib::Server server;
  server.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    posts.push_back(Json::parse(req.body, nullptr, false));
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&] { server.listen_after_bind(); });
  watch::WebhookOptions w;
  w.url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  w.format = watch::WebhookFormat::kJson;
  auto webhook = watch::WebhookSink::Create(w);
  ASSERT_TRUE(webhook.ok()) << webhook.status().message();

  FakeGpuProbe probe({});
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p{1000, 0};
    for (int i = 0; i < 3000; ++i) {
      p.stdout_text += "{\"drover_alert\": {\"message\": \"look at me " + std::to_string(i) +
                       "\", \"level\": \"error\", \"key\": \"k" + std::to_string(i) + "\"}}\n";
    }
    for (int step = 0; step < 40; ++step) {
      double loss = 1.0 / (1 + step) + 0.01 * (step % 3);
      p.stdout_text += "{\"step\": " + std::to_string(step) +
                       ", \"loss\": " + std::to_string(loss) + "}\n";
    }
    p.stdout_text += "{\"step\": 40, \"loss\": 57.0}\n";
    return p;
  });
  EngineOptions o = BaseOptions();
  o.watch = config_;
  o.alert_sink = webhook->get();
  Engine engine(*store_, launcher, probe, clock_, o);
  auto sub = engine.Submit(ParseSpec("name: noisy\ncommand: python train.py\n"));
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  ASSERT_TRUE((*webhook)->Flush(20'000));
  server.stop();
  listener.join();

  const std::string user = store_->GetExperiment(sub->experiment_id).value()->user;
  ASSERT_FALSE(user.empty());
  std::map<std::string, int> kinds;
  for (const Json& post : posts) {
    const Json& alert = post["alert"];
    kinds[alert["kind"]] += 1;
    EXPECT_EQ(alert["data"]["user"], user) << post.dump();
    EXPECT_EQ(alert["data"]["experiment"], "noisy") << post.dump();
  }
  const int cap = config_.budget.per_run;
  EXPECT_EQ(kinds["run"], cap);
  EXPECT_EQ(kinds["alerts_suppressed"], 1);
  EXPECT_EQ(kinds["loss_spike"], 1);  // raised after the flood, still delivered
  EXPECT_LE(posts.size(), static_cast<size_t>(cap + 2));
  // The rest are counted on the suppressed alert, not lost without a trace.
  auto suppressed = AlertsOf("alerts_suppressed");
  ASSERT_EQ(suppressed.size(), 1u);
  EXPECT_EQ(suppressed[0].count, 3000 - cap);
  EXPECT_EQ(suppressed[0].data["suppressed"], 3000 - cap);
  EXPECT_EQ(AlertsOf("run").size(), static_cast<size_t>(cap));
}

}  // namespace
}  // namespace drover
