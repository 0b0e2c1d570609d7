#include "server/tokens.h"
#include "common/files.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/hash.h"
#include "model/spec.h"
#include "server/web_auth.h"

namespace drover::server {
namespace {

constexpr std::string_view kPrefix = "drv_";

Json ToJson(const PersonalToken& t) {
  return {{"id", t.id},           {"name", t.name},
          {"user", t.user},       {"uid", t.uid},
          {"gid", t.gid},         {"created_ms", t.created_ms},
          {"revoked_ms", t.revoked_ms}, {"last_used_ms", t.last_used_ms},
          {"hash", t.hash}};
}

// "drv_<id>_<hex>": the id, or 0 when it is not of that shape.
int64_t IdOf(std::string_view secret) {
  if (!secret.starts_with(kPrefix)) return 0;
  secret.remove_prefix(kPrefix.size());
  size_t us = secret.find('_');
  if (us == std::string_view::npos) return 0;
  int64_t id = 0;
  auto [end, ec] = std::from_chars(secret.data(), secret.data() + us, id);
  if (ec != std::errc() || end != secret.data() + us || id <= 0) return 0;
  return id;
}

}  // namespace

TokenBook::TokenBook(std::string path) : path_(std::move(path)) {}

Status TokenBook::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return Status::Ok();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("cannot read the token book '" + path_ + "'");
  }
  if (st.st_size > static_cast<off_t>(kMaxFileBytes)) {
    return FailedPrecondition("the token book '" + path_ + "' is larger than it can be (" +
                              std::to_string(st.st_size) + " bytes); move it aside");
  }
  std::ifstream in(path_);
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!in || !j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) {
    return FailedPrecondition("the token book '" + path_ +
                              "' is not one drover wrote; move it aside (every personal token "
                              "in it stops working)");
  }
  tokens_.clear();
  next_id_ = j.contains("next_id") && j["next_id"].is_number_integer()
                 ? std::max<int64_t>(1, j["next_id"].get<int64_t>())
                 : 1;
  const Json list = j["tokens"];
  // Each field of its type, or the entry is not drover's and is left out (no exception).
  auto integer = [](const Json& t, const char* k) {
    return t.contains(k) && t[k].is_number_integer();
  };
  auto text = [](const Json& t, const char* k) { return t.contains(k) && t[k].is_string(); };
  for (const Json& t : list) {
    if (!t.is_object() || !integer(t, "id") || !integer(t, "uid") || !text(t, "hash")) continue;
    bool well_formed = true;
    for (const char* k : {"gid", "created_ms", "revoked_ms", "last_used_ms"}) {
      well_formed = well_formed && (!t.contains(k) || integer(t, k));
    }
    for (const char* k : {"name", "user"}) well_formed = well_formed && (!t.contains(k) || text(t, k));
    if (!well_formed) continue;
    PersonalToken p;
    p.id = t.value("id", int64_t{0});
    p.name = t.value("name", std::string());
    p.user = t.value("user", std::string());
    p.uid = t.value("uid", int64_t{-1});
    p.gid = t.value("gid", int64_t{-1});
    p.created_ms = t.value("created_ms", Millis{0});
    p.revoked_ms = t.value("revoked_ms", Millis{0});
    p.last_used_ms = t.value("last_used_ms", Millis{0});
    p.hash = t.value("hash", std::string());
    if (p.id <= 0 || p.uid < 0 || p.hash.size() != 64) continue;
    next_id_ = std::max(next_id_, p.id + 1);
    tokens_.push_back(std::move(p));
    if (tokens_.size() >= kMaxEntries) break;
  }
  return Status::Ok();
}

Status TokenBook::SaveLocked() const {
  if (path_.empty()) return Status::Ok();
  Json list = Json::array();
  for (const PersonalToken& t : tokens_) list.push_back(ToJson(t));
  const std::string text = Json{{"next_id", next_id_}, {"tokens", list}}.dump(1) + "\n";
  // A revoked token must stay revoked after a power cut: synced before it replaces the old book.
  return WriteFileAtomically(path_, text, {.mode = 0600});
}

Result<std::pair<PersonalToken, std::string>> TokenBook::Create(const UnixUser& who,
                                                                const std::string& name,
                                                                Millis now) {
  if (name.size() > kMaxNameBytes) {
    return InvalidArgument("a token's name is at most " + std::to_string(kMaxNameBytes) +
                           " bytes");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return InvalidArgument("a token's name is one line of text");
  }
  if (who.uid < 0) return InvalidArgument("a token is issued to a user");
  unsigned char raw[32];
  if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    return ErrnoStatus("cannot read random bytes for a token");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  std::lock_guard<std::mutex> lock(mu_);
  const size_t live = static_cast<size_t>(std::count_if(
      tokens_.begin(), tokens_.end(),
      [&](const PersonalToken& t) { return t.uid == who.uid && t.revoked_ms == 0; }));
  if (live >= kMaxPerUser) {
    return FailedPrecondition(DisplayName(who) + " already holds " + std::to_string(live) +
                              " tokens, the most one user may; revoke one first (drover token "
                              "list, drover token revoke ID)");
  }
  if (tokens_.size() >= kMaxEntries) {
    // Revoked ones go first, the oldest first.
    auto revoked = std::find_if(tokens_.begin(), tokens_.end(),
                                [](const PersonalToken& t) { return t.revoked_ms != 0; });
    if (revoked == tokens_.end()) {
      return FailedPrecondition("the daemon holds " + std::to_string(kMaxEntries) +
                                " tokens, the most it keeps; revoke some first");
    }
    tokens_.erase(revoked);
  }
  PersonalToken t;
  t.id = next_id_;
  t.name = name;
  t.user = DisplayName(who);
  t.uid = who.uid;
  t.gid = who.gid;
  t.created_ms = now;
  const std::string secret = std::string(kPrefix) + std::to_string(t.id) + "_" + hex;
  t.hash = Sha256Hex(secret);
  tokens_.push_back(t);
  ++next_id_;
  if (Status s = SaveLocked(); !s.ok()) {
    tokens_.pop_back();
    --next_id_;
    return s;
  }
  return std::make_pair(t, secret);
}

Result<PersonalToken> TokenBook::Revoke(int64_t id, Millis now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (PersonalToken& t : tokens_) {
    if (t.id != id) continue;
    if (t.revoked_ms == 0) {
      t.revoked_ms = now;
      if (Status s = SaveLocked(); !s.ok()) {
        t.revoked_ms = 0;
        return s;
      }
    }
    return t;
  }
  return NotFound("there is no token " + std::to_string(id) + "; drover token list shows them");
}

std::optional<PersonalToken> TokenBook::Check(std::string_view secret, Millis now) {
  const int64_t id = IdOf(secret);
  if (id == 0 || secret.size() > 128) return std::nullopt;
  const std::string hash = Sha256Hex(secret);
  std::lock_guard<std::mutex> lock(mu_);
  for (PersonalToken& t : tokens_) {
    if (t.id != id) continue;
    if (t.revoked_ms != 0 || !SecretsEqual(t.hash, hash)) return std::nullopt;
    t.last_used_ms = now;
    return t;
  }
  return std::nullopt;
}

std::optional<PersonalToken> TokenBook::Live(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const PersonalToken& t : tokens_) {
    if (t.id == id && t.revoked_ms == 0) return t;
  }
  return std::nullopt;
}

std::vector<PersonalToken> TokenBook::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

}  // namespace drover::server
