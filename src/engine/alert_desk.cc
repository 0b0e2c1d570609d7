// Alerts (alert_desk.h).
#include "engine/alert_desk.h"

#include <fmt/format.h>

#include "common/strings.h"
#include "engine/recovery.h"
#include "metrics/metric_lines.h"
#include "watch/sinks.h"

namespace drover {

void AlertDesk::Raise(Alert alert, Millis now) {
  ctx_.Tx();
  Store& store = ctx_.store();
  // Whose it is: every alert about an experiment names its submitter and the experiment, so a
  // lab's channel knows whom to ask (sinks.cc, AlertSubject).
  if (const Experiment* e = whose_ ? whose_(alert.experiment_id) : nullptr) {
    if (!alert.data.contains("user")) alert.data["user"] = e->user;
    if (!alert.data.contains("experiment")) alert.data["experiment"] = e->name;
  }
  // What it usually means and what to try (watch::AdviceFor), unless the alert says its own.
  if (auto advice = watch::AdviceFor(alert.kind); advice && !alert.data.contains("remedies")) {
    alert.data["cause"] = advice->cause;
    alert.data["remedies"] = advice->remedies;
  }
  alert.first_ms = alert.last_ms = now;
  auto previous = store.LatestAlert(alert.key);
  if (!previous.ok()) {
    ctx_.Fail(previous.status());
    return;
  }
  if (*previous && now - (*previous)->first_ms < config_.silence_ms) {
    // Within the silence window: counted on the alert already sent, not sent again.
    Alert& p = **previous;
    p.count += 1;
    p.last_ms = now;
    p.message = alert.message;
    p.data = alert.data;
    if (Status st = store.UpdateAlert(p); !st.ok()) ctx_.Fail(st);
    return;
  }
  if (Status st = store.InsertAlert(alert); !st.ok()) {
    ctx_.Fail(st);
    return;
  }
  Event e;
  e.t_ms = now;
  e.kind = "alert";
  e.experiment_id = alert.experiment_id;
  e.run_id = alert.run_id;
  e.data = {{"alert_id", alert.id}, {"kind", alert.kind}, {"message", alert.message}};
  if (Status st = store.InsertEvent(e); !st.ok()) ctx_.Fail(st);
  unsent_.push_back(std::move(alert));  // sent once committed (TakeUnsent)
}

void AlertDesk::RaiseForRun(int64_t run_id, int64_t experiment_id, int attempt,
                            const watch::Finding& f, const std::string& key_suffix, Millis now) {
  Alert a;
  a.kind = f.kind;
  a.severity = f.severity;
  a.key = fmt::format("run:{}:{}", run_id, key_suffix);
  a.message = f.message;
  a.experiment_id = experiment_id;
  a.run_id = run_id;
  a.data = f.data;
  if (attempt > 0) a.data["attempt"] = attempt;
  Raise(std::move(a), now);
}

void AlertDesk::OnRunLine(const Run& run, int attempt, std::string_view line, Millis now) {
  auto a = ParseAlertLine(line);
  if (!a) return;
  // A run's own alerts are the run's to make: capped per run and per user, so that one run
  // cannot flood a lab's channel or the webhook's queue (watch/alert_budget.h). The rest of the
  // hour's are counted on one alerts_suppressed alert, which is sent once.
  const watch::AlertBudgetConfig& budget = config_.budget;
  const watch::AlertAdmission admit = budget_.Take(budget, run.id, run.user, now);
  if (!admit.send) {
    const bool per_run = admit.over == "run";
    const std::string key = per_run ? fmt::format("run:{}:alerts_suppressed", run.id)
                                    : fmt::format("user:{}:alerts_suppressed", run.user);
    if (!admit.first_over) {
      // Counted on the alert already raised, whatever the silence window: never sent again.
      auto previous = ctx_.store().LatestAlert(key);
      if (!previous.ok()) {
        ctx_.Fail(previous.status());
        return;
      }
      if (!*previous) return;
      ctx_.Tx();
      Alert& p = **previous;
      p.count += 1;
      p.last_ms = now;
      p.data["suppressed"] = admit.suppressed;
      p.data["last_key"] = a->key;
      if (Status st = ctx_.store().UpdateAlert(p); !st.ok()) ctx_.Fail(st);
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
        per_run ? fmt::format("run {}", run.id) : fmt::format("user {}'s runs", run.user), cap,
        FormatDuration(budget.window_ms), run.id, per_run ? "per_run" : "per_user");
    s.experiment_id = run.experiment_id;
    s.run_id = per_run ? run.id : 0;
    s.data = {{"cap", cap},
              {"window_ms", budget.window_ms},
              {"suppressed", admit.suppressed},
              {"last_key", a->key},
              {"user", run.user}};
    Raise(std::move(s), now);
    return;
  }
  watch::Finding f;
  f.kind = "run";
  f.severity = a->level;
  f.message = a->message;
  f.data = {{"details", a->details}};
  RaiseForRun(run, attempt, f, "run:" + a->key, now);
}

bool AlertDesk::RepeatedFailure(const Run& run, AttemptOutcome outcome, Millis now) {
  const int streak = config_.detectors.failure_streak;
  if (streak <= 0 || StreakOf(outcome) != Streak::kFailure || run.fingerprint.empty()) {
    return false;
  }
  // This attempt's reason is already written in this transaction, so it is the newest here.
  auto outcomes = ctx_.store().RecentOutcomes(run.fingerprint, streak * 4 + 16);
  if (!outcomes.ok()) {
    ctx_.Fail(outcomes.status());
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
  a.key = "config:" + run.fingerprint + ":repeated_failure";
  a.message = fmt::format(
      "run {}'s config failed {} times in a row, over its runs and submissions (last: {}); fix "
      "the cause (drover logs {} --stderr) before submitting it again",
      run.id, failures, ToString(outcome), run.id);
  a.experiment_id = run.experiment_id;
  a.run_id = run.id;
  a.data = {{"fingerprint", run.fingerprint},
            {"failures", failures},
            {"last_reason", std::string(ToString(outcome))}};
  Raise(std::move(a), now);
  return true;
}

std::vector<Alert> AlertDesk::TakeUnsent() {
  std::vector<Alert> out;
  out.swap(unsent_);
  return out;
}

}  // namespace drover
