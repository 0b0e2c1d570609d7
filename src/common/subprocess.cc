#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/spawn.h"

extern char** environ;

namespace drover {

Result<Captured> RunAndCapture(const std::vector<std::string>& args, const CaptureOptions& opts) {
  if (args.empty()) return InvalidArgument("RunAndCapture: empty argv");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("cannot create a pipe");

  // The program, looked up in our PATH as posix_spawnp would (the child allocates nothing).
  std::string program = args[0];
  if (program.find('/') == std::string::npos) {
    const char* path_env = std::getenv("PATH");
    std::string_view path = path_env != nullptr && *path_env != '\0' ? path_env : "/usr/bin:/bin";
    std::string found;
    while (found.empty()) {
      const size_t colon = path.find(':');
      std::string dir(path.substr(0, colon));
      std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0) {
        found = std::move(candidate);
      }
      if (colon == std::string_view::npos) break;
      path.remove_prefix(colon + 1);
    }
    if (found.empty()) {
      ::close(fds[0]);
      ::close(fds[1]);
      return Status(Code::kNotFound, "cannot run '" + args[0] + "': " + ErrnoText(ENOENT));
    }
    program = std::move(found);
  }
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0) {
    Status st = ErrnoStatus("opening /dev/null");
    ::close(fds[0]);
    ::close(fds[1]);
    return st;
  }

  std::vector<std::string> env_strings;
  for (char** e = environ; !opts.clean_env && e != nullptr && *e != nullptr; ++e) {
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

  // Its own process group, so a timeout kills what it started too (a grandchild that kept the
  // pipe open would otherwise hold the read below for ever); killed with the thread that waits
  // for it, so a helper never outlives a daemon that died or stopped.
  SpawnPlan plan;
  plan.exec_path = program.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = opts.cwd.empty() ? nullptr : opts.cwd.c_str();
  plan.out_fd = fds[1];
  plan.err_fd = devnull;
  plan.die_with_parent = true;
  const SpawnOutcome spawned = SpawnVfork(plan);
  ::close(fds[1]);
  ::close(devnull);
  const pid_t pid = spawned.pid;
  if (pid <= 0) {
    ::close(fds[0]);
    const int err = spawned.err;
    const bool at_exec = spawned.failed_step != nullptr &&
                         std::string_view(spawned.failed_step) == "exec";
    return Status(err == ENOENT && at_exec ? Code::kNotFound : Code::kIo,
                  "cannot run '" + args[0] + "'" +
                      (at_exec || spawned.failed_step == nullptr
                           ? std::string()
                           : std::string(" (") + spawned.failed_step + ")") +
                      ": " + ErrnoText(err));
  }
  Captured result;
  char buf[65536];
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(opts.timeout_ms);
  enum class Why { kNone, kTimeout, kTooMuch, kStopped } killed = Why::kNone;
  SteadyClock::time_point killed_at;
  auto kill_group = [&](Why why) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    killed = why;
    killed_at = SteadyClock::now();
  };
  for (;;) {
    // Checked on every pass, not only when poll times out: a helper whose output never stops
    // would otherwise never be timed out, and a killed one never given up on.
    if (killed == Why::kNone && opts.timeout_ms > 0 && SteadyClock::now() >= deadline) {
      kill_group(Why::kTimeout);
    }
    if (killed == Why::kNone && opts.stop && opts.stop()) kill_group(Why::kStopped);
    if (killed != Why::kNone && SteadyClock::now() >= killed_at + std::chrono::seconds(1)) break;
    // Deadlines are monotonic: a wall-clock step never shortens or stretches a helper's time.
    int wait_ms = -1;
    if (killed != Why::kNone) {
      // Killed: its group is gone within moments; a descendant that left the group and still
      // holds the pipe is not waited for past a second.
      auto left = killed_at + std::chrono::seconds(1) - SteadyClock::now();
      wait_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
    } else if (opts.timeout_ms > 0) {
      auto left = deadline - SteadyClock::now();
      wait_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(left).count(), 0, 60000));
    }
    if (opts.stop && killed == Why::kNone) wait_ms = wait_ms < 0 ? 100 : std::min(wait_ms, 100);
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r == 0) {
      if (killed != Why::kNone) break;
      if (opts.timeout_ms > 0 && SteadyClock::now() >= deadline) kill_group(Why::kTimeout);
      continue;
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      if (killed != Why::kNone) continue;  // draining what a killed helper left
      if (opts.on_output) {
        if (!opts.on_output(std::string_view(buf, static_cast<size_t>(n)))) {
          kill_group(Why::kStopped);
        }
        continue;
      }
      result.out.append(buf, static_cast<size_t>(n));
      if (opts.max_output_bytes > 0 &&
          static_cast<int64_t>(result.out.size()) > opts.max_output_bytes) {
        kill_group(Why::kTooMuch);
      }
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  if (killed == Why::kNone && opts.timeout_ms > 0) {
    // The pipe closed but the helper may still run (it closed its stdout): its time still counts.
    for (;;) {
      int status = 0;
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
        return result;
      }
      if (w < 0 && errno != EINTR) return ErrnoStatus("waiting for '" + args[0] + "'");
      if (SteadyClock::now() >= deadline || (opts.stop && opts.stop())) {
        kill_group(SteadyClock::now() >= deadline ? Why::kTimeout : Why::kStopped);
        break;
      }
      ::usleep(2000);
    }
  }
  int status = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  if (w != pid) return ErrnoStatus("waiting for '" + args[0] + "'");
  if (killed == Why::kTimeout) {
    return Unavailable("'" + args[0] + "' did not finish within " +
                       std::to_string(opts.timeout_ms) + " ms and was killed");
  }
  if (killed == Why::kStopped) return Status(Code::kCancelled, "'" + args[0] + "' was stopped");
  if (killed == Why::kTooMuch) {
    return Unavailable("'" + args[0] + "' printed more than " +
                       std::to_string(opts.max_output_bytes) + " bytes and was killed");
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace drover
