#include "exec/posix_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

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

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Resolves argv[0] as execvp would, but against the child's PATH (posix_spawnp would search the
// parent's). Relative PATH entries and relative programs with a '/' are taken from the child's cwd,
// as the child resolves them after its chdir. Returns "" when PATH holds no such program.
std::string ResolveProgram(const std::string& prog, const std::vector<std::string>& env,
                           const std::string& cwd) {
  auto in_cwd = [&](const std::string& p) {
    if (p.empty() || p[0] == '/' || cwd.empty()) return p;
    return cwd + "/" + p;
  };
  // With a '/', exec takes it as it is (and reports its own error: not found, permission).
  if (prog.find('/') != std::string::npos) return prog;
  std::string_view path = ChildPath(env);
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string_view::npos) end = path.size();
    // An empty PATH entry means the current directory.
    std::string_view dir = end > start ? path.substr(start, end - start) : std::string_view(".");
    std::string candidate;
    candidate.reserve(dir.size() + 1 + prog.size());
    candidate.append(dir).append("/").append(prog);
    if (IsExecutableFile(in_cwd(candidate))) return candidate;
    start = end + 1;
  }
  return "";
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

PosixLauncher::PosixLauncher() {
  // SIGCHLD, SIGINT, SIGTERM and SIGHUP are taken synchronously with sigtimedwait() in Wait(), so
  // no handler runs at an awkward moment and a child ending between a reap and the wait is never
  // missed (its SIGCHLD stays pending).
  sigset_t set = WaitedSignals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
}

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
  std::string resolved = ResolveProgram(prog, spec.env, spec.cwd);
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

  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 1);
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(spec.env.size() + 1);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = 0;
  // glibc reports failures of the child's setup (chdir, dup2) and of exec through the return
  // value (it spawns with CLONE_VFORK and passes the errno back), so no error is lost.
  int err = posix_spawn(&pid, resolved.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_fd);
  if (err_fd != out_fd) close(err_fd);
  if (err != 0) {
    return Status(err == ENOENT ? Code::kNotFound : Code::kIo,
                  "cannot start '" + prog + "': " + std::strerror(err) +
                      "; check the command's program name and PATH");
  }
  live_.insert(pid);
  return static_cast<int>(pid);
}

void PosixLauncher::SignalGroup(int pgid, int sig) {
  // pgid 0 or 1 would signal our own group or everything: never a run.
  if (pgid <= 1) return;
  kill(-pgid, sig);  // ESRCH: the group has already ended, which is fine
}

void PosixLauncher::Reap(std::vector<ProcessExit>* exits) {
  for (auto it = live_.begin(); it != live_.end();) {
    const int pid = *it;
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
      // (exit_code -1, signal 0), rather than wait for it forever.
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
    if (!result.exits.empty()) return result;
    int64_t left = 0;
    if (deadline >= 0) {
      left = deadline - MonotonicMs();
      if (left <= 0) return result;
    }
    timespec ts{static_cast<time_t>(left / 1000), static_cast<long>((left % 1000) * 1'000'000)};
    siginfo_t info;
    int sig = sigtimedwait(&waited, &info, deadline >= 0 ? &ts : nullptr);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      result.interrupt_signal = sig;
      Reap(&result.exits);
      return result;
    }
    // SIGCHLD (possibly a stale one from a helper process, or one pending for several
    // children), a timeout (EAGAIN) or EINTR: reap again, and go on waiting until the deadline.
  }
}

}  // namespace drover
