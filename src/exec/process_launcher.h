#pragma once
// Starting and stopping run processes. Each run is its own process group (so Ctrl-C at the
// terminal does not reach it, and a timeout or cancel kills it with all its children). The engine
// uses this interface; tests above the executor use a fake (tests/testutil/fake_launcher.h).
#include <string>
#include <vector>

#include "common/status.h"

namespace drover {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // the complete environment, "KEY=VALUE"
  std::string cwd;
  std::string stdout_path;  // created/truncated; the child's stdout
  std::string stderr_path;  // created/truncated; the child's stderr
};

struct ProcessExit {
  int pid = 0;         // == the process group id
  int exit_code = -1;  // when it exited normally
  int signal = 0;      // when a signal killed it
};

struct WaitResult {
  std::vector<ProcessExit> exits;
  int interrupt_signal =
      0;  // SIGINT/SIGTERM/SIGHUP received by drover itself while waiting, else 0
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts the process as the leader of a new process group; returns its pid (== pgid).
  virtual Result<int> Start(const LaunchSpec& spec) = 0;
  // Sends `sig` to the whole process group. Harmless if it has already ended.
  virtual void SignalGroup(int pgid, int sig) = 0;
  // Waits up to timeout_ms for a started process to end or for an interrupt; returns every exit
  // collected (leftover members of an ended leader's group are killed, so no orphans remain).
  virtual WaitResult Wait(int64_t timeout_ms) = 0;
};

}  // namespace drover
