#include "server/connection_gate.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
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

void SetDeadline(int64_t ms) {
  if (t_slot.deadline_ms) t_slot.deadline_ms->store(ms);
}

}  // namespace

int64_t ConnectionGate::NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

ConnectionGate::ConnectionGate(size_t workers, ConnectionLimits limits,
                               std::function<void(int)> serve)
    : limits_(limits), serve_(std::move(serve)) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  workers = std::max<size_t>(workers, 1);
  for (size_t i = 0; i < workers; ++i) slots_.push_back(std::make_unique<Slot>());
  workers_ = std::make_unique<httplib::ThreadPool>(workers);
  watcher_ = std::thread([this] { Watch(); });
}

ConnectionGate::~ConnectionGate() {
  Shutdown();
  if (epoll_ >= 0) close(epoll_);
  if (wake_ >= 0) close(wake_);
}

void ConnectionGate::Admit(int fd, bool kept_alive) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_) {
    close(fd);
    return;
  }
  if (waiting_.size() >= std::max<size_t>(limits_.max_waiting, 1)) {
    // The oldest has had the longest to send its headers: it gives way.
    Waiting oldest = waiting_.front();
    waiting_.pop_front();
    epoll_ctl(epoll_, EPOLL_CTL_DEL, oldest.fd, nullptr);
    Drop(oldest, /*answer_408=*/!oldest.kept_alive);
  }
  waiting_.push_back({fd, NowMs() + limits_.header_ms, kept_alive});
  epoll_event ev{};
  // Edge-triggered: the headers are peeked, not read, so the socket stays readable; an event
  // comes again when more bytes arrive (and at once if some are already there).
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    waiting_.pop_back();
    close(fd);
  }
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

void ConnectionGate::Serve(int fd) {
  if (t_slot.fd == nullptr) {
    Slot* s = slots_[next_slot_.fetch_add(1) % slots_.size()].get();
    t_slot = {&s->fd, &s->deadline_ms};
  }
  // The headers are in; httplib reads them, then HeadersRead() sets the body's deadline.
  t_slot.deadline_ms->store(NowMs() + limits_.body_ms);
  t_limits = &limits_;
  t_slot.fd->store(fd);
  serve_(fd);  // closes fd, or admits it again for its next request
  t_slot.deadline_ms->store(0);
  t_slot.fd->store(-1);
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
  return got > 0 && (static_cast<size_t>(got) == sizeof peek ||
                     memmem(peek, static_cast<size_t>(got), "\r\n\r\n", 4) != nullptr);
}

void ConnectionGate::HeadersRead() {
  if (t_limits) SetDeadline(NowMs() + t_limits->body_ms);
}
void ConnectionGate::HandlerDone() {
  if (t_limits) SetDeadline(NowMs() + t_limits->response_ms);
}
void ConnectionGate::Unbounded() { SetDeadline(0); }

void ConnectionGate::Watch() {
  std::vector<char> peek(kMaxHeaderBytes);
  epoll_event events[64];
  for (;;) {
    int64_t now = NowMs();
    int timeout = 100;  // worker deadlines are looked at this often
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_watch_) return;
      if (!waiting_.empty()) {
        timeout = static_cast<int>(
            std::clamp<int64_t>(waiting_.front().deadline_ms - now, 0, timeout));
      }
    }
    int n = epoll_wait(epoll_, events, 64, timeout);
    now = NowMs();
    std::vector<int> ready;
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_watch_) return;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_) continue;
      auto it = std::find_if(waiting_.begin(), waiting_.end(),
                             [fd](const Waiting& w) { return w.fd == fd; });
      if (it == waiting_.end()) continue;
      ssize_t got = recv(fd, peek.data(), peek.size(), MSG_PEEK | MSG_DONTWAIT);
      const bool complete =
          got > 0 && memmem(peek.data(), static_cast<size_t>(got), "\r\n\r\n", 4) != nullptr;
      const bool too_big = !complete && got > 0 && static_cast<size_t>(got) == peek.size();
      const bool gone = got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) ||
                        (!complete && (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)));
      if (!complete && !gone && !too_big) continue;  // more headers to come
      waiting_.erase(it);
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      if (complete && !shut_) {
        ready.push_back(fd);
      } else if (too_big) {
        static const char kTooBig[] =
            "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n"
            "Content-Length: 0\r\n\r\n";
        (void)!send(fd, kTooBig, sizeof kTooBig - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        close(fd);
        dropped_waiting_.fetch_add(1);
      } else {
        close(fd);  // hung up before sending a request, or shutting down: nothing to answer
      }
    }
    // Headers not in on time: 408 and closed.
    while (!waiting_.empty() && waiting_.front().deadline_ms <= now) {
      Waiting w = waiting_.front();
      waiting_.pop_front();
      epoll_ctl(epoll_, EPOLL_CTL_DEL, w.fd, nullptr);
      Drop(w, /*answer_408=*/!w.kept_alive);
    }
    for (int fd : ready) workers_->enqueue([this, fd] { Serve(fd); });
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
    for (const Waiting& w : waiting_) {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, w.fd, nullptr);
      close(w.fd);
    }
    waiting_.clear();
  }
  // Running requests finish (handlers watch the server's stopping flag) while Watch() still
  // enforces their deadlines, so a client that trickles cannot hold the shutdown; then it ends.
  workers_->shutdown();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_watch_ = true;
  }
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
  if (watcher_.joinable()) watcher_.join();
}

}  // namespace drover::server
