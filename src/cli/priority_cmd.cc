// drover priority N RUN... | --experiment EXP: reorder the daemon's queue (higher starts first).
#include <fmt/format.h>

#include "cli/client.h"
#include "cli/common.h"
#include "common/terminal.h"
#include "cli/follow.h"

namespace drover::cli {
namespace {

struct PriorityFlags {
  int priority = 0;
  std::vector<std::string> runs;
  std::string experiment;
};

int SetPriority(Globals& g, const PriorityFlags& f) {
  if (f.runs.empty() && f.experiment.empty()) {
    return ReportError(InvalidArgument(
        "say which runs: drover priority N RUN..., or drover priority N --experiment EXP"));
  }
  auto daemon = FindDaemon(g);
  if (!daemon) {
    return ReportError(FailedPrecondition(fmt::format(
        "no drover daemon serves the store {}; priorities order the daemon's queue (start it with "
        "drover serve, or set priority: in the spec)",
        StoreDir(g))));
  }
  ApiClient api(*daemon);
  std::vector<int64_t> ids;
  for (const auto& text : f.runs) {
    auto id = ParseRunId(text);
    if (!id.ok()) return ReportError(id.status());
    ids.push_back(*id);
  }
  if (!f.experiment.empty()) {
    auto exp = FetchExperiment(api, f.experiment);
    if (!exp.ok()) return ReportError(exp.status());
    RunFilter filter;
    filter.experiment_id = exp->id;
    auto runs = FetchRuns(api, filter);
    if (!runs.ok()) return ReportError(runs.status());
    // Only runs that still wait: a priority orders the queue, it moves nothing already running.
    for (const Run& r : *runs) {
      if (r.state == RunState::kQueued || r.state == RunState::kRetrying) ids.push_back(r.id);
    }
    if (ids.empty()) {
      std::printf("experiment %lld (%s) has no queued run\n", static_cast<long long>(exp->id),
                  TerminalLine(exp->name).c_str());
      return kExitOk;
    }
  }
  int code = kExitOk;
  for (int64_t id : ids) {
    auto r = api.Post(fmt::format("/runs/{}/priority", id), Json{{"priority", f.priority}});
    if (!r.ok()) {
      code = ReportError(r.status());
      continue;
    }
    std::printf("run %lld: priority %d\n", static_cast<long long>(id), f.priority);
  }
  return code;
}

}  // namespace

Command RegisterPriority(CLI::App& root, Globals& g) {
  auto f = std::make_shared<PriorityFlags>();
  CLI::App* app = root.add_subcommand(
      "priority", "Set the priority of queued runs in the daemon (higher starts first)");
  app->add_option("priority", f->priority, "The priority, an integer (default of a run: 0)")
      ->required();
  app->add_option("runs", f->runs, "Run ids");
  app->add_option("-e,--experiment", f->experiment, "Every queued run of this experiment");
  return {app, [&g, f] { return SetPriority(g, *f); }};
}

}  // namespace drover::cli
