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

void Engine::TailMetrics(Live& live, bool final, Instant now) {
  Attempt& a = *live.attempt;
  std::vector<MetricPoint> points;
  auto offset = ReadNewLines(a.stdout_path, a.stdout_offset, final, [&](std::string_view line) {
    OnRunAlertLine(live, line, now.wall);
    auto m = ParseMetricLine(line, live.metric_lines);
    if (!m) return;
    ++live.metric_lines;
    for (auto& [name, value] : m->values) {
      MetricPoint p;
      p.run_id = a.run_id;
      p.attempt_id = a.id;
      p.step = m->step;
      p.name = name;
      p.value = value;
      p.t_ms = now.wall;
      live.run.final_metrics[name] = value;
      if (!std::isfinite(value) && !Stopping(live) && SpecOf(live).monitor.stop_on_nan &&
          Watched(SpecOf(live), name)) {
        // A diverged run only burns GPU time from here on: stop it now.
        Stop(live, StopReason::kDiverged, now, options_.kill_grace_ms);
        spdlog::info("run {}: {} is {} at step {}: stopping it as diverged", a.run_id, name, value,
                     m->step);
        watch::Finding f;
        f.kind = "diverged";
        f.severity = "error";
        f.message = fmt::format("{} became {} at step {}: stopped the run as diverged", name,
                                std::isnan(value) ? "NaN" : "infinite", m->step);
        f.data = {{"metric", name}, {"step", m->step}};
        RaiseRunAlert(live, f, "diverged", now.wall);
      }
      points.push_back(std::move(p));
    }
  }, kEngineLineLimits);
  if (!offset.ok()) {
    spdlog::warn("run {}: {}", a.run_id, offset.status().message());
    return;
  }
  NoteOutput(live, now);
  if (*offset == a.stdout_offset) return;
  a.stdout_offset = *offset;
  Tx();
  // Points and the offset they reach land in one transaction, so none is lost or stored twice.
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
