// drover top: a live view of the daemon's GPUs (memory handed out, which runs hold them) and its
// queue, redrawn whenever the event stream says something changed (and at least every 2 s).
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "cli/client.h"
#include "cli/unix_http.h"
#include "cli/common.h"
#include "common/strings.h"
#include "common/terminal.h"
#include "protocol/api.h"

namespace drover::cli {
namespace {

struct TopFlags {
  bool once = false;
  int queued_rows = 10;
};

std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop = true; }

Result<std::string> Frame(ApiClient& api, const TopFlags& f) {
  DROVER_ASSIGN_OR_RETURN(Json gpus, api.Get("/gpus"));
  DROVER_ASSIGN_OR_RETURN(Json running, api.Get("/runs?state=running&limit=1000"));
  DROVER_ASSIGN_OR_RETURN(
      Json queued, api.Get(fmt::format("/runs?state=queued&limit={}", f.queued_rows + 1)));
  DROVER_ASSIGN_OR_RETURN(Json retrying, api.Get("/runs?state=retrying&limit=1000"));
  const Json& run_list = running.contains("runs") ? running["runs"] : running;
  const Json& queue_list = queued.contains("runs") ? queued["runs"] : queued;
  const Json& retry_list = retrying.contains("runs") ? retrying["runs"] : retrying;
  const Json& gpu_list = gpus.contains("gpus") ? gpus["gpus"] : gpus;

  std::string out = fmt::format(
      "drover top  {}:{}  {} running, {}{} queued, {} waiting to retry\n\n", api.info().host,
      api.info().port, run_list.size(), queue_list.size() > static_cast<size_t>(f.queued_rows) ? ">" : "",
      std::min<size_t>(queue_list.size(), f.queued_rows), retry_list.size());
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : gpu_list) {
    std::vector<std::string> ids;
    for (const auto& r : g.value("runs", Json::array())) ids.push_back(std::to_string(r.get<int64_t>()));
    // Live telemetry, where the probe gives it ("-" for what it does not know).
    const Json t = g.contains("telemetry") && g["telemetry"].is_object() ? g["telemetry"] : Json();
    auto known = [&](const char* key) { return t.is_object() && t.contains(key) && t[key].is_number(); };
    std::string util = known("utilization") ? fmt::format("{:.0f}%", t["utilization"].get<double>()) : "-";
    std::string used = known("memory_used") ? FormatBytes(t["memory_used"].get<int64_t>()) : "-";
    std::string temp = known("temperature_c") ? fmt::format("{:.0f}C", t["temperature_c"].get<double>()) : "-";
    std::string power = known("power_w") ? fmt::format("{:.0f}W", t["power_w"].get<double>()) : "-";
    rows.push_back({std::to_string(g.value("index", 0)), g.value("name", ""), util, used, temp, power,
                    fmt::format("{} / {}", FormatBytes(g.value("memory_reserved", int64_t{0})),
                                FormatBytes(g.value("memory_total", int64_t{0}))),
                    g.value("exclusive", false) ? "whole" : (ids.empty() ? "idle" : "shared"),
                    ids.empty() ? "-" : Join(ids, " ")});
  }
  if (rows.empty()) {
    out += "no GPUs (CPU runs only)\n";
  } else {
    out += RenderTable({"gpu", "name", "util", "mem used", "temp", "power", "reserved / total",
                        "use", "runs"},
                       rows);
  }
  out += "\nrunning\n";
  rows.clear();
  for (const auto& r : run_list) {
    std::string metrics;
    for (auto it = r["metrics"].begin(); it != r["metrics"].end() && metrics.size() < 50; ++it) {
      metrics += (metrics.empty() ? "" : " ") + it.key() + "=" + FormatValue(it.value());
    }
    rows.push_back({std::to_string(r.value("id", int64_t{0})),
                    std::to_string(r.value("experiment_id", int64_t{0})),
                    std::to_string(r.value("attempts", 0)),
                    ParamsSummary(r.value("current_params", Json::object()),
                                  [&] {
                                    std::vector<std::string> keys;
                                    for (auto it = r["params"].begin(); it != r["params"].end();
                                         ++it) {
                                      keys.push_back(it.key());
                                    }
                                    return keys;
                                  }()),
                    metrics});
  }
  out += rows.empty() ? "  (none)\n"
                      : RenderTable({"run", "exp", "attempt", "params", "latest"}, rows);
  out += "\nqueued (next to start first)\n";
  rows.clear();
  int shown = 0;
  for (const auto& r : queue_list) {
    if (shown++ >= f.queued_rows) break;
    rows.push_back({std::to_string(r.value("id", int64_t{0})),
                    std::to_string(r.value("experiment_id", int64_t{0})),
                    std::to_string(r.value("priority", 0)),
                    FormatBytes(r["resources"].value("gpu_memory", int64_t{0})) + " x " +
                        std::to_string(r["resources"].value("gpus", 0)) + " GPU"});
  }
  out += rows.empty() ? "  (none)\n" : RenderTable({"run", "exp", "priority", "needs"}, rows);
  DROVER_ASSIGN_OR_RETURN(Json alerts, api.Get("/alerts?limit=5"));
  if (!alerts["alerts"].empty()) {
    out += "\nrecent alerts (drover alerts lists them all)\n";
    for (const auto& a : alerts["alerts"]) {
      std::string times = a.value("count", 1) > 1 ? fmt::format(" (x{})", a.value("count", 1)) : "";
      out += fmt::format("  {}  {:<8} {}{}\n", FormatTime(a.value("first_ms", int64_t{0})).substr(11),
                         a.value("kind", ""), a.value("message", ""), times);
    }
  }
  return out;
}

int Top(Globals& g, const TopFlags& f) {
  auto daemon = FindDaemon(g);
  if (!daemon) {
    return ReportError(FailedPrecondition(fmt::format(
        "no drover daemon serves the store {}; drover top watches a daemon (drover serve). For a "
        "foreground drover run, its own terminal shows the progress; drover ls lists runs",
        StoreDir(g))));
  }
  ApiClient api(*daemon);
  if (f.once) {
    auto frame = Frame(api, f);
    if (!frame.ok()) return ReportError(frame.status());
    PrintText(*frame);
    return kExitOk;
  }
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // The event stream only says "something changed": the frame is fetched afresh each time.
  std::mutex mu;
  std::condition_variable cv;
  bool dirty = true;
  std::thread events([&] {
    auto changed = [&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        dirty = true;
      }
      cv.notify_one();
      return !g_stop.load();
    };
    httplib::Client c(daemon->host, daemon->port);
    c.set_bearer_token_auth(daemon->token.c_str());
    c.set_read_timeout(30, 0);
    while (!g_stop) {
      if (!daemon->socket.empty()) {
        // Over the socket, as the caller (a shared daemon's users have no token).
        (void)UnixHttpStream(daemon->socket, "/api/v1/events",
                             [&](std::string_view) { return changed(); }, 30);
      } else {
        c.Get("/api/v1/events", [&](const char*, size_t) { return changed(); });
      }
      if (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  while (!g_stop) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(2), [&] { return dirty || g_stop.load(); });
      dirty = false;
    }
    if (g_stop) break;
    auto frame = Frame(api, f);
    std::string text = frame.ok() ? *frame : "drover top: " + frame.status().message() + "\n";
    // Clearing the screen is top's own escape; what the frame shows (alert messages, metric
    // names) is escaped.
    std::fputs(("\x1b[H\x1b[2J" + TerminalText(text)).c_str(), stdout);
    std::fflush(stdout);
  }
  events.detach();  // blocked in a read until the daemon sends something; the process ends now
  return kExitOk;
}

}  // namespace

Command RegisterTop(CLI::App& root, Globals& g) {
  auto f = std::make_shared<TopFlags>();
  CLI::App* app = root.add_subcommand(
      "top", "Live view of the daemon's GPUs and queue (refreshes on every change)");
  app->add_flag("--once", f->once, "Print one frame and exit");
  app->add_option("--queued", f->queued_rows, "How many queued runs to show")
      ->check(CLI::NonNegativeNumber);
  return {app, [&g, f] { return Top(g, *f); }};
}

}  // namespace drover::cli
