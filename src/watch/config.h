#pragma once
// The configuration of a daemon (`drover serve --config FILE`, `drover run --config FILE`, or
// <store>/config.yaml): telemetry period, alert silence window, sinks, detector thresholds, and
// the scheduler. Every field is optional; docs/metrics.md shows the watch sections with their
// defaults, docs/scheduling.md ("In the daemon") the scheduler section:
//
//   telemetry:
//     period: 5s          # how often GPUs are sampled
//     store_every: 1m     # samples are averaged into one stored row per GPU per this long
//   alerts:
//     silence: 30m        # the same alert key notifies once per this long
//     sinks:
//       - type: log
//       - type: webhook
//         format: slack   # slack | feishu | dingtalk | json
//         url: https://hooks.slack.com/services/T000/B000/XXXX
//         min_severity: warning
//   detectors:
//     loss_spike:    {window: 50, min_points: 20, threshold: 6}
//     plateau:       {window: 100, min_delta: 0.001}
//     idle_gpu:      {utilization: 30, for: 5m}
//     memory_leak:   {window: 20, min_growth: 256MiB, monotonic: 0.8}
//     fragmentation: {threshold: 0.25, samples: 3, min_reserved: 512MiB}
//     repeated_failure: {count: 3}
//   scheduler:
//     policy: fifo          # fifo | priority | las | srtf | gittins | default
//     min_runtime: 10m      # a run this young is never preempted
//     preempt_above: 0.8    # preempt only while this share of the GPUs is allocated (default:
//                           # 0.5 for policy default)
//     grace: 30s            # a preempted run gets SIGTERM, then SIGKILL this much later
//     gpu_reserve: 1GiB     # memory per GPU kept for the driver and monitoring
//     las_threshold: 16h    # las: GPU time attained before a run moves to the second queue
//     groups:
//       vision: {weight: 2, quota: 4}   # quota in GPUs; 0 = none
//   environment:
//     package_list_timeout: 30s   # the interpreter's package listing is killed after this
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sched/policy.h"
#include "sched/scheduler.h"
#include "watch/detectors.h"
#include "watch/sinks.h"

namespace drover::watch {

struct SinkConfig {
  std::string type = "log";  // log | webhook
  WebhookOptions webhook;    // for type webhook
};

// How the engine schedules (the `scheduler:` section; docs/scheduling.md, "In the daemon").
struct SchedulerConfig {
  // The daemon's default is fifo: docs/scheduling.md says why the preemptive policies are
  // opt-in.
  sched::PolicyKind policy = sched::PolicyKind::kFifo;
  // Set when the file gives them; otherwise the policy's own defaults (sched::ForPolicy), so
  // `--policy` or `policy:` alone picks a policy with the knobs it was tuned with.
  std::optional<Millis> min_runtime_ms;
  std::optional<double> preempt_above;
  std::optional<Millis> las_threshold_gpu_ms;
  Millis grace_ms = 30'000;                // preempted: SIGTERM, then SIGKILL this much later
  int64_t gpu_reserve = int64_t{1} << 30;  // bytes per GPU never handed out to runs
  std::map<std::string, sched::GroupShare> groups;  // spec `group` -> weight and quota

  // The policy's defaults with this config's values over them.
  sched::PolicyConfig Policy() const;
};

// What is recorded of each experiment's environment (docs/execution.md).
struct EnvironmentConfig {
  // The package listing runs the user's interpreter off the loop; past this it is killed and
  // recorded as timed out (the runs start meanwhile either way).
  Millis package_list_timeout_ms = 30'000;
};

struct WatchConfig {
  Millis telemetry_period_ms = 5000;
  Millis telemetry_store_every_ms = 60'000;
  Millis silence_ms = 30 * 60 * 1000;
  // Without a sinks list: one log sink. An empty list (`sinks: []`) sends nowhere.
  std::vector<SinkConfig> sinks = {SinkConfig{}};
  DetectorConfig detectors;
  SchedulerConfig scheduler;
  EnvironmentConfig environment;
};

// Errors carry file:line:column (`source` names the file) and a did-you-mean for misspelt keys,
// and say the accepted range or form of a bad value.
Result<WatchConfig> ParseWatchConfig(const std::string& yaml_text, const std::string& source);
Result<WatchConfig> LoadWatchConfig(const std::string& path);

// The sinks of a config, ready to use (a FanOutSink; webhooks start their threads).
Result<std::unique_ptr<FanOutSink>> MakeSinks(const WatchConfig& config);

}  // namespace drover::watch
