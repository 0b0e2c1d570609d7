#pragma once
// The real launcher: posix_spawn into a new process group, output to files,
// SIGCHLD/SIGINT/SIGTERM/SIGHUP taken synchronously with sigtimedwait (the constructor blocks them
// in the calling thread; create it in main() before other threads start, and keep one per process).
// With LaunchSpec::exit_path set, the group's leader is a shim (src/exec/shim.h) that starts the
// run, outlives the engine and records the run's end in that file.
#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/process_launcher.h"

namespace drover {

class Spawner;

class PosixLauncher : public ProcessLauncher {
 public:
  // Where runs that need a fork (a shim, an overlay) are forked from: this process, or a spawner
  // (exec/spawner.h) forked now, while the caller is still small and single-threaded.
  enum class ForkFrom { kThisProcess, kSpawner };
  explicit PosixLauncher(ForkFrom fork_from = ForkFrom::kThisProcess);
  ~PosixLauncher() override;
  Result<int> Start(const LaunchSpec& spec) override;
  void SignalGroup(int pgid, int sig) override;
  WaitResult Wait(int64_t timeout_ms) override;
  int64_t StartTicks(int pid) override;
  int GroupOf(int pid) override;
  void Adopt(int pid, int64_t start_ticks, const std::string& exit_path) override;

  // By default the shim is a fork() of this process (ShimMain, no exec: cheap per run). With this,
  // the given drover binary is exec'd in `__shim` mode instead; tests cover both ways.
  void SetShimBinary(std::string path);
  const std::string& shim_binary() const { return shim_argv0_; }
  // Whether runs are forked by a spawner (it may be gone: then by this process again).
  bool has_spawner() const { return spawner_ != nullptr; }
  int spawner_pid() const;  // -1 without one

  // Adopted shims send no SIGCHLD: while any is watched, Wait() looks at them this often.
  static constexpr int64_t kAdoptedPollMs = 100;

 private:
  struct Adopted {
    int64_t start_ticks = 0;
    std::string exit_path;
  };
  // Reaps every ended pid of live_ (killing the rest of its group first) into `exits`.
  void Reap(std::vector<ProcessExit>* exits);
  // Reports every adopted shim that is gone into `exits`.
  void CheckAdopted(std::vector<ProcessExit>* exits);

  std::map<int, std::string> live_;  // pids started and not yet reaped -> exit_path ("": no shim)
  std::map<int, Adopted> adopted_;   // adopted shims not yet reported
  std::string shim_path_;            // what is spawned as the shim
  std::string shim_argv0_;           // its argv[0]: the binary's real path
  bool exec_shim_ = false;
  std::unique_ptr<Spawner> spawner_;  // null: fork from this process           // exec shim_path_ (SetShimBinary) instead of forking
  sigset_t old_mask_;  // the calling thread's mask before the constructor, restored after
};

}  // namespace drover
