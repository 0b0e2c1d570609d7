#include "common/spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace drover {

// No sanitizer instrumentation: SpawnEntry calls it on a stack the sanitizers do not know.
__attribute__((no_sanitize("address", "undefined"))) int DropTo(uint32_t uid, uint32_t gid,
                                                                  const uint32_t* groups,
                                                                  size_t ngroups) {
  static_assert(sizeof(gid_t) == sizeof(uint32_t));
  if (syscall(SYS_setgroups, ngroups, groups) != 0) return errno;
  if (syscall(SYS_setresgid, gid, gid, gid) != 0) return errno;
  if (syscall(SYS_setresuid, uid, uid, uid) != 0) return errno;
  return 0;
}

namespace {

// The plan and what the child writes back (it shares our memory until it execs): only `err`
// and `step`.
struct SpawnTask {
  const SpawnPlan* plan;
  int out_fd;
  int err_fd;
  int err = 0;
  const char* step = nullptr;
};

// The spawned child, on its own stack. glibc's posix_spawn does the same steps but first asks the
// kernel for the disposition of every signal (64 rt_sigaction calls and more, a tenth of a short
// run's start on a VM); drover itself catches only signals that are reset here, and nothing can
// signal the child before it execs (it leads a new group, and its pid is known to no one yet),
// so only these six are reset. No sanitizer instrumentation: it runs on a stack the sanitizers
// do not know, with the parent suspended.
__attribute__((no_sanitize("address", "undefined"))) int SpawnEntry(void* arg) {
  auto* t = static_cast<SpawnTask*>(arg);
  const SpawnPlan& p = *t->plan;
  auto fail = [t](const char* step) {
    t->err = errno != 0 ? errno : EIO;
    t->step = step;
    _exit(127);
  };
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig : kChildDefaultSignals) sigaction(sig, &dfl, nullptr);
  // Its own process group (it leads a new one), so Ctrl-C at the terminal reaches drover, not the
  // child directly, and cancel/timeout can kill the whole group.
  if (setpgid(0, 0) != 0) fail("setpgid");
  // Set before the rights change would clear it only for a set-user-ID program; DropTo keeps it
  // (the kernel clears it on a change of credentials, so it is set again after).
  if (p.die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail("prctl");
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0) fail("opening /dev/null");
  if (devnull != 0 && dup2(devnull, 0) < 0) fail("dup2 of stdin");
  // The output descriptors are at 3 or above (O_CLOEXEC); dup2 clears CLOEXEC.
  if (dup2(t->out_fd, 1) < 0 || dup2(t->err_fd, 2) < 0) fail("dup2 of stdout and stderr");
  // Nothing else of ours leaks into the child (store, sockets, other runs' files).
  if (close_range(3, ~0U, 0) != 0) {  // missing (Linux < 5.9, some seccomp profiles)
    const long max_fd = std::min<long>(sysconf(_SC_OPEN_MAX), 1 << 16);
    for (int fd = 3; fd < max_fd; ++fd) close(fd);
  }
  if (p.uid >= 0) {
    errno = DropTo(static_cast<uint32_t>(p.uid), static_cast<uint32_t>(p.gid), p.groups,
                   p.ngroups);
    if (errno != 0) fail("taking its submitter's user and groups");
    if (p.die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail("prctl");
  }
  if (p.cwd != nullptr && chdir(p.cwd) != 0) fail("entering the working directory");
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(p.exec_path, p.argv, p.envp);
  fail("exec");
  return 127;
}

// A descriptor at 3 or above for the child's stdout or stderr (a caller whose own stdio is
// closed can get 0 to 2 from open).
int AboveStdio(int fd, int* owned) {
  if (fd >= 3) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return fd;
  *owned = moved;
  return moved;
}

}  // namespace

SpawnOutcome SpawnVfork(const SpawnPlan& plan) {
  SpawnOutcome outcome;
  int owned_out = -1, owned_err = -1;
  SpawnTask task{&plan, AboveStdio(plan.out_fd, &owned_out), AboveStdio(plan.err_fd, &owned_err)};
  // The child's stack, one per thread that spawns, kept: the child is done with it once clone
  // returns (it has exec'd or exited).
  constexpr size_t kStack = 64 * 1024;
  thread_local std::unique_ptr<char[]> stack;
  if (!stack) stack.reset(new char[kStack]);
  char* top = stack.get() + kStack;
  top -= reinterpret_cast<uintptr_t>(top) % 64;
  // No signal handler of ours may run in the child while it shares our memory: every signal is
  // blocked from before the clone until the child has reset its dispositions and exec'd.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = clone(SpawnEntry, top, CLONE_VM | CLONE_VFORK | SIGCHLD, &task);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (owned_out >= 0) close(owned_out);
  if (owned_err >= 0) close(owned_err);
  if (pid < 0) {
    outcome.err = clone_errno;
    outcome.failed_step = "clone";
    return outcome;
  }
  if (task.err != 0) {
    // It exited before exec: reaped here, as posix_spawn does, so the caller has no pid to wait
    // for.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    outcome.err = task.err;
    outcome.failed_step = task.step;
    return outcome;
  }
  outcome.pid = pid;
  return outcome;
}

}  // namespace drover
