#include "exec/posix_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
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
#include "exec/supervisor.h"

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

// The PATH the child will see: its own env's PATH when the spec sets one, else ours.
std::string_view ChildPath(const std::vector<std::string>& env) {
  for (const std::string& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) return std::string_view(kv).substr(5);
  }
  const char* p = getenv("PATH");
  return p ? std::string_view(p) : std::string_view("/usr/local/bin:/usr/bin:/bin");
}

Status OpenOutput(const std::string& path, int* fd) {
  if (path.empty()) {
    *fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  } else {
    *fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  if (*fd < 0) return ErrnoStatus("cannot open output file '" + path + "'");
  return Status::Ok();
}

}  // namespace

const char* ExitAttribute() {
  static const bool root = ::geteuid() == 0;
  return root ? kTrustedExitAttribute : kUserExitAttribute;
}

PosixLauncher::PosixLauncher(Mode mode) {
  // SIGCHLD, SIGINT, SIGTERM and SIGHUP are taken synchronously through a signalfd in Wait(), so
  // no handler runs at an awkward moment and a child ending between a reap and the wait is never
  // missed (its SIGCHLD stays pending until read).
  sigset_t set = WaitedSignals();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // The shim is this very binary. It is spawned through /proc/self/exe, which stays our image
  // even when the file is replaced or deleted while drover runs; its argv[0] is the real path.
  shim_path_ = "/proc/self/exe";
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  shim_argv0_ = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("drover");
  if (mode == Mode::kSupervised) {
    // Without one, shims forked from this process do its work: slower, the same otherwise.
    if (auto supervisor = Supervisor::Start(); supervisor.ok()) {
      supervisor_ = std::move(*supervisor);
    }
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

bool PosixLauncher::has_supervisor() const {
  return supervisor_ != nullptr && !supervisor_->gone();
}

int PosixLauncher::supervisor_pid() const {
  return supervisor_ ? static_cast<int>(supervisor_->pid()) : -1;
}

PosixLauncher::~PosixLauncher() {
  // Runs still going are left alone: ending them is the engine's decision, not the destructor's.
  // The supervisor goes on watching its runs, and exits after the last one.
  supervisor_.reset();
  if (signal_fd_ >= 0) close(signal_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

Status PosixLauncher::PlanStart(const LaunchSpec& spec, ChildPlan* plan, int* out_fd,
                                int* err_fd) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return InvalidArgument("cannot start a run with an empty command");
  }
  const std::string& prog = spec.argv[0];
  if (!spec.cwd.empty()) {
    struct stat st;
    if (stat(spec.cwd.c_str(), &st) != 0) {
      return Status(Code::kIo, "cannot start '" + prog + "': working directory '" + spec.cwd +
                                   "': " + ErrnoText(errno) + "; check the run's workdir");
    }
    if (!S_ISDIR(st.st_mode)) {
      return Status(Code::kIo, "cannot start '" + prog + "': working directory '" + spec.cwd +
                                   "' is not a directory; check the run's workdir");
    }
  }
  // An overlay's mount point is empty until the run mounts it: look in the snapshot instead.
  std::string resolved =
      Resolve(prog, ChildPath(spec.env), spec.overlay.empty() ? spec.cwd : spec.overlay.lower);
  if (!spec.overlay.empty()) {
    auto prepared = PrepareOverlay(spec.overlay, spec.cwd, spec.data);
    if (!prepared.ok()) {
      return Status(Code::kIo, "cannot start '" + prog +
                                   "': its working copy: " + prepared.status().message());
    }
    plan->overlay = std::move(*prepared);
    plan->mount_overlay = true;
  }
  if (resolved.empty()) {
    return Status(Code::kNotFound, "cannot start '" + prog +
                                       "': No such file or directory; check the command's "
                                       "program name and PATH");
  }
  DROVER_RETURN_IF_ERROR(OpenOutput(spec.stdout_path, out_fd));
  if (!spec.stderr_path.empty() && spec.stderr_path == spec.stdout_path) {
    *err_fd = *out_fd;  // one file description, so the two streams append rather than overwrite
  } else if (Status s = OpenOutput(spec.stderr_path, err_fd); !s.ok()) {
    close(*out_fd);
    return s;
  }
  if (spec.run_as.set()) {
    // The run's logs are its submitter's, like everything it writes.
    for (int fd : {*out_fd, *err_fd}) {
      if (fchown(fd, static_cast<uid_t>(spec.run_as.uid), static_cast<gid_t>(spec.run_as.gid)) !=
          0) {
        Status s = ErrnoStatus("cannot give the output file '" + spec.stdout_path + "' to uid " +
                               std::to_string(spec.run_as.uid));
        close(*out_fd);
        if (*err_fd != *out_fd) close(*err_fd);
        return s;
      }
    }
  }
  plan->run_as = spec.run_as;
  plan->exit_path = spec.exit_path;
  plan->exit_log = spec.stdout_path;
  plan->program = resolved;
  plan->env = spec.env;
  plan->cwd = spec.cwd;
  return Status::Ok();
}

Status PosixLauncher::StartError(const std::string& prog, int err, const std::string& failed_step,
                                 bool overlay, bool shim) const {
  if (!failed_step.empty() && failed_step != "exec") {
    return Status(Code::kIo,
                  "cannot start '" + prog + "': " + failed_step + ": " + ErrnoText(err) +
                      (overlay ? "; set DROVER_WORKING_COPY=copy to copy working copies instead "
                                 "of mounting them"
                               : std::string()));
  }
  if (shim) {
    return Status(Code::kIo, "cannot start '" + prog + "': starting its supervisor '" +
                                 shim_argv0_ + " __shim' failed: " + ErrnoText(err));
  }
  return Status(err == ENOENT ? Code::kNotFound : Code::kIo,
                "cannot start '" + prog + "': " + ErrnoText(err) +
                    "; check the command's program name and PATH");
}

bool PosixLauncher::StartsInBackground() const { return has_supervisor() && !exec_shim_; }

Result<int64_t> PosixLauncher::BeginStart(const LaunchSpec& spec) {
  const int64_t ticket = next_ticket_++;
  auto now = [&](Result<ExecHandle> started) -> Result<int64_t> {
    // Started (or failed) here and now: reported by the next Wait() all the same.
    StartOutcome o;
    o.ticket = ticket;
    if (started.ok()) {
      o.handle = *started;
      o.identity = Identity(*started);
    } else {
      o.error = started.status();
    }
    ready_.push_back(std::move(o));
    return ticket;
  };
  // A run that does not outlive us (no exit file) is not the supervisor's.
  if (!StartsInBackground() || spec.exit_path.empty()) return now(Start(spec));
  ChildPlan plan;
  int out_fd = -1, err_fd = -1;
  DROVER_RETURN_IF_ERROR(PlanStart(spec, &plan, &out_fd, &err_fd));
  plan.exec_path = plan.program;
  plan.argv = spec.argv;
  bool delivered = false;
  Status sent = supervisor_->Send(plan, out_fd, err_fd, &delivered);
  close(out_fd);
  if (err_fd != out_fd) close(err_fd);
  if (!sent.ok() && !delivered && !supervisor_->gone()) {
    // Refused before anything was sent (too big to pass): this run cannot start, the
    // supervisor goes on with the others.
    return Status(Code::kInvalidArgument, "cannot start '" + spec.argv[0] + "': " +
                                              sent.message() + "; shorten its environment");
  }
  if (sent.ok() || delivered) {
    pending_.push_back(Pending{ticket, {spec.exit_path, spec.stdout_path}, spec.argv[0],
                               plan.mount_overlay,
                               MonotonicMs()});
  }
  if (!sent.ok()) {
    // Gone: what it may have started is taken from the exit file (SupervisorLost); a request it
    // never had is started under a shim instead.
    SupervisorLost();
    if (!delivered) return now(Start(spec));
  }
  return ticket;
}

Result<ExecHandle> PosixLauncher::Start(const LaunchSpec& spec) {
  if (StartsInBackground() && !spec.exit_path.empty()) {
    // The supervisor's hand-over, waited for.
    DROVER_ASSIGN_OR_RETURN(const int64_t ticket, BeginStart(spec));
    for (;;) {
      for (auto it = ready_.begin(); it != ready_.end(); ++it) {
        if (it->ticket != ticket) continue;
        StartOutcome o = std::move(*it);
        ready_.erase(it);
        if (!o.error.ok()) return o.error;
        return o.handle;
      }
      if (!supervisor_) return Internal("a launch was lost with the supervisor");
      // Ends that come first are kept for Wait().
      if (!supervisor_->ReadMessage(Supervisor::kAnswerTimeoutMs)) {
        SupervisorLost();  // settles every launch it had
      } else {
        MatchAnswers();
      }
    }
  }
  ChildPlan plan;
  int out_fd = -1, err_fd = -1;
  DROVER_RETURN_IF_ERROR(PlanStart(spec, &plan, &out_fd, &err_fd));
  const std::string& prog = spec.argv[0];
  // A shim leads the group and records the end: a fork of this process (ShimMain, no exec of
  // drover per run: loading its libraries would cost more than a short run), or, with
  // SetShimBinary, `<drover> __shim <exit_path> -- <argv...>` exec'd. An exit file left from
  // before (a reused path) must not be taken for this run's.
  const bool survives = !spec.exit_path.empty();  // the run outlives us; its end is recorded
  if (survives) unlink(spec.exit_path.c_str());
  plan.shim = survives && !exec_shim_;
  plan.exec_path = survives ? shim_path_ : plan.program;
  if (survives && exec_shim_) {
    plan.argv = {shim_argv0_, "__shim", spec.exit_path, "--"};
    plan.argv.insert(plan.argv.end(), spec.argv.begin(), spec.argv.end());
  } else {
    plan.argv = spec.argv;
  }
  ForkOutcome outcome = StartChild(plan, out_fd, err_fd);
  if (outcome.err != 0 && outcome.pid > 0) {
    // The child exited after reporting (or was killed): reap it, it is not a run.
    int status = 0;
    while (waitpid(outcome.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (outcome.err == 0) live_.emplace(outcome.pid, Child{spec.exit_path, outcome.start_ticks});
  close(out_fd);
  if (err_fd != out_fd) close(err_fd);
  if (outcome.err != 0) {
    return StartError(prog, outcome.err, outcome.failed_step, plan.mount_overlay, plan.shim);
  }
  return ExecHandle(outcome.pid);
}

void PosixLauncher::MatchAnswers() {
  if (supervisor_ == nullptr) return;
  std::vector<Supervisor::Started> answers;
  supervisor_->TakeAnswers(&answers);
  for (Supervisor::Started& a : answers) {
    // Answers come in the order of the requests. One with no request is a broken supervisor.
    if (pending_.empty()) {
      supervisor_->Stop();
      return;
    }
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    StartOutcome o;
    o.ticket = p.ticket;
    if (a.outcome.err == 0) {
      o.handle = ExecHandle(a.outcome.pid);
      o.identity = a.start_ticks;
      supervised_[a.outcome.pid] = Supervised{p.record, a.start_ticks};
    } else {
      o.error = StartError(p.program, a.outcome.err, a.outcome.failed_step, p.overlay, false);
    }
    ready_.push_back(std::move(o));
  }
}

std::string PosixLauncher::Resolve(const std::string& prog, std::string_view path,
                                   const std::string& cwd) {
  if (prog.find('/') != std::string::npos) return FindProgram(prog, path, cwd);
  bool absolute = !path.empty();
  for (size_t start = 0; absolute && start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string_view::npos) end = path.size();
    absolute = end > start && path[start] == '/';
    start = end + 1;
  }
  if (!absolute) return FindProgram(prog, path, cwd);
  std::string key;
  key.reserve(prog.size() + 1 + path.size());
  key.append(prog).push_back('\0');
  key.append(path);
  const int64_t now = MonotonicMs();
  if (auto it = resolved_.find(key); it != resolved_.end() && now < it->second.until_ms) {
    return it->second.program;
  }
  std::string found = FindProgram(prog, path, cwd);
  if (found.empty()) return found;  // not cached: installing it should help at once
  if (resolved_.size() >= 1024) resolved_.clear();
  resolved_[std::move(key)] = Resolved{found, now + kResolvedMs};
  return found;
}

void PosixLauncher::Stop(ExecHandle attempt, StopSignal how) {
  SignalGroup(PidOf(attempt), how == StopSignal::kKill ? SIGKILL : SIGTERM);
}

int64_t PosixLauncher::Identity(ExecHandle attempt) {
  const int pid = PidOf(attempt);
  return pid > 0 ? StartTicks(pid) : 0;
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
  // Known since the start, ours or the supervisor's (a pid not reaped yet cannot be reused).
  if (auto it = live_.find(pid); it != live_.end() && it->second.start_ticks > 0) {
    return it->second.start_ticks;
  }
  if (auto it = supervised_.find(pid); it != supervised_.end() && it->second.start_ticks > 0) {
    return it->second.start_ticks;
  }
  char state = 0;
  int64_t ticks = 0;
  if (pid <= 0 || !ReadProcStat(pid, &state, &ticks)) return 0;
  return ticks;
}

std::optional<std::string> PosixLauncher::EnvOf(ExecHandle attempt, const std::string& name) {
  const int pid = PidOf(attempt);
  if (pid <= 0) return std::nullopt;
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string env;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || env.size() > (1 << 20)) break;  // an environment is at most a few MiB
    env.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const std::string prefix = name + "=";
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (env.compare(at, prefix.size(), prefix) == 0) {
      return env.substr(at + prefix.size(), end - at - prefix.size());
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<ExecHandle> PosixLauncher::OwnerOf(int64_t pid) {
  if (pid <= 0 || pid > INT32_MAX) return std::nullopt;
  pid_t g = getpgid(static_cast<pid_t>(pid));
  if (g <= 1) return std::nullopt;
  return ExecHandle(g);  // an attempt's process group is led by its handle's process
}

void PosixLauncher::Adopt(ExecHandle attempt, int64_t identity, const ExitRecordAt& record) {
  const int pid = PidOf(attempt);
  if (pid <= 0) {
    // No process here can have it: reported at the next Wait from its record (else lost), and
    // nothing is signalled.
    ProcessExit exit;
    Result<ProcessExit> recorded = ReadExitRecord(record);
    if (recorded.ok()) {
      exit = *recorded;
    } else {
      exit.lost = true;
    }
    exit.handle = attempt;
    foreign_ends_.push_back(std::move(exit));
    return;
  }
  adopted_[pid] = Adopted{identity, record};
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
    Result<ProcessExit> recorded = ReadExitRecord(it->second.record);
    if (same && !recorded.ok()) {
      // A zombie whose end is not written yet: a supervisor writes the end before it reaps the
      // run. Wait for it a while (the pid cannot be reused while the zombie holds it).
      const int64_t now = MonotonicMs();
      if (it->second.zombie_since_ms == 0) it->second.zombie_since_ms = now;
      if (now - it->second.zombie_since_ms < kZombieGraceMs) {
        ++it;
        continue;
      }
    }
    if (recorded.ok()) {
      exit = *recorded;
    } else {
      exit.lost = true;  // killed before the run ended, or the shim crashed: the end is unknown
    }
    exit.handle = ExecHandle(pid);
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
    const std::string& exit_path = it->second.exit_path;
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
    exit.handle = ExecHandle(pid);
    if (r != 0) {
      // ECHILD: someone else reaped it (a waitpid(-1) elsewhere). Its pid may already belong to
      // another process, so its group is not touched; report it ended, status unknown
      // (exit_code -1, signal 0), rather than wait for it forever. A shim's file may still say.
      if (!exit_path.empty()) {
        if (Result<ProcessExit> recorded = ReadExitFile(exit_path); recorded.ok()) exit = *recorded;
        exit.handle = ExecHandle(pid);
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
        exit.handle = ExecHandle(pid);
      }
    }
    exits->push_back(exit);
    it = live_.erase(it);
  }
}

void PosixLauncher::Wake() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void PosixLauncher::TakeSupervised(std::vector<ProcessExit>* exits) {
  if (supervisor_ == nullptr) return;
  std::vector<ProcessExit> ends;
  bool here = supervisor_->TakeEnds(&ends);
  // Answers first: a run's answer comes before its end.
  MatchAnswers();
  for (ProcessExit& e : ends) {
    if (supervised_.erase(static_cast<int>(e.handle.id)) > 0) exits->push_back(e);
  }
  if (here && !pending_.empty() &&
      MonotonicMs() - pending_.front().sent_ms > Supervisor::kAnswerTimeoutMs) {
    supervisor_->Stop();  // silent for 40 s during a launch: stuck
    here = false;
  }
  if (!here || supervisor_->gone()) SupervisorLost();
}

void PosixLauncher::SupervisorLost() {
  MatchAnswers();  // what it answered before it went
  // Its runs are no longer anyone's children we can hear from: watch them as adopted ones (their
  // end is read from the exit file the supervisor may have written, else they are lost).
  for (const auto& [pid, s] : supervised_) Adopt(ExecHandle(pid), s.start_ticks, s.record);
  supervised_.clear();
  // A launch it had but did not answer may have begun: its start line says. Then the run is
  // watched as an adopted one; it is never started a second time under this attempt.
  for (Pending& p : pending_) {
    StartOutcome o;
    o.ticket = p.ticket;
    Result<ShimStart> begun = ReadRecordedStart(p.record);
    if (begun.ok() && StartTicks(static_cast<int>(begun->pid)) == begun->start_ticks) {
      o.handle = ExecHandle(begun->pid);
      o.identity = begun->start_ticks;
      Adopt(o.handle, begun->start_ticks, p.record);
    } else {
      o.error = Status(Code::kIo, "cannot start '" + p.program +
                                      "': the supervisor went away during its launch (it may "
                                      "have started the run: see its exit record, " +
                                      p.record.file + " or the attribute " + ExitAttribute() +
                                      " of " + p.record.log + ")");
    }
    ready_.push_back(std::move(o));
  }
  pending_.clear();
  supervisor_.reset();
}

WaitResult PosixLauncher::Wait(int64_t timeout_ms) {
  WaitResult result;
  const int64_t deadline = timeout_ms < 0 ? -1 : MonotonicMs() + timeout_ms;
  auto collect = [&] {
    // Reap each of our own pids (never waitpid(-1): other code may wait for its own helpers,
    // such as git during a snapshot).
    Reap(&result.exits);
    for (ProcessExit& e : foreign_ends_) result.exits.push_back(std::move(e));
    foreign_ends_.clear();
    CheckAdopted(&result.exits);
    TakeSupervised(&result.exits);
  };
  auto done = [&] {
    if (result.exits.empty() && ready_.empty()) return false;
    for (StartOutcome& o : ready_) result.started.push_back(std::move(o));
    ready_.clear();
    return true;
  };
  for (;;) {
    collect();
    if (done()) return result;
    int64_t left = -1;
    if (deadline >= 0) {
      left = deadline - MonotonicMs();
      if (left <= 0) return result;
    }
    // A launch the supervisor has not answered: look again when its answer is overdue.
    if (!pending_.empty()) {
      int64_t overdue =
          pending_.front().sent_ms + Supervisor::kAnswerTimeoutMs + 1 - MonotonicMs();
      overdue = std::max<int64_t>(overdue, 1);
      if (left < 0 || left > overdue) left = overdue;
    }
    // Adopted shims are not our children (no SIGCHLD): wake up to look at them.
    if (!adopted_.empty() && (left < 0 || left > kAdoptedPollMs)) left = kAdoptedPollMs;
    int sig = 0;
    if (signal_fd_ >= 0) {
      // A signal, a Wake(), or an end from the supervisor.
      pollfd p[3] = {{signal_fd_, POLLIN, 0},
                     {wake_fd_, POLLIN, 0},
                     {supervisor_ ? supervisor_->fd() : -1, POLLIN, 0}};
      int r = poll(p, supervisor_ ? 3 : 2, left >= 0 ? static_cast<int>(left) : -1);
      if (r > 0 && (p[0].revents & POLLIN)) {
        signalfd_siginfo si;
        while (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          int got = static_cast<int>(si.ssi_signo);
          if (got == SIGINT || got == SIGTERM || got == SIGHUP) sig = got;
        }
      }
      if (r > 0 && (p[1].revents & POLLIN)) {
        uint64_t n = 0;
        (void)!read(wake_fd_, &n, sizeof n);
        if (sig == 0) {
          collect();
          done();
          return result;
        }
      }
    } else {
      // No signalfd (it is not expected to fail): wait for a signal, looking at the supervisor
      // every 10 ms.
      if (supervisor_ && (left < 0 || left > 10)) left = 10;
      timespec ts{static_cast<time_t>(left / 1000), static_cast<long>((left % 1000) * 1'000'000)};
      siginfo_t info;
      const sigset_t waited = WaitedSignals();
      sig = sigtimedwait(&waited, &info, left >= 0 ? &ts : nullptr);
      if (sig == SIGCHLD || sig < 0) sig = 0;
    }
    if (sig != 0) {
      result.interrupt_signal = sig;
      collect();
      done();
      return result;
    }
    // SIGCHLD (possibly a stale one from a helper process, or one pending for several
    // children), an end from the supervisor, a timeout or EINTR: collect again, and go on
    // waiting until the deadline.
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

namespace {

// The exit record's text, wherever it is; NotFound when there is none (the run never started).
// The log's attribute, when it holds one, is the record, unless it has no end yet and the file
// holds the same start with an end (the supervisor could set the start there but not the end).
// A file whose start is another one is not this attempt's (it was left from before).
Result<std::string> ReadRecordText(const ExitRecordAt& at) {
  std::string attr;
  if (!at.log.empty()) {
    char buf[4096];
    ssize_t n = getxattr(at.log.c_str(), ExitAttribute(), buf, sizeof buf);
    struct stat st {};
    if (n < 0 && errno == ENODATA && ExitAttribute() == kTrustedExitAttribute &&
        lstat(at.log.c_str(), &st) == 0 && st.st_uid == 0) {
      // A root daemon's run started by a drover from before the trusted record, whose log is
      // root's own (no user could have written its attribute).
      n = getxattr(at.log.c_str(), kUserExitAttribute, buf, sizeof buf);
    }
    if (n >= 0) {
      attr.assign(buf, static_cast<size_t>(n));
    } else if (errno != ENODATA && errno != ENOTSUP && errno != ENOENT) {
      return ErrnoStatus("cannot read the exit record on '" + at.log + "'");
    }
  }
  const size_t start_end = attr.find('\n');
  if (attr.empty() || start_end == std::string::npos) return ReadSmallFile(at.file);
  if (attr.find('{', start_end) != std::string::npos) return attr;
  Result<std::string> file = ReadSmallFile(at.file);
  if (file.ok() && file->compare(0, start_end + 1, attr, 0, start_end + 1) == 0) return file;
  return attr;
}

// Where a record was read from, for messages.
std::string Where(const ExitRecordAt& at) {
  return at.log.empty() ? "exit file '" + at.file + "'"
                        : "exit record of '" + at.log + "'";
}

}  // namespace

Result<ProcessExit> ReadExitRecord(const ExitRecordAt& at) {
  DROVER_ASSIGN_OR_RETURN(std::string text, ReadRecordText(at));
  // The end is the complete JSON line after the start line; without one the run has not ended
  // (or its group was killed before it did).
  size_t brace = text.find('{');
  if (brace == std::string::npos || text.find('\n', brace) == std::string::npos) {
    return NotFound(Where(at) + " records no end");
  }
  std::string line = text.substr(brace, text.find('\n', brace) - brace);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto bad = [&]() {
    return Status(Code::kInternal,
                  Where(at) + " is not a shim's exit record: " + text.substr(0, 200));
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

Result<ShimStart> ReadRecordedStart(const ExitRecordAt& at) {
  DROVER_ASSIGN_OR_RETURN(std::string text, ReadRecordText(at));
  size_t end = text.find('\n');
  // No line yet, or only the end (the shim could not write its start line).
  if (end == std::string::npos || text[0] == '{') {
    return NotFound(Where(at) + " has no start line");
  }
  ShimStart s;
  char* rest = nullptr;
  std::string first = text.substr(0, end);
  s.pid = std::strtoll(first.c_str(), &rest, 10);
  s.start_ticks = rest ? std::strtoll(rest, nullptr, 10) : 0;
  // (A Slurm job's record has its job id, which may be 1: slurm/launcher.h.)
  if (s.pid <= 0 || s.start_ticks <= 0) {
    return Status(Code::kInternal, Where(at) + " starts with '" + first.substr(0, 80) +
                                       "', not a shim's pid and start time");
  }
  return s;
}

Result<ProcessExit> ReadExitFile(const std::string& path) { return ReadExitRecord({path, ""}); }

Result<ShimStart> ReadShimStart(const std::string& path) { return ReadRecordedStart({path, ""}); }

}  // namespace drover
