#pragma once
// The real launcher: spawned (exec/child.h) into a new process group, output to files,
// SIGCHLD/SIGINT/SIGTERM/SIGHUP taken synchronously through a signalfd (the constructor blocks
// them in the calling thread; create it in main() before other threads start, and keep one per
// process). With LaunchSpec::exit_path set, the run outlives the engine and its end is recorded in
// that file: by the supervisor (exec/supervisor.h) that started it, or by a shim (exec/shim.h)
// that leads its group.
#include <signal.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exec/child.h"
#include "exec/process_launcher.h"

namespace drover {

class Supervisor;

class PosixLauncher : public ProcessLauncher {
 public:
  // kSupervised: runs with an exit_path are started and watched by a supervisor process
  // (exec/supervisor.h) forked now, while the caller is still small and single-threaded; if it
  // cannot be forked or goes away, by shims as with kStandalone.
  enum class Mode { kStandalone, kSupervised };
  explicit PosixLauncher(Mode mode = Mode::kStandalone);
  ~PosixLauncher() override;
  Result<ExecHandle> Start(const LaunchSpec& spec) override;
  // With a supervisor, runs that outlive us (an exit_path) are handed to it and their outcome
  // read by Wait(); other starts happen at once and are reported the same way.
  bool StartsInBackground() const override;
  Result<int64_t> BeginStart(const LaunchSpec& spec) override;
  void Stop(ExecHandle attempt, StopSignal how) override;  // SIGTERM or SIGKILL to its group
  WaitResult Wait(int64_t timeout_ms) override;
  int64_t Identity(ExecHandle attempt) override;
  std::optional<std::string> EnvOf(ExecHandle attempt, const std::string& name) override;
  // Its process group's leader, for any process of this machine (an attempt's or not).
  std::optional<ExecHandle> OwnerOf(int64_t pid) override;
  void Adopt(ExecHandle attempt, int64_t identity, const ExitRecordAt& record) override;

  // The pid a handle of this launcher is (its group leader's); -1 for one no process of this
  // machine can have (a Slurm job id of a store that moved executors, 0, 1 or past pid_t).
  static int PidOf(ExecHandle attempt) {
    return attempt.id > 1 && attempt.id <= INT32_MAX ? static_cast<int>(attempt.id) : -1;
  }
  // This machine's side, under the handles (a handle here is its group leader's pid):
  // Sends `sig` to the whole process group (an adopted one only while its leader is the process
  // adopted). Harmless if it has already ended.
  void SignalGroup(int pgid, int sig);
  // The start time of process `pid` (field 22 of /proc/<pid>/stat), 0 when there is none.
  int64_t StartTicks(int pid);
  void Wake() override;  // through an eventfd that Wait() polls

  // By default the shim is a fork() of this process (ShimMain, no exec: cheap per run). With this,
  // the given drover binary is exec'd in `__shim` mode instead, and no supervisor is used; tests
  // cover every way.
  void SetShimBinary(std::string path);
  const std::string& shim_binary() const { return shim_argv0_; }
  // Whether runs are started by a supervisor (false once it is gone).
  bool has_supervisor() const;
  int supervisor_pid() const;  // -1 without one

  // How long a program's PATH look-up is kept (Resolve).
  static constexpr int64_t kResolvedMs = 1'000;
  // Adopted shims send no SIGCHLD: while any is watched, Wait() looks at them this often.
  static constexpr int64_t kAdoptedPollMs = 100;
  // An adopted pid that is a zombie with no end in its exit file yet (its supervisor writes the
  // end before it reaps it): how long to wait for the end before reporting the run lost.
  static constexpr int64_t kZombieGraceMs = 5'000;

 private:
  struct Adopted {
    int64_t start_ticks = 0;
    ExitRecordAt record;
    int64_t zombie_since_ms = 0;  // monotonic; 0: not seen as a zombie
  };
  struct Supervised {
    ExitRecordAt record;
    int64_t start_ticks = 0;
  };
  // Reaps every ended pid of live_ (killing the rest of its group first) into `exits`.
  void Reap(std::vector<ProcessExit>* exits);
  // Reports every adopted shim that is gone into `exits`.
  void CheckAdopted(std::vector<ProcessExit>* exits);
  // Reports the ends the supervisor sent into `exits`; when it is gone, its runs are adopted.
  void TakeSupervised(std::vector<ProcessExit>* exits);
  void SupervisorLost();
  // What every start needs, checked and made: the program found, the working copy's mount
  // prepared, the output files open (closed by the caller).
  Status PlanStart(const LaunchSpec& spec, ChildPlan* plan, int* out_fd, int* err_fd);
  // Why a start failed, from the errno and the step of the child's setup that failed.
  Status StartError(const std::string& prog, int err, const std::string& failed_step,
                    bool overlay, bool shim) const;
  // Pairs the supervisor's answers with the launches handed to it, into ready_.
  void MatchAnswers();
  // FindProgram through a short-lived cache: a sweep starts the same program thousands of times,
  // and a long PATH costs a stat per entry per launch.
  std::string Resolve(const std::string& prog, std::string_view path, const std::string& cwd);

  struct Child {
    std::string exit_path;  // "": no shim
    int64_t start_ticks = 0;
  };
  std::map<int, Child> live_;        // pids started and not yet reaped
  std::map<int, Adopted> adopted_;   // adopted shims not yet reported
  std::vector<ProcessExit> foreign_ends_;  // adopted handles no process here can have (Adopt)
  std::map<int, Supervised> supervised_;  // runs the supervisor watches, not yet reported
  struct Resolved {
    std::string program;
    int64_t until_ms = 0;  // monotonic
  };
  // "<prog>\0<PATH>" -> where it was found, for PATHs of absolute folders only (a relative one
  // depends on the run's cwd). Kept 1 s: a program installed earlier in PATH meanwhile is seen
  // a second later, as with a shell's hash table but sooner.
  std::unordered_map<std::string, Resolved> resolved_;
  std::string shim_path_;            // what is spawned as the shim
  std::string shim_argv0_;           // its argv[0]: the binary's real path
  bool exec_shim_ = false;           // exec shim_path_ (SetShimBinary) instead of forking
  std::unique_ptr<Supervisor> supervisor_;  // null: none (or it is gone)
  struct Pending {  // a launch handed to the supervisor, not answered yet
    int64_t ticket = 0;
    ExitRecordAt record;
    std::string program;
    bool overlay = false;
    int64_t sent_ms = 0;  // monotonic
  };
  std::deque<Pending> pending_;        // oldest first: answers come in this order
  std::vector<StartOutcome> ready_;    // starts Wait() has still to report
  int64_t next_ticket_ = 1;
  int signal_fd_ = -1;  // the waited signals, read in Wait()
  int wake_fd_ = -1;    // an eventfd: Wake() from another thread
  sigset_t old_mask_;   // the calling thread's mask before the constructor, restored after
};

}  // namespace drover
