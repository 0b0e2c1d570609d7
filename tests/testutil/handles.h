#pragma once
// Tests of the local launcher and the exec layer speak of pids: on this machine an attempt's
// handle is its process group leader's pid (exec/process_launcher.h, ExecHandle).
#include "common/status.h"
#include "exec/process_launcher.h"

namespace drover::testing {

inline Result<int> PidOf(Result<ExecHandle> started) {
  if (!started.ok()) return started.status();
  return static_cast<int>(started->id);
}

}  // namespace drover::testing
