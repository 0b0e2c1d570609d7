#include "exec/posix_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "exec/child.h"
#include "exec/shim.h"
#include "exec/spawner.h"

extern char** environ;

namespace drover {

namespace {

// Signals the launcher takes synchronously in Wait().
sigset_t WaitedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal or a dropped ssh session: stop runs cleanly
  return set;
}

int64_t MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

// The PATH the child will see: its own env's PATH when the spec sets one, else ours.
std::string_view ChildPath(const std::vector<std::string>& env) {
  for (const std::string& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) return std::string_view(kv).substr(5);
  }
  const char* p = getenv("PATH");
  return p ? std::string_view(p) : std::string_view("/usr/local/bin:/usr/bin:/bin");
}

// Field 3 (state) and field 22 (start time) of /proc/<pid>/stat; false when there is no such
// process. Read with one read() into a stack buffer: Wait() calls it for every adopted shim.
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

Status OpenOutput(const std::string& path, int* fd) {
  if (path.empty()) {
    *fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  } else {
    *fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (*fd < 0) return ErrnoStatus("cannot open output file '" + path + "'");
  return Status::Ok();
}

}  // namespace

PosixLauncher::PosixLauncher(ForkFrom fork_from) {
  // SIGCHLD, SIGINT, SIGTERM and SIGHUP are taken synchronously with sigtimedwait() in Wait(), so
  // no handler runs at an awkward moment and a child ending between a reap and the wait is never
  // missed (its SIGCHLD stays pending).
  sigset_t set = WaitedSignals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  // The shim is this very binary. It is spawned through /proc/self/exe, which stays our image
  // even when the file is replaced or deleted while drover runs; its argv[0] is the real path.
  shim_path_ = "/proc/self/exe";
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  shim_argv0_ = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("drover");
  if (fork_from == ForkFrom::kSpawner) {
    // Without one, runs are forked from this process: slower, the same otherwise.
    if (auto spawner = Spawner::Start(); spawner.ok()) spawner_ = std::move(*spawner);
  }
}

void PosixLauncher::SetShimBinary(std::string path) {
  // It is exec'd after the chdir into the run's working directory: make a relative path absolute.
  if (!path.empty() && path[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) != nullptr) path = std::string(cwd) + "/" + path;
  }
  shim_path_ = path;
  shim_argv0_ = std::move(path);
  exec_shim_ = true;
}

int PosixLauncher::spawner_pid() const { return spawner_ ? static_cast<int>(spawner_->pid()) : -1; }

PosixLauncher::~PosixLauncher() {
  // Runs still going are left alone: ending them is the engine's decision, not the destructor's.
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

Result<int> PosixLauncher::Start(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgument("cannot start a run with an empty command");
  }
  const std::string& prog = spec.argv[0];
  if (!spec.cwd.empty()) {
    struct stat st;
    if (stat(spec.cwd.c_str(), &st) != 0) {
      return Status(Code::kIo, "cannot start '" + prog + "': working directory '" + spec.cwd +
                                   "': " + std::strerror(errno) + "; check the run's workdir");
    }
    if (!S_ISDIR(st.st_mode)) {
      return Status(Code::kIo, "cannot start '" + prog + "': working directory '" + spec.cwd +
                                   "' is not a directory; check the run's workdir");
    }
  }
  // An overlay's mount point is empty until the run mounts it: look in the snapshot instead.
  std::string resolved =
      FindProgram(prog, ChildPath(spec.env), spec.overlay.empty() ? spec.cwd : spec.overlay.lower);
  PreparedOverlay overlay;
  if (!spec.overlay.empty()) {
    auto prepared = PrepareOverlay(spec.overlay, spec.cwd);
    if (!prepared.ok()) {
      return Status(Code::kIo, "cannot start '" + prog +
                                   "': its working copy: " + prepared.status().message());
    }
    overlay = std::move(*prepared);
  }
  if (resolved.empty()) {
    return Status(Code::kNotFound, "cannot start '" + prog +
                                       "': No such file or directory; check the command's "
                                       "program name and PATH");
  }

  int out_fd = -1, err_fd = -1;
  DROVER_RETURN_IF_ERROR(OpenOutput(spec.stdout_path, &out_fd));
  if (!spec.stderr_path.empty() && spec.stderr_path == spec.stdout_path) {
    err_fd = out_fd;  // one file description, so the two streams append rather than overwrite
  } else if (Status s = OpenOutput(spec.stderr_path, &err_fd); !s.ok()) {
    close(out_fd);
    return s;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // The output files are opened here (O_CLOEXEC) rather than with addopen in the child, so a bad
  // path is reported as such instead of as an anonymous spawn error; dup2 clears CLOEXEC.
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  // Nothing else of ours leaks into the run (store, sockets, other runs' pipes).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Put the child in its own process group (pgroup 0: it leads a new one), so Ctrl-C at the
  // terminal reaches drover, not the runs directly, and cancel/timeout can kill the whole group.
  // The child must not inherit our blocked mask, nor any disposition we set for these signals.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  // Under a shim: `<drover> __shim <exit_path> -- <argv...>` leads the group instead, and starts
  // the run in it. An exit file left from before (a reused path) must not be taken for this run's.
  const bool shim = !spec.exit_path.empty();
  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 5);
  if (shim) {
    unlink(spec.exit_path.c_str());
    argv.push_back(const_cast<char*>(shim_argv0_.c_str()));
    argv.push_back(const_cast<char*>("__shim"));
    argv.push_back(const_cast<char*>(spec.exit_path.c_str()));
    argv.push_back(const_cast<char*>("--"));
  }
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(spec.env.size() + 1);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = 0;
  int err = 0;
  std::string failed_step;  // what the forked child could not do
  const bool fork_shim = shim && !exec_shim_;
  if (fork_shim || !spec.overlay.empty()) {
    // Forked rather than spawned: the shim lives as long as the run, so it cannot be a vfork,
    // and it is a fork of drover, not a new exec of it (loading drover's libraries for every run
    // would cost more than the run itself for short runs: bench/README.md); an overlay is mounted
    // in the child's own mount namespace before exec. The spawner forks it when there is one.
    ChildPlan plan;
    plan.shim = fork_shim;
    plan.exit_path = spec.exit_path;
    plan.program = resolved;
    plan.exec_path = shim ? shim_path_ : resolved;
    // Under the shim the run's own argv (the shim starts it); exec'd, the whole argv above.
    if (fork_shim) {
      plan.argv = spec.argv;
    } else {
      for (size_t i = 0; i + 1 < argv.size(); ++i) plan.argv.emplace_back(argv[i]);
    }
    plan.env = spec.env;
    plan.cwd = spec.cwd;
    plan.mount_overlay = !spec.overlay.empty();
    plan.overlay = std::move(overlay);
    ForkOutcome outcome;
    bool forked = false;
    if (spawner_ != nullptr) {
      if (Result<ForkOutcome> r = spawner_->Fork(plan, out_fd, err_fd); r.ok()) {
        outcome = std::move(*r);
        forked = true;
      } else {
        spawner_.reset();  // gone: fork by ourselves from now on
      }
    }
    if (!forked) outcome = ForkChild(plan, out_fd, err_fd, /*clone_parent=*/false);
    pid = outcome.pid;
    err = outcome.err;
    failed_step = std::move(outcome.failed_step);
    if (err != 0 && pid > 0) {
      // The child exited after reporting (or was killed): reap it, it is not a run.
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  } else {
    // glibc reports failures of the child's setup (chdir, dup2) and of exec through the return
    // value (it spawns with CLONE_VFORK and passes the errno back), so no error is lost.
    err = posix_spawn(&pid, shim ? shim_path_.c_str() : resolved.c_str(), &actions, &attr,
                      argv.data(), envp.data());
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_fd);
  if (err_fd != out_fd) close(err_fd);
  if (err != 0 && !failed_step.empty() && failed_step != "exec") {
    return Status(
        Code::kIo,
        "cannot start '" + prog + "': " + failed_step + ": " + std::strerror(err) +
            (spec.overlay.empty() ? std::string()
                                  : "; set DROVER_WORKING_COPY=copy to copy working copies "
                                    "instead of mounting them"));
  }
  if (err != 0 && shim) {
    return Status(Code::kIo, "cannot start '" + prog + "': starting its supervisor '" +
                                 shim_argv0_ + " __shim' failed: " + std::strerror(err));
  }
  if (err != 0) {
    return Status(err == ENOENT ? Code::kNotFound : Code::kIo,
                  "cannot start '" + prog + "': " + std::strerror(err) +
                      "; check the command's program name and PATH");
  }
  live_.emplace(pid, spec.exit_path);
  return static_cast<int>(pid);
}

void PosixLauncher::SignalGroup(int pgid, int sig) {
  // pgid 0 or 1 would signal our own group or everything: never a run.
  if (pgid <= 1) return;
  if (auto it = adopted_.find(pgid); it != adopted_.end()) {
    // Not our child, so no zombie holds its pid: signal the group only while the shim that leads
    // it is the process we adopted. Once it is gone, Wait() reports it.
    char state = 0;
    int64_t ticks = 0;
    if (!ReadProcStat(pgid, &state, &ticks) || ticks != it->second.start_ticks) return;
  }
  kill(-pgid, sig);  // ESRCH: the group has already ended, which is fine
}

int64_t PosixLauncher::StartTicks(int pid) {
  char state = 0;
  int64_t ticks = 0;
  if (pid <= 0 || !ReadProcStat(pid, &state, &ticks)) return 0;
  return ticks;
}

int PosixLauncher::GroupOf(int pid) {
  if (pid <= 0) return -1;
  pid_t g = getpgid(pid);
  return g < 0 ? -1 : static_cast<int>(g);
}

void PosixLauncher::Adopt(int pid, int64_t start_ticks, const std::string& exit_path) {
  adopted_[pid] = Adopted{start_ticks, exit_path};
}

void PosixLauncher::CheckAdopted(std::vector<ProcessExit>* exits) {
  for (auto it = adopted_.begin(); it != adopted_.end();) {
    const int pid = it->first;
    char state = 0;
    int64_t ticks = 0;
    // A zombie has ended too (its parent, the engine that died, is gone, and whoever inherited it
    // may be slow to reap it, or never do it).
    const bool exists = ReadProcStat(pid, &state, &ticks);
    const bool same = exists && it->second.start_ticks != 0 && ticks == it->second.start_ticks;
    const bool alive = same && state != 'Z' && state != 'X';
    if (alive) {
      ++it;
      continue;
    }
    ProcessExit exit;
    if (Result<ProcessExit> recorded = ReadExitFile(it->second.exit_path); recorded.ok()) {
      exit = *recorded;
    } else {
      exit.lost = true;  // killed before the run ended, or the shim crashed: the end is unknown
    }
    exit.pid = pid;
    // Kill what may be left of the group (a run whose shim crashed), but only when the pid is
    // still the shim's zombie or held by no process at all: while a group has members its id is
    // not given to a new process, so the group is then still the adopted one. A pid that another
    // process has reused is left alone.
    if (!exists || same) kill(-pid, SIGKILL);
    exits->push_back(exit);
    it = adopted_.erase(it);
  }
}

void PosixLauncher::Reap(std::vector<ProcessExit>* exits) {
  for (auto it = live_.begin(); it != live_.end();) {
    const int pid = it->first;
    const std::string& exit_path = it->second;
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    // Look without reaping first: while the leader is a zombie its pid cannot be reused, so
    // killing its group below cannot hit an unrelated process group.
    int r = waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == 0) {  // still running
      ++it;
      continue;
    }
    if (r != 0 && errno == EINTR) continue;
    ProcessExit exit;
    exit.pid = pid;
    if (r != 0) {
      // ECHILD: someone else reaped it (a waitpid(-1) elsewhere). Its pid may already belong to
      // another process, so its group is not touched; report it ended, status unknown
      // (exit_code -1, signal 0), rather than wait for it forever. A shim's file may still say.
      if (!exit_path.empty()) {
        if (Result<ProcessExit> recorded = ReadExitFile(exit_path); recorded.ok()) exit = *recorded;
        exit.pid = pid;
      }
      exits->push_back(exit);
      it = live_.erase(it);
      continue;
    }
    // Kill what is left of the group (a background child of the run), so nothing outlives it.
    kill(-pid, SIGKILL);
    int status = 0;
    pid_t w;
    do {
      w = waitpid(pid, &status, 0);
    } while (w < 0 && errno == EINTR);
    if (w == pid) {
      if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
    }
    // A shim that recorded the end killed itself (signal 9): the file has the run's own end. No
    // file: the group was SIGKILLed before the run ended (or the shim crashed); waitpid says how.
    if (!exit_path.empty()) {
      if (Result<ProcessExit> recorded = ReadExitFile(exit_path); recorded.ok()) {
        exit = *recorded;
        exit.pid = pid;
      }
    }
    exits->push_back(exit);
    it = live_.erase(it);
  }
}

WaitResult PosixLauncher::Wait(int64_t timeout_ms) {
  WaitResult result;
  const sigset_t waited = WaitedSignals();
  const int64_t deadline = timeout_ms < 0 ? -1 : MonotonicMs() + timeout_ms;
  for (;;) {
    // Reap each of our own pids (never waitpid(-1): other code may wait for its own helpers,
    // such as git during a snapshot).
    Reap(&result.exits);
    CheckAdopted(&result.exits);
    if (!result.exits.empty()) return result;
    int64_t left = -1;
    if (deadline >= 0) {
      left = deadline - MonotonicMs();
      if (left <= 0) return result;
    }
    // Adopted shims are not our children (no SIGCHLD): wake up to look at them.
    if (!adopted_.empty() && (left < 0 || left > kAdoptedPollMs)) left = kAdoptedPollMs;
    timespec ts{static_cast<time_t>(left / 1000), static_cast<long>((left % 1000) * 1'000'000)};
    siginfo_t info;
    int sig = sigtimedwait(&waited, &info, left >= 0 ? &ts : nullptr);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      result.interrupt_signal = sig;
      Reap(&result.exits);
      CheckAdopted(&result.exits);
      return result;
    }
    // SIGCHLD (possibly a stale one from a helper process, or one pending for several
    // children), a timeout (EAGAIN) or EINTR: reap again, and go on waiting until the deadline.
  }
}

namespace {

// The exit file's text (at most 64 KiB), or NotFound.
Result<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no exit file '" + path + "'");
    return ErrnoStatus("cannot read exit file '" + path + "'");
  }
  std::string text;
  char buf[1024];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = ErrnoStatus("cannot read exit file '" + path + "'");
      close(fd);
      return s;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 64 * 1024) break;
  }
  close(fd);
  return text;
}

}  // namespace

Result<ProcessExit> ReadExitFile(const std::string& path) {
  DROVER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  // The end is the complete JSON line after the shim's start line; without one the run has not
  // ended (or its group was killed before it did).
  size_t brace = text.find('{');
  if (brace == std::string::npos || text.find('\n', brace) == std::string::npos) {
    return NotFound("exit file '" + path + "' records no end");
  }
  std::string line = text.substr(brace, text.find('\n', brace) - brace);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto bad = [&]() {
    return Status(Code::kInternal,
                  "exit file '" + path + "' is not a shim's exit record: " + text.substr(0, 200));
  };
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer() ||
      !j.contains("signal") || !j["signal"].is_number_integer()) {
    return bad();
  }
  ProcessExit e;
  e.exit_code = j["exit_code"].get<int>();
  e.signal = j["signal"].get<int>();
  if (auto it = j.find("ended_ms"); it != j.end() && it->is_number_integer()) {
    e.ended_ms = it->get<int64_t>();
  }
  if (auto it = j.find("error"); it != j.end() && it->is_string()) e.error = it->get<std::string>();
  return e;
}

Result<ShimStart> ReadShimStart(const std::string& path) {
  DROVER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  size_t end = text.find('\n');
  // No line yet, or only the end (the shim could not write its start line).
  if (end == std::string::npos || text[0] == '{') {
    return NotFound("exit file '" + path + "' has no start line");
  }
  ShimStart s;
  char* rest = nullptr;
  std::string first = text.substr(0, end);
  s.pid = std::strtoll(first.c_str(), &rest, 10);
  s.start_ticks = rest ? std::strtoll(rest, nullptr, 10) : 0;
  if (s.pid <= 1 || s.start_ticks <= 0) {
    return Status(Code::kInternal, "exit file '" + path + "' starts with '" + first.substr(0, 80) +
                                       "', not a shim's pid and start time");
  }
  return s;
}

}  // namespace drover
