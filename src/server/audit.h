#pragma once
// The audit log (docs/lab-server.md, "Audit"): every request that changes something (submit,
// cancel, priority, retry, removal, ask/tell, sign-in) and every refusal, with who, when, from
// where and what came of it, one JSON object per line, read by admins with `drover audit`.
// No user's volume may push out the others' records (issue 39: 61,500 tells with an 8 KB query
// string pushed a user's own earlier refusals out in 30 s), so: each line is bounded (the path
// and the message cut to kMaxFieldBytes, with the length they had); refusals (401/403) go to a
// file of their own (<store>/audit-refused.log), each user's past kRefusalsPerMinute counted and
// the count logged with their next; other requests to <store>/audit.log, each user's past
// kPerMinute a minute counted by route and logged as one summary line when that minute is over.
// Callers nobody recognised (no valid token, session or socket user: "ip ADDR") are one caller
// here, whatever their address: 4,000 loopback addresses, each with its own 30 refusals a
// minute, wrote 64 MiB in 65 s and rotated a user's own earlier 403s out. Their refusals share
// one budget of kRefusalsPerMinute and go to a file of their own (<store>/audit-unidentified.log),
// so no volume of theirs rotates out a user's refusal. All files are 0600; at rotate_bytes
// audit.log moves to audit.log.1 (and .1 to .2, up to kKeptFiles), audit-refused.log to
// audit-refused.log.1, audit-unidentified.log to audit-unidentified.log.1.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
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

// A request's target as the log keeps it: whole up to kMaxFieldBytes, else cut there and the
// length it had said ("/api/v1/x?pad=aaaa... (8042 bytes)").
std::string BoundedField(std::string_view text);

struct AuditQuery {
  std::string user;   // "" = everyone
  Millis since_ms = 0;
  size_t limit = 200;  // the newest this many
};

class AuditLog {
 public:
  static constexpr int64_t kRotateBytes = 64LL << 20;
  static constexpr int kKeptFiles = 4;  // audit.log.1 .. audit.log.4
  static constexpr size_t kMaxFieldBytes = 512;
  static constexpr int64_t kPerMinute = 60;          // lines a user's requests make a minute
  static constexpr int64_t kRefusalsPerMinute = 30;  // and their refusals
  static constexpr size_t kMaxRoutesInSummary = 16;
  // The one key (budget) of every caller nobody recognised.
  static constexpr const char* kUnidentified = "(unidentified)";

  explicit AuditLog(std::string path, int64_t rotate_bytes = kRotateBytes);
  ~AuditLog();  // logs the summaries still open
  // Logs one request by `who` (the user, or "ip ADDR" or "" for nobody recognised: all of
  // those share kUnidentified) under the rules above; entry.t_ms is the time (thread-safe).
  void Record(AuditEntry entry, const std::string& who);
  // Appends one line as it is (thread-safe). A failure to write is reported once per minute on
  // the daemon's log; the request itself is not failed for it.
  void Append(const AuditEntry& entry);
  // A refusal (401/403) by `who` at now_ms: whether to log it. Past 30 a minute per user the rest
  // of that minute is counted, and the count logged with the next one admitted, so a flood of
  // refusals cannot push the rest of the log out.
  bool AdmitRefusal(const std::string& who, Millis now_ms, int64_t* suppressed_before);
  // The newest entries matching, oldest first (from both files and the rotated ones).
  Result<std::vector<Json>> Read(const AuditQuery& query) const;
  const std::string& path() const { return path_; }
  const std::string& refused_path() const { return refused_.path; }
  const std::string& unidentified_path() const { return unidentified_.path; }

 private:
  struct File {  // one log and its rotation
    std::string path;
    int keep = 1;  // rotated files kept
    int fd = -1;
    int64_t size = 0;
  };
  // `now`: the time of the entry written (a failure is warned of at most once a minute).
  void AppendTo(File& file, const Json& line, Millis now);
  // Writes the summaries of minutes that ended before now_ms (all with flush_all).
  void FlushSummaries(Millis now_ms, bool flush_all);
  std::string path_;
  int64_t rotate_bytes_;
  std::mutex mu_;  // guards the files
  File log_;
  File refused_;
  File unidentified_;  // refusals of callers nobody recognised
  Millis warned_ms_ = 0;
  struct Volume {  // a user's ordinary lines this minute, and what was left out
    Millis start_ms = 0;
    int64_t logged = 0;
    int64_t not_logged = 0;
    std::string user;
    int64_t uid = -1;
    std::map<std::string, int64_t> routes;  // "POST /api/v1/..." -> requests left out
  };
  std::mutex volume_mu_;
  std::map<std::string, Volume> volume_;
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
