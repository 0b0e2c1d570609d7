#include "mcp/sessions.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <random>

#include "common/strings.h"

namespace drover::mcp {

std::string NewSessionId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's generator failing is near impossible; the kernel's is the next best source.
    std::random_device rd;
    for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  }
  std::string id;
  id.reserve(2 * sizeof(bytes));
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  return id;
}

SessionStore::SessionStore(size_t max_sessions) : max_sessions_(max_sessions ? max_sessions : 1) {}

std::shared_ptr<McpSessionEntry> SessionStore::Create() {
  auto entry = std::make_shared<McpSessionEntry>(NewSessionId());
  std::lock_guard lock(mu_);
  while (sessions_.size() >= max_sessions_) {
    sessions_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(entry->id);
  sessions_[entry->id] = Slot{entry, lru_.begin()};
  return entry;
}

std::shared_ptr<McpSessionEntry> SessionStore::Find(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);  // iterators stay valid
  return it->second.entry;
}

bool SessionStore::Remove(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  lru_.erase(it->second.lru);
  sessions_.erase(it);
  return true;
}

size_t SessionStore::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

std::string ProtocolVersionFromHeader(const std::string& header_value) {
  std::string_view v = Trim(header_value);
  return v.empty() ? "2025-03-26" : std::string(v);
}

std::optional<std::string> CheckProtocolVersionHeader(const std::string& header_value) {
  std::string version = ProtocolVersionFromHeader(header_value);
  if (IsSupportedProtocolVersion(version)) return std::nullopt;
  std::string shown = version.size() > 40 ? version.substr(0, 40) + "..." : version;
  return fmt::format("unsupported MCP-Protocol-Version \"{}\" (supported: {})", shown,
                     Join(SupportedProtocolVersions(), ", "));
}

}  // namespace drover::mcp
