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
#include "watch/run_watch.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

// Whether NaN/Inf in this metric means the run diverged (docs/spec.md, monitor.watch).
bool Watched(const Spec& spec, const std::string& name) {
  if (!spec.monitor.watch.empty()) return watch::IsLossLike(spec, name);
  return watch::IsLossLike(spec, name) || (spec.objective && spec.objective->metric == name);
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
  if (live.run.final_metrics.size() >= kMaxMetricNames && !live.run.final_metrics.contains(name)) {
    if (!live.metric_names_capped) {
      live.metric_names_capped = true;
      spdlog::warn("run {}: it logs more than {} metric names; new names are not recorded",
                   a.run_id, kMaxMetricNames);
    }
    return;
  }
  auto add = [&](int64_t at, std::string metric, double v) {
    MetricPoint p;
    p.run_id = a.run_id;
    p.attempt_id = a.id;
    p.step = at;
    p.value = v;
    p.t_ms = t;
    live.run.final_metrics[metric] = v;
    if (!std::isfinite(v) && !Stopping(live) && spec.monitor.stop_on_nan && Watched(spec, metric)) {
      // A diverged run only burns GPU time from here on: stop it now.
      Stop(live, StopReason::kDiverged, now, options_.kill_grace_ms);
      spdlog::info("run {}: {} is {} at step {}: stopping it as diverged", a.run_id, metric, v, at);
      watch::Finding f;
      f.kind = "diverged";
      f.severity = "error";
      f.message = fmt::format("{} became {} at step {}: stopped the run as diverged", metric,
                              std::isnan(v) ? "NaN" : "infinite", at);
      f.data = {{"metric", metric}, {"step", at}};
      RaiseRunAlert(live, f, "diverged", now.wall);
    }
    p.name = std::move(metric);
    points->push_back(std::move(p));
  };
  if (!spec.metrics.empty() && !live.derived) {
    live.derived = std::make_unique<DerivedMetrics>(spec.metrics);
    std::map<std::string, double> last;
    for (const auto& [k, v] : live.run.final_metrics.items()) {
      if (v.is_number()) last[k] = v.get<double>();
    }
    live.derived->Seed(last);
  }
  if (live.derived) {
    for (auto& [at, d] : live.derived->Feed(step, name, value)) add(at, d.first, d.second);
  }
  add(step, std::move(name), value);
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
  if (live.derived) {
    for (auto& [at, d] : live.derived->Flush()) {
      MetricPoint p;
      p.run_id = a.run_id;
      p.attempt_id = a.id;
      p.step = at;
      p.name = d.first;
      p.value = d.second;
      p.t_ms = now.wall;
      live.run.final_metrics[p.name] = p.value;
      points.push_back(std::move(p));
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
