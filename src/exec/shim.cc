#include "exec/shim.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "exec/child.h"

extern char** environ;

namespace drover {

namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Writes `s` as a JSON string into out[0..cap) (cut short to fit) and returns its length. No
// allocation: the shim runs in a child forked from a process with other threads.
size_t JsonString(char* out, size_t cap, const char* s) {
  static const char kHex[] = "0123456789abcdef";
  size_t n = 0;
  auto put = [&](char c) {
    if (n + 1 < cap) out[n++] = c;
  };
  put('"');
  for (; *s != '\0' && n + 8 < cap; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      put('\\');
      put(static_cast<char>(c));
    } else if (c < 0x20) {
      for (char e : {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]}) put(e);
    } else {
      put(static_cast<char>(c));
    }
  }
  put('"');
  return n;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Writes `line` to `path` in one write(). No temp file and rename: the file is read only once
// the shim is gone (so a complete line is there), and a shim killed in the middle leaves a line
// that does not parse, which readers treat as no file. No fsync: what it guards against is the
// engine dying (the page cache survives that); after a power loss the run is gone too, and a
// missing file makes the next engine requeue it. Returns errno, 0 on success.
// Appends one line to the exit file (opened at the start, or now if that failed) and closes it.
// The end is one write() of one short line: a reader sees the whole line or none of it. Not
// fsynced: like the store's commits (WAL, synchronous=NORMAL) it survives a crash of drover, not
// a power cut, and an fsync here would sit between every run and its end.
int AppendExitLine(int fd, const char* path, const char* line, size_t len) {
  if (fd < 0) fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  if (!WriteAll(fd, line, len)) err = errno ? errno : EIO;
  if (close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Ends the shim when the exit file could not be written: the shim's own status mirrors the run's,
// so the launcher's waitpid still tells the truth (an engine that adopted it reports it lost).
[[noreturn]] void MirrorStatus(int exit_code, int sig) {
  if (sig != 0) {
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
  }
  _exit(exit_code < 0 ? 255 : exit_code);
}

}  // namespace

std::string FindProgram(const std::string& prog, std::string_view path, const std::string& cwd) {
  auto in_cwd = [&](const std::string& p) {
    if (p.empty() || p[0] == '/' || cwd.empty()) return p;
    return cwd + "/" + p;
  };
  // With a '/', exec takes it as it is (and reports its own error: not found, permission).
  if (prog.find('/') != std::string::npos) return prog;
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

namespace {

// Field 22 of /proc/self/stat: this process's start time in clock ticks.
long long SelfStartTicks() {
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  // After ") " come fields 3, 4, ...: skip 19 of them (20 spaces) to reach field 22.
  int field = 2;
  for (; *p != '\0' && field < 22; ++p) {
    if (*p == ' ') ++field;
  }
  return std::strtoll(p, nullptr, 10);
}

}  // namespace

void ShimMain(const ShimTask& task) {
  // The engine stops a run by signalling its whole group, the shim included: the run must get
  // the signal, the shim must live on to record the end.
  struct sigaction ign;
  std::memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &ign, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGCHLD, SIGPIPE}) sigaction(sig, &dfl, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);

  // One file per attempt: the shim's pid and start time first (an engine that dies before it
  // records the pid finds the shim through it, and its absence proves the run never started),
  // the run's end appended when it comes.
  int exit_fd = open(task.exit_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (exit_fd >= 0) {
    char start[64];
    int n = std::snprintf(start, sizeof start, "%d %lld\n", static_cast<int>(getpid()),
                          SelfStartTicks());
    (void)WriteAll(exit_fd, start, static_cast<size_t>(n));
  }
  if (task.started_fd >= 0) close(task.started_fd);

  // The run: same group (no SETPGROUP), stdin/stdout/stderr inherited, clean signal state.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : kChildDefaultSignals) sigaddset(&defaults, sig);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  pid_t pid = 0;
  int err = 0;
  if (task.program == nullptr || task.program[0] == '\0') {
    err = ENOENT;
  } else if (task.run_as == nullptr || !task.run_as->set()) {
    err = posix_spawn(&pid, task.program, nullptr, &attr, task.argv, task.envp);
  } else {
    // The run as its submitter: posix_spawn cannot change users, so a fork (the shim has one
    // thread) that drops before it execs; the shim keeps the starter's rights, so the run can
    // neither stop it nor write its exit file. The errno of a failed step comes back on a pipe.
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
      err = errno;
    } else {
      pid = fork();
      if (pid == 0) {
        close(report[0]);
        for (int sig : kChildDefaultSignals) signal(sig, SIG_DFL);
        const RunAs& r = *task.run_as;
        int e = DropTo(static_cast<uint32_t>(r.uid), static_cast<uint32_t>(r.gid),
                       r.groups.data(), r.groups.size());
        if (e == 0) {
          execve(task.program, task.argv, task.envp);
          e = errno;
        }
        (void)!write(report[1], &e, sizeof e);
        _exit(127);
      }
      err = pid < 0 ? errno : 0;
      close(report[1]);
      int child_err = 0;
      ssize_t n;
      do {
        n = read(report[0], &child_err, sizeof child_err);
      } while (n < 0 && errno == EINTR);
      close(report[0]);
      if (pid > 0 && n == static_cast<ssize_t>(sizeof child_err)) {
        // It never ran: reaped here, reported as a start that failed.
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        err = child_err != 0 ? child_err : EIO;
      }
    }
  }
  posix_spawnattr_destroy(&attr);

  int exit_code = -1, sig = 0;
  char line[512];
  int len = 0;
  if (err != 0) {
    exit_code = 127;
    // Fixed buffers and write(2) only: no allocation, no stdio lock, in a forked child.
    // strerrordesc_np, unlike strerror, takes no locale lock and allocates nothing.
    const char* why = strerrordesc_np(err);
    char message[256];
    int m = std::snprintf(message, sizeof message, "cannot start '%s': %s", task.argv[0],
                          why ? why : "unknown error");
    if (m > 0) {
      (void)WriteAll(2, message, std::min(static_cast<size_t>(m), sizeof message - 1));
      (void)WriteAll(2, "\n", 1);
    }
    len = std::snprintf(line, sizeof line,
                        "{\"exit_code\": 127, \"signal\": 0, \"ended_ms\": %lld, \"error\": ",
                        static_cast<long long>(WallMs()));
    len += static_cast<int>(JsonString(line + len, sizeof line - len - 3, message));
    line[len++] = '}';
    line[len++] = '\n';
  } else {
    int status = 0;
    pid_t w;
    do {
      w = waitpid(pid, &status, 0);
    } while (w < 0 && errno == EINTR);
    if (w == pid && WIFEXITED(status)) exit_code = WEXITSTATUS(status);
    if (w == pid && WIFSIGNALED(status)) sig = WTERMSIG(status);
    len = std::snprintf(line, sizeof line,
                        "{\"exit_code\": %d, \"signal\": %d, \"ended_ms\": %lld}\n", exit_code, sig,
                        static_cast<long long>(WallMs()));
  }
  int werr = AppendExitLine(exit_fd, task.exit_path, line, static_cast<size_t>(len));
  if (werr != 0) {
    // write(2) and strerrordesc_np only: no stdio lock or locale lock in a forked child.
    const char* why = strerrordesc_np(werr);
    char message[512];
    int m = std::snprintf(message, sizeof message, "drover shim: cannot write exit file '%s': %s\n",
                          task.exit_path, why ? why : "unknown error");
    if (m > 0) (void)WriteAll(2, message, std::min(static_cast<size_t>(m), sizeof message - 1));
    // Leftover members of the group are killed by the launcher when it reaps us.
    MirrorStatus(exit_code, sig);
  }
  // Nothing of the run outlives it: kill the whole group, this shim included (the launcher takes
  // the result from the file, not from our SIGKILL).
  kill(-getpgrp(), SIGKILL);
  _exit(0);  // not reached
}

int RunShim(int argc, char** argv) {
  // drover __shim <exit_path> -- <program> [args...]
  if (argc < 5 || argv[2][0] == '\0' || std::strcmp(argv[3], "--") != 0) {
    std::fputs(
        "usage: drover __shim <exit_path> -- <program> [args...]\n"
        "(internal: drover starts each run under this supervisor; it is not meant to be run by "
        "hand)\n",
        stderr);
    return 2;
  }
  // PATH lookup against the run's environment (ours), in our cwd (the run's).
  const char* path_var = getenv("PATH");
  std::string resolved =
      FindProgram(argv[4], path_var ? path_var : "/usr/local/bin:/usr/bin:/bin", std::string());
  ShimTask task;
  task.exit_path = argv[2];
  task.program = resolved.c_str();
  task.argv = argv + 4;
  task.envp = environ;
  ShimMain(task);
}

}  // namespace drover
