#pragma once
// The real launcher: posix_spawn into a new process group, output to files,
// SIGCHLD/SIGINT/SIGTERM/SIGHUP taken synchronously with sigtimedwait (the constructor blocks them
// in the calling thread; create it in main() before other threads start, and keep one per process).
#include <signal.h>

#include <set>
#include <vector>

#include "exec/process_launcher.h"

namespace drover {

class PosixLauncher : public ProcessLauncher {
 public:
  PosixLauncher();
  ~PosixLauncher() override;
  Result<int> Start(const LaunchSpec& spec) override;
  void SignalGroup(int pgid, int sig) override;
  WaitResult Wait(int64_t timeout_ms) override;

 private:
  // Reaps every ended pid of live_ (killing the rest of its group first) into `exits`.
  void Reap(std::vector<ProcessExit>* exits);

  std::set<int> live_;  // pids started and not yet reaped
  sigset_t old_mask_;   // the calling thread's mask before the constructor, restored after
};

}  // namespace drover
