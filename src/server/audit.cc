#include "server/audit.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include "common/files.h"

namespace drover::server {

namespace {

// <store>/audit.log -> <store>/audit-refused.log
std::string RefusedPath(const std::string& path) {
  if (path.empty()) return "";
  if (path.ends_with(".log")) return path.substr(0, path.size() - 4) + "-refused.log";
  return path + "-refused";
}

// <store>/audit.log -> <store>/audit-unidentified.log
std::string UnidentifiedPath(const std::string& path) {
  if (path.empty()) return "";
  if (path.ends_with(".log")) return path.substr(0, path.size() - 4) + "-unidentified.log";
  return path + "-unidentified";
}

bool IsRefusal(int status) { return status == 401 || status == 403; }

}  // namespace

std::string BoundedField(std::string_view text) {
  if (text.size() <= AuditLog::kMaxFieldBytes) return std::string(text);
  size_t cut = AuditLog::kMaxFieldBytes;
  // Not inside a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

Json ToJson(const AuditEntry& e) {
  Json j = {{"t_ms", e.t_ms},   {"user", e.user},     {"uid", e.uid},       {"via", e.via},
            {"from", e.from},   {"method", e.method}, {"path", e.path},     {"status", e.status}};
  if (!e.error.empty()) j["error"] = e.error;
  if (e.suppressed > 0) j["refusals_not_logged_before"] = e.suppressed;
  return j;
}

AuditLog::AuditLog(std::string path, int64_t rotate_bytes)
    : path_(std::move(path)), rotate_bytes_(rotate_bytes) {
  log_.path = path_;
  log_.keep = kKeptFiles;
  refused_.path = RefusedPath(path_);
  refused_.keep = 1;
  unidentified_.path = UnidentifiedPath(path_);
  unidentified_.keep = 1;
}

AuditLog::~AuditLog() {
  FlushSummaries(0, /*flush_all=*/true);
  for (File* f : {&log_, &refused_, &unidentified_}) {
    if (f->fd >= 0) ::close(f->fd);
  }
}

void AuditLog::Append(const AuditEntry& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  AppendTo(log_, ToJson(entry), entry.t_ms);
}

void AuditLog::AppendTo(File& file, const Json& entry, Millis now) {
  if (file.path.empty()) return;
  std::string line = entry.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  auto fail = [&](const char* what) {
    if (now - warned_ms_ > 60'000) {
      warned_ms_ = now;
      spdlog::warn("audit log {}: {}: {}", file.path, what, ErrnoText(errno));
    }
  };
  if (file.fd >= 0 && file.size + static_cast<int64_t>(line.size()) > rotate_bytes_) {
    ::close(file.fd);
    file.fd = -1;
    // audit.log.3 -> .4, ..., audit.log -> .1 (the oldest kept is replaced).
    for (int i = file.keep - 1; i >= 1; --i) {
      const std::string from = file.path + "." + std::to_string(i);
      if (::access(from.c_str(), F_OK) == 0) {
        (void)::rename(from.c_str(), (file.path + "." + std::to_string(i + 1)).c_str());
      }
    }
    if (::rename(file.path.c_str(), (file.path + ".1").c_str()) != 0) fail("cannot move it aside");
  }
  if (file.fd < 0) {
    file.fd = ::open(file.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                     0600);
    if (file.fd < 0) {
      fail("cannot open it");
      return;
    }
    struct stat st {};
    file.size = ::fstat(file.fd, &st) == 0 ? st.st_size : 0;
  }
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(file.fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail("cannot write it");
      break;
    }
    done += static_cast<size_t>(n);
  }
  file.size += static_cast<int64_t>(done);
}

void AuditLog::Record(AuditEntry entry, const std::string& who_said) {
  if (path_.empty()) return;
  // Every caller nobody recognised is one: an address is not a person, and one person may send
  // from any of 127.0.0.0/8 (or a /64 of IPv6).
  const bool unidentified = who_said.empty() || who_said.starts_with("ip ");
  const std::string who = unidentified ? kUnidentified : who_said;
  entry.path = BoundedField(entry.path);
  entry.error = BoundedField(entry.error);
  entry.from = BoundedField(entry.from);
  entry.user = BoundedField(entry.user);
  if (IsRefusal(entry.status)) {
    // Kept apart, so no volume of other requests (anyone's) pushes a refusal out; and those of
    // callers nobody recognised apart from the users', so theirs push out no user's.
    if (!AdmitRefusal(who, entry.t_ms, &entry.suppressed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    AppendTo(unidentified ? unidentified_ : refused_, ToJson(entry), entry.t_ms);
    return;
  }
  FlushSummaries(entry.t_ms, /*flush_all=*/false);
  {
    std::lock_guard<std::mutex> lock(volume_mu_);
    Volume& v = volume_[who];
    if (v.logged >= kPerMinute) {
      // Counted by route ("POST /api/v1/experiments/3/tell", the query left out) for the
      // minute's summary line.
      ++v.not_logged;
      std::string route = entry.method + " " + entry.path.substr(0, entry.path.find('?'));
      route = route.substr(0, 160);
      if (v.routes.size() < kMaxRoutesInSummary || v.routes.contains(route)) {
        ++v.routes[route];
      } else {
        ++v.routes["(other routes)"];
      }
      return;
    }
    if (v.logged == 0) {
      v.start_ms = entry.t_ms;
      v.user = entry.user;
      v.uid = entry.uid;
    }
    ++v.logged;
  }
  Append(entry);
}

void AuditLog::FlushSummaries(Millis now_ms, bool flush_all) {
  std::vector<Json> lines;
  {
    std::lock_guard<std::mutex> lock(volume_mu_);
    for (auto it = volume_.begin(); it != volume_.end();) {
      const Volume& v = it->second;
      // Bounded: past 10,000 users in a minute every window closes at once.
      if (!flush_all && volume_.size() <= 10'000 && now_ms - v.start_ms < 60'000) {
        ++it;
        continue;
      }
      if (v.not_logged > 0) {
        Json routes = Json::object();
        for (const auto& [route, n] : v.routes) routes[route] = n;
        lines.push_back({{"t_ms", v.start_ms + 60'000},  // the minute's end
                         {"user", v.user},
                         {"uid", v.uid},
                         {"via", ""},
                         {"from", ""},
                         {"method", "*"},
                         {"path", std::to_string(v.not_logged) +
                                      " more requests in the minute from t_ms " +
                                      std::to_string(v.start_ms) + ", counted by route"},
                         {"status", 0},
                         {"summary_since_ms", v.start_ms},
                         {"not_logged", v.not_logged},
                         {"routes", routes}});
      }
      it = volume_.erase(it);
    }
  }
  if (lines.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Json& line : lines) AppendTo(log_, line, now_ms);
}

bool AuditLog::AdmitRefusal(const std::string& who, Millis now_ms, int64_t* suppressed_before) {
  std::lock_guard<std::mutex> lock(refusals_mu_);
  if (refusals_.size() > 10'000) refusals_.clear();  // bounded: a fresh start for everyone
  Window& w = refusals_[who];
  *suppressed_before = 0;
  if (now_ms - w.start_ms >= 60'000) {
    *suppressed_before = w.suppressed;
    w = Window{now_ms, 0, 0};
  }
  if (w.logged >= kRefusalsPerMinute) {
    ++w.suppressed;
    return false;
  }
  ++w.logged;
  return true;
}

Result<std::vector<Json>> AuditLog::Read(const AuditQuery& query) const {
  // Each log newest file first, until it has given `limit` matching entries (its older files can
  // add none of the newest); then both merged by time.
  std::vector<Json> all;
  for (const File* f : {&log_, &refused_, &unidentified_}) {
    if (f->path.empty()) continue;
    size_t matched = 0;
    std::vector<std::deque<Json>> files;  // newest first
    for (int i = 0; i <= f->keep; ++i) {
      const std::string file = i == 0 ? f->path : f->path + "." + std::to_string(i);
      std::ifstream in(file);
      if (!in) continue;
      std::deque<Json> kept;
      std::string line;
      while (std::getline(in, line)) {
        Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object()) continue;  // a torn last line after a crash
        // A line that is not one of ours (edited by hand, another version) is skipped, never
        // thrown on.
        const bool user_ok = j.contains("user") && j["user"].is_string();
        const bool t_ok = j.contains("t_ms") && j["t_ms"].is_number_integer();
        if (!query.user.empty() && (!user_ok || j["user"].get<std::string>() != query.user)) {
          continue;
        }
        if (query.since_ms > 0 && (!t_ok || j["t_ms"].get<int64_t>() < query.since_ms)) continue;
        kept.push_back(std::move(j));
        if (query.limit > 0 && kept.size() > query.limit) kept.pop_front();
      }
      matched += kept.size();
      files.push_back(std::move(kept));
      if (query.limit > 0 && matched >= query.limit) break;
    }
    for (auto it = files.rbegin(); it != files.rend(); ++it) {
      all.insert(all.end(), std::make_move_iterator(it->begin()),
                 std::make_move_iterator(it->end()));
    }
  }
  auto time_of = [](const Json& j) {
    return j.contains("t_ms") && j["t_ms"].is_number_integer() ? j["t_ms"].get<int64_t>()
                                                               : int64_t{0};
  };
  std::stable_sort(all.begin(), all.end(),
                   [&](const Json& a, const Json& b) { return time_of(a) < time_of(b); });
  if (query.limit > 0 && all.size() > query.limit) {
    all.erase(all.begin(), all.end() - static_cast<std::ptrdiff_t>(query.limit));
  }
  return all;
}

}  // namespace drover::server
