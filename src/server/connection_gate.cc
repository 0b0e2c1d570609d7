#include "server/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace drover::server {

namespace {

struct WorkerSlotRef {
  std::atomic<int>* fd = nullptr;
  std::atomic<int64_t>* deadline_ms = nullptr;
};
// The slot of the connection this worker thread serves (none on other threads).
thread_local WorkerSlotRef t_slot;
thread_local const ConnectionLimits* t_limits = nullptr;
// The body deadline the gate set when the body of the request being served was still coming
// (0: none, the body starts its own at HeadersRead()).
thread_local int64_t t_body_deadline_ms = 0;
// Whether the gate sent `100 Continue` for the first request of the connection being served.
thread_local bool t_continue_sent = false;

void SetDeadline(int64_t ms) {
  if (t_slot.deadline_ms) t_slot.deadline_ms->store(ms);
}

// The bytes waiting in a socket's receive queue (not read).
size_t Queued(int fd) {
  int n = 0;
  if (ioctl(fd, FIONREAD, &n) != 0 || n < 0) return 0;
  return static_cast<size_t>(n);
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

int64_t ConnectionGate::NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

std::string ConnectionGate::HeaderValue(std::string_view head, std::string_view name) {
  const size_t end = head.find("\r\n\r\n");
  if (end != std::string_view::npos) head = head.substr(0, end + 2);
  size_t at = head.find("\r\n");  // past the request line
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t start = at + 2;
    const size_t next = head.find("\r\n", start);
    const std::string_view line =
        head.substr(start, next == std::string_view::npos ? std::string_view::npos : next - start);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && EqualsIgnoringCase(line.substr(0, colon), name)) {
      return std::string(Trim(line.substr(colon + 1)));
    }
    at = next;
  }
  return "";
}

size_t ConnectionGate::RequestBytes(std::string_view head, size_t* whole) {
  const size_t end = head.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  const size_t header_bytes = end + 4;
  uint64_t body = 0;
  // A chunked body is refused before it is read (411), and a malformed length by httplib: only
  // a plain Content-Length is waited for.
  // A client that asks to be told to go on (`Expect: 100-continue`, curl for a large body) sends
  // its body only once told: the gate tells a caller it knows and then waits for it (Examine).
  const std::string length = HeaderValue(head.substr(0, header_bytes), "Content-Length");
  if (!length.empty() && length.size() <= 15 &&
      std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    body = std::stoull(length);
  }
  if (whole) *whole = header_bytes + static_cast<size_t>(body);
  if (ExpectsContinue(head.substr(0, header_bytes))) return header_bytes;
  return header_bytes + static_cast<size_t>(std::min<uint64_t>(body, kBodyAtGateBytes));
}

bool ConnectionGate::ExpectsContinue(std::string_view head) {
  const std::string expect = HeaderValue(head, "Expect");
  return EqualsIgnoringCase(expect, "100-continue");
}

bool ConnectionGate::ContinueSent() { return t_continue_sent; }

CallerKey ConnectionGate::PeerOf(int fd) {
  CallerKey k;
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && a.ss_family == AF_UNIX) {
    ucred cr{};
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) k.uid = cr.uid;
    k.key = "uid " + std::to_string(k.uid);
    return k;
  }
  len = sizeof a;
  char host[INET6_ADDRSTRLEN] = {0};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    if (a.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, host, sizeof host);
    } else if (a.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, host, sizeof host);
    }
  }
  k.key = std::string("ip ") + host;
  return k;
}

ConnectionGate::ConnectionGate(size_t workers, ConnectionLimits limits,
                               std::function<void(int)> serve, Classifier classify)
    : limits_(limits), serve_(std::move(serve)), classify_(std::move(classify)) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  workers = std::max<size_t>(workers, 1);
  per_caller_ = limits_.per_caller_workers > 0 ? limits_.per_caller_workers
                                               : std::max<size_t>(2, workers / 4);
  body_cap_ = std::max<size_t>(1, workers / 2);
  for (size_t i = 0; i < workers; ++i) slots_.push_back(std::make_unique<Slot>());
  for (size_t i = 0; i < workers; ++i) {
    workers_.emplace_back([this, s = slots_[i].get()] { Work(s); });
  }
  watcher_ = std::thread([this] { Watch(); });
}

ConnectionGate::~ConnectionGate() {
  Shutdown();
  if (epoll_ >= 0) close(epoll_);
  if (wake_ >= 0) close(wake_);
}

void ConnectionGate::Admit(int fd, bool kept_alive) {
  CallerKey who = PeerOf(fd);
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_) {
    close(fd);
    return;
  }
  MakeRoomLocked();
  const int64_t now = NowMs();
  Waiting w{fd, now + limits_.header_ms, now, kept_alive, std::move(who)};
  epoll_event ev{};
  // Edge-triggered: the request is peeked, not read, so the socket stays readable; an event
  // comes again when more bytes arrive (and at once if some are already there).
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  ++callers_[w.who.key].waiting;
  const std::string key = w.who.key;
  waiting_[fd] = std::move(w);
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    waiting_.erase(fd);
    --callers_[key].waiting;
    ForgetLocked(key);
    close(fd);
  }
}

void ConnectionGate::MakeRoomLocked() {
  if (waiting_.size() + ready_count_ < std::max<size_t>(limits_.max_waiting, 1)) return;
  // The caller holding the most connections at the gate gives way, its oldest first: a flood of
  // one user's connections pushes out only its own.
  const std::string* most = nullptr;
  size_t most_n = 0;
  for (const auto& [key, c] : callers_) {
    if (c.waiting + c.ready.size() > most_n) {
      most_n = c.waiting + c.ready.size();
      most = &key;
    }
  }
  if (most == nullptr) return;
  const std::string key = *most;
  Caller& c = callers_[key];
  if (c.waiting > 0) {
    auto oldest = waiting_.end();
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if (it->second.who.key == key &&
          (oldest == waiting_.end() || it->second.since_ms < oldest->second.since_ms)) {
        oldest = it;
      }
    }
    if (oldest != waiting_.end()) {
      Waiting w = std::move(oldest->second);
      waiting_.erase(oldest);
      --c.waiting;
      epoll_ctl(epoll_, EPOLL_CTL_DEL, w.fd, nullptr);
      // A kept-alive connection that has started no request is closed without a word.
      Drop(w, /*answer_408=*/!w.kept_alive || w.need > 0);
      ForgetLocked(key);
      return;
    }
  }
  if (!c.ready.empty()) {
    Waiting w = std::move(c.ready.front());
    c.ready.pop_front();
    --ready_count_;
    static const char kBusy[] =
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
        "Content-Length: 0\r\n\r\n";
    (void)!send(w.fd, kBusy, sizeof kBusy - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    close(w.fd);
    dropped_waiting_.fetch_add(1);
    ForgetLocked(key);
  }
}

void ConnectionGate::ForgetLocked(const std::string& key) {
  auto it = callers_.find(key);
  if (it == callers_.end()) return;
  const Caller& c = it->second;
  if (c.waiting == 0 && c.ready.empty() && c.held == 0 && !c.in_turns) callers_.erase(it);
}

void ConnectionGate::Drop(const Waiting& w, bool answer_408) {
  if (answer_408) {
    static const char kTimeout[] =
        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    (void)!send(w.fd, kTimeout, sizeof kTimeout - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  close(w.fd);
  dropped_waiting_.fetch_add(1);
}

void ConnectionGate::Ready(Waiting w) {
  const std::string key = w.who.key;
  Caller& c = callers_[key];
  c.capped = w.who.capped;
  c.ready.push_back(std::move(w));
  ++ready_count_;
  if (!c.in_turns) {
    c.in_turns = true;
    turns_.push_back(key);
  }
  work_cv_.notify_one();
}

bool ConnectionGate::PickLocked(Waiting* out) {
  // The first caller in turn that has a connection ready and may hold one more worker; it then
  // goes to the back of the line, so callers take workers in turn however many connections each
  // has ready.
  for (auto it = turns_.begin(); it != turns_.end();) {
    auto c = callers_.find(*it);
    if (c == callers_.end() || c->second.ready.empty()) {
      if (c != callers_.end()) c->second.in_turns = false;
      const std::string key = *it;
      it = turns_.erase(it);
      ForgetLocked(key);
      continue;
    }
    Caller& caller = c->second;
    if (caller.capped && caller.held >= per_caller_) {
      ++it;
      continue;
    }
    // Its oldest connection whose request has all arrived, or whose body is still coming while
    // fewer than body_cap_ workers read one: a worker reading a body never takes the last
    // workers from requests that are all in (four callers within their shares, trickling
    // bodies, held every worker).
    auto pick = caller.ready.end();
    bool partial = false;
    for (auto r = caller.ready.begin(); r != caller.ready.end(); ++r) {
      const bool all_in = r->whole == 0 || Queued(r->fd) >= r->whole;
      if (all_in) r->body_deadline_ms = 0;
      if (all_in || !caller.capped || body_held_ < body_cap_) {
        pick = r;
        partial = !all_in;
        break;
      }
    }
    if (pick == caller.ready.end()) {
      ++it;
      continue;
    }
    *out = std::move(*pick);
    caller.ready.erase(pick);
    out->in_body = partial;
    if (partial) ++body_held_;
    --ready_count_;
    ++caller.held;
    const std::string key = *it;
    turns_.erase(it);
    if (caller.ready.empty()) {
      caller.in_turns = false;
    } else {
      turns_.push_back(key);
    }
    return true;
  }
  return false;
}

void ConnectionGate::Work(Slot* slot) {
  t_slot = {&slot->fd, &slot->deadline_ms};
  t_limits = &limits_;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Waiting w;
    work_cv_.wait(lock, [&] { return shut_ || PickLocked(&w); });
    if (w.fd < 0) return;  // shut down
    lock.unlock();
    Serve(w);
    lock.lock();
    if (w.in_body) --body_held_;  // a capped caller's body may now take a worker
    auto c = callers_.find(w.who.key);
    if (c != callers_.end()) {
      --c->second.held;
      ForgetLocked(w.who.key);
    }
    // A capped caller may now take this worker; other idle workers need not wake for it.
  }
}

void ConnectionGate::Serve(const Waiting& w) {
  // The request is in (or the first kBodyAtGateBytes of its body): httplib reads it, and the
  // rest of a body still coming keeps the deadline it had at the gate.
  t_body_deadline_ms = w.body_deadline_ms;
  t_continue_sent = w.continued;
  t_slot.deadline_ms->store(w.body_deadline_ms > 0 ? w.body_deadline_ms
                                                   : NowMs() + limits_.body_ms);
  t_slot.fd->store(w.fd);
  serve_(w.fd);  // closes fd, or admits it again for its next request
  t_slot.deadline_ms->store(0);
  t_slot.fd->store(-1);
  t_body_deadline_ms = 0;
  t_continue_sent = false;
}

bool ConnectionGate::RequestWaiting(int fd, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, wait_ms);
  } while (r < 0 && errno == EINTR);
  if (r <= 0 || !(p.revents & POLLIN)) return false;
  char peek[kMaxHeaderBytes];
  ssize_t got = recv(fd, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
  if (got <= 0) return false;
  // Headers too large: the worker refuses them at once.
  const std::string_view head(peek, static_cast<size_t>(got));
  size_t whole = 0;
  const size_t need = RequestBytes(head, &whole);
  if (need == 0) return static_cast<size_t>(got) == sizeof peek;
  // Served on this worker only once all of it is here: a body still coming, or one to be
  // invited, is waited for at the gate (and then counted among the bodies being read).
  if (whole > need && ExpectsContinue(head)) return false;
  return Queued(fd) >= whole;
}

void ConnectionGate::HeadersRead() {
  if (!t_limits) return;
  // The first request of a connection handed over by the gate keeps the deadline its body had
  // there; a later one served on this worker starts its own.
  const int64_t d = t_body_deadline_ms > 0 ? t_body_deadline_ms : NowMs() + t_limits->body_ms;
  t_body_deadline_ms = 0;
  SetDeadline(d);
}
void ConnectionGate::HandlerDone() {
  if (t_limits) SetDeadline(NowMs() + t_limits->response_ms);
}
void ConnectionGate::Unbounded() { SetDeadline(0); }

ConnectionGate::Seen ConnectionGate::Examine(Waiting& w, uint32_t events, std::vector<char>& peek, int64_t now) {
  const int fd = w.fd;
  const bool hung_up = events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
  if (w.need == 0) {
    ssize_t got = recv(fd, peek.data(), peek.size(), MSG_PEEK | MSG_DONTWAIT);
    const std::string_view head(peek.data(), got > 0 ? static_cast<size_t>(got) : 0);
    const size_t need = got > 0 ? RequestBytes(head, &w.whole) : 0;
    const bool too_big = need == 0 && got > 0 && static_cast<size_t>(got) == peek.size();
    const bool gone = got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) ||
                      (need == 0 && hung_up);
    if (too_big) {
      static const char kTooBig[] =
          "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n"
          "Content-Length: 0\r\n\r\n";
      (void)!send(fd, kTooBig, sizeof kTooBig - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      close(fd);
      dropped_waiting_.fetch_add(1);
      return Seen::kClosed;
    }
    if (gone) {
      close(fd);  // hung up before sending a request: nothing to answer
      return Seen::kClosed;
    }
    if (need == 0) return Seen::kMore;  // more headers to come
    // The headers are in: who is asking, and the body's time starts.
    w.need = need;
    w.deadline_ms = now + limits_.body_ms;
    w.body_deadline_ms = w.deadline_ms;
    if (classify_) {
      CallerKey who = classify_(head, w.who);
      if (who.key != w.who.key) {
        Caller& before = callers_[w.who.key];
        --before.waiting;
        const std::string old_key = w.who.key;
        w.who = std::move(who);
        ++callers_[w.who.key].waiting;
        ForgetLocked(old_key);
      } else {
        w.who = std::move(who);
      }
    }
    // A body announced with `Expect: 100-continue`: a caller whose credentials hold is told to
    // go on here, and its body waited for like any other; anyone else is not invited to send
    // one (the worker answers its 401 or 403 at once, on headers alone).
    if (w.whole > w.need && ExpectsContinue(head) && w.who.known) {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)!send(fd, kContinue, sizeof kContinue - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      w.continued = true;
      w.need = std::min(w.whole, w.need + kBodyAtGateBytes);
    }
  }
  const size_t queued = Queued(fd);
  if (queued >= w.need) {
    if (queued >= w.whole) w.body_deadline_ms = 0;  // all of it is here
    return Seen::kReady;
  }
  if (hung_up) {
    close(fd);  // hung up halfway through its body
    return Seen::kClosed;
  }
  return Seen::kMore;  // more body to come
}

void ConnectionGate::Watch() {
  std::vector<char> peek(kMaxHeaderBytes);
  epoll_event events[64];
  for (;;) {
    int64_t now = NowMs();
    int timeout = 100;  // worker deadlines are looked at this often
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_watch_) return;
      for (const auto& [fd, w] : waiting_) {
        timeout = static_cast<int>(std::clamp<int64_t>(w.deadline_ms - now, 0, timeout));
      }
    }
    int n = epoll_wait(epoll_, events, 64, timeout);
    now = NowMs();
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_watch_) return;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_) continue;
      auto it = waiting_.find(fd);
      if (it == waiting_.end()) continue;
      Waiting& w = it->second;
      const Seen seen = Examine(w, events[i].events, peek, now);
      if (seen == Seen::kMore) continue;
      Waiting done = std::move(w);
      waiting_.erase(it);
      --callers_[done.who.key].waiting;
      if (seen == Seen::kReady) epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      if (seen == Seen::kReady && !shut_) {
        Ready(std::move(done));  // its caller's turn for a worker comes
      } else {
        if (seen == Seen::kReady) close(fd);
        ForgetLocked(done.who.key);
      }
    }
    // Headers or a body not in on time: 408 and closed.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.deadline_ms > now) {
        ++it;
        continue;
      }
      Waiting w = std::move(it->second);
      it = waiting_.erase(it);
      --callers_[w.who.key].waiting;
      epoll_ctl(epoll_, EPOLL_CTL_DEL, w.fd, nullptr);
      Drop(w, /*answer_408=*/!w.kept_alive || w.need > 0);
      ForgetLocked(w.who.key);
    }
    // A worker's connection past its deadline (a body, a response or a next request that does
    // not come): shut down, so its worker's read or write returns and it closes the connection.
    for (const auto& slot : slots_) {
      int64_t deadline = slot->deadline_ms.load();
      const int fd = slot->fd.load();
      if (deadline <= 0 || deadline > now || fd < 0) continue;
      if (slot->deadline_ms.compare_exchange_strong(deadline, 0)) {
        shutdown(fd, SHUT_RDWR);
        dropped_working_.fetch_add(1);
      }
    }
  }
}

void ConnectionGate::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_) return;
    shut_ = true;
    for (const auto& [fd, w] : waiting_) {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      close(fd);
    }
    waiting_.clear();
    // Requests that wait for a worker are closed unanswered: the daemon is stopping.
    for (auto& [key, c] : callers_) {
      for (const Waiting& w : c.ready) close(w.fd);
      c.ready.clear();
      c.waiting = 0;
    }
    ready_count_ = 0;
    work_cv_.notify_all();
  }
  // Running requests finish (handlers watch the server's stopping flag) while Watch() still
  // enforces their deadlines, so a client that trickles cannot hold the shutdown; then it ends.
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_watch_ = true;
  }
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
  if (watcher_.joinable()) watcher_.join();
}

}  // namespace drover::server
