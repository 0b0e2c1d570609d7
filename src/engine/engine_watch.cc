// The engine's watching: detectors on each run's metrics and GPU memory, GPU telemetry sampling
// (stored averaged, handed to the observer live), the idle-GPU and repeated-failure checks, and
// alerts: stored, deduplicated by key within the silence window, sent to the sinks.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "engine/live.h"
#include "metrics/metric_lines.h"
#include "engine/recovery.h"
#include "common/strings.h"

namespace drover {

void Engine::RaiseAlert(Alert alert, Millis now) {
  Tx();
  // Whose it is: every alert about an experiment names its submitter and the experiment, so a
  // lab's channel knows whom to ask (sinks.cc, AlertSubject).
  if (auto it = experiments_.find(alert.experiment_id); it != experiments_.end()) {
    if (!alert.data.contains("user")) alert.data["user"] = it->second->experiment.user;
    if (!alert.data.contains("experiment")) alert.data["experiment"] = it->second->experiment.name;
  }
  // What it usually means and what to try (watch::AdviceFor), unless the alert says its own.
  if (auto advice = watch::AdviceFor(alert.kind); advice && !alert.data.contains("remedies")) {
    alert.data["cause"] = advice->cause;
    alert.data["remedies"] = advice->remedies;
  }
  alert.first_ms = alert.last_ms = now;
  auto previous = store_.LatestAlert(alert.key);
  if (!previous.ok()) {
    Fail(previous.status());
    return;
  }
  if (*previous && now - (*previous)->first_ms < options_.watch.silence_ms) {
    // Within the silence window: counted on the alert already sent, not sent again.
    Alert& p = **previous;
    p.count += 1;
    p.last_ms = now;
    p.message = alert.message;
    p.data = alert.data;
    if (Status st = store_.UpdateAlert(p); !st.ok()) Fail(st);
    return;
  }
  if (Status st = store_.InsertAlert(alert); !st.ok()) {
    Fail(st);
    return;
  }
  Event e;
  e.t_ms = now;
  e.kind = "alert";
  e.experiment_id = alert.experiment_id;
  e.run_id = alert.run_id;
  e.data = {{"alert_id", alert.id}, {"kind", alert.kind}, {"message", alert.message}};
  if (Status st = store_.InsertEvent(e); !st.ok()) Fail(st);
  unsent_alerts_.push_back(std::move(alert));  // sent by Flush() once committed
}

void Engine::RaiseRunAlert(const Live& live, const watch::Finding& f, const std::string& key_suffix,
                           Millis now) {
  Alert a;
  a.kind = f.kind;
  a.severity = f.severity;
  a.key = fmt::format("run:{}:{}", live.run.id, key_suffix);
  a.message = f.message;
  a.experiment_id = live.run.experiment_id;
  a.run_id = live.run.id;
  a.data = f.data;
  if (live.attempt) a.data["attempt"] = live.attempt->number;
  RaiseAlert(std::move(a), now);
}

void Engine::WatchPoints(Live& live, const std::vector<MetricPoint>& points, Millis now) {
  for (const auto& rf : watchers_.OnPoints(live.run.id, points)) {
    RaiseRunAlert(live, rf.finding, rf.key_suffix, now);
  }
}

void Engine::OnRunAlertLine(Live& live, std::string_view line, Millis now) {
  auto a = ParseAlertLine(line);
  if (!a) return;
  // A run's own alerts are the run's to make: capped per run and per user, so that one run
  // cannot flood a lab's channel or the webhook's queue (watch/alert_budget.h). The rest of the
  // hour's are counted on one alerts_suppressed alert, which is sent once.
  const watch::AlertBudgetConfig& budget = options_.watch.budget;
  const watch::AlertAdmission admit = alert_budget_.Take(budget, live.run.id, live.run.user, now);
  if (!admit.send) {
    const bool per_run = admit.over == "run";
    const std::string key = per_run ? fmt::format("run:{}:alerts_suppressed", live.run.id)
                                    : fmt::format("user:{}:alerts_suppressed", live.run.user);
    if (!admit.first_over) {
      // Counted on the alert already raised, whatever the silence window: never sent again.
      auto previous = store_.LatestAlert(key);
      if (!previous.ok()) {
        Fail(previous.status());
        return;
      }
      if (!*previous) return;
      Tx();
      Alert& p = **previous;
      p.count += 1;
      p.last_ms = now;
      p.data["suppressed"] = admit.suppressed;
      p.data["last_key"] = a->key;
      if (Status st = store_.UpdateAlert(p); !st.ok()) Fail(st);
      return;
    }
    Alert s;
    s.kind = "alerts_suppressed";
    s.severity = "warning";
    s.key = key;
    const int cap = per_run ? budget.per_run : budget.per_user;
    s.message = fmt::format(
        "{} raised more than {} alerts of its own within {}; the rest of them until then are "
        "counted on this alert, not sent (see them in drover logs {}; the cap is alerts.{} in "
        "the daemon's config)",
        per_run ? fmt::format("run {}", live.run.id) : fmt::format("user {}'s runs", live.run.user),
        cap, FormatDuration(budget.window_ms), live.run.id, per_run ? "per_run" : "per_user");
    s.experiment_id = live.run.experiment_id;
    s.run_id = per_run ? live.run.id : 0;
    s.data = {{"cap", cap},
              {"window_ms", budget.window_ms},
              {"suppressed", admit.suppressed},
              {"last_key", a->key},
              {"user", live.run.user}};
    RaiseAlert(std::move(s), now);
    return;
  }
  watch::Finding f;
  f.kind = "run";
  f.severity = a->level;
  f.message = a->message;
  f.data = {{"details", a->details}};
  RaiseRunAlert(live, f, "run:" + a->key, now);
}

bool Engine::RepeatedFailure(Live& live, AttemptOutcome outcome, Millis now) {
  const int streak = options_.watch.detectors.failure_streak;
  if (streak <= 0 || StreakOf(outcome) != Streak::kFailure || live.run.fingerprint.empty()) {
    return false;
  }
  // This attempt's reason is already written in this transaction, so it is the newest here.
  auto outcomes = store_.RecentOutcomes(live.run.fingerprint, streak * 4 + 16);
  if (!outcomes.ok()) {
    Fail(outcomes.status());
    return false;
  }
  int failures = 0;
  for (const auto& r : *outcomes) {
    Streak kind = StreakOf(ParseAttemptOutcome(r));
    if (kind == Streak::kFailure) {
      if (++failures >= streak) break;
    } else if (kind == Streak::kBreaks) {
      break;  // a success ends the streak
    }
  }
  if (failures < streak) return false;
  Alert a;
  a.kind = "repeated_failure";
  a.severity = "error";
  // Keyed by the config, not the run: a resubmitted copy that fails again is the same problem.
  a.key = "config:" + live.run.fingerprint + ":repeated_failure";
  a.message = fmt::format(
      "run {}'s config failed {} times in a row, over its runs and submissions (last: {}); fix "
      "the cause (drover logs {} --stderr) before submitting it again",
      live.run.id, failures, ToString(outcome), live.run.id);
  a.experiment_id = live.run.experiment_id;
  a.run_id = live.run.id;
  a.data = {{"fingerprint", live.run.fingerprint},
            {"failures", failures},
            {"last_reason", std::string(ToString(outcome))}};
  RaiseAlert(std::move(a), now);
  return true;
}

void Engine::SampleTelemetry(Instant now) {
  if (options_.watch.telemetry_period_ms <= 0 || now.mono < next_sample_mono_) return;
  next_sample_mono_ = now.mono + options_.watch.telemetry_period_ms;
  if (pool_.devices().empty()) return;
  auto samples = probe_.Sample(now.wall);
  if (!samples.ok()) {
    // Old numbers shown as current would hide the problem: show none.
    if (!latest_samples_.empty() || sample_error_ != samples.status().message()) {
      spdlog::warn("sampling GPUs: {}", samples.status().message());
    }
    sample_error_ = samples.status().message();
    latest_samples_.clear();
    return;
  }
  sample_error_.clear();
  latest_samples_ = *samples;
  // Which runs hold each GPU, and the GPU memory of each run's processes (by process group).
  std::map<int, std::vector<int64_t>> holders;
  std::map<int, std::vector<RunOnGpu>> on_gpu;
  for (int64_t id : queue_.running()) {
    auto found = live_.find(id);
    if (found == live_.end()) continue;
    const Live& live = *found->second;
    for (int g : live.placement.gpus) {
      holders[g].push_back(id);
      on_gpu[g].push_back({id, live.run.experiment_id, live.attempt ? live.attempt->number : 0});
    }
  }
  health_.Check(*samples, pool_.devices(), on_gpu, now);  // alerts and drains (health_watch.h)
  std::map<int64_t, int64_t> run_memory;
  for (const GpuSample& s : *samples) {
    for (const GpuProcess& p : s.processes) {
      const std::optional<ExecHandle> owner = launcher_.OwnerOf(p.pid);
      if (!owner) continue;
      auto it = by_handle_.find(*owner);
      if (it == by_handle_.end() || p.memory_used < 0) continue;
      run_memory[it->second] += p.memory_used;
    }
  }
  for (const auto& g : telemetry_.Observe(*samples, holders, now.wall)) {
    for (int64_t id : g.runs) {
      auto found = live_.find(id);
      if (found == live_.end()) continue;
      const Live& live = *found->second;
      if (!g.idle) {
        RaiseRunAlert(live, g.finding, fmt::format("gpu:{}:input", g.gpu), now.wall);
        continue;
      }
      // One alert per GPU and run: the run is what someone has to look at.
      Alert a;
      a.kind = g.finding.kind;
      a.severity = g.finding.severity;
      a.key = fmt::format("gpu:{}:idle:run:{}", g.gpu, id);
      a.message = fmt::format("{} (run {})", g.finding.message, id);
      a.experiment_id = live.run.experiment_id;
      a.run_id = id;
      a.gpu = g.gpu;
      a.data = g.finding.data;
      RaiseAlert(std::move(a), now.wall);
    }
  }
  for (const auto& [run_id, bytes] : run_memory) {
    auto it = live_.find(run_id);
    if (it == live_.end()) continue;
    if (auto f = watchers_.OnGpuMemory(run_id, now.wall, bytes)) {
      RaiseRunAlert(*it->second, f->finding, f->key_suffix, now.wall);
    }
  }
  StoreSamples(*samples, /*flush_all=*/false);
  if (observer_) observer_->OnGpuSamples(*samples);
}

void Engine::StoreSamples(const std::vector<GpuSample>& samples, bool flush_all) {
  watch::GpuTelemetry::Rows rows = telemetry_.Bucket(samples, flush_all);
  if (rows.rows.empty()) return;
  Tx();
  if (Status st = store_.InsertGpuSamples(rows.rows, rows.counts); !st.ok()) Fail(st);
}

}  // namespace drover
