#pragma once
// The real launcher: posix_spawn into a new process group, output to files, SIGCHLD/SIGINT/SIGTERM
// taken synchronously with sigtimedwait (the constructor blocks them in the calling thread; create
// it in main() before other threads start, and keep one per process).
#include <set>

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
  std::set<int> live_;  // pids started and not yet reaped
};

}  // namespace drover
