#include "server/web_auth.h"

#include <charconv>
#include <optional>

#include "common/hash.h"

namespace drover::server {

bool SecretsEqual(std::string_view a, std::string_view b) {
  // Compare every byte of the longer one, so the time does not tell how much matched.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string MakeSessionCookie(const std::string& token, Millis now) {
  std::string issued = std::to_string(now);
  return "v1." + issued + "." + HmacSha256Hex(token, "session." + issued);
}

namespace {

// "<decimal>" of a whole field, or nothing.
std::optional<int64_t> Whole(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string MakePersonSessionCookie(const std::string& token, int64_t token_id, Millis now) {
  const std::string body = std::to_string(token_id) + "." + std::to_string(now);
  return "p1." + body + "." + HmacSha256Hex(token, "person." + body);
}

int64_t PersonSessionTokenId(const std::string& token, std::string_view cookie, Millis now) {
  if (token.empty() || !cookie.starts_with("p1.")) return 0;
  std::string_view rest = cookie.substr(3);
  const size_t d1 = rest.find('.');
  if (d1 == std::string_view::npos) return 0;
  const size_t d2 = rest.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return 0;
  auto id = Whole(rest.substr(0, d1));
  auto issued = Whole(rest.substr(d1 + 1, d2 - d1 - 1));
  if (!id || !issued || *id <= 0) return 0;
  if (*issued > now + 60'000 || now - *issued > kSessionMaxAgeS * 1000) return 0;
  if (!SecretsEqual(rest.substr(d2 + 1),
                    HmacSha256Hex(token, "person." + std::string(rest.substr(0, d2))))) {
    return 0;
  }
  return *id;
}

bool SessionValid(const std::string& token, std::string_view cookie, Millis now) {
  if (PersonSessionTokenId(token, cookie, now) > 0) return true;
  if (token.empty() || !cookie.starts_with("v1.")) return false;
  std::string_view rest = cookie.substr(3);
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  std::string_view issued = rest.substr(0, dot);
  Millis issued_ms = 0;
  auto [end, ec] = std::from_chars(issued.data(), issued.data() + issued.size(), issued_ms);
  if (ec != std::errc() || end != issued.data() + issued.size()) return false;
  if (issued_ms > now + 60'000 || now - issued_ms > kSessionMaxAgeS * 1000) return false;
  return SecretsEqual(rest.substr(dot + 1), HmacSha256Hex(token, "session." + std::string(issued)));
}

std::string CsrfFor(const std::string& token, std::string_view cookie) {
  return HmacSha256Hex(token, "csrf." + std::string(cookie));
}

std::string SessionCookieName(int port) { return "drover_session_" + std::to_string(port); }

std::vector<std::string> CookieValues(std::string_view header, std::string_view name) {
  std::vector<std::string> out;
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view part = header.substr(0, semi);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) {
      std::string_view v = part.substr(eq + 1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      out.emplace_back(v);
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return out;
}

std::string ValidSessionCookie(const std::string& token, std::string_view header, int port,
                               Millis now) {
  for (const std::string& v : CookieValues(header, SessionCookieName(port))) {
    if (SessionValid(token, v, now)) return v;
  }
  return "";
}

std::string SessionSetCookie(int port, const std::string& value) {
  // HttpOnly: page scripts cannot read it; SameSite=Strict: other sites' pages never send it.
  return SessionCookieName(port) + "=" + value + "; HttpOnly; SameSite=Strict; Path=/; Max-Age=" +
         (value.empty() ? "0" : std::to_string(kSessionMaxAgeS));
}

}  // namespace drover::server
