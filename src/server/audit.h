#pragma once
// The audit log (docs/lab-server.md, "Audit"): every request that changes something (submit,
// cancel, priority, retry, removal, ask/tell, sign-in) and every refusal, with who, when, from
// where and what came of it, one JSON object per line in <store>/audit.log (0600; at 64 MiB it
// moves to audit.log.1, replacing the one before). Read by admins with `drover audit`.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "protocol/api.h"

namespace drover::server {

struct AuditEntry {
  Millis t_ms = 0;
  std::string user;  // "alice", "uid 1234", "" when nobody was recognised
  int64_t uid = -1;
  std::string via;   // socket, token, session, "" (refused before)
  std::string from;  // "unix pid 4242", "127.0.0.1:51234"
  std::string method;
  std::string path;  // with its query
  int status = 0;
  std::string error;  // the refusal's or failure's message
};

struct AuditQuery {
  std::string user;   // "" = everyone
  Millis since_ms = 0;
  size_t limit = 200;  // the newest this many
};

class AuditLog {
 public:
  static constexpr int64_t kRotateBytes = 64LL << 20;
  explicit AuditLog(std::string path, int64_t rotate_bytes = kRotateBytes)
      : path_(std::move(path)), rotate_bytes_(rotate_bytes) {}
  ~AuditLog();
  // Appends one line (thread-safe). A failure to write is reported once per minute on the
  // daemon's log; the request itself is not failed for it.
  void Append(const AuditEntry& entry);
  // The newest entries matching, oldest first (from audit.log.1 and audit.log).
  Result<std::vector<Json>> Read(const AuditQuery& query) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t rotate_bytes_;
  std::mutex mu_;
  int fd_ = -1;
  int64_t size_ = 0;
  Millis warned_ms_ = 0;
};

Json ToJson(const AuditEntry& e);

}  // namespace drover::server
