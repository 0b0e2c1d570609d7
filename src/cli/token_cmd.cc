// drover token create [--name N] [--user U] | list [--json] | revoke ID: personal tokens, each
// acting as one user over HTTP (the web UI's sign-in, remote clients, agents; DROVER_TOKEN for
// the CLI). docs/lab-server.md, "Tokens".
#include <fmt/format.h>
#include <httplib.h>

#include "cli/client.h"
#include "cli/common.h"
#include "common/strings.h"

namespace drover::cli {
namespace {

struct TokenFlags {
  std::string name;
  std::string user;
  int64_t id = 0;
  bool json = false;
};

Result<DaemonInfo> TheDaemon(Globals& g) {
  if (auto daemon = FindDaemon(g)) return *daemon;
  return FailedPrecondition("tokens are kept by the daemon: start it (drover serve) for store " +
                            StoreDir(g));
}

int Create(Globals& g, const TokenFlags& f) {
  auto daemon = TheDaemon(g);
  if (!daemon.ok()) return ReportError(daemon.status());
  ApiClient api(*daemon);
  Json body = {{"name", f.name}};
  if (!f.user.empty()) body["user"] = f.user;
  auto j = api.Post("/tokens", body);
  if (!j.ok()) return ReportError(j.status());
  if (f.json) {
    std::printf("%s\n", j->dump(2).c_str());
    return kExitOk;
  }
  std::printf("token %lld for %s%s:\n\n  %s\n\n", static_cast<long long>(j->value("id", 0)),
              j->value("user", "").c_str(),
              f.name.empty() ? "" : fmt::format(" ({})", f.name).c_str(),
              j->value("token", "").c_str());
  std::printf(
      "It is shown only now. It acts as %s: sign in to the web UI with it, send it as "
      "Authorization: Bearer <token>, or set DROVER_TOKEN for the CLI. Revoke it with drover "
      "token revoke %lld.\n",
      j->value("user", "").c_str(), static_cast<long long>(j->value("id", 0)));
  return kExitOk;
}

int List(Globals& g, const TokenFlags& f) {
  auto daemon = TheDaemon(g);
  if (!daemon.ok()) return ReportError(daemon.status());
  ApiClient api(*daemon);
  std::string q = "/tokens";
  if (!f.user.empty()) q += "?user=" + httplib::detail::encode_query_param(f.user);
  auto j = api.Get(q);
  if (!j.ok()) return ReportError(j.status());
  if (f.json) {
    std::printf("%s\n", j->dump(2).c_str());
    return kExitOk;
  }
  const Json tokens = j->value("tokens", Json::array());
  if (tokens.empty()) {
    std::printf("no tokens (drover token create makes one)\n");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Json& t : tokens) {
    const Millis used = t.value("last_used_ms", Millis{0});
    rows.push_back({std::to_string(t.value("id", 0)), t.value("user", ""), t.value("name", ""),
                    FormatTime(t.value("created_ms", Millis{0})),
                    used > 0 ? FormatTime(used) : "-", t.value("state", "")});
  }
  std::fputs(RenderTable({"id", "user", "name", "created", "last used", "state"}, rows).c_str(),
             stdout);
  return kExitOk;
}

int Revoke(Globals& g, const TokenFlags& f) {
  auto daemon = TheDaemon(g);
  if (!daemon.ok()) return ReportError(daemon.status());
  ApiClient api(*daemon);
  auto j = api.Delete("/tokens/" + std::to_string(f.id));
  if (!j.ok()) return ReportError(j.status());
  std::printf("token %lld (%s's) revoked: it and the web sessions opened with it stop working\n",
              static_cast<long long>(f.id), j->value("user", "").c_str());
  return kExitOk;
}

}  // namespace

Command RegisterToken(CLI::App& root, Globals& g) {
  auto f = std::make_shared<TokenFlags>();
  CLI::App* app = root.add_subcommand(
      "token", "Personal tokens: each acts as one user over HTTP (web UI, remote clients)");
  app->require_subcommand(1);
  CLI::App* create = app->add_subcommand("create", "Make a token for yourself (shown once)");
  create->add_option("--name", f->name, "What it is for (laptop, agent)");
  create->add_option("--user", f->user, "For another user (admins)");
  create->add_flag("--json", f->json, "Print JSON");
  CLI::App* list = app->add_subcommand("list", "Your tokens (an admin: everyone's)");
  list->add_option("--user", f->user, "Only this user's");
  list->add_flag("--json", f->json, "Print JSON");
  CLI::App* revoke = app->add_subcommand("revoke", "Revoke a token: it stops working at once");
  revoke->add_option("id", f->id, "Token id, as drover token list shows it")
      ->required()
      ->check(CLI::PositiveNumber);
  return {app, [&g, f, create, list] {
            if (create->parsed()) return Create(g, *f);
            if (list->parsed()) return List(g, *f);
            return Revoke(g, *f);
          }};
}

}  // namespace drover::cli
