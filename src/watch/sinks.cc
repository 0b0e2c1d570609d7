#include "watch/sinks.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <map>
#include <optional>

#include "drover_version.h"
#include "protocol/json_codec.h"

namespace drover::watch {

namespace {

// What the destructor allows the alerts still queued, in all: shutting a daemon down must not
// wait on a dead endpoint once per queued alert.
constexpr Millis kShutdownBudgetMs = 2000;

constexpr std::string_view kUrlForm =
    "use http://host[:port]/path or https://host[:port]/path, e.g. "
    "https://hooks.slack.com/services/T000/B000/XXXX";

// info < warning < error. An unknown severity ranks as warning, the Alert default, so a typo in
// a detector neither floods an info-only sink nor escapes a warning one.
std::optional<int> SeverityRank(std::string_view severity) {
  if (severity == "info") return 0;
  if (severity == "warning") return 1;
  if (severity == "error") return 2;
  return std::nullopt;
}
int RankOrWarning(std::string_view severity) { return SeverityRank(severity).value_or(1); }

// Slack reads &, < and > as markup (links, mentions) in "text"; these three must be entities.
std::string SlackEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// httplib's error names ("Connection", "Read") read oddly in a log line on their own.
std::string DescribeError(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect";
    case httplib::Error::ConnectionTimeout:
      return "connecting timed out";
    case httplib::Error::Read:
      return "no reply (the read failed or timed out)";
    case httplib::Error::Write:
      return "sending the request failed";
    case httplib::Error::SSLConnection:
      return "the TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "the server's TLS certificate is not trusted";
    default:
      return fmt::format("request failed ({})", httplib::to_string(error));
  }
}

// A reply body in a log line: short, one line.
std::string Snippet(std::string_view body) {
  std::string out(body.substr(0, 200));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  if (body.size() > 200) out += "...";
  return out;
}

struct ParsedUrl {
  bool https = false;
  std::string host;  // without brackets for IPv6
  int port = 0;
  std::string path;  // path and query, at least "/"
};

Result<ParsedUrl> ParseUrl(const std::string& url) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format("webhook url '{}': {}; {}", RedactUrl(url), why, kUrlForm));
  };
  if (url.empty()) return InvalidArgument(fmt::format("webhook url is empty; {}", kUrlForm));
  // The path goes on the request line as written (it is already encoded, and DingTalk's signed
  // query must not be re-encoded), so nothing may break the line.
  for (unsigned char c : url) {
    if (c <= 0x20 || c == 0x7f) return bad("it contains a space or a control character");
  }
  size_t sep = url.find("://");
  if (sep == std::string::npos) return bad("it has no scheme");
  std::string scheme = url.substr(0, sep);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  ParsedUrl out;
  if (scheme == "https") {
    out.https = true;
  } else if (scheme != "http") {
    return bad(fmt::format("scheme '{}' is not supported", url.substr(0, sep)));
  }
  std::string rest = url.substr(sep + 3);
  size_t end = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, end);
  std::string path = end == std::string::npos ? "" : rest.substr(end);
  if (authority.find('@') != std::string::npos) return bad("user@host is not supported");
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string::npos) return bad("the IPv6 address has no closing ']'");
    out.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') return bad("unexpected text after the IPv6 address");
    if (!after.empty()) port_text = after.substr(1);
    if (!after.empty() && port_text.empty()) return bad("the port is empty");
  } else {
    size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("the port is empty");
    }
  }
  if (out.host.empty()) return bad("it has no host");
  out.port = out.https ? 443 : 80;
  if (!port_text.empty()) {
    bool digits =
        port_text.size() <= 5 && std::all_of(port_text.begin(), port_text.end(),
                                             [](unsigned char c) { return std::isdigit(c); });
    int port = digits ? std::stoi(port_text) : 0;
    if (port < 1 || port > 65535) {
      return bad(fmt::format("port '{}' is not a number from 1 to 65535", port_text));
    }
    out.port = port;
  }
  path = path.substr(0, path.find('#'));  // a fragment is never sent
  if (path.empty() || path[0] != '/') path = "/" + path;
  out.path = path;
  return out;
}

}  // namespace

void LogSink::Notify(const Alert& alert) {
  // The log line has its own level: no "[drover] warning:" prefix.
  std::string text = fmt::format("alert {}: {}", alert.kind, AlertSubject(alert));
  switch (RankOrWarning(alert.severity)) {
    case 0:
      spdlog::info("{}", text);
      break;
    case 2:
      spdlog::error("{}", text);
      break;
    default:
      spdlog::warn("{}", text);
  }
}

Result<WebhookFormat> ParseWebhookFormat(const std::string& text) {
  if (text == "slack") return WebhookFormat::kSlack;
  if (text == "feishu") return WebhookFormat::kFeishu;
  if (text == "dingtalk") return WebhookFormat::kDingTalk;
  if (text == "json") return WebhookFormat::kJson;
  return InvalidArgument(
      fmt::format("webhook format '{}': use slack, feishu, dingtalk or json", text));
}

std::string_view ToString(WebhookFormat f) {
  switch (f) {
    case WebhookFormat::kSlack:
      return "slack";
    case WebhookFormat::kFeishu:
      return "feishu";
    case WebhookFormat::kDingTalk:
      return "dingtalk";
    case WebhookFormat::kJson:
      return "json";
  }
  return "json";
}

std::string RedactUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t path = url.find_first_of("/?#", scheme == std::string::npos ? 0 : scheme + 3);
  if (path == std::string::npos) return url;
  return url.substr(0, path) + "/...";
}

std::string AlertSource(const Alert& alert) {
  auto it = alert.data.find("user");
  return it != alert.data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string AlertSubject(const Alert& alert) {
  // Whose experiment it is, and its name, when the engine said (RaiseAlert names them).
  std::string owner;
  if (auto it = alert.data.find("experiment"); it != alert.data.end() && it->is_string()) {
    owner += fmt::format(" '{}'", it->get<std::string>());
  }
  if (std::string user = AlertSource(alert); !user.empty()) {
    owner += fmt::format(", submitted by {}", user);
  }
  std::string subject;
  if (alert.run_id > 0) {
    subject = fmt::format("run {}", alert.run_id);
    if (alert.experiment_id > 0) {
      subject += fmt::format(" (experiment {}{})", alert.experiment_id, owner);
    }
  } else if (alert.experiment_id > 0) {
    subject = fmt::format("experiment {}{}", alert.experiment_id, owner);
  } else if (std::string user = AlertSource(alert); !user.empty()) {
    subject = fmt::format("user {}", user);
  }
  if (alert.gpu >= 0) {
    subject += fmt::format("{}GPU {}", subject.empty() ? "" : " on ", alert.gpu);
  }
  const std::string& message = alert.message.empty() ? alert.kind : alert.message;
  if (subject.empty()) return message;
  return fmt::format("{}: {}", subject, message);
}

std::string AlertText(const Alert& alert) {
  return fmt::format("[drover] {}: {}", alert.severity, AlertSubject(alert));
}

Json WebhookPayload(WebhookFormat format, const Alert& alert) {
  switch (format) {
    case WebhookFormat::kSlack:
      return {{"text", SlackEscape(AlertText(alert))}};
    case WebhookFormat::kFeishu:
      return {{"msg_type", "text"}, {"content", {{"text", AlertText(alert)}}}};
    case WebhookFormat::kDingTalk:
      return {{"msgtype", "text"}, {"text", {{"content", AlertText(alert)}}}};
    case WebhookFormat::kJson:
      return {{"alert", protocol::ToJson(alert)}};
  }
  return {{"alert", protocol::ToJson(alert)}};
}

WebhookSink::WebhookSink(WebhookOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<WebhookSink>> WebhookSink::Create(WebhookOptions options) {
  DROVER_ASSIGN_OR_RETURN(ParsedUrl url, ParseUrl(options.url));
  std::optional<int> min_rank = SeverityRank(options.min_severity);
  if (!min_rank) {
    return InvalidArgument(
        fmt::format("webhook min_severity '{}': use info, warning or error", options.min_severity));
  }
  if (options.max_attempts < 1) {
    return InvalidArgument(
        fmt::format("webhook max_attempts {}: use 1 or more", options.max_attempts));
  }
  if (options.timeout_ms < 1) {
    return InvalidArgument(
        fmt::format("webhook timeout {}ms: use 1ms or more", options.timeout_ms));
  }
  if (options.initial_backoff_ms < 0 || options.max_backoff_ms < 0) {
    return InvalidArgument("webhook backoff: use 0 or more");
  }
  if (options.max_queue < 1) return InvalidArgument("webhook max_queue 0: use 1 or more");

  std::unique_ptr<WebhookSink> sink(new WebhookSink(std::move(options)));
  sink->min_rank_ = *min_rank;
  bool ipv6 = url.host.find(':') != std::string::npos;
  std::string host = ipv6 ? "[" + url.host + "]" : url.host;
  bool default_port = url.port == (url.https ? 443 : 80);
  sink->host_header_ = default_port ? host : fmt::format("{}:{}", host, url.port);
  sink->origin_ = fmt::format("{}://{}:{}", url.https ? "https" : "http", host, url.port);
  sink->path_ = url.path;
  if (url.https) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    sink->client_ = std::make_unique<httplib::SSLClient>(url.host, url.port);
#else
    return Unavailable(
        fmt::format("webhook url '{}': this build of drover has no TLS; use an http:// URL",
                    RedactUrl(sink->options_.url)));
#endif
  } else {
    sink->client_ = std::make_unique<httplib::ClientImpl>(url.host, url.port);
  }
  if (!sink->client_->is_valid()) {
    return Internal(
        fmt::format("webhook {}: could not set up the HTTP client (TLS context)", sink->origin_));
  }
  sink->client_->set_url_encode(false);  // ParseUrl vetted the path; it goes out as written
  sink->client_->set_keep_alive(false);
  sink->client_->set_default_headers({{"User-Agent", "drover/" DROVER_VERSION}});
  sink->thread_ = std::thread([s = sink.get()] { s->Worker(); });
  return sink;
}

WebhookSink::~WebhookSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // A slow endpoint could hold the worker for the whole read timeout. stop() shuts the socket
    // of the request in progress (it waits for a connect to finish first); held under mu_ so the
    // worker cannot start its next request, which stop() would cut too, in between.
    if (posting_) client_->stop();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WebhookSink::Notify(const Alert& alert) {
  if (RankOrWarning(alert.severity) < min_rank_) return;
  bool dropped = false;
  std::string dropped_key;
  size_t queued = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    // No one source may fill the queue (issue 39: one run's flood dropped the daemon's real
    // alerts): a user's alerts hold at most a quarter of it, and when it is full the one to go
    // is the oldest of the user with most queued; the daemon's own alerts (no user) go only
    // when nothing else is queued.
    const std::string source = AlertSource(alert);
    const size_t quota = std::max<size_t>(1, options_.max_queue / 4);
    std::map<std::string, size_t> held;
    for (const Alert& q : queue_) ++held[AlertSource(q)];
    std::optional<std::string> victim;
    if (!source.empty() && held[source] >= quota) {
      victim = source;
    } else if (queue_.size() >= options_.max_queue) {
      victim = std::string();
      size_t most = 0;
      for (const auto& [who, n] : held) {
        if (!who.empty() && n > most) {
          most = n;
          victim = who;
        }
      }
    }
    if (victim) {
      auto it = std::find_if(queue_.begin(), queue_.end(),
                             [&](const Alert& q) { return AlertSource(q) == *victim; });
      if (it == queue_.end()) it = queue_.begin();
      dropped = true;
      dropped_key = it->key;
      queue_.erase(it);
      ++stats_.failed;
    }
    queue_.push_back(alert);
    queued = queue_.size();
  }
  cv_.notify_all();
  // Logged after unlocking, so the worker and Flush never wait behind a log write.
  if (dropped) {
    spdlog::warn("webhook {}: {} alerts queued (the endpoint is slow or down): dropped alert {}",
                 origin_, queued, dropped_key);
  }
}

bool WebhookSink::Flush(Millis timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return queue_.empty() && !in_flight_; });
}

WebhookSink::Stats WebhookSink::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status WebhookSink::Post(const Alert& alert, Millis timeout_ms) {
  // An exception escaping the worker would end the daemon; httplib and the JSON dump are the
  // places one could come from.
  try {
    auto timeout = std::chrono::milliseconds(std::max<Millis>(timeout_ms, 1));
    client_->set_connection_timeout(timeout);
    client_->set_read_timeout(timeout);
    client_->set_write_timeout(timeout);
    // Replace, not throw: a message can carry bytes from a run's output that are not UTF-8.
    std::string body =
        WebhookPayload(options_.format, alert).dump(-1, ' ', false, Json::error_handler_t::replace);
    httplib::Headers headers = {{"Host", host_header_}};
    auto res = client_->Post(path_, headers, body, "application/json");
    if (!res) return Unavailable(DescribeError(res.error()));
    if (res->status < 200 || res->status >= 300) {
      return Unavailable(fmt::format("HTTP {}: {}", res->status, Snippet(res->body)));
    }
    // Feishu and DingTalk answer 200 to a message they reject (bad token, missing keyword, rate
    // limit) and put the verdict in the body.
    const char* code_key = options_.format == WebhookFormat::kFeishu     ? "code"
                           : options_.format == WebhookFormat::kDingTalk ? "errcode"
                                                                         : nullptr;
    if (code_key) {
      Json reply = Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
      if (reply.is_object() && reply.contains(code_key) && reply[code_key].is_number_integer() &&
          reply[code_key].get<int64_t>() != 0) {
        return Unavailable(fmt::format("HTTP {} but {} {}: {}", res->status, code_key,
                                       reply[code_key].get<int64_t>(), Snippet(res->body)));
      }
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal(e.what());
  }
}

void WebhookSink::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    Alert alert = std::move(queue_.front());
    queue_.pop_front();
    in_flight_ = true;
    Millis backoff = std::min(options_.initial_backoff_ms, options_.max_backoff_ms);
    bool requeued = false;
    for (int attempt = 1;; ++attempt) {
      posting_ = true;
      lock.unlock();
      Status st = Post(alert, options_.timeout_ms);
      lock.lock();
      posting_ = false;
      if (st.ok()) {
        ++stats_.sent;
        break;
      }
      if (attempt >= options_.max_attempts) {
        ++stats_.failed;
        lock.unlock();
        spdlog::warn("webhook {}: giving up on alert {} after {} tries: {}", origin_, alert.key,
                     attempt, st.message());
        lock.lock();
        break;
      }
      lock.unlock();
      spdlog::debug("webhook {}: alert {} not delivered (try {}: {}); retrying in {}ms", origin_,
                    alert.key, attempt, st.message(), backoff);
      lock.lock();
      // Waits on the condition variable, not a sleep, so the destructor cuts it short. Real
      // time, not a Clock: the wait is the worker's own, and tests use short backoffs.
      cv_.wait_for(lock, std::chrono::milliseconds(backoff), [&] { return stopping_; });
      if (stopping_) {
        // Its last try comes with the rest of the queue, under the shutdown budget.
        queue_.push_front(std::move(alert));
        requeued = true;
        break;
      }
      ++stats_.retries;
      backoff = std::min(backoff * 2, options_.max_backoff_ms);
    }
    in_flight_ = false;
    idle_cv_.notify_all();
    if (requeued) {
      Drain(lock, /*front_was_tried=*/true);
      return;
    }
  }
  Drain(lock, /*front_was_tried=*/false);
}

void WebhookSink::Drain(std::unique_lock<std::mutex>& lock, bool front_was_tried) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kShutdownBudgetMs);
  while (!queue_.empty()) {
    Millis left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
    if (left <= 0) {
      size_t dropped = queue_.size();
      stats_.failed += static_cast<int64_t>(dropped);
      queue_.clear();
      lock.unlock();
      spdlog::warn("webhook {}: stopping: dropped {} undelivered alerts", origin_, dropped);
      lock.lock();
      break;
    }
    Alert alert = std::move(queue_.front());
    queue_.pop_front();
    if (front_was_tried) ++stats_.retries;
    front_was_tried = false;
    in_flight_ = true;
    lock.unlock();
    Status st = Post(alert, std::min(options_.timeout_ms, left));
    if (!st.ok()) {
      spdlog::warn("webhook {}: stopping: alert {} not delivered: {}", origin_, alert.key,
                   st.message());
    }
    lock.lock();
    in_flight_ = false;
    ++(st.ok() ? stats_.sent : stats_.failed);
  }
  idle_cv_.notify_all();
}

}  // namespace drover::watch
