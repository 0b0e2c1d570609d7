#include "watch/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/strings.h"
#include "spec/yaml_fields.h"

namespace drover::watch {
namespace {

namespace fs = std::filesystem;
using yaml::Contains;
using yaml::Describe;
using yaml::Field;
using yaml::Find;
using YAML::Node;

const std::vector<std::string> kTelemetryKeys = {"period", "store_every"};
const std::vector<std::string> kAlertKeys = {"silence", "sinks", "per_run", "per_user"};
const std::vector<std::string> kSinkKeys = {"type",         "url",     "format", "min_severity",
                                            "max_attempts", "backoff", "timeout"};
const std::vector<std::string> kDetectorKeys = {"loss_spike",  "plateau",       "idle_gpu",
                                                "memory_leak", "fragmentation", "repeated_failure"};
const std::vector<std::string> kSpikeKeys = {"window", "min_points", "threshold"};
const std::vector<std::string> kPlateauKeys = {"window", "min_delta"};
const std::vector<std::string> kIdleKeys = {"utilization", "for"};
const std::vector<std::string> kLeakKeys = {"window", "min_growth", "monotonic"};
const std::vector<std::string> kFragmentationKeys = {"threshold", "samples", "min_reserved"};
const std::vector<std::string> kFailureKeys = {"count"};
const std::vector<std::string> kSinkTypes = {"log", "webhook"};
const std::vector<std::string> kFormats = {"slack", "feishu", "dingtalk", "json"};
const std::vector<std::string> kSeverities = {"info", "warning", "error"};

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// The config file's parser: the shared field reader (spec/yaml_fields.h) and one method per
// section.
class Parser : public yaml::Reader {
 public:
  explicit Parser(std::string source) : yaml::Reader(std::move(source)) {}
  Status ParseTelemetry(const Field& f, WatchConfig& c) const;
  Status ParseAlerts(const Field& f, WatchConfig& c) const;
  Status ParseDetectors(const Field& f, WatchConfig& c) const;

 private:
  // The fields of a mapping (null: none), each key checked against `valid`.
  Result<std::vector<Field>> ReadMap(const Node& at, const Node& map, const std::string& path,
                                     const std::vector<std::string>& valid,
                                     std::string_view example) const {
    yaml::MapRules rules;
    rules.valid = &valid;
    rules.example = example;
    return yaml::Reader::ReadMap(at, map, path, rules);
  }

  Status ParseSinks(const Field& f, WatchConfig& c) const;
};

Status Parser::ParseTelemetry(const Field& f, WatchConfig& c) const {
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          ReadMap(f.at(), f.value, "telemetry", kTelemetryKeys,
                                  "telemetry: {period: 5s, store_every: 1m}"));
  if (const Field* p = Find(fields, "period")) {
    DROVER_ASSIGN_OR_RETURN(c.telemetry_period_ms, Duration(*p, 100));
  }
  if (const Field* s = Find(fields, "store_every")) {
    DROVER_ASSIGN_OR_RETURN(c.telemetry_store_every_ms, Duration(*s, 100));
  }
  if (c.telemetry_store_every_ms < c.telemetry_period_ms) {
    const Field* at = Find(fields, "store_every");
    if (!at) at = Find(fields, "period");
    return Err(at->at(),
               fmt::format("telemetry.store_every ({}) is shorter than telemetry.period ({}); "
                           "samples are averaged into one row per store_every, so make it at "
                           "least the period",
                           FormatDuration(c.telemetry_store_every_ms),
                           FormatDuration(c.telemetry_period_ms)));
  }
  return Status::Ok();
}

Status Parser::ParseAlerts(const Field& f, WatchConfig& c) const {
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                          ReadMap(f.at(), f.value, "alerts", kAlertKeys,
                                  "alerts: {silence: 30m, sinks: [{type: log}]}"));
  if (const Field* s = Find(fields, "silence")) {
    DROVER_ASSIGN_OR_RETURN(c.silence_ms, Duration(*s, 0));
  }
  if (const Field* s = Find(fields, "sinks")) DROVER_RETURN_IF_ERROR(ParseSinks(*s, c));
  if (const Field* x = Find(fields, "per_run")) {
    DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 1, 1000, "an integer from 1 to 1000",
                                           "write how many of a run's own alerts may be sent "
                                           "per hour, such as 10"));
    c.budget.per_run = static_cast<int>(v);
  }
  if (const Field* x = Find(fields, "per_user")) {
    DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 1, 10'000, "an integer from 1 to 10000",
                                           "write how many of one user's runs' own alerts may "
                                           "be sent per hour, such as 30"));
    c.budget.per_user = static_cast<int>(v);
  }
  return Status::Ok();
}

Status Parser::ParseSinks(const Field& f, WatchConfig& c) const {
  if (!f.value.IsSequence()) {
    return Err(f.at(), fmt::format("alerts.sinks must be a list of sinks, got {}; write e.g. "
                                   "sinks: [{{type: log}}], or sinks: [] for none",
                                   Describe(f.value)));
  }
  c.sinks.clear();
  size_t index = 0;
  for (const Node& item : f.value) {
    std::string path = fmt::format("alerts.sinks[{}]", index++);
    const Node& at = item.IsNull() ? f.at() : item;
    if (!item.IsMap()) {
      return Err(at, fmt::format("{} must be a mapping with a type, got {}; write e.g. "
                                 "- type: log, or - {{type: webhook, format: slack, url: ...}}",
                                 path, Describe(item)));
    }
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                            ReadMap(at, item, path, kSinkKeys, "{type: log}"));
    const Field* type = Find(fields, "type");
    if (!type) {
      return Err(item, fmt::format("{} needs a type: log or webhook; add e.g. type: log", path));
    }
    SinkConfig sink;
    DROVER_ASSIGN_OR_RETURN(sink.type, Choice(*type, kSinkTypes));
    if (sink.type == "log") {
      for (const Field& x : fields) {
        if (x.name != "type") {
          return Err(x.key, fmt::format("{} is only for webhook sinks; remove it from this log "
                                        "sink, or make it type: webhook",
                                        x.path));
        }
      }
      c.sinks.push_back(std::move(sink));
      continue;
    }
    WebhookOptions& w = sink.webhook;
    const Field* url = Find(fields, "url");
    if (!url) {
      return Err(item, fmt::format("{} (webhook) needs a url; add e.g. url: "
                                   "https://hooks.slack.com/services/...",
                                   path));
    }
    if (!url->value.IsScalar() ||
        !(StartsWith(url->value.Scalar(), "http://") ||
          StartsWith(url->value.Scalar(), "https://")) ||
        url->value.Scalar().find_first_of(" \t") != std::string::npos) {
      return Err(url->at(), fmt::format("{} must be an http:// or https:// URL, got {}; write "
                                        "the webhook address, e.g. "
                                        "https://hooks.slack.com/services/...",
                                        url->path, Describe(url->value)));
    }
    w.url = url->value.Scalar();
    const Field* format = Find(fields, "format");
    if (!format) {
      return Err(item, fmt::format("{} (webhook) needs a format: slack, feishu, dingtalk or "
                                   "json; add e.g. format: slack",
                                   path));
    }
    DROVER_ASSIGN_OR_RETURN(std::string format_text, Choice(*format, kFormats));
    Result<WebhookFormat> parsed = ParseWebhookFormat(format_text);
    if (!parsed.ok()) return Err(format->at(), parsed.status().message());
    w.format = *parsed;
    if (const Field* s = Find(fields, "min_severity")) {
      DROVER_ASSIGN_OR_RETURN(w.min_severity, Choice(*s, kSeverities));
    }
    if (const Field* m = Find(fields, "max_attempts")) {
      int64_t n = 0;
      DROVER_ASSIGN_OR_RETURN(n, Int(*m, 1, 100, "an integer from 1 to 100",
                                     "write how many times to try each alert, such as 5"));
      w.max_attempts = static_cast<int>(n);
    }
    if (const Field* b = Find(fields, "backoff")) {
      DROVER_ASSIGN_OR_RETURN(w.initial_backoff_ms, Duration(*b, 0));
      w.max_backoff_ms = std::max(w.max_backoff_ms, w.initial_backoff_ms);
    }
    if (const Field* t = Find(fields, "timeout")) {
      DROVER_ASSIGN_OR_RETURN(w.timeout_ms, Duration(*t, 100));
    }
    c.sinks.push_back(std::move(sink));
  }
  return Status::Ok();
}

Status Parser::ParseDetectors(const Field& f, WatchConfig& c) const {
  DetectorConfig& d = c.detectors;
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> sections,
                          ReadMap(f.at(), f.value, "detectors", kDetectorKeys,
                                  "detectors: {loss_spike: {threshold: 6}}"));
  auto as_int = [](int64_t v) { return static_cast<int>(v); };

  if (const Field* s = Find(sections, "loss_spike")) {
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                            ReadMap(s->at(), s->value, s->path, kSpikeKeys,
                                    "loss_spike: {window: 50, min_points: 20, threshold: 6}"));
    if (const Field* x = Find(fields, "window")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 2, 100'000, "an integer from 2 to 100000",
                                             "write how many recent values to compare with, "
                                             "such as 50"));
      d.spike_window = as_int(v);
    }
    if (const Field* x = Find(fields, "min_points")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 2, 100'000, "an integer from 2 to 100000",
                                             "write how many values to see before judging, "
                                             "such as 20"));
      d.spike_min_points = as_int(v);
    }
    if (d.spike_min_points > d.spike_window) {
      const Field* x = Find(fields, "min_points");
      if (!x) x = Find(fields, "window");
      return Err(x->at(), fmt::format("detectors.loss_spike.min_points ({}) is more than "
                                      "detectors.loss_spike.window ({}), so it would never fire; "
                                      "make min_points at most the window",
                                      d.spike_min_points, d.spike_window));
    }
    if (const Field* x = Find(fields, "threshold")) {
      DROVER_ASSIGN_OR_RETURN(d.spike_threshold,
                              Real(*x, 0, std::numeric_limits<double>::infinity(), true, false,
                                   "write how many robust deviations above the median count as "
                                   "a spike, such as 6"));
    }
  }

  if (const Field* s = Find(sections, "plateau")) {
    DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields,
                            ReadMap(s->at(), s->value, s->path, kPlateauKeys,
                                    "plateau: {window: 100, min_delta: 0.001}"));
    if (const Field* x = Find(fields, "window")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 2, kIntMax, "an integer >= 2",
                                             "write how many points without improvement make a "
                                             "plateau, such as 100"));
      d.plateau_window = as_int(v);
    }
    if (const Field* x = Find(fields, "min_delta")) {
      DROVER_ASSIGN_OR_RETURN(d.plateau_min_delta,
                              Real(*x, 0, std::numeric_limits<double>::infinity(), false, false,
                                   "write the relative improvement that counts, such as 0.001"));
    }
  }

  if (const Field* s = Find(sections, "idle_gpu")) {
    DROVER_ASSIGN_OR_RETURN(
        std::vector<Field> fields,
        ReadMap(s->at(), s->value, s->path, kIdleKeys, "idle_gpu: {utilization: 30, for: 5m}"));
    if (const Field* x = Find(fields, "utilization")) {
      DROVER_ASSIGN_OR_RETURN(d.idle_utilization,
                              Real(*x, 0, 100, false, false,
                                   "write the utilisation percentage under which a GPU is idle, "
                                   "such as 30"));
    }
    if (const Field* x = Find(fields, "for")) {
      DROVER_ASSIGN_OR_RETURN(d.idle_for_ms, Duration(*x, 0));
    }
  }

  if (const Field* s = Find(sections, "memory_leak")) {
    DROVER_ASSIGN_OR_RETURN(
        std::vector<Field> fields,
        ReadMap(s->at(), s->value, s->path, kLeakKeys,
                "memory_leak: {window: 20, min_growth: 256MiB, monotonic: 0.8}"));
    if (const Field* x = Find(fields, "window")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 2, 100'000, "an integer from 2 to 100000",
                                             "write how many memory samples to look at, such as "
                                             "20"));
      d.leak_window = as_int(v);
    }
    if (const Field* x = Find(fields, "min_growth")) {
      DROVER_ASSIGN_OR_RETURN(d.leak_min_growth, Bytes(*x));
      if (d.leak_min_growth < 1) {
        return Err(x->at(),
                   "detectors.memory_leak.min_growth must be more than 0 bytes; write "
                   "the growth that counts as a leak, such as 256MiB");
      }
    }
    if (const Field* x = Find(fields, "monotonic")) {
      DROVER_ASSIGN_OR_RETURN(d.leak_monotonic,
                              Real(*x, 0, 1, false, false,
                                   "write the fraction of steps that must not go down, such as "
                                   "0.8"));
    }
  }

  if (const Field* s = Find(sections, "fragmentation")) {
    DROVER_ASSIGN_OR_RETURN(
        std::vector<Field> fields,
        ReadMap(s->at(), s->value, s->path, kFragmentationKeys,
                "fragmentation: {threshold: 0.25, samples: 3, min_reserved: 512MiB}"));
    if (const Field* x = Find(fields, "threshold")) {
      DROVER_ASSIGN_OR_RETURN(d.fragmentation,
                              Real(*x, 0, 1, false, true,
                                   "write the fraction of reserved memory left unallocated that "
                                   "counts, such as 0.25"));
    }
    if (const Field* x = Find(fields, "samples")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 1, kIntMax, "an integer >= 1",
                                             "write how many samples in a row, such as 3"));
      d.fragmentation_samples = as_int(v);
    }
    if (const Field* x = Find(fields, "min_reserved")) {
      DROVER_ASSIGN_OR_RETURN(d.fragmentation_min_reserved, Bytes(*x));
    }
  }

  if (const Field* s = Find(sections, "repeated_failure")) {
    DROVER_ASSIGN_OR_RETURN(
        std::vector<Field> fields,
        ReadMap(s->at(), s->value, s->path, kFailureKeys, "repeated_failure: {count: 3}"));
    if (const Field* x = Find(fields, "count")) {
      DROVER_ASSIGN_OR_RETURN(int64_t v, Int(*x, 1, kIntMax, "an integer >= 1",
                                             "write how many failures in a row of the same "
                                             "error raise an alert, such as 3"));
      d.failure_streak = as_int(v);
    }
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& TelemetryKeys() { return kTelemetryKeys; }
const std::vector<std::string>& AlertKeys() { return kAlertKeys; }
const std::vector<std::string>& DetectorKeys() { return kDetectorKeys; }

Status ParseWatchSection(const yaml::Reader& r, const yaml::Field& f, WatchConfig* out) {
  Parser p(r.source());
  if (f.name == "telemetry") return p.ParseTelemetry(f, *out);
  if (f.name == "alerts") return p.ParseAlerts(f, *out);
  if (f.name == "detectors") return p.ParseDetectors(f, *out);
  return r.Err(f.key, fmt::format("'{}' is not a watch section", f.name));
}

Result<std::unique_ptr<FanOutSink>> MakeSinks(const WatchConfig& config) {
  auto fan = std::make_unique<FanOutSink>();
  for (size_t i = 0; i < config.sinks.size(); ++i) {
    const SinkConfig& s = config.sinks[i];
    if (s.type == "log") {
      fan->Add(std::make_unique<LogSink>());
    } else if (s.type == "webhook") {
      Result<std::unique_ptr<WebhookSink>> w = WebhookSink::Create(s.webhook);
      if (!w.ok()) {
        return w.status().WithContext(
            fmt::format("alerts.sinks[{}] (webhook {})", i, RedactUrl(s.webhook.url)));
      }
      fan->Add(std::move(w).value());
    } else {
      return InvalidArgument(
          fmt::format("alerts.sinks[{}]: unknown sink type '{}'; use log or "
                      "webhook",
                      i, s.type));
    }
  }
  return fan;
}

}  // namespace drover::watch
