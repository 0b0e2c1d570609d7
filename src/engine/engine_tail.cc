// Metric tailing: each running attempt's stdout is read for JSON metric lines, stored with the
// offset reached in one transaction; output of any kind counts as progress for stall detection;
// a NaN in a watched metric stops the run as diverged.
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/live.h"
#include "engine/metric_lines.h"
#include "protocol/api.h"
#include "watch/run_watch.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

// Whether NaN/Inf in this metric means the run diverged (docs/spec.md, monitor.watch).
bool Watched(const Spec& spec, const std::string& name) {
  if (!spec.monitor.watch.empty()) return watch::IsLossLike(spec, name);
  return watch::IsLossLike(spec, name) || (spec.objective && spec.objective->metric == name);
}

// Whether the spec reads this metric: its objective, its pruner's metric, a derived metric or
// one of their inputs.
bool SpecNames(const Spec& spec, const std::string& name) {
  if (spec.objective && spec.objective->metric == name) return true;
  if (spec.prune && spec.prune->metric == name) return true;
  for (const auto& d : spec.metrics) {
    if (d.name == name || std::find(d.inputs.begin(), d.inputs.end(), name) != d.inputs.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

void Engine::NoteOutput(Live& live, Instant now) {
  if (SpecOf(live).monitor.stall_ms <= 0) return;
  const Attempt& a = *live.attempt;
  // Any output counts as progress, stderr too (tqdm bars, warnings).
  std::error_code ec;
  int64_t bytes = static_cast<int64_t>(fs::file_size(a.stdout_path, ec));
  if (ec) bytes = 0;
  int64_t err_bytes = static_cast<int64_t>(fs::file_size(a.stderr_path, ec));
  if (!ec) bytes += err_bytes;
  if (bytes != live.output_bytes) {
    live.output_bytes = bytes;
    live.last_output_mono = now.mono;
  }
}

void Engine::TakePoint(Live& live, int64_t step, std::string name, double value, Millis t,
                       Instant now, std::vector<MetricPoint>* points) {
  const Attempt& a = *live.attempt;
  const Spec& spec = SpecOf(live);
  if (name.size() > kMaxMetricNameBytes) return;
  if (!live.run.final_metrics.contains(name)) {
    // A run keeps at most kMaxMetricNames names, and one line (or one step of an event file)
    // adds at most kMaxNewMetricNamesPerLine of them, so a wide first line (1,000 per-class
    // values) cannot keep the names logged after it out. The names the spec ranks, prunes,
    // derives or watches for divergence by are always kept, up to as many again.
    const size_t have = live.run.final_metrics.size();
    const bool needed = SpecNames(spec, name) || Watched(spec, name);
    const bool admit = needed ? have < 2 * kMaxMetricNames
                              : have < kMaxMetricNames &&
                                    live.new_names_in_line < kMaxNewMetricNamesPerLine;
    if (!admit) {
      if (!live.metric_names_capped) {
        live.metric_names_capped = true;
        spdlog::warn("run {}: it logs more metric names than it may keep; {} is not recorded",
                     a.run_id, name);
        watch::Finding f;
        f.kind = "metric_names";
        f.severity = "warning";
        f.message = fmt::format(
            "the run logs more metric names than drover keeps ({} a run, {} new in one line or "
            "step); {} and later new names are not recorded: log per-class values under fewer "
            "names, or as a list",
            kMaxMetricNames, kMaxNewMetricNamesPerLine, name);
        f.data = {{"metric", name}, {"names", have}};
        RaiseRunAlert(live, f, "metric_names", now.wall);
      }
      return;
    }
    ++live.new_names_in_line;
  }
  if (!spec.metrics.empty() && !live.derived) {
    live.derived = std::make_unique<DerivedMetrics>(spec.metrics);
    std::map<std::string, double> last;
    for (const auto& [k, v] : live.run.final_metrics.items()) {
      // Stored non-finite values are the protocol's strings ("NaN", "Infinity"); null is an
      // older store's NaN, unknown.
      if (auto d = protocol::NumberFromJson(v); d.ok()) last[k] = *d;
    }
    live.derived->Seed(last);
  }
  if (live.derived) {
    for (auto& [at, d] : live.derived->Feed(step, name, value)) {
      RecordPoint(live, at, std::move(d.first), d.second, t, now, points);
    }
  }
  RecordPoint(live, step, std::move(name), value, t, now, points);
}

void Engine::RecordPoint(Live& live, int64_t step, std::string name, double value, Millis t,
                         Instant now, std::vector<MetricPoint>* points) {
  const Attempt& a = *live.attempt;
  const Spec& spec = SpecOf(live);
  // JSON has no NaN or infinity: the run's last values keep them as the protocol spells them
  // ("NaN", "Infinity", "-Infinity"), so +Inf is stored and shown as infinite, not as null/nan.
  live.run.final_metrics[name] = protocol::NumberJson(value);
  if (!std::isfinite(value) && !Stopping(live) && spec.monitor.stop_on_nan &&
      Watched(spec, name)) {
    // A diverged run only burns GPU time from here on: stop it now.
    Stop(live, StopReason::kDiverged, now, options_.kill_grace_ms);
    spdlog::info("run {}: {} is {} at step {}: stopping it as diverged", a.run_id, name, value,
                 step);
    watch::Finding f;
    f.kind = "diverged";
    f.severity = "error";
    f.message = fmt::format("{} became {} at step {}: stopped the run as diverged", name,
                            std::isnan(value) ? "NaN" : "infinite", step);
    f.data = {{"metric", name}, {"step", step}};
    RaiseRunAlert(live, f, "diverged", now.wall);
  }
  MetricPoint p;
  p.run_id = a.run_id;
  p.attempt_id = a.id;
  p.step = step;
  p.name = std::move(name);
  p.value = value;
  p.t_ms = t;
  points->push_back(std::move(p));
}

void Engine::TailMetrics(Live& live, bool final, Instant now) {
  Attempt& a = *live.attempt;
  std::vector<MetricPoint> points;
  bool reported = false;  // the attempt's own record changed (a checkpoint, hyper-parameters)
  auto offset = ReadNewLines(a.stdout_path, a.stdout_offset, final, [&](std::string_view line) {
    OnRunAlertLine(live, line, now.wall);
    if (auto r = ParseReportLine(line)) {
      reported = true;
      if (r->kind == ReportLine::Kind::kCheckpoint) {
        a.checkpoint = CheckpointMark{r->step, now.wall};
      } else if (r->kind == ReportLine::Kind::kResume) {
        if (!a.checkpoint) a.checkpoint = CheckpointMark{r->step, now.wall};
        a.hparams["resumed_from_step"] = r->step;
      } else {
        for (auto it = r->hparams.begin(); it != r->hparams.end(); ++it) {
          if (a.hparams.size() >= kMaxHparams && !a.hparams.contains(it.key())) break;
          a.hparams[it.key()] = it.value();
        }
      }
      return;
    }
    auto m = ParseMetricLine(line, live.metric_lines);
    if (!m) return;
    ++live.metric_lines;
    live.new_names_in_line = 0;
    for (auto& [name, value] : m->values) {
      TakePoint(live, m->step, std::move(name), value, now.wall, now, &points);
    }
  }, kEngineLineLimits);
  if (!offset.ok()) {
    spdlog::warn("run {}: {}", a.run_id, offset.status().message());
    return;
  }
  NoteOutput(live, now);
  bool changed = reported || *offset != a.stdout_offset;
  a.stdout_offset = *offset;
  TailEventFiles(live, final, now, &points, &changed);
  // The step that ended with this batch: its derived points pass the same checks as any other
  // (a NaN derived loss at a real training pace arrives here, not through Feed).
  if (live.derived) {
    for (auto& [at, d] : live.derived->Flush()) {
      RecordPoint(live, at, std::move(d.first), d.second, now.wall, now, &points);
    }
  }
  if (!changed && points.empty()) return;
  Tx();
  // Points and the offsets they reach land in one transaction, so none is lost or stored twice.
  Status st = store_.InsertMetrics(points);
  if (st.ok()) st = store_.UpdateAttempt(a);
  if (st.ok()) st = store_.UpdateRun(live.run);
  if (!st.ok()) Fail(st);
  WatchPoints(live, points, now.wall);
  CheckPrune(live, points, now);
  if (!points.empty()) {
    Notify([this, run = live.run, points] { observer_->OnMetrics(run, points); });
  }
}

}  // namespace drover
