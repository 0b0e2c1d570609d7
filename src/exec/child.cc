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

namespace {

ForkOutcome SpawnChild(const ChildPlan& plan, int out_fd, int err_fd) {
  ForkOutcome outcome;
  std::vector<char*> argv = Pointers(plan.argv);
  std::vector<char*> envp = Pointers(plan.env);
  SpawnPlan p;
  p.exec_path = plan.exec_path.c_str();
  p.argv = argv.data();
  p.envp = envp.data();
  p.cwd = plan.cwd.empty() ? nullptr : plan.cwd.c_str();
  p.out_fd = out_fd;
  p.err_fd = err_fd;
  if (plan.run_as.set()) {
    p.uid = plan.run_as.uid;
    p.gid = plan.run_as.gid;
    p.groups = plan.run_as.groups.data();
    p.ngroups = plan.run_as.groups.size();
  }
  SpawnOutcome o = SpawnVfork(p);
  outcome.pid = o.pid;
  outcome.err = o.err;
  // An exec that failed is reported by its errno alone (the caller says what it means).
  if (o.failed_step != nullptr && std::strcmp(o.failed_step, "exec") != 0) {
    outcome.failed_step = o.failed_step;
  }
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
