#include "exec/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>

#include <cstdio>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "common/file_faults.h"

namespace drover {

namespace {

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
void PutStrings(std::string* out, const std::vector<std::string>& v) {
  PutU32(out, static_cast<uint32_t>(v.size()));
  for (const std::string& s : v) PutString(out, s);
}

// Reads what Encode wrote; every length is checked against what is left, so no input can make
// it read past the end, and what it allocates grows with what it has read.
class Reader {
 public:
  explicit Reader(const std::string& b) : b_(b) {}
  bool U32(uint32_t* v) {
    if (b_.size() - pos_ < 4) return false;
    std::memcpy(v, b_.data() + pos_, 4);
    pos_ += 4;
    return true;
  }
  bool Flag(bool* v) {
    uint32_t u = 0;
    if (!U32(&u) || u > 1) return false;
    *v = u == 1;
    return true;
  }
  bool String(std::string* s) {
    uint32_t n = 0;
    if (!U32(&n) || b_.size() - pos_ < n) return false;
    s->assign(b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Strings(std::vector<std::string>* v) {
    uint32_t n = 0;
    if (!U32(&n) || n > (b_.size() - pos_) / 4) return false;
    // Grown as strings are read, not sized from the count: a count is only a claim.
    v->clear();
    for (uint32_t i = 0; i < n; ++i) {
      std::string s;
      if (!String(&s)) return false;
      v->push_back(std::move(s));
    }
    return true;
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

bool ReadFull(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// What the supervisor sends: the answer to a launch, or the end of a run.
enum MessageType : uint32_t { kAnswer = 1, kEnded = 2 };
struct Message {
  uint32_t type = 0;
  int32_t pid = 0;
  int32_t err = 0;        // kAnswer: errno of the failed start, 0 when it started
  int32_t exit_code = -1;  // kEnded
  int32_t signal = 0;      // kEnded
  uint32_t text_len = 0;   // kAnswer: the failed step's name follows
  int64_t start_ticks = 0;
  int64_t ended_ms = 0;
};

// The supervisor's end of the socket. What it sends is queued and written without blocking, so
// it never waits on a daemon that is busy (or itself writing a large request): it goes on reading
// requests and reaping runs, and the daemon reads the queue when it can.
struct Link {
  // A started run's answer waits at most this long for the next message to go with: a short
  // run's start and end then wake the daemon once, not twice (its start is recorded when it
  // hears of it; the run's start line is in its exit record from the start).
  static constexpr int64_t kAnswerDelayMs = 2;
  int sock = -1;
  bool gone = false;    // the daemon has closed its end, or the socket failed
  std::string outbox;   // messages not yet written
  std::string later;    // answers held back (SendLater), sent before the next message
  int64_t later_due = -1;  // when they go by themselves (monotonic ms; -1: none held)
  void Gone() {
    if (sock >= 0) close(sock);
    sock = -1;
    gone = true;
    outbox.clear();
    later.clear();
    later_due = -1;
  }
  // The held answers go now, before anything else.
  void Release() {
    if (later.empty()) return;
    outbox.append(later);
    later.clear();
    later_due = -1;
  }
  void Flush() {
    while (!gone && !outbox.empty()) {
      ssize_t n = send(sock, outbox.data(), outbox.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        outbox.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      Gone();
    }
  }
  void Send(const Message& m, const std::string& text) {
    if (gone) return;
    Release();
    outbox.append(reinterpret_cast<const char*>(&m), sizeof m);
    outbox.append(text, 0, m.text_len);
    Flush();
  }
  // A message that may wait (kAnswerDelayMs at most) for the next one.
  void SendLater(const Message& m, const std::string& text) {
    if (gone) return;
    later.append(reinterpret_cast<const char*>(&m), sizeof m);
    later.append(text, 0, m.text_len);
    if (later_due < 0) later_due = MonotonicMs() + kAnswerDelayMs;
  }
};

// Appends `line` to the exit file in one write() (a reader sees the whole line or none). Not
// fsynced, as the shim's: it survives a crash of drover, not a power cut.
bool AppendLine(const std::string& path, const char* line, size_t len, int flags) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | flags, 0644);
  if (fd < 0) return false;
  bool ok = true;
  while (len > 0) {
    ssize_t w = write(fd, line, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    line += w;
    len -= static_cast<size_t>(w);
  }
  return close(fd) == 0 && ok;
}

// Receives one request: its bytes and the two descriptors sent with it. False at the end of the
// stream (the daemon has gone) or on a malformed request.
bool ReceiveRequest(int fd, std::string* payload, int* out_fd, int* err_fd) {
  uint32_t len = 0;
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    cmsghdr align;
  } control;
  iovec iov{&len, sizeof len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  ssize_t r;
  do {
    r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (r < 0 && errno == EINTR);
  *out_fd = *err_fd = -1;
  for (cmsghdr* c = r > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
      int fds[2];
      std::memcpy(fds, CMSG_DATA(c), sizeof fds);
      *out_fd = fds[0];
      *err_fd = fds[1];
    }
  }
  auto fail = [&] {
    // Descriptors that came with a request it cannot take are not kept open.
    if (*out_fd >= 0) close(*out_fd);
    if (*err_fd >= 0 && *err_fd != *out_fd) close(*err_fd);
    *out_fd = *err_fd = -1;
    return false;
  };
  if (r != static_cast<ssize_t>(sizeof len)) return fail();
  if (*out_fd < 0 || len > Supervisor::kMaxRequestBytes) return fail();
  payload->resize(len);
  if (!ReadFull(fd, payload->data(), len)) return fail();
  return true;
}

// One stream of a run (its stdout, or its stderr when that goes to another file): the run writes
// into a pipe, the supervisor moves what comes to the attempt's log (splice: no copy through
// here). A full disk then costs the run nothing: what it wrote stays in the pipe (grown to
// kHeldPipeBytes at the first refusal), the run blocks on its next write once that is full, and
// the bytes are written when the disk has room again, tried every kRetryMs. Before, the run's own
// write failed with ENOSPC and the run failed with its points lost (issue 39).
struct Drain {
  int pipe = -1;  // the read end (non-blocking); -1 once closed
  // The write end, kept here while the run runs: the run's end then wakes the supervisor once
  // (SIGCHLD), not a second time by the pipe's hang-up; what the run wrote is read after its
  // leader's end (ReapEnded) all the same.
  int hold = -1;
  int log = -1;   // the attempt's file, as the daemon opened it
  bool held = false;       // the log refused the last write for want of room
  int64_t retry_mono = 0;  // when held: the next try
  bool copy = false;       // splice refused (a file system without it): read() and write()
  std::string pending;     // copy mode: read from the pipe, not yet written
  bool grown = false;
};
constexpr int64_t kRetryMs = 1000;
constexpr int kHeldPipeBytes = 1 << 20;  // the default /proc/sys/fs/pipe-max-size

bool NoRoom(int err) { return err == ENOSPC || err == EDQUOT; }

void Hold(Drain& d) {
  d.held = true;
  d.retry_mono = MonotonicMs() + kRetryMs;
  if (!d.grown) {
    // More room for the run's bytes while the disk has none (up to the unprivileged maximum;
    // refused beyond a user's pipe quota, which only means it blocks sooner).
    d.grown = true;
    (void)fcntl(d.pipe, F_SETPIPE_SZ, kHeldPipeBytes);
  }
}

// Moves what is in the pipe to the log until the pipe is empty, the writers are all gone (the
// pipe is then closed), or the log has no room (held). Any other failure of the log drops the
// bytes, as the run's own write would have failed: the run is never stopped for its log.
void Pump(Drain& d) {
  if (d.pipe < 0) return;
  d.held = false;
  char buf[1 << 16];
  for (;;) {
    if (!d.pending.empty()) {
      ssize_t w = write(d.log, d.pending.data(), d.pending.size());
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && NoRoom(errno)) return Hold(d);
      d.pending.erase(0, w > 0 ? static_cast<size_t>(w) : d.pending.size());
      continue;
    }
    ssize_t n = d.copy ? read(d.pipe, buf, sizeof buf)
                       : splice(d.pipe, nullptr, d.log, nullptr, 1 << 20, SPLICE_F_NONBLOCK);
    if (n > 0) {
      if (d.copy) d.pending.assign(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {  // every writer has gone
      close(d.pipe);
      d.pipe = -1;
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (!d.copy && NoRoom(errno)) return Hold(d);
    if (d.copy) {  // the pipe itself failed (never expected): nothing more comes from it
      close(d.pipe);
      d.pipe = -1;
      return;
    }
    d.copy = true;  // splice refused this log: copy through a buffer instead
  }
}

// A run the supervisor watches, and where its exit record is: the attribute ExitAttribute() of
// its stdout log (`log`), or, where that could not be set, the exit file.
struct Watched {
  std::string exit_path;
  std::string log;    // "": the record is in the exit file
  std::string start;  // the record's start line, rewritten with the end into the attribute
  Drain out, err;     // err unused (pipe -1) when both streams go to one file
  // Its leader has ended but the log holds back part of its output (a full disk): the end is
  // told and recorded once the output is all in the log.
  bool ending = false;
  Message end;
  void Close() {
    for (Drain* d : {&out, &err}) {
      if (d->pipe >= 0) close(d->pipe);
      if (d->hold >= 0) close(d->hold);
      d->pipe = d->hold = -1;
    }
    if (err.log >= 0 && err.log != out.log) close(err.log);
    if (out.log >= 0) close(out.log);
    out.log = err.log = -1;
  }
  bool Flushed() const { return !out.held && !err.held; }
};

// Sets the exit record on the log's attribute (one call, no inode: an exit file of its own was
// a tenth of the daemon's cost per short run, bench/README.md). False where the file system
// takes no user attributes (or refuses this one): the caller writes the exit file instead.
bool SetRecord(int fd, const std::string& log, const std::string& text) {
  if (log.empty() || FileFault(log) != 0) return false;
  int r = fd >= 0 ? fsetxattr(fd, ExitAttribute(), text.data(), text.size(), 0)
                  : setxattr(log.c_str(), ExitAttribute(), text.data(), text.size(), 0);
  return r == 0;
}

// Tells the daemon how the run ended and records it (the run's output is all in its log).
void Finish(Watched& w, Link* link) {
  const Message& m = w.end;
  link->Send(m, "");
  // Compact, so that start and end fit in the inode's own room for attributes (ext4's 256-byte
  // inodes): no block is allocated for them either.
  char line[128];
  int len = std::snprintf(line, sizeof line,
                          "{\"exit_code\":%d,\"signal\":%d,\"ended_ms\":%lld}\n", m.exit_code,
                          m.signal, static_cast<long long>(m.ended_ms));
  if (w.log.empty()) {
    (void)AppendLine(w.exit_path, line, static_cast<size_t>(len), 0);
  } else if (std::string record = w.start + std::string(line, static_cast<size_t>(len));
             !SetRecord(-1, w.log, record)) {
    // The log is gone or refuses the attribute now: the whole record goes to the file.
    (void)AppendLine(w.exit_path, record.data(), record.size(), O_CREAT | O_TRUNC);
  }
  w.Close();
}

// Every run whose leader has ended: the rest of its group is killed while the leader's zombie
// still holds the group's id, what the run wrote is moved to its log, the daemon is told, the end
// is written to its exit file, and only then is the leader reaped (so whoever sees the pid gone
// finds the end recorded). A run whose log has no room for the rest of its output waits in
// `ending` (its leader reaped: the group is dead) until it has.
void ReapEnded(std::map<pid_t, Watched>* runs, std::vector<Watched>* ending, Link* link) {
  for (;;) {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    const pid_t pid = info.si_pid;
    auto it = runs->find(pid);
    if (it != runs->end()) {
      Watched& w = it->second;
      w.ending = true;
      Message& m = w.end;
      m.type = kEnded;
      m.pid = pid;
      if (info.si_code == CLD_EXITED) {
        m.exit_code = info.si_status;
      } else {
        m.signal = info.si_status;
      }
      m.ended_ms = WallMs();
      kill(-pid, SIGKILL);
      // The write ends it kept go now: what is left in the pipes is read below, and a run held
      // in `ending` for want of room costs no more descriptors than it did before (HoldsRoom
      // counts only the runs still running).
      for (Drain* d : {&w.out, &w.err}) {
        if (d->hold >= 0) close(d->hold);
        d->hold = -1;
      }
      // What it wrote last, before the daemon hears of its end (the daemon reads the log to its
      // end then). The daemon first (the next run waits for it), then the file, then the reap:
      // an adopter that finds the zombie waits for the line (PosixLauncher::kZombieGraceMs).
      Pump(w.out);
      Pump(w.err);
      if (w.Flushed()) {
        Finish(w, link);
      } else {
        ending->push_back(std::move(w));
      }
      runs->erase(it);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

// Whether `runs` runs may each keep their pipes' write ends open here: six descriptors a run,
// with a margin of 64, under the soft limit on open files.
bool HoldsRoom(size_t runs) {
  static const rlim_t limit = [] {
    rlimit rl{};
    return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : static_cast<rlim_t>(1024);
  }();
  return limit == RLIM_INFINITY || runs * 6 + 64 < limit;
}

// Starts one run and writes its exit file's start line; the answer goes back to the daemon.
// Takes out_fd and err_fd (the attempt's logs; one descriptor when both streams share a file).
void LaunchRun(const ChildPlan& plan, int out_fd, int err_fd, std::map<pid_t, Watched>* runs,
               Link* link) {
  // The run writes into pipes this process empties into the logs (Drain). Both streams to one
  // file (sent as two descriptors of one open file) share one pipe, so they stay in order.
  struct stat so {}, se {};
  const bool shared = err_fd == out_fd || (fstat(out_fd, &so) == 0 && fstat(err_fd, &se) == 0 &&
                                           so.st_dev == se.st_dev && so.st_ino == se.st_ino);
  if (shared && err_fd != out_fd) {
    close(err_fd);
    err_fd = out_fd;
  }
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  ForkOutcome outcome;
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || (!shared && pipe2(err_pipe, O_CLOEXEC) != 0)) {
    outcome.err = errno;
    outcome.failed_step = "creating the pipe for its output";
  } else {
    outcome = StartChild(plan, out_pipe[1], shared ? out_pipe[1] : err_pipe[1]);
  }
  const bool started = outcome.err == 0 && outcome.pid > 0;
  // The write ends are kept (Drain::hold) while descriptors are plentiful: each run then costs
  // six here (two logs, two pipes' two ends), four without them; a supervisor near its limit
  // (the soft RLIMIT_NOFILE) keeps only what it must.
  const bool hold = started && HoldsRoom(runs->size() + 1);
  if (!hold) {
    for (int fd : {out_pipe[1], err_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    out_pipe[1] = err_pipe[1] = -1;
  }
  for (int fd : {out_pipe[0], err_pipe[0]}) {
    if (fd >= 0) fcntl(fd, F_SETFL, O_NONBLOCK);
  }
  auto drop = [&] {
    for (int fd : {out_pipe[0], err_pipe[0], out_fd}) {
      if (fd >= 0) close(fd);
    }
    if (!shared && err_fd >= 0) close(err_fd);
  };
  Message m;
  m.type = kAnswer;
  m.pid = outcome.pid;
  m.err = outcome.err;
  if (outcome.err == 0 && outcome.pid > 0) {
    const int64_t ticks = outcome.start_ticks;
    m.start_ticks = ticks;
    // The start line names the run's pid: an engine that dies before it records the pid finds
    // the run through it, and its absence proves the run never started.
    char line[64];
    int len = std::snprintf(line, sizeof line, "%d %lld\n", static_cast<int>(outcome.pid),
                            static_cast<long long>(ticks));
    Watched w;
    w.exit_path = plan.exit_path;
    w.log = plan.exit_log;
    w.start.assign(line, static_cast<size_t>(len));
    w.out.pipe = out_pipe[0];
    w.out.hold = out_pipe[1];
    w.out.log = out_fd;
    w.err.pipe = err_pipe[0];
    w.err.hold = err_pipe[1];
    w.err.log = shared ? -1 : err_fd;
    if (!SetRecord(out_fd, w.log, w.start)) {
      w.log.clear();
      (void)AppendLine(plan.exit_path, line, static_cast<size_t>(len), O_CREAT | O_TRUNC);
    }
    (*runs)[outcome.pid] = std::move(w);
  } else {
    if (outcome.pid > 0) {
      // Its setup failed and it exited (or was killed): not a run.
      int status = 0;
      while (waitpid(outcome.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    m.pid = 0;
    drop();
  }
  m.text_len = static_cast<uint32_t>(std::min<size_t>(outcome.failed_step.size(), 1024));
  if (m.pid > 0) {
    link->SendLater(m, outcome.failed_step);
  } else {
    link->Send(m, outcome.failed_step);  // a start that failed is said at once
  }
}

// The supervisor's whole life: start runs when asked, record their ends, until the daemon has
// gone and no run is left.
[[noreturn]] void SupervisorMain(int sock) {
  prctl(PR_SET_NAME, "drover-super", 0, 0, 0);
  // Nothing of the daemon's stays open here (the store's database, its lock, sockets, its stdio:
  // a `drover serve | tee` must end when the daemon does): only the socket to the daemon.
  if (sock > 3) close_range(3, static_cast<unsigned>(sock - 1), 0);
  close_range(static_cast<unsigned>(sock + 1), ~0U, 0);
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    for (int fd = 0; fd <= 2; ++fd) {
      if (fd != devnull) dup2(devnull, fd);
    }
    if (devnull > 2) close(devnull);
  }
  // Its own session and group: what is sent to the daemon's terminal or group (Ctrl-C, Ctrl-\,
  // Ctrl-Z, kill -- -PGID) does not stop it from watching the runs. SIGINT, SIGTERM and SIGHUP
  // stay blocked as the launcher left them.
  setsid();
  for (int sig : {SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE}) signal(sig, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  std::map<pid_t, Watched> runs;
  std::vector<Watched> ending;  // ended, their output still held back by a full disk
  Link link;
  link.sock = sock;
  std::vector<pollfd> p;
  std::vector<Drain*> drains;  // the drain of each p[i] from 2 on
  for (;;) {
    ReapEnded(&runs, &ending, &link);
    // Held output is tried again when its time comes; a run that ended is told once all of it
    // is in its log.
    const int64_t now = MonotonicMs();
    int64_t next_retry = -1;
    for (size_t i = 0; i < ending.size();) {
      Watched& w = ending[i];
      for (Drain* d : {&w.out, &w.err}) {
        if (d->held && now >= d->retry_mono) Pump(*d);
      }
      if (w.Flushed()) {
        Finish(w, &link);
        ending.erase(ending.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
    if (link.gone && runs.empty() && ending.empty()) _exit(0);
    if (link.later_due >= 0 && now >= link.later_due) {
      link.Release();
      link.Flush();
    }
    p.clear();
    drains.clear();
    short want = static_cast<short>(POLLIN | (link.outbox.empty() ? 0 : POLLOUT));
    p.push_back({sfd, POLLIN, 0});
    p.push_back({link.gone ? -1 : link.sock, want, 0});  // a negative fd is left out by poll
    auto watch = [&](Drain& d) {
      if (d.pipe < 0) return;
      if (d.held) {
        if (now >= d.retry_mono) Pump(d);
        if (d.held) {
          next_retry = next_retry < 0 ? d.retry_mono : std::min(next_retry, d.retry_mono);
          return;
        }
      }
      if (d.pipe < 0) return;
      p.push_back({d.pipe, POLLIN, 0});
      drains.push_back(&d);
    };
    for (auto& [pid, w] : runs) {
      watch(w.out);
      watch(w.err);
    }
    for (Watched& w : ending) {
      for (Drain* d : {&w.out, &w.err}) {
        if (d->held) next_retry = next_retry < 0 ? d->retry_mono : std::min(next_retry, d->retry_mono);
      }
    }
    // Without a signalfd (never expected), look for ends every 100 ms.
    int timeout = sfd < 0 ? 100 : -1;
    if (next_retry >= 0) {
      const int64_t wait = std::max<int64_t>(0, next_retry - now);
      timeout = timeout < 0 ? static_cast<int>(wait) : std::min<int>(timeout, static_cast<int>(wait));
    }
    if (link.later_due >= 0) {
      const int wait = static_cast<int>(std::max<int64_t>(0, link.later_due - now));
      timeout = timeout < 0 ? wait : std::min(timeout, wait);
    }
    int r = poll(p.data(), p.size(), timeout);
    if (r < 0 && errno != EINTR) _exit(1);
    if (r <= 0) continue;
    if (sfd >= 0 && (p[0].revents & POLLIN)) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      }
    }
    for (size_t i = 2; i < p.size(); ++i) {
      if (p[i].revents != 0) Pump(*drains[i - 2]);
    }
    if (link.gone) continue;
    if (p[1].revents & POLLOUT) link.Flush();
    if (link.gone || (p[1].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    std::string payload;
    int out_fd = -1, err_fd = -1;
    if (!ReceiveRequest(link.sock, &payload, &out_fd, &err_fd)) {
      link.Gone();
      continue;
    }
    Result<ChildPlan> plan = Supervisor::Decode(payload);
    if (plan.ok()) {
      LaunchRun(*plan, out_fd, err_fd, &runs, &link);  // takes out_fd and err_fd
    } else {
      Message m;
      m.type = kAnswer;
      m.err = EINVAL;
      const std::string step = "reading the supervisor's request";
      m.text_len = static_cast<uint32_t>(step.size());
      link.Send(m, step);
      close(out_fd);
      if (err_fd != out_fd) close(err_fd);
    }
  }
}

}  // namespace

std::string Supervisor::Encode(const ChildPlan& p) {
  std::string out;
  PutU32(&out, p.shim ? 1 : 0);
  PutString(&out, p.exit_path);
  PutString(&out, p.exit_log);
  PutString(&out, p.program);
  PutString(&out, p.exec_path);
  PutStrings(&out, p.argv);
  PutStrings(&out, p.env);
  PutString(&out, p.cwd);
  PutU32(&out, p.mount_overlay ? 1 : 0);
  PutString(&out, p.overlay.options);
  PutString(&out, p.overlay.target);
  PutU32(&out, p.overlay.user_namespace ? 1 : 0);
  PutString(&out, p.overlay.uid_map);
  PutString(&out, p.overlay.gid_map);
  PutU32(&out, static_cast<uint32_t>(p.overlay.binds.size()));
  for (const auto& b : p.overlay.binds) {
    PutString(&out, b.source);
    PutString(&out, b.target);
    PutU32(&out, b.dir ? 1 : 0);
    PutU32(&out, static_cast<uint32_t>(b.flags));
    PutU32(&out, b.trusted ? 1 : 0);
    PutString(&out, b.source_root);
  }
  PutString(&out, std::to_string(p.run_as.uid) + " " + std::to_string(p.run_as.gid));
  PutU32(&out, static_cast<uint32_t>(p.run_as.groups.size()));
  for (uint32_t g : p.run_as.groups) PutU32(&out, g);
  return out;
}

Result<ChildPlan> Supervisor::Decode(const std::string& bytes) {
  ChildPlan p;
  Reader r(bytes);
  bool ok = r.Flag(&p.shim) && r.String(&p.exit_path) && r.String(&p.exit_log) &&
            r.String(&p.program) &&
            r.String(&p.exec_path) && r.Strings(&p.argv) && r.Strings(&p.env) &&
            r.String(&p.cwd) && r.Flag(&p.mount_overlay) && r.String(&p.overlay.options) &&
            r.String(&p.overlay.target) && r.Flag(&p.overlay.user_namespace) &&
            r.String(&p.overlay.uid_map) && r.String(&p.overlay.gid_map);
  uint32_t binds = 0;
  ok = ok && r.U32(&binds) && binds <= 1024;
  for (uint32_t i = 0; ok && i < binds; ++i) {
    PreparedOverlay::Bind b;
    uint32_t flags = 0;
    ok = r.String(&b.source) && r.String(&b.target) && r.Flag(&b.dir) && r.U32(&flags) &&
         r.Flag(&b.trusted) && r.String(&b.source_root);
    b.flags = flags;
    p.overlay.binds.push_back(std::move(b));
  }
  std::string ids;
  uint32_t groups = 0;
  ok = ok && r.String(&ids) && r.U32(&groups) && groups <= 65536;
  if (ok) {
    long long uid = -1, gid = -1;
    ok = std::sscanf(ids.c_str(), "%lld %lld", &uid, &gid) == 2 && uid >= -1 && gid >= -1 &&
         uid <= UINT32_MAX && gid <= UINT32_MAX;
    p.run_as.uid = uid;
    p.run_as.gid = gid;
  }
  for (uint32_t i = 0; ok && i < groups; ++i) {
    uint32_t g = 0;
    ok = r.U32(&g);
    p.run_as.groups.push_back(g);
  }
  ok = ok && r.AtEnd();
  if (!ok || p.argv.empty()) return InvalidArgument("not a supervisor request");
  return p;
}

Result<std::unique_ptr<Supervisor>> Supervisor::Start() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus("cannot create the supervisor's socket");
  }
  pid_t pid = fork();
  if (pid < 0) {
    Status s = ErrnoStatus("cannot fork the supervisor");
    close(fds[0]);
    close(fds[1]);
    return s;
  }
  if (pid == 0) {
    close(fds[0]);
    SupervisorMain(fds[1]);
  }
  close(fds[1]);
  return std::unique_ptr<Supervisor>(new Supervisor(pid, fds[0]));
}

Status Supervisor::Send(const ChildPlan& plan, int out_fd, int err_fd, bool* delivered) {
  *delivered = false;
  if (fd_ < 0) return Status(Code::kIo, "the supervisor is gone");
  std::string payload = Encode(plan);
  if (payload.size() > kMaxRequestBytes) {
    return InvalidArgument("its command and environment take over 8 MiB (" +
                           std::to_string(payload.size()) + " bytes)");
  }
  uint32_t len = static_cast<uint32_t>(payload.size());
  int fds[2] = {out_fd, err_fd};
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    cmsghdr align;
  } control;
  std::memset(control.buf, 0, sizeof control.buf);
  iovec iov{&len, sizeof len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent;
  do {
    sent = sendmsg(fd_, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(sizeof len)) {
    Lost();
    return Status(Code::kIo, "the supervisor is gone");
  }
  // From here the supervisor may have the request, whole or in part: it may start the run.
  *delivered = true;
  if (!WriteFull(fd_, payload.data(), len)) {
    Lost();
    return Status(Code::kIo, "the supervisor went away during a launch");
  }
  return Status::Ok();
}

bool Supervisor::ReadMessage(int timeout_ms) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  Message m;
  std::string text;
  bool ok = r == 1 && ReadFull(fd_, &m, sizeof m) && m.text_len <= 1024;
  if (ok && m.text_len > 0) {
    text.resize(m.text_len);
    ok = ReadFull(fd_, text.data(), text.size());
  }
  if (!ok || (m.type != kAnswer && m.type != kEnded)) {
    Lost();
    return false;
  }
  if (m.type == kAnswer) {
    Started answer;
    answer.outcome.pid = m.pid;
    answer.outcome.err = m.err;
    answer.outcome.failed_step = std::move(text);
    answer.start_ticks = m.start_ticks;
    answers_.push_back(std::move(answer));
  } else {
    ProcessExit e;
    e.handle = ExecHandle(m.pid);
    e.exit_code = m.exit_code;
    e.signal = m.signal;
    e.ended_ms = m.ended_ms;
    ends_.push_back(e);
  }
  return true;
}

bool Supervisor::TakeEnds(std::vector<ProcessExit>* ends) {
  while (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) break;
    if (!ReadMessage(kAnswerTimeoutMs)) break;  // the rest of a message that has begun
  }
  for (ProcessExit& e : ends_) ends->push_back(e);
  ends_.clear();
  return fd_ >= 0;
}

void Supervisor::TakeAnswers(std::vector<Started>* answers) {
  for (Started& a : answers_) answers->push_back(std::move(a));
  answers_.clear();
}

void Supervisor::Close() {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

void Supervisor::Lost() {
  Close();
  // One that is silent or broken is not trusted to watch runs any more: it is stopped (the
  // launcher adopts its runs and reads their exit files), and reaped when it has ended.
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;
  }
}

Supervisor::~Supervisor() {
  Close();
  // With no run to watch it exits at the end of the stream: give it a moment, so no zombie of
  // it is left. One that still watches runs goes on after us.
  for (int i = 0; i < 50 && pid_ > 0; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    usleep(2000);
  }
}

}  // namespace drover
