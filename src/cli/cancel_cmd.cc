// drover cancel RUN... | --experiment EXP: stop runs the daemon is running or has queued, or,
// without a daemon, those of a `drover run` in the foreground (asked through the store).
#include <fmt/format.h>

#include "cli/client.h"
#include "cli/common.h"
#include "common/terminal.h"
#include "cli/catalog.h"
#include "cli/follow.h"
#include "engine/requests.h"
#include "store/engine_lock.h"

namespace drover::cli {
namespace {

struct CancelFlags {
  std::vector<std::string> runs;
  std::string experiment;
};

// No daemon: a `drover run` in the foreground may hold the store; it takes requests from files
// (engine/requests.h).
int CancelInForeground(Globals& g, const CancelFlags& f) {
  const auto holder = EngineLock::Holder(StoreDir(g));
  if (!holder) {
    return ReportError(FailedPrecondition(fmt::format(
        "nothing runs experiments from the store {}: no daemon serves it and no drover run holds "
        "it",
        StoreDir(g))));
  }
  EngineRequest req;
  std::string what;
  if (!f.experiment.empty()) {
    auto catalog = OpenCatalog(g);
    if (!catalog.ok()) return ReportError(catalog.status());
    auto exp = (*catalog)->FindExperiment(f.experiment);
    if (!exp.ok()) return ReportError(exp.status());
    req.cancel_experiment = exp->id;
    what = fmt::format("experiment {} ({})", exp->id, exp->name);
  }
  for (const auto& text : f.runs) {
    auto id = ParseRunId(text);
    if (!id.ok()) return ReportError(id.status());
    req.cancel_runs.push_back(*id);
    what += fmt::format("{}run {}", what.empty() ? "" : ", ", *id);
  }
  auto name = PostEngineRequest(StoreDir(g), req, RealClock().Now());
  if (!name.ok()) return ReportError(name.status());
  if (Status st = AwaitEngineAnswer(StoreDir(g), *name, 10'000); !st.ok()) return ReportError(st);
  std::printf("cancelling %s (in the drover run in the foreground, pid %d)\n", what.c_str(),
              *holder);
  return kExitOk;
}

int Cancel(Globals& g, const CancelFlags& f) {
  if (f.runs.empty() && f.experiment.empty()) {
    return ReportError(InvalidArgument("say what to cancel: run ids, or --experiment EXP"));
  }
  auto daemon = FindDaemon(g);
  if (!daemon) return CancelInForeground(g, f);
  ApiClient api(*daemon);
  int code = kExitOk;
  if (!f.experiment.empty()) {
    auto exp = FetchExperiment(api, f.experiment);
    if (!exp.ok()) return ReportError(exp.status());
    auto r = api.Post(fmt::format("/experiments/{}/cancel", exp->id), Json::object());
    if (!r.ok()) return ReportError(r.status());
    std::printf("cancelling experiment %lld (%s)\n", static_cast<long long>(exp->id),
                TerminalLine(exp->name).c_str());
  }
  for (const auto& text : f.runs) {
    auto id = ParseRunId(text);
    if (!id.ok()) return ReportError(id.status());
    auto r = api.Post(fmt::format("/runs/{}/cancel", *id), Json::object());
    if (!r.ok()) {
      code = ReportError(r.status());
      continue;
    }
    std::printf("cancelling run %lld\n", static_cast<long long>(*id));
  }
  return code;
}

}  // namespace

Command RegisterCancel(CLI::App& root, Globals& g) {
  auto f = std::make_shared<CancelFlags>();
  CLI::App* app = root.add_subcommand(
      "cancel", "Cancel queued or running runs (the daemon's, or a foreground drover run's)");
  app->add_option("runs", f->runs, "Run ids");
  app->add_option("-e,--experiment", f->experiment, "Cancel every unfinished run of this experiment");
  return {app, [&g, f] { return Cancel(g, *f); }};
}

}  // namespace drover::cli
