#pragma once
// Alerts, a component of the engine (docs/metrics.md, "Alerts"; docs/architecture.md): each
// alert stored in the loop's transaction with its event, deduplicated by key within the silence
// window (counted on the one already sent), named with its experiment's submitter and name, and
// handed to the sinks only once its transaction has committed (TakeUnsent after the commit,
// DropUnsent after a rollback: a webhook never names an alert the store does not have). Also
// the alerts a run prints itself, under their per-run and per-user budget, and the check for a
// config that keeps failing.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "engine/engine_context.h"
#include "model/run.h"
#include "watch/alert_budget.h"
#include "watch/config.h"
#include "watch/detectors.h"

namespace drover {

class AlertDesk {
 public:
  // The experiment an alert is about (null: none known), for its submitter's and name's sake.
  using Whose = std::function<const Experiment*(int64_t experiment_id)>;
  AlertDesk(EngineContext& ctx, const watch::WatchConfig& config, Whose whose)
      : ctx_(ctx), config_(config), whose_(std::move(whose)) {}

  // Stores the alert (or counts it on the same key's within the silence window) and its event.
  void Raise(Alert alert, Millis now);
  // A finding about a run (its attempt `attempt`, 0: none running), keyed run:<id>:<suffix>.
  void RaiseForRun(const Run& run, int attempt, const watch::Finding& f,
                   const std::string& key_suffix, Millis now) {
    RaiseForRun(run.id, run.experiment_id, attempt, f, key_suffix, now);
  }
  void RaiseForRun(int64_t run_id, int64_t experiment_id, int attempt, const watch::Finding& f,
                   const std::string& key_suffix, Millis now);
  // A line the run printed that may be an alert of its own (metrics/metric_lines.h): raised
  // under the run's and its user's budget (watch/alert_budget.h); past it, counted on one
  // alerts_suppressed alert.
  void OnRunLine(const Run& run, int attempt, std::string_view line, Millis now);
  // Whether this failure makes `detectors.failure_streak` in a row for the run's config (over
  // its runs and submissions); raises repeated_failure when it does.
  bool RepeatedFailure(const Run& run, AttemptOutcome outcome, Millis now);

  // The alerts raised since the last call, to send now that they are committed.
  std::vector<Alert> TakeUnsent();
  // The transaction rolled back: they were never stored.
  void DropUnsent() { unsent_.clear(); }

 private:
  EngineContext& ctx_;
  const watch::WatchConfig& config_;
  Whose whose_;
  watch::AlertBudget budget_;  // runs' own alerts per run and user
  std::vector<Alert> unsent_;  // raised in the open transaction
};

}  // namespace drover
