#pragma once
// The supervisor: a small helper process that starts the daemon's runs, waits for them and
// records how each ended, so runs outlive the daemon (docs/execution.md, "Shim and adoption").
//
// It does for every run what a shim (exec/shim.h) does for one, without a process per run: the
// daemon forks it once, first thing, while the daemon is still small and has one thread, and
// asks it to start each run; it spawns the run (StartChild: a vfork, nothing of its memory is copied)
// as the leader of the run's own group, writes the exit file's start line ("<pid> <start
// ticks>"), and when the run's leader ends it kills the rest of the group, tells the daemon,
// appends the end line (the shim's format, so ReadExitFile and adoption read it unchanged) and
// reaps it. Forking the daemon itself for a shim per run cost a copy of its page tables and then
// copy-on-write faults in the daemon for every page it wrote while shims shared them
// (bench/README.md, "Launch throughput").
//
// Requests and answers go over a Unix socket pair: a ChildPlan (child.h) encoded as
// length-prefixed strings with the run's stdout and stderr attached (SCM_RIGHTS), answered with
// the run's pid and start ticks or the errno and step that failed; ends arrive as messages of
// their own. When the daemon goes (its end of the socket closes), the supervisor goes on
// watching the runs it started, writing their exit files, and exits after the last one: a
// restarted daemon adopts those runs as it adopts shims. If the supervisor dies, the runs it
// watched become adopted ones (their end is lost unless recorded), and the launcher uses shims.
#include <sys/types.h>

#include <deque>
#include <memory>
#include <string>

#include "common/status.h"
#include "exec/child.h"
#include "exec/process_launcher.h"

namespace drover {

class Supervisor {
 public:
  // Forks the supervisor now. Call it while the process is small and single-threaded (the
  // PosixLauncher that owns it is made first thing in `drover serve`), with SIGCHLD blocked.
  static Result<std::unique_ptr<Supervisor>> Start();
  // Closes the socket. The supervisor exits at once when it watches no run (it is then reaped
  // here), or after its last run ends.
  ~Supervisor();

  struct Started {
    ForkOutcome outcome;      // pid, or err and failed_step
    int64_t start_ticks = 0;  // of the run's pid, as written in its exit file
  };
  // Hands `plan` over (its exit_path is where the end is recorded) without waiting for the
  // answer: answers come in the order of the requests (TakeAnswers). An error Status means the
  // supervisor is gone (it is stopped if it was not): `delivered` then says whether it may have
  // had the request, and so may have started the run (its exit file's start line says).
  // A request over kMaxRequestBytes is refused (InvalidArgument) before anything is sent: the
  // supervisor goes on.
  Status Send(const ChildPlan& plan, int out_fd, int err_fd, bool* delivered);

  // Readable when an answer or an end has arrived.
  int fd() const { return fd_; }
  // Reads what has arrived (without blocking) and moves the ends read so far into `ends`. False
  // when the supervisor is gone.
  bool TakeEnds(std::vector<ProcessExit>* ends);
  // Moves the answers read so far into `answers`, oldest first.
  void TakeAnswers(std::vector<Started>* answers);
  // Reads one message, waiting up to `timeout_ms` for it. False when none came (the supervisor
  // is then taken as stuck and stopped) or it is gone.
  bool ReadMessage(int timeout_ms);
  // How long an answer may take: a forked run gives up on its own setup after 30 s (child.h),
  // so a supervisor silent for longer is stuck.
  static constexpr int kAnswerTimeoutMs = 40'000;
  bool gone() const { return fd_ < 0; }
  // Stops it: it broke the protocol or is stuck (its runs are then watched as adopted ones).
  void Stop() { Lost(); }
  pid_t pid() const { return pid_; }

  // The encoding of a plan, exposed for tests.
  static std::string Encode(const ChildPlan& plan);
  static Result<ChildPlan> Decode(const std::string& bytes);

  // The largest request (argv and environment together): the kernel's own limit for exec is
  // lower, so a run that does not fit could not start anyway.
  static constexpr size_t kMaxRequestBytes = 8 << 20;

 private:
  Supervisor(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  void Close();  // our end of the socket: the supervisor goes on with its runs
  void Lost();   // closed and stopped: it is not trusted any more
  pid_t pid_ = -1;
  int fd_ = -1;
  std::deque<ProcessExit> ends_;  // read, not yet taken
  std::deque<Started> answers_;   // read, not yet taken
};

}  // namespace drover
