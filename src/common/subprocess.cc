#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace drover {

Result<Captured> RunAndCapture(const std::vector<std::string>& args, const CaptureOptions& opts) {
  if (args.empty()) return InvalidArgument("RunAndCapture: empty argv");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("cannot create a pipe");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, opts.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The caller may block SIGCHLD/SIGINT for its own loop; the helper must start with defaults.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    std::string_view name = kv.substr(0, kv.find('='));
    if (std::find(opts.unset_env.begin(), opts.unset_env.end(), name) != opts.unset_env.end()) {
      continue;
    }
    env_strings.emplace_back(kv);
  }
  env_strings.insert(env_strings.end(), opts.set_env.begin(), opts.set_env.end());
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  pid_t pid = 0;
  int err = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    return Status(err == ENOENT ? Code::kNotFound : Code::kIo,
                  "cannot run '" + args[0] + "': " + std::strerror(err));
  }
  Captured result;
  char buf[65536];
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.timeout_ms);
  bool killed = false;
  for (;;) {
    if (opts.timeout_ms > 0 && !killed) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      pollfd p{fds[0], POLLIN, 0};
      int r = left > 0 ? ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 60000))) : 0;
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        if (std::chrono::steady_clock::now() < deadline) continue;
        // Out of time: kill it; its end closes the pipe and the reads below finish.
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      result.out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  if (w != pid) return ErrnoStatus("waiting for '" + args[0] + "'");
  if (killed) {
    return Unavailable("'" + args[0] + "' did not finish within " +
                       std::to_string(opts.timeout_ms) + " ms and was killed");
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace drover
