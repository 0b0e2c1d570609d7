#pragma once
// Runs a short helper program (git, python -c, nvidia-smi) without a shell and captures its
// stdout. It waits for its own pid only, so it works beside the launcher (whose blocked SIGCHLD
// is simply left pending and ignored by its Wait loop) and never reaps a run's process.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover {

struct Captured {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;     // everything written to stdout
};

struct CaptureOptions {
  std::string cwd;                     // "" = ours
  std::vector<std::string> unset_env;  // names removed from our environment
  std::vector<std::string> set_env;    // "K=V" added after that
  bool clean_env = false;              // none of our environment: set_env alone
  // > 0: a helper still running after this long is killed (SIGKILL) and the call fails as
  // Unavailable. For tools that can hang (nvidia-smi on a wedged driver).
  int64_t timeout_ms = 0;
  // > 0: a helper that prints more than this is killed and the call fails as Unavailable, so a
  // runaway helper cannot fill our memory.
  int64_t max_output_bytes = 64LL * 1024 * 1024;
  // Set: stdout is handed to it as it arrives instead of being kept (max_output_bytes does not
  // apply). Returning false kills the helper's group and the call fails as Cancelled.
  std::function<bool(std::string_view)> on_output;
  // Set: asked about ten times a second while the helper runs; true kills the helper's group and
  // the call fails as Cancelled (its owner is stopping: a daemon does not wait out a listing).
  std::function<bool()> stop;
};

// stdin and stderr are /dev/null; argv[0] is looked up in PATH. A missing program is NotFound.
// The helper leads its own process group; a timeout or too much output kills the group. It is
// killed (SIGKILL) if the calling thread or drover dies first, so no helper outlives a daemon.
Result<Captured> RunAndCapture(const std::vector<std::string>& argv,
                               const CaptureOptions& options = {});

}  // namespace drover
