// drover usage [--since 7d] [--json]: GPU-hours by user and by team over a window, from the
// daemon (or the store when none serves it); docs/lab-server.md, "Usage".
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cli/client.h"
#include "cli/common.h"
#include "common/clock.h"
#include "common/strings.h"

namespace drover::cli {
namespace {

struct UsageFlags {
  std::string since = "7d";
  bool json = false;
};

int Usage(Globals& g, const UsageFlags& f) {
  auto window = ParseDurationMs(f.since);
  if (!window.ok()) return ReportError(InvalidArgument("--since: " + window.status().message()));
  const Millis now = RealClock().Now();
  const Millis since_ms = now - *window;
  Json usage = Json::array();
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    auto j = api.Get(fmt::format("/usage?since_ms={}&until_ms={}", since_ms, now));
    if (!j.ok()) return ReportError(j.status());
    usage = j->value("usage", Json::array());
  } else {
    auto store = OpenStore(g, /*create=*/false);
    if (!store.ok()) return ReportError(store.status());
    auto rows = (*store)->Usage(since_ms, now);
    if (!rows.ok()) return ReportError(rows.status());
    for (const UsageRow& r : *rows) {
      usage.push_back({{"user", r.user},
                       {"group", r.group},
                       {"gpu_hours", r.gpu_ms / 3'600'000.0},
                       {"runs", r.runs}});
    }
  }
  if (f.json) {
    std::printf("%s\n", Json({{"since_ms", since_ms}, {"until_ms", now}, {"usage", usage}})
                            .dump(2, ' ', false, Json::error_handler_t::replace)
                            .c_str());
    return kExitOk;
  }
  if (usage.empty()) {
    std::printf("no GPU time in the last %s\n", f.since.c_str());
    return kExitOk;
  }
  std::map<std::string, double> by_user, by_team;
  for (const Json& u : usage) {
    const double h = u.value("gpu_hours", 0.0);
    by_user[u.value("user", "")] += h;
    by_team[u.value("group", "")] += h;
  }
  auto table = [](const char* what, const std::map<std::string, double>& m) {
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [k, h] : m) order.push_back({-h, k});
    std::sort(order.begin(), order.end());
    std::vector<std::vector<std::string>> rows;
    for (const auto& [h, k] : order) rows.push_back({k.empty() ? "-" : k, fmt::format("{:.3f}", -h)});
    std::fputs(RenderTable({what, "GPU-hours"}, rows).c_str(), stdout);
  };
  std::printf("GPU time in the last %s\n\n", f.since.c_str());
  table("user", by_user);
  std::printf("\n");
  table("team", by_team);
  return kExitOk;
}

}  // namespace

Command RegisterUsage(CLI::App& root, Globals& g) {
  auto f = std::make_shared<UsageFlags>();
  CLI::App* app =
      root.add_subcommand("usage", "GPU-hours by user and by team over a window (default 7d)");
  app->add_option("--since", f->since, "The window: 24h, 7d, 30d (default 7d)");
  app->add_flag("--json", f->json, "Print JSON (by user and group)");
  return {app, [&g, f] { return Usage(g, *f); }};
}

}  // namespace drover::cli
