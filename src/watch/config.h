#pragma once
// The watch sections of the daemon's config file (config/daemon_config.h reads the file):
// telemetry period, alert silence window, sinks and detector thresholds. Every field is
// optional; docs/metrics.md shows them with their defaults:
//
//   telemetry:
//     period: 5s          # how often GPUs are sampled
//     store_every: 1m     # samples are averaged into one stored row per GPU per this long
//   alerts:
//     silence: 30m        # the same alert key notifies once per this long
//     per_run: 10         # a run's own alerts (drover_alert lines) sent per hour
//     per_user: 30        # all of one user's runs' own alerts sent per hour
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
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "spec/yaml_fields.h"
#include "watch/alert_budget.h"
#include "watch/detectors.h"
#include "watch/sinks.h"

namespace drover::watch {

struct SinkConfig {
  std::string type = "log";  // log | webhook
  WebhookOptions webhook;    // for type webhook
};

struct WatchConfig {
  Millis telemetry_period_ms = 5000;
  Millis telemetry_store_every_ms = 60'000;
  Millis silence_ms = 30 * 60 * 1000;
  // Without a sinks list: one log sink. An empty list (`sinks: []`) sends nowhere.
  std::vector<SinkConfig> sinks = {SinkConfig{}};
  // alerts.per_run / alerts.per_user: how many of the alerts runs raise themselves reach the
  // sinks per hour (alert_budget.h).
  AlertBudgetConfig budget;
  DetectorConfig detectors;
};

// The watch sections' keys (a config that has one at the top level is told to move it there).
const std::vector<std::string>& TelemetryKeys();
const std::vector<std::string>& AlertKeys();
const std::vector<std::string>& DetectorKeys();
// Reads the `telemetry:`, `alerts:` or `detectors:` field `f` into `out`: errors carry
// file:line:column and a did-you-mean for misspelt keys, and say the accepted range or form.
Status ParseWatchSection(const yaml::Reader& r, const yaml::Field& f, WatchConfig* out);

// The sinks of a config, ready to use (a FanOutSink; webhooks start their threads).
Result<std::unique_ptr<FanOutSink>> MakeSinks(const WatchConfig& config);

}  // namespace drover::watch
