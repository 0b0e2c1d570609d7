#include "exec/spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

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
// it read past the end or allocate more than the request's own size.
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
    v->resize(n);
    for (std::string& s : *v) {
      if (!String(&s)) return false;
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

struct Reply {
  int32_t pid = 0;
  int32_t err = 0;
  uint32_t step_len = 0;
};

// Receives one request: its bytes and the two descriptors sent with it. False at the end of the
// stream (the daemon has gone) or on a malformed request.
bool ReceiveRequest(int fd, std::string* payload, int* out_fd, int* err_fd) {
  uint32_t len = 0;
  char control[CMSG_SPACE(2 * sizeof(int))];
  iovec iov{&len, sizeof len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t r;
  do {
    r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (r < 0 && errno == EINTR);
  if (r != static_cast<ssize_t>(sizeof len)) return false;
  *out_fd = *err_fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
      int fds[2];
      std::memcpy(fds, CMSG_DATA(c), sizeof fds);
      *out_fd = fds[0];
      *err_fd = fds[1];
    }
  }
  if (*out_fd < 0 || len > Spawner::kMaxRequestBytes) return false;
  payload->resize(len);
  return ReadFull(fd, payload->data(), len);
}

// The spawner's whole life: fork a child per request, answer with its pid, until the daemon
// closes the socket.
[[noreturn]] void SpawnerMain(int fd) {
  prctl(PR_SET_NAME, "drover-spawner", 0, 0, 0);
  // Nothing of the daemon's stays open here (the store's database, its lock, sockets): only
  // stdio and the socket to the daemon.
  if (fd > 3) close_range(3, static_cast<unsigned>(fd - 1), 0);
  close_range(static_cast<unsigned>(fd + 1), ~0U, 0);
  for (;;) {
    std::string payload;
    int out_fd = -1, err_fd = -1;
    if (!ReceiveRequest(fd, &payload, &out_fd, &err_fd)) _exit(0);
    Result<ChildPlan> plan = Spawner::Decode(payload);
    ForkOutcome outcome;
    if (plan.ok()) {
      outcome = ForkChild(*plan, out_fd, err_fd, /*clone_parent=*/true);
    } else {
      outcome.err = EINVAL;
      outcome.failed_step = "reading the spawner's request";
    }
    close(out_fd);
    if (err_fd != out_fd) close(err_fd);
    Reply reply;
    reply.pid = outcome.pid;
    reply.err = outcome.err;
    reply.step_len = static_cast<uint32_t>(std::min<size_t>(outcome.failed_step.size(), 1024));
    std::string bytes(reinterpret_cast<const char*>(&reply), sizeof reply);
    bytes.append(outcome.failed_step, 0, reply.step_len);
    if (!WriteFull(fd, bytes.data(), bytes.size())) _exit(0);
  }
}

}  // namespace

std::string Spawner::Encode(const ChildPlan& p) {
  std::string out;
  PutU32(&out, p.shim ? 1 : 0);
  PutString(&out, p.exit_path);
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
  return out;
}

Result<ChildPlan> Spawner::Decode(const std::string& bytes) {
  ChildPlan p;
  Reader r(bytes);
  bool ok = r.Flag(&p.shim) && r.String(&p.exit_path) && r.String(&p.program) &&
            r.String(&p.exec_path) && r.Strings(&p.argv) && r.Strings(&p.env) &&
            r.String(&p.cwd) && r.Flag(&p.mount_overlay) && r.String(&p.overlay.options) &&
            r.String(&p.overlay.target) && r.Flag(&p.overlay.user_namespace) &&
            r.String(&p.overlay.uid_map) && r.String(&p.overlay.gid_map) && r.AtEnd();
  if (!ok || p.argv.empty()) return InvalidArgument("not a spawner request");
  return p;
}

Result<std::unique_ptr<Spawner>> Spawner::Start() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus("cannot create the spawner's socket");
  }
  pid_t pid = fork();
  if (pid < 0) {
    Status s = ErrnoStatus("cannot fork the spawner");
    close(fds[0]);
    close(fds[1]);
    return s;
  }
  if (pid == 0) {
    close(fds[0]);
    SpawnerMain(fds[1]);
  }
  close(fds[1]);
  return std::unique_ptr<Spawner>(new Spawner(pid, fds[0]));
}

Result<ForkOutcome> Spawner::Fork(const ChildPlan& plan, int out_fd, int err_fd) {
  if (fd_ < 0) return Status(Code::kIo, "the spawner is gone");
  std::string payload = Encode(plan);
  if (payload.size() > kMaxRequestBytes) {
    ForkOutcome too_big;
    too_big.err = E2BIG;
    too_big.failed_step = "passing its command and environment (over 8 MiB)";
    return too_big;
  }
  uint32_t len = static_cast<uint32_t>(payload.size());
  int fds[2] = {out_fd, err_fd};
  char control[CMSG_SPACE(sizeof fds)];
  std::memset(control, 0, sizeof control);
  iovec iov{&len, sizeof len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent;
  do {
    sent = sendmsg(fd_, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  bool ok = sent == static_cast<ssize_t>(sizeof len) && WriteFull(fd_, payload.data(), len);
  // The answer comes once the child has started or failed; the child gives up on its own setup
  // after 30 s (ForkChild), so a spawner silent for longer is stuck.
  Reply reply;
  if (ok) {
    pollfd p{fd_, POLLIN, 0};
    int r;
    do {
      r = poll(&p, 1, 40'000);
    } while (r < 0 && errno == EINTR);
    ok = r == 1 && ReadFull(fd_, &reply, sizeof reply) && reply.step_len <= 1024;
  }
  std::string step(ok ? reply.step_len : 0, '\0');
  if (ok && !step.empty()) ok = ReadFull(fd_, step.data(), step.size());
  if (!ok) {
    Stop();
    return Status(Code::kIo, "the spawner is gone");
  }
  ForkOutcome outcome;
  outcome.pid = reply.pid;
  outcome.err = reply.err;
  outcome.failed_step = std::move(step);
  return outcome;
}

void Spawner::Stop() {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ > 0) {
    // It exits at the end of the stream; one stuck in a child's setup is not waited for.
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
  }
}

Spawner::~Spawner() { Stop(); }

}  // namespace drover
