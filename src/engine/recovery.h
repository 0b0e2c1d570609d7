#pragma once
// What an attempt's end means and what happens next: pure functions, unit-tested without
// processes.
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
Recovery DecideRecovery(const Spec& spec, const Json& params, int retries_used,
                        AttemptOutcome outcome);

}  // namespace drover
