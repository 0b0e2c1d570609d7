// drover gpu ls | drain N --reason TEXT | clear N: the GPUs with their health, and an admin's
// drain and clear (docs/metrics.md, "GPU health"). With a daemon serving the store it asks the
// daemon (on a shared daemon only its admins may drain and clear); without one, `ls` reads this
// machine's GPUs itself and drain/clear edit the store's drain book, which a foreground
// `drover run` reads back within a second.
#include <fmt/format.h>

#include <algorithm>
#include <unistd.h>

#include <ctime>

#include "cli/client.h"
#include "cli/common.h"
#include "common/terminal.h"
#include "common/clock.h"
#include "common/strings.h"
#include "common/users.h"
#include "gpu/drain_book.h"
#include "gpu/gpu_probe.h"
#include "gpu/health.h"
#include "gpu/health_json.h"

namespace drover::cli {
namespace {

struct GpuFlags {
  CLI::App* ls = nullptr;
  CLI::App* drain = nullptr;
  CLI::App* clear = nullptr;
  int index = -1;
  std::string reason;
  bool json = false;
};

// One row of `drover gpu ls`, from the daemon's JSON or this machine's probe.
struct GpuRow {
  int index = 0;
  std::string name;
  std::string uuid;
  int64_t memory = 0;         // what drover may hand out
  int64_t memory_device = 0;  // the device's total (0: unknown, or the same)
  std::vector<int64_t> runs;
  std::optional<GpuSample> reading;
  std::optional<DrainEntry> drained;
};

std::string WallTimeOfDay(Millis ms) {
  std::time_t t = ms / 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string BookPath(const Globals& g) { return DrainBookPath(StoreDir(g)); }

int Print(const std::vector<GpuRow>& rows, const std::string& where) {
  if (rows.empty()) {
    std::printf("no GPUs (%s)\n", where.c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  bool kept = false;  // some GPU's device total is more than drover hands out
  // Why each drained GPU is, once per reason (a GPU's MIG instances share theirs).
  std::vector<std::pair<std::vector<std::string>, std::string>> notes;
  for (const GpuRow& r : rows) {
    std::string name = r.name;
    if (r.reading && r.reading->parent_index >= 0) {
      name += fmt::format(" (on GPU {})", r.reading->parent_index);
    }
    std::vector<std::string> ids;
    for (int64_t id : r.runs) ids.push_back(std::to_string(id));
    std::string temp = "-";
    std::string clock = "-";
    if (r.reading) {
      if (r.reading->temperature_c >= 0) temp = fmt::format("{:.0f}C", r.reading->temperature_c);
      if (r.reading->sm_clock_mhz >= 0) clock = fmt::format("{:.0f} MHz", r.reading->sm_clock_mhz);
    }
    std::string health = r.reading ? HealthSummary(*r.reading) : "unknown";
    if (r.drained) {
      health = fmt::format("DRAINED by {} at {}{}", r.drained->by.empty() ? "?" : r.drained->by,
                           WallTimeOfDay(r.drained->since_ms),
                           health == "ok" || health == "unknown" ? "" : "; " + health);
      const std::string why = r.drained->reason.empty() ? "(no reason given)" : r.drained->reason;
      auto same = std::find_if(notes.begin(), notes.end(),
                               [&](const auto& n) { return n.second == why; });
      if (same == notes.end()) same = notes.insert(notes.end(), {{}, why});
      same->first.push_back(std::to_string(r.index));
    }
    std::string memory = FormatBytes(r.memory);
    if (r.memory_device > r.memory) {
      memory += " of " + FormatBytes(r.memory_device);
      kept = true;
    }
    table.push_back({std::to_string(r.index), name, memory,
                     ids.empty() ? "-" : Join(ids, " "), temp, clock, health});
  }
  std::printf("%s", RenderTable({"gpu", "name", "memory", "runs", "temp", "sm clock", "health"},
                                table)
                        .c_str());
  if (kept) {
    std::printf("memory: what drover hands out to runs, of the device's total; the rest is kept for "
                "the driver and monitoring (scheduler.gpu_reserve, 1GiB by default) and for what "
                "was in use when the daemon started\n");
  }
  if (!notes.empty()) {
    std::printf("\n");
    for (const auto& [gpus, why] : notes) {
      std::printf("GPU %s: %s\n", Join(gpus, ", ").c_str(), TerminalLine(why).c_str());
    }
  }
  return kExitOk;
}

Result<std::vector<GpuRow>> RowsFromDaemon(const Json& body) {
  std::vector<GpuRow> rows;
  if (!body.contains("gpus") || !body["gpus"].is_array()) {
    return Internal("the daemon's answer has no GPU list");
  }
  for (const Json& g : body["gpus"]) {
    GpuRow r;
    r.index = g.value("index", 0);
    r.name = g.value("name", "");
    r.uuid = g.value("uuid", "");
    r.memory = g.value("memory_total", int64_t{0});
    r.memory_device = g.value("memory_device", int64_t{0});
    for (const Json& id : g.value("runs", Json::array())) {
      if (id.is_number_integer()) r.runs.push_back(id.get<int64_t>());
    }
    if (g.contains("telemetry") && g["telemetry"].is_object()) {
      const Json& t = g["telemetry"];
      GpuSample s;
      s.index = r.index;
      auto num = [&](const char* k) {
        return t.contains(k) && t[k].is_number() ? t[k].get<double>() : -1.0;
      };
      s.utilization = num("utilization");
      s.temperature_c = num("temperature_c");
      s.power_w = num("power_w");
      if (g.contains("health")) HealthFromJson(g["health"], s);
      r.reading = s;
    }
    if (g.contains("drained") && g["drained"].is_object()) {
      const Json& d = g["drained"];
      DrainEntry e;
      e.uuid = r.uuid;
      e.index = r.index;
      e.reason = d.value("reason", "");
      e.by = d.value("by", "");
      e.since_ms = d.value("since_ms", int64_t{0});
      e.kind = d.value("kind", "");
      r.drained = e;
    }
    rows.push_back(std::move(r));
  }
  if (body.contains("drain_error") && body["drain_error"].is_string()) {
    std::fprintf(stderr, "drover: the daemon cannot read its GPU drain book: %s\n",
                 body["drain_error"].get<std::string>().c_str());
  }
  return rows;
}

// Without a daemon: this machine's GPUs as the probe sees them, and the store's drain book.
Result<std::vector<GpuRow>> RowsFromMachine(const Globals& g, std::vector<GpuDevice>* devices) {
  DROVER_ASSIGN_OR_RETURN(std::unique_ptr<GpuProbe> probe, MakeGpuProbe(""));
  DROVER_ASSIGN_OR_RETURN(std::vector<GpuDevice> found, probe->Devices());
  auto samples = probe->Sample(RealClock().Now());
  DROVER_ASSIGN_OR_RETURN(DrainBook book, ReadDrainBook(BookPath(g)));
  std::vector<GpuRow> rows;
  for (const GpuDevice& d : found) {
    GpuRow r;
    r.index = d.index;
    r.name = d.name;
    r.uuid = d.uuid;
    r.memory = d.memory_total;
    if (samples.ok()) {
      for (const GpuSample& s : *samples) {
        if (s.index == d.index) r.reading = s;
      }
    }
    const std::string key = d.uuid.empty() ? "index:" + std::to_string(d.index) : d.uuid;
    if (const DrainEntry* e = book.Find(key)) r.drained = *e;
    rows.push_back(std::move(r));
  }
  if (devices) *devices = std::move(found);
  return rows;
}

int List(Globals& g, const GpuFlags& f) {
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    auto body = api.Get("/gpus");
    if (!body.ok()) return ReportError(body.status());
    if (f.json) {
      std::printf("%s\n", body->dump(2, ' ', false, Json::error_handler_t::replace).c_str());
      return kExitOk;
    }
    auto rows = RowsFromDaemon(*body);
    if (!rows.ok()) return ReportError(rows.status());
    return Print(*rows, "the daemon runs CPU runs only");
  }
  auto rows = RowsFromMachine(g, nullptr);
  if (!rows.ok()) return ReportError(rows.status());
  if (f.json) {
    Json out = Json::array();
    for (const GpuRow& r : *rows) {
      Json j = {{"index", r.index}, {"name", r.name}, {"uuid", r.uuid}, {"memory_total", r.memory}};
      j["health"] = r.reading ? HealthToJson(*r.reading) : Json(nullptr);
      j["drained"] = r.drained ? Json{{"reason", r.drained->reason},
                                      {"by", r.drained->by},
                                      {"since_ms", r.drained->since_ms},
                                      {"kind", r.drained->kind}}
                               : Json(nullptr);
      out.push_back(std::move(j));
    }
    std::printf("%s\n", Json({{"gpus", out}}).dump(2).c_str());
    return kExitOk;
  }
  return Print(*rows, "no daemon serves " + StoreDir(g) + "; none found on this machine");
}

std::string List(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int i : v) s.push_back(std::to_string(i));
  return Join(s, ", ");
}

// drain (clear = false) or clear GPU f.index.
int Change(Globals& g, const GpuFlags& f, bool clear) {
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    Json body = Json::object();
    if (!clear && !f.reason.empty()) body["reason"] = f.reason;
    auto r = api.Post(fmt::format("/gpus/{}/{}", f.index, clear ? "clear" : "drain"), body);
    if (!r.ok()) return ReportError(r.status());
    std::vector<int> done = r->value(clear ? "cleared" : "drained", std::vector<int>{});
    std::vector<int> not_done =
        r->value(clear ? "not_drained" : "already_drained", std::vector<int>{});
    if (!done.empty()) {
      const char* it = done.size() == 1 ? "it" : "them";
      std::printf("GPU %s %s: %s\n", List(done).c_str(), clear ? "cleared" : "drained",
                  (clear ? fmt::format("new runs may start on {} again (within a second)", it)
                         : fmt::format("no new runs start on {}; runs on {} are left alone", it,
                                       it))
                      .c_str());
    }
    if (!not_done.empty()) {
      std::printf("GPU %s %s\n", List(not_done).c_str(),
                  clear ? "was not drained" : "was already drained");
    }
    return kExitOk;
  }
  // No daemon: the book directly (a foreground `drover run` reads it back).
  std::vector<GpuDevice> devices;
  auto machine = RowsFromMachine(g, &devices);
  std::vector<std::pair<std::string, int>> which;
  if (machine.ok()) {
    for (const GpuDevice& d : devices) {
      if (d.index == f.index || (IsMig(d) && d.parent_index == f.index)) {
        which.emplace_back(d.uuid.empty() ? "index:" + std::to_string(d.index) : d.uuid, d.index);
      }
    }
  }
  if (which.empty() && clear) {
    // GPUs this machine's probe does not see (fake ones a foreground run declared): by the index
    // they were drained under.
    auto book = ReadDrainBook(BookPath(g));
    if (!book.ok()) return ReportError(book.status());
    for (const DrainEntry& e : book->drained) {
      if (e.index == f.index) which.emplace_back(e.uuid, e.index);
    }
  }
  if (which.empty()) {
    return ReportError(NotFound(fmt::format(
        "no GPU {} here: no daemon serves {} and this machine's GPUs do not include it{}", f.index,
        StoreDir(g), clear ? " (nor does the store's drain book)" : "")));
  }
  const std::string by = DisplayName(LookupUser(::geteuid(), ::getegid()));
  auto done = clear ? ClearGpus(BookPath(g), which, by, RealClock().Now())
                    : DrainGpus(BookPath(g), which, f.reason, by, RealClock().Now());
  if (!done.ok()) return ReportError(done.status());
  if (done->empty()) {
    std::printf("GPU %d %s\n", f.index, clear ? "was not drained" : "was already drained");
  } else {
    std::printf("GPU %s %s in %s\n", List(*done).c_str(), clear ? "cleared" : "drained",
                BookPath(g).c_str());
  }
  return kExitOk;
}

}  // namespace

Command RegisterGpu(CLI::App& root, Globals& g) {
  auto f = std::make_shared<GpuFlags>();
  CLI::App* app = root.add_subcommand(
      "gpu", "The GPUs with their health; drain a GPU (no new runs on it) or clear it");
  app->require_subcommand(1);
  f->ls = app->add_subcommand("ls", "List the GPUs: memory, runs, temperature, clock, health");
  f->ls->add_flag("--json", f->json, "Print JSON");
  f->drain = app->add_subcommand(
      "drain", "Start no new runs on GPU N (runs on it are left alone) until it is cleared");
  f->drain->add_option("gpu", f->index, "GPU index (a GPU in MIG mode: all its instances)")
      ->required();
  f->drain->add_option("--reason", f->reason, "Why, for the alert and `drover gpu ls`");
  f->clear = app->add_subcommand("clear", "Let new runs start on GPU N again (after a reset)");
  f->clear->add_option("gpu", f->index, "GPU index (a GPU in MIG mode: all its instances)")
      ->required();
  return {app, [&g, f] {
            if (f->drain->parsed()) return Change(g, *f, /*clear=*/false);
            if (f->clear->parsed()) return Change(g, *f, /*clear=*/true);
            return List(g, *f);
          }};
}

}  // namespace drover::cli
