#pragma once
// What keeps slow and idle clients from starving the daemon's API. cpp-httplib gives each
// connection a worker thread for as long as it reads it, so 200 clients sending a header line
// every 2 s held every worker and no request was answered for over 30 s. Here a connection gets a
// worker only while a request that has all arrived is served: until its headers and its body (or
// the first kBodyAtGateBytes of a larger one) are in, and between the requests of a kept-alive
// connection, one thread watches it (epoll, peeking without reading) for at most header_ms, then
// body_ms, and at most max_waiting connections wait (the oldest of the caller with the most
// waiting is dropped for a new one). Workers are handed out in turn per caller (a Unix socket's
// peer uid, else whom the request's token or session names, else the peer's address), and one
// caller holds at most per_caller_workers of them: 300 connections of one user trickling their
// bodies kept every other user's requests waiting for the 10 s body deadline (issue 39). A body
// announced with `Expect: 100-continue` is invited by the gate itself (`100 Continue`, only for a
// caller the classifier knows) and waited for like any other; and at most half of the workers
// may be reading the rest of a body at once, across all callers: four callers each within their
// share, trickling bodies, held all 32 workers and froze every other user for up to 11.6 s. On a
// worker, the rest of a large body and the writing of the response each have a deadline too,
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
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
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
  // Connections waiting for their headers, their body, their next request or a worker; the
  // oldest of the caller with the most of them gives way.
  size_t max_waiting = 512;
  // Workers one caller may hold at once (0: a quarter of them, at least 2). Callers the
  // classifier leaves uncapped (root, the daemon's own user) are not held to it.
  size_t per_caller_workers = 0;
};

// Who a connection is for, for fairness: "uid 1001" (a Unix socket's peer, or a personal token's
// user), "owner", "ip 10.0.0.7".
struct CallerKey {
  std::string key;
  int64_t uid = -1;  // the Unix socket's peer, else -1
  bool capped = true;
  // Whether its credentials are accepted (a valid token or session, a socket user the daemon
  // serves): only then does the gate invite a body announced with `Expect: 100-continue`.
  bool known = false;
};

class ConnectionGate {
 public:
  // A request's headers larger than this are refused (431) at the gate.
  static constexpr size_t kMaxHeaderBytes = 16 * 1024;
  // A request's body is waited for at the gate until it has all arrived or this much of it has:
  // a socket's receive queue holds at least this much (TCP on loopback ~64 KiB before the window
  // closes, a Unix socket ~200 KiB), so a client that sends at speed is never left waiting on a
  // full buffer, and only one that sent this much at once may trickle the rest on a worker.
  static constexpr size_t kBodyAtGateBytes = 32 * 1024;

  // Names the caller of a request whose headers are in (`head`: its first bytes), starting from
  // its connection's peer (PeerOf). Runs on the gate's thread: it must be quick.
  using Classifier = std::function<CallerKey(std::string_view head, const CallerKey& peer)>;

  // `serve(fd)` processes and closes one connection on a worker (`workers` of them).
  ConnectionGate(size_t workers, ConnectionLimits limits, std::function<void(int)> serve,
                 Classifier classify = nullptr);
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
  // Whether a request has arrived on fd within wait_ms (peeked, not read): its headers, and its
  // body up to kBodyAtGateBytes.
  static bool RequestWaiting(int fd, int wait_ms);
  // The bytes a request must have at the gate before a worker takes it: its headers and its body
  // up to kBodyAtGateBytes (`whole`: all of its body); 0 while its headers are not all in `head`.
  // `whole` counts the body announced with Expect too, which is not waited for before it is
  // invited.
  static size_t RequestBytes(std::string_view head, size_t* whole = nullptr);
  // Whether a request's head asks to be told to go on (`Expect: 100-continue`).
  static bool ExpectsContinue(std::string_view head);
  // On a worker: whether the gate already told this connection's first request to go on (its
  // `100 Continue` is not to be sent again).
  static bool ContinueSent();
  // A header's value in a request's head ("" when absent; the first when repeated).
  static std::string HeaderValue(std::string_view head, std::string_view name);
  // The connection's peer: "uid N" on a Unix socket (SO_PEERCRED), else "ip ADDR".
  static CallerKey PeerOf(int fd);
  static void HandlerDone();
  static void Unbounded();

  // For tests: connections dropped at the door so far (headers too slow, or too many waiting),
  // and worker connections shut down for a missed deadline.
  int64_t dropped_waiting() const { return dropped_waiting_.load(); }
  int64_t dropped_working() const { return dropped_working_.load(); }
  // The most workers one capped caller may hold, and the most that may be reading the rest of
  // a body at once (capped callers' requests whose body is not all in wait for one).
  size_t per_caller_workers() const { return per_caller_; }
  size_t body_workers() const { return body_cap_; }

 private:
  struct Waiting {
    int fd = -1;
    int64_t deadline_ms = 0;
    int64_t since_ms = 0;  // admitted (the oldest of a caller gives way first)
    bool kept_alive = false;
    CallerKey who;
    size_t need = 0;           // 0: the headers are still coming; else the bytes to wait for
    size_t whole = 0;          // the request's headers and whole body
    int64_t body_deadline_ms = 0;  // when the body must be in (0 once it is)
    bool continued = false;  // the gate sent `100 Continue`
    bool in_body = false;    // on a worker with its body still coming (one of body_cap_)
  };
  struct Caller {  // a caller's connections waiting at the gate, ready for and on workers
    size_t waiting = 0;
    std::deque<Waiting> ready;  // oldest first
    size_t held = 0;
    bool capped = true;
    bool in_turns = false;
  };
  struct Slot {  // one per worker: the connection it serves and when it must be done reading
    std::atomic<int> fd{-1};
    std::atomic<int64_t> deadline_ms{0};  // 0: none
  };
  void Watch();
  void Work(Slot* slot);
  // Looks at what arrived on a waiting connection: more is to come, it was closed (and answered
  // where there is something to say), or its request is in.
  enum class Seen { kMore, kClosed, kReady };
  Seen Examine(Waiting& w, uint32_t events, std::vector<char>& peek, int64_t now);
  void Ready(Waiting w);  // to its caller's queue, for a worker
  bool PickLocked(Waiting* out);
  void MakeRoomLocked();  // drops one connection when max_waiting are held
  void ForgetLocked(const std::string& key);  // the caller's entry, once it holds nothing
  void Drop(const Waiting& w, bool answer_408);
  void Serve(const Waiting& w);
  static int64_t NowMs();

  const ConnectionLimits limits_;
  std::function<void(int)> serve_;
  Classifier classify_;
  size_t per_caller_ = 2;
  size_t body_cap_ = 1;
  size_t body_held_ = 0;  // workers given a request whose body was not all in
  int epoll_ = -1;
  int wake_ = -1;  // an eventfd: Shutdown() ends Watch()
  std::mutex mu_;
  std::unordered_map<int, Waiting> waiting_;  // by fd
  std::map<std::string, Caller> callers_;
  std::deque<std::string> turns_;  // callers with ready connections, whose turn comes first
  size_t ready_count_ = 0;
  std::condition_variable work_cv_;
  bool shut_ = false;        // nothing new is admitted or handed to a worker
  bool stop_watch_ = false;  // the workers have drained: Watch() may end
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> workers_;
  std::thread watcher_;
  std::atomic<int64_t> dropped_waiting_{0};
  std::atomic<int64_t> dropped_working_{0};
};

}  // namespace drover::server
