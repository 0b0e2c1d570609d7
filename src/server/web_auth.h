#pragma once
// The web UI's sign-in: a browser that gave the token once gets a session cookie, and pages it
// loads carry a CSRF token for requests that change anything (docs/web.md). Both are HMACs under
// the store's token, so nothing is kept on the server: a cookie survives a daemon restart and
// stops working when the token changes. Pure functions; the server applies them per request.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"

namespace drover::server {

inline constexpr char kSessionCookieName[] = "drover_session";
inline constexpr char kCsrfHeader[] = "X-Drover-Csrf";
inline constexpr int64_t kSessionMaxAgeS = 30LL * 24 * 3600;

// "v1.<issued_ms>.<hex HMAC-SHA256(token, "session.<issued_ms>")>".
std::string MakeSessionCookie(const std::string& token, Millis now);
// Whether `cookie` was made by MakeSessionCookie with this token, at most kSessionMaxAgeS ago
// (and not in the future beyond a minute of clock skew). Constant-time comparison.
bool SessionValid(const std::string& token, std::string_view cookie, Millis now);
// The CSRF token of a session: HMAC-SHA256(token, "csrf." + cookie).
std::string CsrfFor(const std::string& token, std::string_view cookie);

// The value of cookie `name` in a Cookie header ("a=1; drover_session=v1...."), or "".
std::string CookieValue(std::string_view cookie_header, std::string_view name);
// The Set-Cookie header value that stores (or, with an empty value, clears) the session.
std::string SessionSetCookie(const std::string& value);

// Constant-time string comparison (for tokens and HMACs).
bool SecretsEqual(std::string_view a, std::string_view b);

}  // namespace drover::server
