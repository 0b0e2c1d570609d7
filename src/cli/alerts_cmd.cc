// drover alerts [--run N] [--experiment EXP] [--kind K]: what the watchers raised, newest first.
#include <fmt/format.h>

#include <algorithm>

#include "cli/catalog.h"
#include "cli/common.h"
#include "common/strings.h"
#include "protocol/json_codec.h"

namespace drover::cli {
namespace {

struct AlertsFlags {
  std::string run;
  std::string experiment;
  std::string kind;
  int limit = 50;
  bool json = false;
};

const char* const kKinds[] = {"diverged", "loss_spike",    "plateau",          "stalled",
                              "memory_leak", "idle_gpu", "fragmentation", "repeated_failure",
                              "input_stall", "experiment_stopped", "run", "alerts_suppressed",
                              "metric_names", "event_files"};

int Alerts(Globals& g, const AlertsFlags& f) {
  AlertFilter filter;
  filter.limit = f.limit;
  if (!f.kind.empty()) {
    std::vector<std::string> kinds(std::begin(kKinds), std::end(kKinds));
    if (std::find(kinds.begin(), kinds.end(), f.kind) == kinds.end()) {
      auto close = ClosestMatch(f.kind, kinds);
      return ReportError(InvalidArgument(fmt::format(
          "--kind '{}' is not an alert kind{}; kinds: {}", f.kind,
          close ? "; did you mean '" + *close + "'?" : "", Join(kinds, ", "))));
    }
    filter.kind = f.kind;
  }
  if (!f.run.empty()) {
    auto id = ParseRunId(f.run);
    if (!id.ok()) return ReportError(id.status());
    filter.run_id = *id;
  }
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  if (!f.experiment.empty()) {
    auto exp = (*catalog)->FindExperiment(f.experiment);
    if (!exp.ok()) return ReportError(exp.status());
    filter.experiment_id = exp->id;
  }
  auto alerts = (*catalog)->ListAlerts(filter);
  if (!alerts.ok()) return ReportError(alerts.status());
  if (f.json) {
    Json out = Json::array();
    for (const auto& a : *alerts) out.push_back(protocol::ToJson(a));
    std::printf("%s\n",
                Json({{"alerts", out}}).dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  if (alerts->empty()) {
    std::printf("no alerts%s\n", filter.run_id || filter.experiment_id || !filter.kind.empty()
                                     ? " match"
                                     : " (the watchers have found nothing to report)");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : *alerts) {
    std::string about = a.run_id ? fmt::format("run {}", a.run_id) : "";
    if (a.gpu >= 0) about += fmt::format("{}gpu {}", about.empty() ? "" : ", ", a.gpu);
    std::string times = a.count > 1 ? fmt::format("x{} (last {})", a.count,
                                                  FormatTime(a.last_ms).substr(11))
                                    : "";
    rows.push_back({std::to_string(a.id), FormatTime(a.first_ms), a.severity, a.kind,
                    about.empty() ? "-" : about, a.message, times});
  }
  std::fputs(RenderTable({"id", "raised", "severity", "kind", "about", "message", "repeats"}, rows)
                 .c_str(),
             stdout);
  return kExitOk;
}

}  // namespace

Command RegisterAlerts(CLI::App& root, Globals& g) {
  auto f = std::make_shared<AlertsFlags>();
  CLI::App* app = root.add_subcommand(
      "alerts", "List alerts: diverged or stalled runs, loss spikes, idle GPUs, memory leaks, ...");
  app->add_option("--run", f->run, "Only alerts about this run");
  app->add_option("-e,--experiment", f->experiment, "Only alerts about this experiment");
  app->add_option("--kind", f->kind, "Only this kind (diverged, loss_spike, idle_gpu, ...)");
  app->add_option("-n,--limit", f->limit, "At most this many, newest first (default 50)")
      ->check(CLI::Range(1, 100000));
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return Alerts(g, *f); }};
}

}  // namespace drover::cli
