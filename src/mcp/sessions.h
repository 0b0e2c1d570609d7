#pragma once
// Sessions of the streamable HTTP transport (to be wired into src/server/). The spec's rules that
// this store exists for:
//  - The server hands out a session id in the Mcp-Session-Id header of its answer to initialize;
//    the client sends it with every later request. Ids are visible ASCII (0x21-0x7E) and should
//    be unguessable: here 128 random bits in hex.
//  - A request without the header (other than initialize) gets 400; an unknown or ended id gets
//    404, and the client then starts over with a new initialize.
//  - DELETE with the header ends the session (Remove).
//  - Every request after initialize carries MCP-Protocol-Version (CheckProtocolVersionHeader).
// Live sessions are capped; the least recently used one goes when a new one would pass the cap,
// so a client that never says goodbye cannot grow the daemon without bound.
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "mcp/server.h"

namespace drover::mcp {

// One session. HTTP requests of one session may arrive on several worker threads at once: lock
// `mu` while handling a message with `session`.
struct McpSessionEntry {
  explicit McpSessionEntry(std::string session_id) : id(std::move(session_id)) {}
  const std::string id;
  std::mutex mu;
  McpSession session;
};

class SessionStore {
 public:
  static constexpr size_t kDefaultMaxSessions = 1000;
  explicit SessionStore(size_t max_sessions = kDefaultMaxSessions);

  // A new session with a fresh id (entry->id), evicting the least recently used one at the cap.
  std::shared_ptr<McpSessionEntry> Create();
  // The session, or null when the id is unknown, removed or evicted (answer 404). Marks it used.
  // An entry stays valid for whoever holds it, even after it is removed.
  std::shared_ptr<McpSessionEntry> Find(const std::string& id);
  // Ends a session; false when there was none.
  bool Remove(const std::string& id);
  size_t size() const;

 private:
  struct Slot {
    std::shared_ptr<McpSessionEntry> entry;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  mutable std::mutex mu_;
  const size_t max_sessions_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string, Slot> sessions_;
};

// 32 lowercase hex characters from a cryptographic random source.
std::string NewSessionId();

// Checks the MCP-Protocol-Version header of a request after initialize. An empty value means
// the header is missing: the spec says to assume 2025-03-26 (which had no such header), which is
// accepted. Returns the message for a 400 Bad Request when the version is not one we speak, or
// nothing when the request may go on.
std::optional<std::string> CheckProtocolVersionHeader(const std::string& header_value);
// The version a request speaks: the header's, or 2025-03-26 without one.
std::string ProtocolVersionFromHeader(const std::string& header_value);

}  // namespace drover::mcp
