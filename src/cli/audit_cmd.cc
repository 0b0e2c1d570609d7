// drover audit [--user U] [--since 1h] [-n N] [--json]: who changed what, when and from where
// (the daemon's audit log; admins only: docs/lab-server.md, "Audit").
#include <fmt/format.h>
#include <httplib.h>

#include "cli/client.h"
#include "cli/common.h"
#include "common/clock.h"
#include "common/strings.h"
#include "server/audit.h"

namespace drover::cli {
namespace {

struct AuditFlags {
  std::string user;
  std::string since;
  int limit = 50;
  bool json = false;
};

int Audit(Globals& g, const AuditFlags& f) {
  Millis since_ms = 0;
  if (!f.since.empty()) {
    auto d = ParseDurationMs(f.since);
    if (!d.ok()) return ReportError(InvalidArgument("--since: " + d.status().message()));
    since_ms = RealClock().Now() - *d;
  }
  std::vector<Json> entries;
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    std::string q = fmt::format("/audit?limit={}", f.limit > 0 ? f.limit : 100000);
    if (since_ms > 0) q += fmt::format("&since_ms={}", since_ms);
    if (!f.user.empty()) q += "&user=" + httplib::detail::encode_query_param(f.user);
    auto j = api.Get(q);
    if (!j.ok()) return ReportError(j.status());
    for (const Json& e : j->value("entries", Json::array())) entries.push_back(e);
  } else {
    // No daemon: the log it left, when this user may read it.
    server::AuditLog log(StoreDir(g) + "/audit.log");
    server::AuditQuery q;
    q.user = f.user;
    q.since_ms = since_ms;
    q.limit = f.limit > 0 ? static_cast<size_t>(f.limit) : 0;
    auto read = log.Read(q);
    if (!read.ok()) return ReportError(read.status());
    entries = std::move(*read);
  }
  if (f.json) {
    std::printf("%s\n", Json({{"entries", entries}})
                            .dump(2, ' ', false, Json::error_handler_t::replace)
                            .c_str());
    return kExitOk;
  }
  if (entries.empty()) {
    std::printf("no audit entries\n");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Json& e : entries) {
    std::string what = e.value("method", "") + " " + e.value("path", "");
    std::string result = std::to_string(e.value("status", 0));
    if (e.contains("error")) {
      std::string err = e.value("error", "");
      if (err.size() > 60) err = err.substr(0, 57) + "...";
      result += " " + err;
    }
    rows.push_back({FormatTime(e.value("t_ms", int64_t{0})), e.value("user", "-"),
                    e.value("via", ""), e.value("from", ""), what, result});
  }
  std::fputs(RenderTable({"when", "user", "via", "from", "request", "result"}, rows).c_str(),
             stdout);
  return kExitOk;
}

}  // namespace

Command RegisterAudit(CLI::App& root, Globals& g) {
  auto f = std::make_shared<AuditFlags>();
  CLI::App* app = root.add_subcommand(
      "audit", "Who submitted, cancelled or changed what, when and from where (admins)");
  app->add_option("-u,--user", f->user, "Only this user's requests");
  app->add_option("--since", f->since, "Only the last DURATION (30m, 2h, 7d)");
  app->add_option("-n,--limit", f->limit, "The newest N entries (default 50; 0: all)")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return Audit(g, *f); }};
}

}  // namespace drover::cli
