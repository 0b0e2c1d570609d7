// The web UI (docs/web.md): the sign-in page, the app page, its static files, and
// /api/v1/session. Who may see what is decided before routing (server.cc, with web_auth.h);
// these handlers only serve.
#include <string>

#include "common/clock.h"
#include "common/hash.h"
#include "common/strings.h"
#include "drover_version.h"
#include "server/routes.h"
#include "server/web_assets.h"
#include "server/web_auth.h"

namespace drover::server {
namespace {

void NoStore(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  // Not no-referrer: with it Chromium sends "Origin: null" on the page's own POSTs, which the
  // Origin check refuses.
  res.set_header("Referrer-Policy", "same-origin");
  // Only this server's own scripts; uPlot sets element styles from script, which CSP allows.
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                 "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
                 "base-uri 'none'; form-action 'self'");
}

std::string Replace(std::string text, std::string_view what, std::string_view with) {
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size())) {
    text.replace(at, what.size(), with);
  }
  return text;
}

void SendLogin(httplib::Response& res, int status, const std::string& error) {
  auto page = FindWebFile("login.html");
  if (!page) {
    SendError(res, Internal("the web UI's login.html is missing from this build"));
    return;
  }
  NoStore(res);
  res.status = status;
  res.set_content(Replace(page->data, "{{error}}", HtmlEscape(error)), page->content_type);
}

}  // namespace

std::string SessionCookieOf(const ServerContext& ctx, const httplib::Request& req) {
  const Millis now = ctx.clock.Now();
  std::string cookie =
      ValidSessionCookie(ctx.options.token, req.get_header_value("Cookie"), ctx.port, now);
  // A person's session ends with the token it was opened with.
  if (const int64_t id = PersonSessionTokenId(ctx.options.token, cookie, now);
      id > 0 && !ctx.tokens.Live(id)) {
    return "";
  }
  return cookie;
}

void RegisterWebRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/login", [](const httplib::Request&, httplib::Response& res) { SendLogin(res, 200, ""); });

  http.Post("/login", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::string token = req.has_param("token") ? req.get_param_value("token") : "";
    token = std::string(Trim(token));
    const Millis now = ctx.clock.Now();
    std::string cookie;
    if (!token.empty() && SecretsEqual(token, ctx.options.token)) {
      cookie = MakeSessionCookie(ctx.options.token, now);  // the daemon's own user
    } else if (auto person = token.empty() ? std::nullopt : ctx.tokens.Check(token, now)) {
      // A personal token signs its user in as themselves (drover token create).
      cookie = MakePersonSessionCookie(ctx.options.token, person->id, now);
    }
    if (cookie.empty()) {
      SendLogin(res, 401,
                token.empty() ? "Paste a token to sign in."
                              : "That is not a token of this daemon: paste yours (drover token "
                                "create) or the daemon's (<store>/token).");
      return;
    }
    NoStore(res);
    res.set_header("Set-Cookie", SessionSetCookie(ctx.port, cookie));
    res.set_redirect("/", 303);
  });

  // Whether this browser is signed in, for the sign-in page: a link from another site arrives
  // without the SameSite=Strict cookie, and the page's own request has it. Public, and 200
  // either way (a 401 would be a console error on every sign-in page).
  http.Get("/login/status", [&ctx](const httplib::Request& req, httplib::Response& res) {
    NoStore(res);
    SendJson(res, 200, {{"signed_in", !SessionCookieOf(ctx, req).empty()}});
  });

  http.Post("/logout", [&ctx](const httplib::Request&, httplib::Response& res) {
    NoStore(res);
    res.set_header("Set-Cookie", SessionSetCookie(ctx.port, ""));
    res.set_redirect("/login", 303);
  });

  auto index = [&ctx](const httplib::Request& req, httplib::Response& res) {
    auto page = FindWebFile("index.html");
    if (!page) {
      SendError(res, Internal("the web UI's index.html is missing from this build"));
      return;
    }
    std::string cookie = SessionCookieOf(ctx, req);
    std::string csrf = cookie.empty() ? "" : CsrfFor(ctx.options.token, cookie);
    NoStore(res);
    res.set_content(Replace(page->data, "{{csrf}}", csrf), page->content_type);
  };
  http.Get("/", index);
  http.Get("/index.html", index);

  // Browsers ask for it on pages without an icon (the API's JSON errors); nothing to show.
  http.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });

  http.Get("/static/(.+)", [](const httplib::Request& req, httplib::Response& res) {
    std::string path = req.matches[1].str();
    auto file = FindWebFile(path);
    if (!file || path == "index.html" || path == "login.html") {
      SendErrorCode(res, 404, "not_found", "no file " + path + " in the web UI");
      return;
    }
    // Revalidated on every load, so a new drover binary's UI shows at once; the ETag makes that
    // a 304, and a file the browser keeps keeps its compiled code cache too.
    std::string etag = "\"" + Sha256Hex(file->data).substr(0, 20) + "\"";
    res.set_header("Cache-Control", "no-cache");
    res.set_header("ETag", etag);
    res.set_header("X-Content-Type-Options", "nosniff");
    if (req.get_header_value("If-None-Match") == etag) {
      res.status = 304;
      return;
    }
    res.set_content(std::move(file->data), file->content_type);
  });

  http.Get(std::string(protocol::kApiPrefix) + "/session",
           [&ctx](const httplib::Request& req, httplib::Response& res) {
             std::string cookie = SessionCookieOf(ctx, req);
             bool bearer = req.has_header("Authorization");
             Json csrf = bearer || cookie.empty() ? Json(nullptr)
                                                  : Json(CsrfFor(ctx.options.token, cookie));
             SendJson(res, 200,
                      {{"auth", bearer ? "bearer" : "cookie"}, {"csrf", csrf},
                       {"version", DROVER_VERSION}});
           });
}

}  // namespace drover::server
