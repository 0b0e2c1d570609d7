#pragma once
// Personal tokens (docs/lab-server.md, "Tokens"): each issued to one Unix user, used over HTTP
// (the web UI's sign-in, remote clients, agents) to act as that user rather than as the daemon.
// The book keeps only each token's SHA-256 (the secret is shown once, when it is made) in
// <store>/tokens.json (0600, replaced atomically on every change), and is read at start.
// Thread-safe: HTTP workers check tokens on every request.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/users.h"

namespace drover::server {

struct PersonalToken {
  int64_t id = 0;
  std::string name;  // what its owner called it ("laptop", "agent")
  std::string user;  // the user it acts as
  int64_t uid = -1;
  int64_t gid = -1;
  Millis created_ms = 0;
  Millis revoked_ms = 0;    // 0: in force
  Millis last_used_ms = 0;  // kept in memory, saved with the next change
  std::string hash;         // hex SHA-256 of the secret
};

class TokenBook {
 public:
  // Live tokens per user and entries in all (revoked ones are dropped first past it).
  static constexpr size_t kMaxPerUser = 16;
  static constexpr size_t kMaxEntries = 4096;
  static constexpr size_t kMaxNameBytes = 64;
  static constexpr size_t kMaxFileBytes = 4 << 20;

  // `path` "" keeps no file (tests).
  explicit TokenBook(std::string path);
  // Reads the file; a missing one is an empty book. A file that cannot be read or parsed is an
  // error (the daemon refuses to start rather than forget who holds tokens).
  Status Load();

  // A new token for `who`; returns it with its secret ("drv_<id>_<64 hex>"), shown only now.
  Result<std::pair<PersonalToken, std::string>> Create(const UnixUser& who,
                                                       const std::string& name, Millis now);
  // Revokes token `id` (NotFound when there is none); revoking twice is not an error.
  Result<PersonalToken> Revoke(int64_t id, Millis now);
  // The token in force that `secret` is, or nothing; notes its use.
  std::optional<PersonalToken> Check(std::string_view secret, Millis now);
  // Token `id` when it is in force.
  std::optional<PersonalToken> Live(int64_t id) const;
  std::vector<PersonalToken> List() const;

 private:
  Status SaveLocked() const;
  std::string path_;
  mutable std::mutex mu_;
  std::vector<PersonalToken> tokens_;
  int64_t next_id_ = 1;
};

}  // namespace drover::server
