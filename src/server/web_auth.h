#pragma once
// The web UI's sign-in: a browser that gave the token once gets a session cookie, and pages it
// loads carry a CSRF token for requests that change anything (docs/web.md). Both are HMACs under
// the store's token, so nothing is kept on the server: a cookie survives a daemon restart and
// stops working when the token changes. Pure functions; the server applies them per request.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace drover::server {

inline constexpr char kCsrfHeader[] = "X-Drover-Csrf";
inline constexpr int64_t kSessionMaxAgeS = 7LL * 24 * 3600;

// "drover_session_<port>": browsers do not separate cookies by port, so two daemons on one host
// (two stores) each keep their own session.
std::string SessionCookieName(int port);

// "v1.<issued_ms>.<hex HMAC-SHA256(token, "session.<issued_ms>")>".
std::string MakeSessionCookie(const std::string& token, Millis now);
// Whether `cookie` was made by MakeSessionCookie (or MakePersonSessionCookie) with this token, at
// most kSessionMaxAgeS ago
// (and not in the future beyond a minute of clock skew). Constant-time comparison.
bool SessionValid(const std::string& token, std::string_view cookie, Millis now);
// The CSRF token of a session: HMAC-SHA256(token, "csrf." + cookie).
std::string CsrfFor(const std::string& token, std::string_view cookie);
// A person's session (signed in with a personal token, server/tokens.h):
// "p1.<token id>.<issued_ms>.<hex HMAC-SHA256(token, "person.<id>.<issued_ms>")>", under the
// store's token like the others; it acts as that token's user while the token is in force.
std::string MakePersonSessionCookie(const std::string& token, int64_t token_id, Millis now);
// The token id of a valid person's session cookie, or 0 (not one, forged, or too old).
int64_t PersonSessionTokenId(const std::string& token, std::string_view cookie, Millis now);

// Every value of cookie `name` in a Cookie header ("a=1; drover_session_7070=v1...."), in order.
// A page on another port of the same host can set a cookie of the same name (for a narrower
// path, so it comes first): the caller tries them all.
std::vector<std::string> CookieValues(std::string_view cookie_header, std::string_view name);
// The first of the request's session cookies for this port that SessionValid accepts, or "".
std::string ValidSessionCookie(const std::string& token, std::string_view cookie_header, int port,
                               Millis now);
// The Set-Cookie header value that stores (or, with an empty value, clears) the session.
std::string SessionSetCookie(int port, const std::string& value);

// Constant-time string comparison (for tokens and HMACs).
bool SecretsEqual(std::string_view a, std::string_view b);

}  // namespace drover::server
