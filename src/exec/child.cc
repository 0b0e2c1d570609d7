#include "exec/child.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "exec/shim.h"

namespace drover {

namespace {

std::vector<char*> Pointers(const std::vector<std::string>& v) {
  std::vector<char*> p;
  p.reserve(v.size() + 1);
  for (const std::string& s : v) p.push_back(const_cast<char*>(s.c_str()));
  p.push_back(nullptr);
  return p;
}

}  // namespace

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

// What a spawned child needs, prepared by its parent: the child shares the parent's memory until
// it execs (CLONE_VM | CLONE_VFORK), reads this and writes back only `err` and `step`.
struct SpawnTask {
  const char* exec_path;
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr = stay
  int out_fd;
  int err_fd;
  const RunAs* run_as;
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
  // runs directly, and cancel/timeout can kill the whole group.
  if (setpgid(0, 0) != 0) fail("setpgid");
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0) fail("opening /dev/null");
  if (devnull != 0 && dup2(devnull, 0) < 0) fail("dup2 of stdin");
  // The output files are opened by the caller (O_CLOEXEC, at 3 or above); dup2 clears CLOEXEC.
  if (dup2(t->out_fd, 1) < 0 || dup2(t->err_fd, 2) < 0) fail("dup2 of stdout and stderr");
  // Nothing else of ours leaks into the run (store, sockets, other runs' files).
  if (close_range(3, ~0U, 0) != 0) {  // missing (Linux < 5.9, some seccomp profiles)
    const long max_fd = std::min<long>(sysconf(_SC_OPEN_MAX), 1 << 16);
    for (int fd = 3; fd < max_fd; ++fd) close(fd);
  }
  if (t->run_as->set()) {
    const RunAs& r = *t->run_as;
    errno = DropTo(static_cast<uint32_t>(r.uid), static_cast<uint32_t>(r.gid), r.groups.data(),
                   r.groups.size());
    if (errno != 0) fail("taking its submitter's user and groups");
  }
  if (t->cwd != nullptr && chdir(t->cwd) != 0) fail("entering the working directory");
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(t->exec_path, t->argv, t->envp);
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

ForkOutcome SpawnChild(const ChildPlan& plan, int out_fd, int err_fd) {
  ForkOutcome outcome;
  std::vector<char*> argv = Pointers(plan.argv);
  std::vector<char*> envp = Pointers(plan.env);
  int owned_out = -1, owned_err = -1;
  SpawnTask task{plan.exec_path.c_str(),
                 argv.data(),
                 envp.data(),
                 plan.cwd.empty() ? nullptr : plan.cwd.c_str(),
                 AboveStdio(out_fd, &owned_out),
                 AboveStdio(err_fd, &owned_err),
                 &plan.run_as};
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
    // for. An exec that failed is reported by its errno alone (the caller says what it means).
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    outcome.err = task.err;
    if (std::strcmp(task.step, "exec") != 0) outcome.failed_step = task.step;
    return outcome;
  }
  outcome.pid = pid;
  return outcome;
}

ForkOutcome ForkChild(const ChildPlan& plan, int out_fd, int err_fd) {
  ForkOutcome outcome;
  // All the child needs is prepared here, so it allocates nothing (the parent may have other
  // threads, one of which may hold malloc's lock at the fork).
  std::vector<char*> argv = Pointers(plan.argv);
  std::vector<char*> envp = Pointers(plan.env);
  ShimTask task;
  if (plan.shim) {
    task.exit_path = plan.exit_path.c_str();
    task.program = plan.program.c_str();
    task.argv = argv.data();
    task.envp = envp.data();
    task.run_as = &plan.run_as;
  }
  const char* exec_path = plan.exec_path.c_str();
  const char* cwd = plan.cwd.empty() ? nullptr : plan.cwd.c_str();
  // The child reports a failed step through this pipe (errno, then the step's name); it closes
  // on exec or once the shim has taken over, so an empty read means the start went well.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    outcome.err = errno;
    outcome.failed_step = "creating a pipe";
    return outcome;
  }
  // For closing our descriptors in the child where close_range(2) is missing (Linux < 5.9,
  // some seccomp profiles): the highest descriptor there can be, taken before the fork.
  const int max_fd = static_cast<int>(std::min<long>(sysconf(_SC_OPEN_MAX), 1 << 16));
  pid_t pid = fork();
  if (pid == 0) {
    auto close_from_3 = [&](bool on_exec) {
      if (close_range(3, ~0U, on_exec ? CLOSE_RANGE_CLOEXEC : 0) == 0) return;
      for (int fd = 3; fd < max_fd; ++fd) {
        if (on_exec) {
          fcntl(fd, F_SETFD, FD_CLOEXEC);
        } else {
          close(fd);
        }
      }
    };
    auto fail = [&](int e, const char* step) {
      (void)!write(report[1], &e, sizeof e);
      (void)!write(report[1], step, strlen(step));
      _exit(127);
    };
    // The child: lead a new group, take the run's stdio and folder, then run or supervise it.
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0 && devnull != 0) {
      dup2(devnull, 0);
      close(devnull);
    }
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (plan.mount_overlay) {
      const char* step = "";
      if (int e = EnterOverlay(plan.overlay, &step, &plan.run_as); e != 0) fail(e, step);
    }
    // A run without a shim takes its submitter's rights now (the mount needed the starter's);
    // under a shim, the shim keeps them to record the end and the run drops (ShimMain).
    if (!plan.shim && plan.run_as.set()) {
      const RunAs& r = plan.run_as;
      if (int e = DropTo(static_cast<uint32_t>(r.uid), static_cast<uint32_t>(r.gid),
                         r.groups.data(), r.groups.size());
          e != 0) {
        fail(e, "taking its submitter's user and groups");
      }
    }
    // After the mount: a cwd taken before it would be the empty folder under the overlay.
    if (cwd != nullptr && chdir(cwd) != 0) fail(errno, "entering the working directory");
    if (plan.shim) {
      // Nothing of ours (store, sockets, other runs) reaches the run; the report pipe is closed
      // by the shim once its exit file names the run.
      if (report[1] != 3 && dup2(report[1], 3) < 0) fail(errno, "passing the report pipe");
      if (close_range(4, ~0U, 0) != 0) {
        for (int fd = 4; fd < max_fd; ++fd) close(fd);
      }
      task.started_fd = 3;
      ShimMain(task);
    }
    // Nothing of ours reaches the run either; the report pipe closes on exec.
    close_from_3(true);
    sigset_t none;
    sigemptyset(&none);
    for (int sig : kChildDefaultSignals) signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(exec_path, argv.data(), envp.data());
    fail(errno, "exec");
  }
  const int fork_errno = errno;
  close(report[1]);
  if (pid < 0) {
    outcome.err = fork_errno;
    outcome.failed_step = "fork";
    close(report[0]);
    return outcome;
  }
  outcome.pid = pid;
  // Both sides set the group, so it exists before anyone signals it.
  setpgid(pid, pid);
  char buf[256];
  std::string got;
  // The child's setup is a few syscalls; a mount that hangs (the store on a dead network file
  // system) must not hold the engine's loop: 30 s, then the start fails.
  const int64_t give_up = MonotonicMs() + 30'000;
  for (;;) {
    pollfd p{report[0], POLLIN, 0};
    int64_t left = give_up - MonotonicMs();
    int r = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      kill(pid, SIGKILL);
      int e = ETIMEDOUT;
      got.assign(reinterpret_cast<const char*>(&e), sizeof e);
      got += "setting up its working copy (timed out after 30 s)";
      break;
    }
    ssize_t n = read(report[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(report[0]);
  if (got.size() >= sizeof(int)) {
    std::memcpy(&outcome.err, got.data(), sizeof(int));
    outcome.failed_step = got.substr(sizeof(int));
    if (outcome.err == 0) outcome.err = EIO;
  }
  return outcome;
}

}  // namespace

int64_t MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

int64_t WallMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

bool ReadProcStat(int pid, char* state, int64_t* start_ticks) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so start after the last ')'.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;
  int field = 2;
  char* save = nullptr;
  for (char* tok = strtok_r(p, " ", &save); tok != nullptr; tok = strtok_r(nullptr, " ", &save)) {
    ++field;
    if (field == 3) *state = tok[0];
    if (field == 22) {
      *start_ticks = std::strtoll(tok, nullptr, 10);
      return true;
    }
  }
  return false;
}

int64_t BootTicks() {
  static const long ns_per_tick = [] {
    const long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 && 1'000'000'000L % hz == 0 ? 1'000'000'000L / hz : 0L;
  }();
  timespec ts;
  if (ns_per_tick == 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return -1;
  return (int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec) / ns_per_tick;
}

ForkOutcome StartChild(const ChildPlan& plan, int out_fd, int err_fd) {
  const int64_t before = BootTicks();
  ForkOutcome outcome = plan.shim || plan.mount_overlay ? ForkChild(plan, out_fd, err_fd)
                                                        : SpawnChild(plan, out_fd, err_fd);
  if (outcome.err != 0 || outcome.pid <= 0) return outcome;
  const int64_t after = BootTicks();
  if (before >= 0 && before == after) {
    outcome.start_ticks = before;
  } else {
    // The start straddled a tick (about one start in thirty): ask the kernel.
    char state = 0;
    int64_t ticks = 0;
    if (ReadProcStat(outcome.pid, &state, &ticks)) outcome.start_ticks = ticks;
  }
  return outcome;
}

}  // namespace drover
