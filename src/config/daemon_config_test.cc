// The daemon config file: every section, through the file as a whole.
#include "config/daemon_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace drover::config {
namespace {

using sched::SchedulerConfig;
using watch::DetectorConfig;
using watch::FanOutSink;
using watch::MakeSinks;
using watch::WatchConfig;
using watch::WebhookFormat;
using watch::WebhookOptions;

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

Result<DaemonConfig> Parse(const std::string& yaml) { return ParseDaemonConfig(yaml, "watch.yaml"); }

// The message of a config that must be rejected as bad input.
std::string Error(const std::string& yaml) {
  Result<DaemonConfig> r = Parse(yaml);
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  return r.status().message();
}

void ExpectDefaults(const WatchConfig& c) {
  WatchConfig d;
  EXPECT_EQ(c.telemetry_period_ms, 5000);
  EXPECT_EQ(c.telemetry_store_every_ms, 60'000);
  EXPECT_EQ(c.silence_ms, 30 * 60 * 1000);
  ASSERT_EQ(c.sinks.size(), 1u);
  EXPECT_EQ(c.sinks[0].type, "log");
  EXPECT_EQ(c.detectors.spike_window, d.detectors.spike_window);
  EXPECT_EQ(c.detectors.spike_min_points, d.detectors.spike_min_points);
  EXPECT_EQ(c.detectors.spike_threshold, d.detectors.spike_threshold);
  EXPECT_EQ(c.detectors.plateau_window, d.detectors.plateau_window);
  EXPECT_EQ(c.detectors.plateau_min_delta, d.detectors.plateau_min_delta);
  EXPECT_EQ(c.detectors.idle_utilization, d.detectors.idle_utilization);
  EXPECT_EQ(c.detectors.idle_for_ms, d.detectors.idle_for_ms);
  EXPECT_EQ(c.detectors.leak_window, d.detectors.leak_window);
  EXPECT_EQ(c.detectors.leak_min_growth, d.detectors.leak_min_growth);
  EXPECT_EQ(c.detectors.leak_monotonic, d.detectors.leak_monotonic);
  EXPECT_EQ(c.detectors.fragmentation, d.detectors.fragmentation);
  EXPECT_EQ(c.detectors.fragmentation_samples, d.detectors.fragmentation_samples);
  EXPECT_EQ(c.detectors.fragmentation_min_reserved, d.detectors.fragmentation_min_reserved);
  EXPECT_EQ(c.detectors.failure_streak, d.detectors.failure_streak);
}

TEST(DaemonConfigTest, EmptyTextGivesDefaults) {
  for (const char* text : {"", "\n", "# nothing here\n", "---\n"}) {
    Result<DaemonConfig> r = Parse(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    ExpectDefaults(r->watch);
  }
}

TEST(DaemonConfigTest, EnvironmentSectionSetsThePackageListTimeout) {
  EXPECT_EQ(EnvironmentConfig{}.package_list_timeout_ms, 30'000);
  auto c = Parse("environment: {package_list_timeout: 3s}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->environment.package_list_timeout_ms, 3000);
  EXPECT_NE(
      Error("environment: {package_list_timout: 3s}\n").find("did you mean 'package_list_timeout'"),
      std::string::npos);
  // Written at the top by mistake: the message names its section.
  EXPECT_NE(Error("package_list_timeout: 3s\n").find("environment"), std::string::npos);
}

TEST(DaemonConfigTest, EmptySectionsKeepDefaults) {
  Result<DaemonConfig> r = Parse("telemetry:\nalerts:\ndetectors:\n  loss_spike:\n  plateau: {}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ExpectDefaults(r->watch);
}

TEST(DaemonConfigTest, ParsesAFullFile) {
  Result<DaemonConfig> r = Parse(R"(# every key, none at its default
telemetry:
  period: 2s          # how often GPUs are sampled
  store_every: 30s
alerts:
  silence: 10m
  sinks:
    - type: log
    - type: webhook
      format: slack
      url: https://hooks.slack.com/services/T000/B000/XXXX
      min_severity: warning
      max_attempts: 3
      backoff: 500ms
      timeout: 5s
    - {type: webhook, format: feishu, url: "http://127.0.0.1:8080/hook"}
    - {type: webhook, format: dingtalk, url: "https://oapi.dingtalk.com/robot/send?access_token=x"}
    - {type: webhook, format: json, url: "http://alerts.internal/drover", min_severity: error}
detectors:
  loss_spike:    {window: 40, min_points: 10, threshold: 4.5}
  plateau:       {window: 200, min_delta: 0.01}
  idle_gpu:      {utilization: 10, for: 90s}
  memory_leak:   {window: 30, min_growth: 1GiB, monotonic: 0.9}
  fragmentation: {threshold: 0.4, samples: 5, min_reserved: 2GiB}
  repeated_failure: {count: 2}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const WatchConfig& c = r->watch;
  EXPECT_EQ(c.telemetry_period_ms, 2000);
  EXPECT_EQ(c.telemetry_store_every_ms, 30'000);
  EXPECT_EQ(c.silence_ms, 600'000);
  ASSERT_EQ(c.sinks.size(), 5u);
  EXPECT_EQ(c.sinks[0].type, "log");
  EXPECT_EQ(c.sinks[1].type, "webhook");
  const WebhookOptions& w = c.sinks[1].webhook;
  EXPECT_EQ(w.url, "https://hooks.slack.com/services/T000/B000/XXXX");
  EXPECT_EQ(w.format, WebhookFormat::kSlack);
  EXPECT_EQ(w.min_severity, "warning");
  EXPECT_EQ(w.max_attempts, 3);
  EXPECT_EQ(w.initial_backoff_ms, 500);
  EXPECT_EQ(w.timeout_ms, 5000);
  EXPECT_EQ(c.sinks[2].webhook.format, WebhookFormat::kFeishu);
  EXPECT_EQ(c.sinks[2].webhook.url, "http://127.0.0.1:8080/hook");
  EXPECT_EQ(c.sinks[2].webhook.min_severity, "info");
  EXPECT_EQ(c.sinks[2].webhook.max_attempts, WebhookOptions{}.max_attempts);
  EXPECT_EQ(c.sinks[3].webhook.format, WebhookFormat::kDingTalk);
  EXPECT_EQ(c.sinks[4].webhook.format, WebhookFormat::kJson);
  EXPECT_EQ(c.sinks[4].webhook.min_severity, "error");
  const DetectorConfig& d = c.detectors;
  EXPECT_EQ(d.spike_window, 40);
  EXPECT_EQ(d.spike_min_points, 10);
  EXPECT_DOUBLE_EQ(d.spike_threshold, 4.5);
  EXPECT_EQ(d.plateau_window, 200);
  EXPECT_DOUBLE_EQ(d.plateau_min_delta, 0.01);
  EXPECT_DOUBLE_EQ(d.idle_utilization, 10);
  EXPECT_EQ(d.idle_for_ms, 90'000);
  EXPECT_EQ(d.leak_window, 30);
  EXPECT_EQ(d.leak_min_growth, kGiB);
  EXPECT_DOUBLE_EQ(d.leak_monotonic, 0.9);
  EXPECT_DOUBLE_EQ(d.fragmentation, 0.4);
  EXPECT_EQ(d.fragmentation_samples, 5);
  EXPECT_EQ(d.fragmentation_min_reserved, 2 * kGiB);
  EXPECT_EQ(d.failure_streak, 2);
}

TEST(DaemonConfigTest, PartialSectionsKeepOtherDefaults) {
  Result<DaemonConfig> r = Parse("detectors:\n  memory_leak: {min_growth: 512MiB}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->watch.detectors.leak_min_growth, 512 * kMiB);
  EXPECT_EQ(r->watch.detectors.leak_window, 20);
  EXPECT_EQ(r->watch.detectors.spike_threshold, 6.0);
  ASSERT_EQ(r->watch.sinks.size(), 1u);
}

TEST(DaemonConfigTest, EmptySinkListMeansNoSink) {
  Result<DaemonConfig> r = Parse("alerts:\n  sinks: []\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->watch.sinks.empty());
  Result<std::unique_ptr<FanOutSink>> sinks = MakeSinks(r->watch);
  ASSERT_TRUE(sinks.ok()) << sinks.status().message();
  EXPECT_TRUE((*sinks)->empty());
}

TEST(DaemonConfigTest, MakeSinksBuildsEachSink) {
  Result<DaemonConfig> r = Parse(R"(alerts:
  sinks:
    - type: log
    - {type: webhook, format: json, url: "http://127.0.0.1:9/hook", max_attempts: 1}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  Result<std::unique_ptr<FanOutSink>> sinks = MakeSinks(r->watch);
  ASSERT_TRUE(sinks.ok()) << sinks.status().message();
  EXPECT_FALSE((*sinks)->empty());
  // Defaults: one log sink.
  Result<std::unique_ptr<FanOutSink>> def = MakeSinks(WatchConfig{});
  ASSERT_TRUE(def.ok());
  EXPECT_FALSE((*def)->empty());
}

TEST(DaemonConfigTest, UnknownKeysSayWhereAndSuggest) {
  EXPECT_EQ(Error("alerts:\n  silense: 10m\n"),
            "watch.yaml:2:3: unknown key 'silense' in alerts; did you mean 'silence'?");
  EXPECT_EQ(Error("alert:\n  silence: 10m\n"),
            "watch.yaml:1:1: unknown key 'alert'; did you mean 'alerts'?");
  EXPECT_EQ(Error("telemetry:\n  periode: 5s\n"),
            "watch.yaml:2:3: unknown key 'periode' in telemetry; did you mean 'period'?");
  EXPECT_EQ(Error("detectors:\n  loss_spike: {windw: 10}\n"),
            "watch.yaml:2:16: unknown key 'windw' in detectors.loss_spike; did you mean "
            "'window'?");
  EXPECT_EQ(Error("detectors:\n  idle: {for: 5m}\n"),
            "watch.yaml:2:3: unknown key 'idle' in detectors; valid keys are loss_spike, "
            "plateau, idle_gpu, memory_leak, fragmentation, repeated_failure");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - type: webhook\n      format: slack\n      urll: "
                  "http://x/\n"),
            "watch.yaml:5:7: unknown key 'urll' in alerts.sinks[0]; did you mean 'url'?");
  // A section's key at the top points at its section.
  EXPECT_EQ(Error("silence: 10m\n"),
            "watch.yaml:1:1: unknown key 'silence'; did you mean 'alerts.silence'? (put it "
            "under alerts:)");
  EXPECT_EQ(Error("alerts:\n  silence: 1m\n  silence: 2m\n"),
            "watch.yaml:3:3: duplicate key 'alerts.silence'; keep only one of them");
}

TEST(DaemonConfigTest, BadShapes) {
  EXPECT_EQ(Error("- a\n- b\n"),
            "watch.yaml:1:1: the config must be a mapping with telemetry:, alerts:, detectors: "
            "and scheduler: sections, got a list; write one 'key: value' per line");
  EXPECT_EQ(Error("alerts: loud\n"),
            "watch.yaml:1:9: alerts must be a mapping, got 'loud'; write e.g. alerts: {silence: "
            "30m, sinks: [{type: log}]}");
  EXPECT_EQ(Error("alerts:\n  sinks: log\n"),
            "watch.yaml:2:10: alerts.sinks must be a list of sinks, got 'log'; write e.g. "
            "sinks: [{type: log}], or sinks: [] for none");
  EXPECT_EQ(Error("alerts:\n  sinks: [log]\n"),
            "watch.yaml:2:11: alerts.sinks[0] must be a mapping with a type, got 'log'; write "
            "e.g. - type: log, or - {type: webhook, format: slack, url: ...}");
  EXPECT_NE(Error("alerts: {silence: [1m\n").find("watch.yaml:"), std::string::npos);
  EXPECT_NE(Error("alerts: {silence: [1m\n").find("YAML syntax error"), std::string::npos);
}

TEST(DaemonConfigTest, Sinks) {
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - format: slack\n"),
            "watch.yaml:3:7: alerts.sinks[0] needs a type: log or webhook; add e.g. type: log");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - type: slack\n"),
            "watch.yaml:3:13: alerts.sinks[0].type must be one of log, webhook, got 'slack'");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - type: webhok\n"),
            "watch.yaml:3:13: alerts.sinks[0].type must be one of log, webhook, got 'webhok'; "
            "did you mean 'webhook'?");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - {type: log, url: 'http://x/'}\n"),
            "watch.yaml:3:19: alerts.sinks[0].url is only for webhook sinks; remove it from "
            "this log sink, or make it type: webhook");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - {type: log}\n    - {type: webhook, format: slack}\n"),
            "watch.yaml:4:7: alerts.sinks[1] (webhook) needs a url; add e.g. url: "
            "https://hooks.slack.com/services/...");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - {type: webhook, url: 'http://x/'}\n"),
            "watch.yaml:3:7: alerts.sinks[0] (webhook) needs a format: slack, feishu, "
            "dingtalk or json; add e.g. format: slack");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - {type: webhook, url: 'http://x/', format: slak}\n"),
            "watch.yaml:3:49: alerts.sinks[0].format must be one of slack, feishu, dingtalk, "
            "json, got 'slak'; did you mean 'slack'?");
  EXPECT_EQ(Error("alerts:\n  sinks:\n    - {type: webhook, url: 'ftp://x/', format: json}\n"),
            "watch.yaml:3:28: alerts.sinks[0].url must be an http:// or https:// URL, got "
            "'ftp://x/'; write the webhook address, e.g. https://hooks.slack.com/services/...");
  const std::string hook =
      "alerts:\n  sinks:\n    - {type: webhook, url: 'http://x/', format: json, ";
  EXPECT_EQ(Error(hook + "min_severity: warnin}\n"),
            "watch.yaml:3:69: alerts.sinks[0].min_severity must be one of info, warning, "
            "error, got 'warnin'; did you mean 'warning'?");
  EXPECT_EQ(Error(hook + "min_severity: loud}\n"),
            "watch.yaml:3:69: alerts.sinks[0].min_severity must be one of info, warning, "
            "error, got 'loud'");
  EXPECT_EQ(Error(hook + "max_attempts: 0}\n"),
            "watch.yaml:3:69: alerts.sinks[0].max_attempts must be an integer from 1 to 100, "
            "got '0'; write how many times to try each alert, such as 5");
  EXPECT_EQ(Error(hook + "backoff: soon}\n"),
            "watch.yaml:3:64: alerts.sinks[0].backoff: 'soon' is not a duration; write e.g. "
            "500ms, 90s, 30m, 2h or 1h30m");
  EXPECT_EQ(Error(hook + "timeout: 10ms}\n"),
            "watch.yaml:3:64: alerts.sinks[0].timeout must be at least 100ms, got '10ms'; "
            "write a longer duration");
}

TEST(DaemonConfigTest, DurationsAndSizes) {
  EXPECT_EQ(Error("telemetry:\n  period: 50ms\n"),
            "watch.yaml:2:11: telemetry.period must be at least 100ms, got '50ms'; write a "
            "longer duration");
  EXPECT_EQ(Error("telemetry:\n  period: fast\n"),
            "watch.yaml:2:11: telemetry.period: 'fast' is not a duration; write e.g. 500ms, "
            "90s, 30m, 2h or 1h30m");
  EXPECT_EQ(Error("telemetry:\n  period: [5s]\n"),
            "watch.yaml:2:11: telemetry.period must be a duration, got a list; write e.g. "
            "500ms, 90s, 30m, 2h or 1h30m");
  EXPECT_EQ(Error("telemetry:\n  period: 1m\n  store_every: 30s\n"),
            "watch.yaml:3:16: telemetry.store_every (30.0s) is shorter than telemetry.period "
            "(1m00s); samples are averaged into one row per store_every, so make it at least "
            "the period");
  EXPECT_EQ(Error("telemetry:\n  period: 2m\n"),
            "watch.yaml:2:11: telemetry.store_every (1m00s) is shorter than telemetry.period "
            "(2m00s); samples are averaged into one row per store_every, so make it at least "
            "the period");
  EXPECT_EQ(Error("detectors:\n  memory_leak: {min_growth: lots}\n"),
            "watch.yaml:2:29: detectors.memory_leak.min_growth: 'lots' is not a size; write a "
            "number with a unit, such as 6GiB, 512MiB or 8GB");
  EXPECT_EQ(Error("detectors:\n  memory_leak: {min_growth: 0}\n"),
            "watch.yaml:2:29: detectors.memory_leak.min_growth must be more than 0 bytes; write "
            "the growth that counts as a leak, such as 256MiB");
  EXPECT_EQ(Error("detectors:\n  idle_gpu:\n    for:\n"),
            "watch.yaml:3:5: detectors.idle_gpu.for must be a duration, got nothing; write e.g. "
            "500ms, 90s, 30m, 2h or 1h30m");
  // Bare numbers are seconds; 0 silence means every alert notifies.
  Result<DaemonConfig> r = Parse("telemetry: {period: 1, store_every: 1h}\nalerts: {silence: 0}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->watch.telemetry_period_ms, 1000);
  EXPECT_EQ(r->watch.telemetry_store_every_ms, 3'600'000);
  EXPECT_EQ(r->watch.silence_ms, 0);
}

TEST(DaemonConfigTest, Ranges) {
  EXPECT_EQ(Error("detectors:\n  loss_spike: {window: 1}\n"),
            "watch.yaml:2:24: detectors.loss_spike.window must be an integer from 2 to 100000, "
            "got '1'; write how many recent values to compare with, such as 50");
  EXPECT_EQ(Error("detectors:\n  loss_spike: {window: 2.5}\n"),
            "watch.yaml:2:24: detectors.loss_spike.window must be an integer from 2 to 100000, "
            "got '2.5'; write how many recent values to compare with, such as 50");
  EXPECT_EQ(Error("detectors:\n  loss_spike: {threshold: 0}\n"),
            "watch.yaml:2:27: detectors.loss_spike.threshold must be a number > 0, got '0'; "
            "write how many robust deviations above the median count as a spike, such as 6");
  EXPECT_EQ(Error("detectors:\n  loss_spike: {threshold: .inf}\n"),
            "watch.yaml:2:27: detectors.loss_spike.threshold must be a number > 0, got '.inf'; "
            "write how many robust deviations above the median count as a spike, such as 6");
  EXPECT_EQ(Error("detectors:\n  loss_spike: {window: 10}\n"),
            "watch.yaml:2:24: detectors.loss_spike.min_points (20) is more than "
            "detectors.loss_spike.window (10), so it would never fire; make min_points at most "
            "the window");
  EXPECT_EQ(Error("detectors:\n  plateau: {window: 1}\n"),
            "watch.yaml:2:21: detectors.plateau.window must be an integer >= 2, got '1'; write "
            "how many points without improvement make a plateau, such as 100");
  EXPECT_EQ(Error("detectors:\n  plateau: {min_delta: -0.1}\n"),
            "watch.yaml:2:24: detectors.plateau.min_delta must be a number >= 0, got '-0.1'; "
            "write the relative improvement that counts, such as 0.001");
  EXPECT_EQ(Error("detectors:\n  idle_gpu: {utilization: 101}\n"),
            "watch.yaml:2:27: detectors.idle_gpu.utilization must be a number from 0 to 100, "
            "got '101'; write the utilisation percentage under which a GPU is idle, such as 30");
  EXPECT_EQ(Error("detectors:\n  memory_leak: {monotonic: 1.5}\n"),
            "watch.yaml:2:28: detectors.memory_leak.monotonic must be a number from 0 to 1, "
            "got '1.5'; write the fraction of steps that must not go down, such as 0.8");
  EXPECT_EQ(Error("detectors:\n  memory_leak: {window: 1}\n"),
            "watch.yaml:2:25: detectors.memory_leak.window must be an integer from 2 to 100000, "
            "got '1'; write how many memory samples to look at, such as 20");
  EXPECT_EQ(Error("detectors:\n  fragmentation: {threshold: 1}\n"),
            "watch.yaml:2:30: detectors.fragmentation.threshold must be a number >= 0 and < 1, "
            "got '1'; write the fraction of reserved memory left unallocated that counts, such "
            "as 0.25");
  EXPECT_EQ(Error("detectors:\n  fragmentation: {samples: 0}\n"),
            "watch.yaml:2:28: detectors.fragmentation.samples must be an integer >= 1, got "
            "'0'; write how many samples in a row, such as 3");
  EXPECT_EQ(Error("detectors:\n  repeated_failure: {count: 0}\n"),
            "watch.yaml:2:29: detectors.repeated_failure.count must be an integer >= 1, got "
            "'0'; write how many failures in a row of the same error raise an alert, such as 3");
  EXPECT_EQ(Error("detectors:\n  repeated_failure: {count: 99999999999}\n"),
            "watch.yaml:2:29: detectors.repeated_failure.count must be an integer >= 1, got "
            "'99999999999'; write how many failures in a row of the same error raise an alert, "
            "such as 3");
  // The edges of each range are accepted.
  Result<DaemonConfig> r = Parse(R"(detectors:
  loss_spike: {window: 2, min_points: 2, threshold: 0.001}
  idle_gpu: {utilization: 0, for: 0s}
  memory_leak: {window: 2, monotonic: 1}
  fragmentation: {threshold: 0, samples: 1, min_reserved: 0}
  plateau: {window: 2, min_delta: 0}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->watch.detectors.spike_window, 2);
  EXPECT_EQ(r->watch.detectors.idle_for_ms, 0);
  EXPECT_DOUBLE_EQ(r->watch.detectors.leak_monotonic, 1);
}

TEST(DaemonConfigTest, SchedulerDefaults) {
  Result<DaemonConfig> r = Parse("scheduler:\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const SchedulerConfig& s = r->scheduler;
  // default: it preempts only runs that can resume (checkpoint: true), docs/scheduling.md.
  EXPECT_EQ(s.policy, sched::PolicyKind::kDefault);
  EXPECT_FALSE(s.min_runtime_ms || s.preempt_above || s.las_threshold_gpu_ms);
  sched::PolicyConfig p = s.Policy();
  EXPECT_EQ(p.kind, sched::PolicyKind::kDefault);
  EXPECT_EQ(p.min_runtime_ms, 10 * 60'000);
  EXPECT_DOUBLE_EQ(p.preempt_above_allocated, 0.5);
  EXPECT_EQ(p.las_threshold_gpu_ms, 16LL * 3600 * 1000);
  EXPECT_EQ(s.grace_ms, 30'000);
  EXPECT_EQ(s.gpu_reserve, kGiB);
  EXPECT_TRUE(s.groups.empty());
  // A policy alone brings its own defaults (default preempts from half the pool allocated);
  // what the file says wins over them.
  Result<DaemonConfig> d = Parse("scheduler: {policy: default}\n");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_DOUBLE_EQ(d->scheduler.Policy().preempt_above_allocated,
                   sched::ForPolicy(sched::PolicyKind::kDefault).preempt_above_allocated);
  Result<DaemonConfig> o = Parse("scheduler: {policy: default, preempt_above: 0.9}\n");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_DOUBLE_EQ(o->scheduler.Policy().preempt_above_allocated, 0.9);
}

TEST(DaemonConfigTest, SchedulerSection) {
  Result<DaemonConfig> r = Parse(R"(alerts: {silence: 5m}
scheduler:
  policy: las
  min_runtime: 0s
  preempt_above: 0.5
  grace: 2m
  gpu_reserve: 512MiB
  las_threshold: 2h
  groups:
    vision: {weight: 2, quota: 4}
    nlp: {weight: 0.5}
    misc:
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const SchedulerConfig& s = r->scheduler;
  EXPECT_EQ(r->watch.silence_ms, 300'000);
  EXPECT_EQ(s.policy, sched::PolicyKind::kLas);
  sched::PolicyConfig p = s.Policy();
  EXPECT_EQ(p.kind, sched::PolicyKind::kLas);
  EXPECT_EQ(p.min_runtime_ms, 0);
  EXPECT_DOUBLE_EQ(p.preempt_above_allocated, 0.5);
  EXPECT_EQ(s.grace_ms, 120'000);
  EXPECT_EQ(s.gpu_reserve, 512 * kMiB);
  EXPECT_EQ(p.las_threshold_gpu_ms, 2 * 3600 * 1000);
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_DOUBLE_EQ(s.groups.at("vision").weight, 2);
  EXPECT_EQ(s.groups.at("vision").quota_gpus, 4);
  EXPECT_DOUBLE_EQ(s.groups.at("nlp").weight, 0.5);
  EXPECT_EQ(s.groups.at("nlp").quota_gpus, 0);
  EXPECT_DOUBLE_EQ(s.groups.at("misc").weight, 1);
  for (const char* name : {"fifo", "priority", "las", "srtf", "default"}) {
    Result<DaemonConfig> one = Parse(std::string("scheduler: {policy: ") + name + "}\n");
    ASSERT_TRUE(one.ok()) << one.status().message();
    EXPECT_EQ(sched::ToString(one->scheduler.policy), name);
  }
  Result<DaemonConfig> zero = Parse("scheduler: {gpu_reserve: 0}\n");
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  EXPECT_EQ(zero->scheduler.gpu_reserve, 0);
}

// The scheduler section shown in docs/scheduling.md parses, and its values are the defaults.
TEST(DaemonConfigTest, SchedulerDocsExampleParses) {
  std::ifstream in(std::string(DROVER_SOURCE_DIR) + "/docs/scheduling.md");
  ASSERT_TRUE(in) << "docs/scheduling.md is missing";
  std::string doc((std::istreambuf_iterator<char>(in)), {});
  size_t start = doc.find("```yaml\nscheduler:");
  ASSERT_NE(start, std::string::npos) << "no scheduler: example in docs/scheduling.md";
  start += 8;
  std::string block = doc.substr(start, doc.find("```", start) - start);
  Result<DaemonConfig> r = ParseDaemonConfig(block, "docs/scheduling.md");
  ASSERT_TRUE(r.ok()) << r.status().message();
  SchedulerConfig d;
  const SchedulerConfig& s = r->scheduler;
  EXPECT_EQ(s.policy, d.policy);
  EXPECT_EQ(s.Policy().min_runtime_ms, d.Policy().min_runtime_ms);
  EXPECT_DOUBLE_EQ(s.Policy().preempt_above_allocated, d.Policy().preempt_above_allocated);
  EXPECT_EQ(s.Policy().las_threshold_gpu_ms, d.Policy().las_threshold_gpu_ms);
  EXPECT_EQ(s.grace_ms, d.grace_ms);
  EXPECT_EQ(s.gpu_reserve, d.gpu_reserve);
  EXPECT_EQ(s.groups.size(), 1u);
}

TEST(DaemonConfigTest, BadSchedulerSection) {
  // Which names exist is sched::ParsePolicy's to say (its message lists them).
  std::string choose(sched::ParsePolicy("tiresias").status().message());
  EXPECT_EQ(Error("scheduler:\n  policy: tiresias\n"),
            "watch.yaml:2:11: scheduler.policy: " + choose);
  EXPECT_EQ(Error("scheduler:\n  policy: sfrt\n"),
            "watch.yaml:2:11: scheduler.policy: no scheduling policy 'sfrt'; choose fifo, "
            "priority, las, srtf, gittins or default; did you mean 'srtf'?");
  EXPECT_NE(choose.find("fifo, priority, las, srtf"), std::string::npos) << choose;
  EXPECT_EQ(Error("scheduler:\n  policy: [las]\n"),
            "watch.yaml:2:11: scheduler.policy must be a policy's name, got a list; write e.g. "
            "policy: las");
  EXPECT_EQ(Error("scheduler:\n  polcy: las\n"),
            "watch.yaml:2:3: unknown key 'polcy' in scheduler; did you mean 'policy'?");
  EXPECT_EQ(Error("policy: las\n"),
            "watch.yaml:1:1: unknown key 'policy'; did you mean 'scheduler.policy'? (put it "
            "under scheduler:)");
  EXPECT_EQ(Error("scheduler: las\n"),
            "watch.yaml:1:12: scheduler must be a mapping, got 'las'; write e.g. scheduler: "
            "{policy: default, grace: 30s}");
  EXPECT_EQ(Error("scheduler:\n  preempt_above: 80%\n"),
            "watch.yaml:2:18: scheduler.preempt_above must be a number from 0 to 1, got '80%'; "
            "write the share of GPUs that must be allocated before a run is preempted, such as "
            "0.8");
  EXPECT_EQ(Error("scheduler:\n  preempt_above: 1.5\n"),
            "watch.yaml:2:18: scheduler.preempt_above must be a number from 0 to 1, got '1.5'; "
            "write the share of GPUs that must be allocated before a run is preempted, such as "
            "0.8");
  EXPECT_NE(Error("scheduler:\n  grace: soon\n").find("watch.yaml:2:10: scheduler.grace: "),
            std::string::npos);
  EXPECT_NE(Error("scheduler:\n  gpu_reserve: lots\n")
                .find("watch.yaml:2:16: "
                      "scheduler.gpu_reserve: "),
            std::string::npos);
  EXPECT_EQ(Error("scheduler:\n  las_threshold: 0s\n"),
            "watch.yaml:2:18: scheduler.las_threshold must be at least 1ms, got '0s'; write a "
            "longer duration");
  EXPECT_EQ(Error("scheduler:\n  groups: [vision]\n"),
            "watch.yaml:2:11: scheduler.groups must be a mapping of group names, got a list; "
            "write e.g. groups: {vision: {weight: 2, quota: 4}}");
  EXPECT_EQ(Error("scheduler:\n  groups:\n    vision: {wieght: 2}\n"),
            "watch.yaml:3:14: unknown key 'wieght' in scheduler.groups.vision; did you mean "
            "'weight'?");
  EXPECT_EQ(Error("scheduler:\n  groups:\n    vision: {weight: 0}\n"),
            "watch.yaml:3:22: scheduler.groups.vision.weight must be a number > 0, got '0'; "
            "write the group's share relative to others (1 each by default), such as 2");
  EXPECT_EQ(Error("scheduler:\n  groups:\n    vision: {quota: -1}\n"),
            "watch.yaml:3:21: scheduler.groups.vision.quota must be an integer >= 0, got '-1'; "
            "write the most GPUs the group may hold, 0 for no cap");
  EXPECT_EQ(Error("scheduler:\n  groups:\n    my team: {quota: 1}\n"),
            "watch.yaml:3:5: a group name may only hold letters, digits, '.', '_' and '-', got "
            "'my team'; write the name a spec gives as group:, such as vision");
  EXPECT_EQ(Error("scheduler:\n  groups:\n    vision: 2\n"),
            "watch.yaml:3:13: scheduler.groups.vision must be a mapping, got '2'; write e.g. "
            "{weight: 2, quota: 4}");
}

class DaemonConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("drover_watch_config_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DaemonConfigFileTest, LoadsAFileAndNamesItInErrors) {
  fs::path good = dir_ / "watch.yaml";
  std::ofstream(good) << "alerts:\n  silence: 5m\n";
  Result<DaemonConfig> r = LoadDaemonConfig(good.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->watch.silence_ms, 300'000);

  fs::path bad = dir_ / "bad.yaml";
  std::ofstream(bad) << "alerts:\n  silense: 5m\n";
  r = LoadDaemonConfig(bad.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            bad.string() + ":2:3: unknown key 'silense' in alerts; did you mean 'silence'?");
}

TEST_F(DaemonConfigFileTest, MissingFileOrDirectory) {
  std::string missing = (dir_ / "nope.yaml").string();
  Result<DaemonConfig> r = LoadDaemonConfig(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(),
            "config file '" + missing +
                "' not found; check the path given to --config, or leave --config out to use "
                "the defaults");
  r = LoadDaemonConfig(dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "'" + dir_.string() +
                                      "' is a directory, not a config file; give the YAML "
                                      "file to --config");
}

TEST_F(DaemonConfigFileTest, WhatIsNoRegularFileOrTooLargeIsRefusedBeforeItIsRead) {
  // A device that never ends and a FIFO nobody writes to: refused at once, nothing read.
  Result<DaemonConfig> r = LoadDaemonConfig("/dev/zero");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "'/dev/zero' is not a regular file, so not a config file; give the YAML file to "
            "--config");
  std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  r = LoadDaemonConfig(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a regular file"), std::string::npos);
  // A file past the limit (a config is a few hundred bytes).
  fs::path big = dir_ / "big.yaml";
  {
    std::ofstream out(big);
    out << "alerts:\n  silence: 5m\n";
    out << std::string(kMaxConfigBytes, '#');
  }
  r = LoadDaemonConfig(big.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("over the limit of 1048576"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace drover::config

namespace drover::config {
namespace {

TEST(DaemonConfigExecutor, SlurmWithItsTargetAndLimits) {
  auto c = Parse(
      "executor:\n  kind: slurm\n  partition: gpu\n  account: vision\n  qos: normal\n"
      "  sbatch: [--constraint=a100, --nice=5]\n  max_jobs: 40\n  accounting: jobcomp\n"
      "  shared_dir: /shared/drover\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->executor.spec.kind, ExecutorKind::kSlurm);
  EXPECT_EQ(c->executor.spec.partition, "gpu");
  EXPECT_EQ(c->executor.spec.account, "vision");
  EXPECT_EQ(c->executor.spec.qos, "normal");
  EXPECT_EQ(c->executor.spec.sbatch, (std::vector<std::string>{"--constraint=a100", "--nice=5"}));
  EXPECT_EQ(c->executor.max_jobs, 40);
  EXPECT_EQ(c->executor.accounting, "jobcomp");
  EXPECT_EQ(c->executor.shared_dir, "/shared/drover");
  auto d = Parse("telemetry: {period: 5s}\n");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->executor.spec.kind, ExecutorKind::kLocal);
  EXPECT_EQ(d->executor.max_jobs, 256);
}

TEST(DaemonConfigExecutor, MistakesSayWhatToWrite) {
  EXPECT_NE(Error("executor: {kind: slurmm}\n").find("slurm"), std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, max_jobs: 0}\n").find("from 1 to 100000"),
            std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, sbatch: [--job-name=x]}\n")
                .find("'--job-name' is drover's to set"),
            std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, sbatch: [-o, out]}\n").find("'-o' is drover's"),
            std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, sbatch: [constraint=a100]}\n")
                .find("does not start with '-'"),
            std::string::npos);
  EXPECT_NE(Error("executor: {partition: gpu}\n").find("write kind: slurm"), std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, shared_dir: shared}\n").find("absolute path"),
            std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, partition: \"gpu; rm -rf /\"}\n")
                .find("must be a Slurm name"),
            std::string::npos);
  EXPECT_NE(Error("executor: {kind: slurm, partiton: gpu}\n").find("partition"), std::string::npos);
  EXPECT_NE(Error("partition: gpu\n").find("executor"), std::string::npos);
}

}  // namespace
}  // namespace drover::config

namespace drover::config {
namespace {

TEST(DaemonConfigLabTest, AdminGroupIsReadAndTyposArePointedOut) {
  auto c = ParseDaemonConfig("lab: {admin_group: lab-admins}\n", "config.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->lab.admin_group, "lab-admins");
  auto typo = ParseDaemonConfig("lab: {admin_grup: x}\n", "config.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("admin_group"), std::string::npos)
      << typo.status().message();
}

}  // namespace
}  // namespace drover::config
