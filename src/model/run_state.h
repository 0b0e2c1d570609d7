#pragma once
// The run state machine, in pure code: which transitions are legal.
#include "common/status.h"
#include "model/run.h"

namespace drover {

enum class RunEvent {
  kStart,    // an attempt is launched (queued|retrying -> running)
  kSucceed,  // the attempt exited 0 (running -> succeeded)
  kRetry,    // the attempt failed and another is due (running -> retrying)
  kFail,     // the attempt failed and no retry is left (running -> failed)
  kCancel,   // the user cancelled (any non-final -> cancelled)
  kRequeue,  // the user retries a finished run (succeeded|failed|cancelled|pruned -> queued)
  kPrune,    // the prune rule stopped the attempt (running -> pruned)
  kCached,   // a run with its fingerprint succeeded before and stands for it (queued -> succeeded)
};
std::string_view ToString(RunEvent e);

// The state after `event`, or an error naming the illegal transition.
Result<RunState> Transition(RunState from, RunEvent event);

}  // namespace drover
