#pragma once
// Where alerts go once they are raised (and not silenced): the log, and webhooks in the payload
// shapes of Slack, Feishu, DingTalk or plain JSON. Sending never blocks the engine: webhooks are
// queued to a background thread that retries with exponential backoff.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/run.h"

namespace httplib {
class ClientImpl;
}

namespace drover::watch {

class AlertSink {
 public:
  virtual ~AlertSink() = default;
  // Called on the engine's thread: must return at once.
  virtual void Notify(const Alert& alert) = 0;
  // Before exit: waits up to timeout_ms until what was notified is delivered (or given up).
  // Returns whether everything was.
  virtual bool Flush(Millis timeout_ms) { return true; }
};

// spdlog: warn for warning, error for error, info for info (and warn for anything else).
class LogSink : public AlertSink {
 public:
  void Notify(const Alert& alert) override;
};

enum class WebhookFormat { kSlack, kFeishu, kDingTalk, kJson };
// slack|feishu|dingtalk|json; the error lists the accepted values.
Result<WebhookFormat> ParseWebhookFormat(const std::string& text);
std::string_view ToString(WebhookFormat f);

// A webhook URL fit for a log line or an error: scheme://host[:port] and "/..." for the path,
// which for Slack, Feishu and DingTalk holds the secret token.
std::string RedactUrl(const std::string& url);

// Who an alert is about: the submitter the engine named in its data ("user"), or "" for the
// daemon's own alerts (a GPU, the store).
std::string AlertSource(const Alert& alert);
// "run 12 (experiment 3 'sweep', submitted by alice): loss spiked ...": what the alert is about,
// whose it is, and its message.
std::string AlertSubject(const Alert& alert);
// The text a person reads: severity, subject (run, experiment, GPU when set), message:
//   "[drover] warning: run 12 (experiment 3): loss spiked to 9.1 at step 420 ..."
//   "[drover] info: GPU 1: idle for 5m while 2 runs wait"
std::string AlertText(const Alert& alert);
// The request body for one format:
//   slack:    {"text": TEXT}  (with &, <, > escaped as Slack asks)
//   feishu:   {"msg_type": "text", "content": {"text": TEXT}}
//   dingtalk: {"msgtype": "text", "text": {"content": TEXT}}
//   json:     {"alert": <the alert as protocol JSON: id, kind, severity, key, message, ...>}
Json WebhookPayload(WebhookFormat format, const Alert& alert);

struct WebhookOptions {
  std::string url;  // http://host[:port]/path or https://...
  WebhookFormat format = WebhookFormat::kJson;
  std::string min_severity = "info";  // info < warning < error: less severe alerts are not sent
  int max_attempts = 5;               // first try plus retries
  Millis initial_backoff_ms = 1000;   // doubled after each failure
  Millis max_backoff_ms = 60'000;
  Millis timeout_ms = 10'000;  // per try: for the connect, and again for the reply
  // One user's alerts hold at most a quarter of the queue (their oldest is dropped beyond);
  // when it is full, the oldest of the user with most queued is dropped (logged), the daemon's
  // own alerts only when no user's is queued.
  size_t max_queue = 1000;
};

// POSTs each alert to a URL from its own thread. A 2xx reply is success (for feishu and dingtalk,
// unless its JSON body carries a non-zero code/errcode: they reply 200 to a rejected message);
// anything else (or no reply) is retried after the backoff, up to max_attempts, then dropped
// with a log line. Logs name only scheme://host:port, never the path: webhook paths are secrets.
class WebhookSink : public AlertSink {
 public:
  // Errors: a URL that is not http(s)://host..., an https URL when this build has no TLS, a bad
  // min_severity, max_attempts, timeout or max_queue.
  static Result<std::unique_ptr<WebhookSink>> Create(WebhookOptions options);
  // Cuts short a try in progress and any backoff wait, gives each alert not yet delivered at most
  // one more try (a few seconds in all), then stops.
  ~WebhookSink() override;
  void Notify(const Alert& alert) override;

  // For tests and shutdown: waits until the queue is empty and nothing is in flight, or until
  // timeout_ms passes. Returns whether it drained.
  bool Flush(Millis timeout_ms) override;
  struct Stats {
    int64_t sent = 0;     // delivered (2xx)
    int64_t failed = 0;   // given up after max_attempts, or dropped from a full queue
    int64_t retries = 0;  // tries after the first
  };
  Stats stats() const;

 private:
  explicit WebhookSink(WebhookOptions options);
  void Worker();
  // The alerts still queued at shutdown: one try each, within the shutdown budget.
  void Drain(std::unique_lock<std::mutex>& lock, bool front_was_tried);
  // One try; called without mu_.
  Status Post(const Alert& alert, Millis timeout_ms);

  WebhookOptions options_;
  int min_rank_ = 0;         // of options_.min_severity
  std::string origin_;       // scheme://host:port, for log lines
  std::string path_;         // path and query
  std::string host_header_;  // host[:port] as the Host header wants it
  // Used by the worker only, except stop() from the destructor (httplib allows that).
  std::unique_ptr<httplib::ClientImpl> client_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the worker: an alert queued, or stopping
  std::condition_variable idle_cv_;  // wakes Flush: an alert done
  std::deque<Alert> queue_;
  bool in_flight_ = false;  // an alert is taken off the queue and not yet done (trying or waiting)
  bool posting_ = false;    // a request is on the wire
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;
};

// Sends each alert to every sink.
class FanOutSink : public AlertSink {
 public:
  void Add(std::unique_ptr<AlertSink> sink) { sinks_.push_back(std::move(sink)); }
  void Notify(const Alert& alert) override {
    for (auto& s : sinks_) s->Notify(alert);
  }
  bool Flush(Millis timeout_ms) override {
    bool all = true;
    for (auto& s : sinks_) all = s->Flush(timeout_ms) && all;
    return all;
  }
  bool empty() const { return sinks_.empty(); }

 private:
  std::vector<std::unique_ptr<AlertSink>> sinks_;
};

}  // namespace drover::watch
