// drover cancel RUN... | --experiment EXP: stop runs the daemon is running or has queued.
#include <fmt/format.h>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/follow.h"

namespace drover::cli {
namespace {

struct CancelFlags {
  std::vector<std::string> runs;
  std::string experiment;
};

int Cancel(Globals& g, const CancelFlags& f) {
  if (f.runs.empty() && f.experiment.empty()) {
    return ReportError(InvalidArgument("say what to cancel: run ids, or --experiment EXP"));
  }
  auto daemon = FindDaemon(g);
  if (!daemon) {
    return ReportError(FailedPrecondition(fmt::format(
        "no drover daemon serves the store {}; a `drover run` in the foreground is stopped with "
        "Ctrl-C in its terminal",
        StoreDir(g))));
  }
  ApiClient api(*daemon);
  int code = kExitOk;
  if (!f.experiment.empty()) {
    auto exp = FetchExperiment(api, f.experiment);
    if (!exp.ok()) return ReportError(exp.status());
    auto r = api.Post(fmt::format("/experiments/{}/cancel", exp->id), Json::object());
    if (!r.ok()) return ReportError(r.status());
    std::printf("cancelling experiment %lld (%s)\n", static_cast<long long>(exp->id),
                exp->name.c_str());
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
  CLI::App* app = root.add_subcommand("cancel", "Cancel queued or running runs (needs the daemon)");
  app->add_option("runs", f->runs, "Run ids");
  app->add_option("-e,--experiment", f->experiment, "Cancel every unfinished run of this experiment");
  return {app, [&g, f] { return Cancel(g, *f); }};
}

}  // namespace drover::cli
