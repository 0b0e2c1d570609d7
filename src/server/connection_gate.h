#pragma once
// What keeps slow and idle clients from starving the daemon's API. cpp-httplib gives each
// connection a worker thread for as long as it reads it, so 200 clients sending a header line
// every 2 s held every worker and no request was answered for over 30 s. Here a connection gets a
// worker only while a request whose headers have all arrived is served: until then, and between
// the requests of a kept-alive connection, one thread watches it (epoll, peeking without reading)
// for at most header_ms, and at most max_waiting connections wait (the oldest is dropped for a new
// one). On a worker, a request's body and the writing of its response each have a deadline too,
// enforced by the same thread (it shuts the connection down); handlers that run or stream for
// long (a submit's snapshot, the event stream, a log follow, MCP) lift it with Unbounded().
// Bounds are in docs/security.md.
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace drover::server {

// The bounds (docs/security.md); tests shorten them.
struct ConnectionLimits {
  // Time for a client to send a request's line and headers: from its connection, or from the
  // end of its last request on a kept-alive connection.
  int64_t header_ms = 10'000;
  // Time to send the body once the headers are in (16 MiB at 1.6 MB/s), and to take the whole
  // response once the handler has returned.
  int64_t body_ms = 10'000;
  int64_t response_ms = 10'000;
  // Connections waiting for their headers (or their next request); the oldest gives way.
  size_t max_waiting = 512;
};

class ConnectionGate {
 public:
  // A request's headers larger than this are refused (431) at the gate.
  static constexpr size_t kMaxHeaderBytes = 16 * 1024;

  // `serve(fd)` processes and closes one connection on a worker (`workers` of them).
  ConnectionGate(size_t workers, ConnectionLimits limits, std::function<void(int)> serve);
  ~ConnectionGate();  // Shutdown()s
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // A connection just accepted (or, kept_alive, one whose last request was served): watched
  // until a request's headers are in, then served. Takes the fd. A kept-alive connection that
  // sends nothing more is closed without a word (a client may be about to reuse it).
  void Admit(int fd, bool kept_alive = false);
  // Closes what waits, lets running requests finish, joins the threads. Idempotent.
  void Shutdown();

  // On a worker, from the request handlers' hooks: the headers are read (the body is next),
  // the handler has returned (its response is next), or a handler runs or streams for long from
  // now on (no deadline until the request is done).
  static void HeadersRead();
  // Whether a request's headers have all arrived on fd within wait_ms (peeked, not read).
  static bool RequestWaiting(int fd, int wait_ms);
  static void HandlerDone();
  static void Unbounded();

  // For tests: connections dropped at the door so far (headers too slow, or too many waiting),
  // and worker connections shut down for a missed deadline.
  int64_t dropped_waiting() const { return dropped_waiting_.load(); }
  int64_t dropped_working() const { return dropped_working_.load(); }

 private:
  struct Waiting {
    int fd = -1;
    int64_t deadline_ms = 0;
    bool kept_alive = false;
  };
  struct Slot {  // one per worker: the connection it serves and when it must be done reading
    std::atomic<int> fd{-1};
    std::atomic<int64_t> deadline_ms{0};  // 0: none
  };
  void Watch();
  void Drop(const Waiting& w, bool answer_408);
  void Serve(int fd);
  static int64_t NowMs();

  const ConnectionLimits limits_;
  std::function<void(int)> serve_;
  int epoll_ = -1;
  int wake_ = -1;  // an eventfd: Shutdown() ends Watch()
  std::mutex mu_;
  std::deque<Waiting> waiting_;  // oldest first
  bool shut_ = false;        // nothing new is admitted or handed to a worker
  bool stop_watch_ = false;  // the workers have drained: Watch() may end
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<size_t> next_slot_{0};
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::thread watcher_;
  std::atomic<int64_t> dropped_waiting_{0};
  std::atomic<int64_t> dropped_working_{0};
};

}  // namespace drover::server
