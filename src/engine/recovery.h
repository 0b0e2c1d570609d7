#pragma once
// What an attempt's end means and what happens next: pure functions, unit-tested without
// processes.
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "model/run.h"
#include "model/run_state.h"
#include "model/spec.h"

namespace drover {

// True when the text (the last lines of stderr) shows a CUDA out-of-memory error.
bool LooksLikeCudaOom(std::string_view stderr_tail);

// How a process ended that the engine did not stop (an attempt the engine stopped ends for that
// StopReason: OutcomeOf in model/run.h).
struct ExitFacts {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string_view stderr_tail;
};
AttemptOutcome ClassifyExit(const ExitFacts& facts);

// What the run's state machine does next (model/run_state.h): succeed, retry, fail or cancel.
struct Recovery {
  RunEvent event = RunEvent::kFail;
  Millis delay_ms = 0;           // for kRetry: wait this long before the next attempt
  Json next_params;              // for kRetry: the parameters of the next attempt
  bool counts_as_retry = false;  // consumes one of spec.retries (OOM halving does not)
  std::string note;              // why, for the event log and the user ("batch_size 512 -> 256")
};

// `params` are the parameters the ended attempt ran with; `retries_used` how many of
// spec.retries are spent.
// Outcomes that say the config itself is broken (an exit code, a signal, a timeout, a stall, a
// divergence, a launch error) count towards a streak of failures. An OOM is answered by a
// smaller batch; an interruption, a preemption or a cancel says nothing about the config: they
// neither count nor break a streak. A success ends one. Shared by the repeated-failure alert and
// the run's own failures in a row.
enum class Streak { kFailure, kNeutral, kBreaks };
Streak StreakOf(std::optional<AttemptOutcome> outcome);

Recovery DecideRecovery(const Spec& spec, const Json& params, int retries_used,
                        AttemptOutcome outcome);

}  // namespace drover
