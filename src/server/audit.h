#pragma once
// The audit log (docs/lab-server.md, "Audit"): every request that changes something (submit,
// cancel, priority, retry, removal, ask/tell, sign-in) and every refusal, with who, when, from
// where and what came of it, one JSON object per line in <store>/audit.log (0600; at 64 MiB it
// moves to audit.log.1, replacing the one before). Read by admins with `drover audit`.
#include <cstdint>
#include <map>
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
  int64_t suppressed = 0;  // refusals of this user not logged in the minute before (flood)
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
  // A refusal (401/403) by `who` at now_ms: whether to log it. Past 30 a minute per user the rest
  // of that minute is counted, and the count logged with the next one admitted, so a flood of
  // refusals cannot push the rest of the log out.
  bool AdmitRefusal(const std::string& who, Millis now_ms, int64_t* suppressed_before);
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
  struct Window {
    Millis start_ms = 0;
    int64_t logged = 0;
    int64_t suppressed = 0;
  };
  std::mutex refusals_mu_;
  std::map<std::string, Window> refusals_;
};

Json ToJson(const AuditEntry& e);

}  // namespace drover::server
