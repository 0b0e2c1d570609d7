#include "server/audit.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include "common/files.h"

namespace drover::server {

Json ToJson(const AuditEntry& e) {
  Json j = {{"t_ms", e.t_ms},   {"user", e.user},     {"uid", e.uid},       {"via", e.via},
            {"from", e.from},   {"method", e.method}, {"path", e.path},     {"status", e.status}};
  if (!e.error.empty()) j["error"] = e.error;
  if (e.suppressed > 0) j["refusals_not_logged_before"] = e.suppressed;
  return j;
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

void AuditLog::Append(const AuditEntry& entry) {
  if (path_.empty()) return;
  std::string line = ToJson(entry).dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  auto fail = [&](const char* what) {
    const Millis now = RealClock().Now();
    if (now - warned_ms_ > 60'000) {
      warned_ms_ = now;
      spdlog::warn("audit log {}: {}: {}", path_, what, std::strerror(errno));
    }
  };
  if (fd_ >= 0 && size_ + static_cast<int64_t>(line.size()) > rotate_bytes_) {
    ::close(fd_);
    fd_ = -1;
    if (::rename(path_.c_str(), (path_ + ".1").c_str()) != 0) fail("cannot move it aside");
  }
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) {
      fail("cannot open it");
      return;
    }
    struct stat st {};
    size_ = ::fstat(fd_, &st) == 0 ? st.st_size : 0;
  }
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail("cannot write it");
      break;
    }
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(done);
}

bool AuditLog::AdmitRefusal(const std::string& who, Millis now_ms, int64_t* suppressed_before) {
  constexpr int64_t kPerMinute = 30;
  std::lock_guard<std::mutex> lock(refusals_mu_);
  if (refusals_.size() > 10'000) refusals_.clear();  // bounded: a fresh start for everyone
  Window& w = refusals_[who];
  *suppressed_before = 0;
  if (now_ms - w.start_ms >= 60'000) {
    *suppressed_before = w.suppressed;
    w = Window{now_ms, 0, 0};
  }
  if (w.logged >= kPerMinute) {
    ++w.suppressed;
    return false;
  }
  ++w.logged;
  return true;
}

Result<std::vector<Json>> AuditLog::Read(const AuditQuery& query) const {
  std::deque<Json> kept;
  for (const std::string& file : {path_ + ".1", path_}) {
    std::ifstream in(file);
    if (!in) continue;
    std::string line;
    while (std::getline(in, line)) {
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object()) continue;  // a torn last line after a crash
      // A line that is not one of ours (edited by hand, another version) is skipped, never thrown on.
      const bool user_ok = j.contains("user") && j["user"].is_string();
      const bool t_ok = j.contains("t_ms") && j["t_ms"].is_number_integer();
      if (!query.user.empty() && (!user_ok || j["user"].get<std::string>() != query.user)) continue;
      if (query.since_ms > 0 && (!t_ok || j["t_ms"].get<int64_t>() < query.since_ms)) continue;
      kept.push_back(std::move(j));
      if (query.limit > 0 && kept.size() > query.limit) kept.pop_front();
    }
  }
  return std::vector<Json>(kept.begin(), kept.end());
}

}  // namespace drover::server
