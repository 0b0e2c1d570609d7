#include "model/run_state.h"

#include <fmt/format.h>

#include <cmath>

#include "model/enum_names.h"

namespace drover {

std::string_view ToString(RunState s) {
  switch (s) {
    case RunState::kQueued:
      return "queued";
    case RunState::kRunning:
      return "running";
    case RunState::kRetrying:
      return "retrying";
    case RunState::kSucceeded:
      return "succeeded";
    case RunState::kFailed:
      return "failed";
    case RunState::kCancelled:
      return "cancelled";
    case RunState::kPruned:
      return "pruned";
  }
  return "?";
}

std::optional<RunState> ParseRunState(std::string_view s) {
  return ParseByName(kAllRunStates, s);
}

std::string_view ToString(TrialOrigin o) {
  switch (o) {
    case TrialOrigin::kNone: return "";
    case TrialOrigin::kRandomStart: return "random start";
    case TrialOrigin::kRandom: return "random";
    case TrialOrigin::kTpe: return "tpe";
    case TrialOrigin::kGp: return "gp";
    case TrialOrigin::kAgent: return "agent";
  }
  return "";
}

std::optional<TrialOrigin> ParseTrialOrigin(std::string_view s) {
  return ParseByName(kAllTrialOrigins, s);
}

std::string_view ToString(ExperimentStatus s) {
  return s == ExperimentStatus::kDone ? "done" : "active";
}

std::optional<ExperimentStatus> ParseExperimentStatus(std::string_view s) {
  if (s == "active") return ExperimentStatus::kActive;
  if (s == "done") return ExperimentStatus::kDone;
  return std::nullopt;
}

bool IsFinal(RunState s) {
  return s == RunState::kSucceeded || s == RunState::kFailed || s == RunState::kCancelled ||
         s == RunState::kPruned;
}

std::string_view ToString(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kSucceeded:
      return "succeeded";
    case AttemptOutcome::kExitCode:
      return "exit_code";
    case AttemptOutcome::kSignal:
      return "signal";
    case AttemptOutcome::kTimeout:
      return "timeout";
    case AttemptOutcome::kCudaOom:
      return "cuda_oom";
    case AttemptOutcome::kCancelled:
      return "cancelled";
    case AttemptOutcome::kLaunchError:
      return "launch_error";
    case AttemptOutcome::kInterrupted:
      return "interrupted";
    case AttemptOutcome::kDiverged:
      return "diverged";
    case AttemptOutcome::kStalled:
      return "stalled";
    case AttemptOutcome::kPreempted:
      return "preempted";
    case AttemptOutcome::kPruned:
      return "pruned";
  }
  return "?";
}

std::optional<AttemptOutcome> ParseAttemptOutcome(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(AttemptOutcome::kPruned); ++i) {
    auto o = static_cast<AttemptOutcome>(i);
    if (ToString(o) == s) return o;
  }
  return std::nullopt;
}

std::string_view ToString(EventKind k) {
  switch (k) {
    case EventKind::kExperimentSubmitted:
      return "experiment_submitted";
    case EventKind::kRunState:
      return "run_state";
    case EventKind::kMetrics:
      return "metrics";
    case EventKind::kAlert:
      return "alert";
    case EventKind::kGpu:
      return "gpu";
  }
  return "?";
}

std::string_view ToString(StopReason r) {
  switch (r) {
    case StopReason::kCancel:
      return "cancel";
    case StopReason::kTimeout:
      return "timeout";
    case StopReason::kStall:
      return "stall";
    case StopReason::kDiverged:
      return "diverged";
    case StopReason::kPreempt:
      return "preempt";
    case StopReason::kDrain:
      return "drain";
    case StopReason::kPrune:
      return "prune";
  }
  return "?";
}

std::optional<StopReason> ParseStopReason(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(StopReason::kPrune); ++i) {
    auto r = static_cast<StopReason>(i);
    if (ToString(r) == s) return r;
  }
  return std::nullopt;
}

AttemptOutcome OutcomeOf(StopReason r, bool exited_zero) {
  switch (r) {
    case StopReason::kCancel:
      return AttemptOutcome::kCancelled;
    case StopReason::kTimeout:
      return AttemptOutcome::kTimeout;
    case StopReason::kStall:
      return AttemptOutcome::kStalled;
    case StopReason::kDiverged:
      return AttemptOutcome::kDiverged;
    case StopReason::kPreempt:
      // A run that checkpoints on SIGTERM and exits 0 has not finished: it is requeued.
      return AttemptOutcome::kPreempted;
    case StopReason::kDrain:
      return exited_zero ? AttemptOutcome::kSucceeded : AttemptOutcome::kInterrupted;
    case StopReason::kPrune:
      return AttemptOutcome::kPruned;
  }
  return AttemptOutcome::kInterrupted;
}

std::optional<double> Summarize(const CurveSummary& curve, ScoreSummary summary, bool maximize) {
  if (curve.points <= 0) return std::nullopt;
  switch (summary) {
    case ScoreSummary::kBest: {
      const double best = maximize ? curve.highest : curve.lowest;
      return std::isnan(best) ? curve.last : best;
    }
    case ScoreSummary::kMeanLast:
      return curve.mean_last;
    case ScoreSummary::kLast:
      break;
  }
  return curve.last;
}

std::string_view ToString(RunEvent e) {
  switch (e) {
    case RunEvent::kStart:
      return "start";
    case RunEvent::kSucceed:
      return "succeed";
    case RunEvent::kRetry:
      return "retry";
    case RunEvent::kFail:
      return "fail";
    case RunEvent::kCancel:
      return "cancel";
    case RunEvent::kRequeue:
      return "requeue";
    case RunEvent::kPrune:
      return "prune";
    case RunEvent::kCached:
      return "cached";
  }
  return "?";
}

Result<RunState> Transition(RunState from, RunEvent event) {
  using S = RunState;
  switch (event) {
    case RunEvent::kStart:
      if (from == S::kQueued || from == S::kRetrying) return S::kRunning;
      break;
    case RunEvent::kSucceed:
      if (from == S::kRunning) return S::kSucceeded;
      break;
    case RunEvent::kRetry:
      if (from == S::kRunning) return S::kRetrying;
      break;
    case RunEvent::kFail:
      if (from == S::kRunning) return S::kFailed;
      break;
    case RunEvent::kCancel:
      if (!IsFinal(from)) return S::kCancelled;
      break;
    case RunEvent::kRequeue:
      if (IsFinal(from)) return S::kQueued;
      break;
    case RunEvent::kPrune:
      if (from == S::kRunning) return S::kPruned;
      break;
    case RunEvent::kCached:
      if (from == S::kQueued) return S::kSucceeded;
      break;
  }
  return FailedPrecondition(
      fmt::format("a run that is {} cannot {}", ToString(from), ToString(event)));
}

}  // namespace drover
