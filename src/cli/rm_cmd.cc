// drover rm EXP...: deletes experiments with everything recorded about them (runs, attempts,
// metrics, alerts, logs, working copies, checkpoints, reports). Through the daemon when one serves
// the store; otherwise here, holding the engine lock. Asks first (or --yes); --dry-run shows what
// would go.
#include <fmt/format.h>

#include <algorithm>

#include "cli/catalog.h"
#include "cli/cleanup_view.h"
#include "cli/client.h"
#include "cli/common.h"
#include "common/terminal.h"
#include "common/strings.h"
#include "engine/cleanup.h"
#include "protocol/api.h"

namespace drover::cli {
namespace {

struct RmFlags {
  std::vector<std::string> experiments;
  bool dry_run = false;
  bool yes = false;
  bool json = false;
};

// What removing the experiment means (dry_run) or did, from the daemon or from the store here.
Result<Cleanup> RemoveOne(const Globals& g, const Experiment& e, bool dry_run) {
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    DROVER_ASSIGN_OR_RETURN(
        Json reply, api.Delete(fmt::format("/experiments/{}{}", e.id, dry_run ? "?dry_run=true" : "")));
    return protocol::CleanupFromJson(reply);
  }
  return CleanUpHere(
      g,
      [&](Store& store, const std::string& store_dir) -> Result<Cleanup> {
        // No engine runs now (the lock is ours), but runs may wait for the next one.
        DROVER_ASSIGN_OR_RETURN(RunCounts counts, store.CountRuns(e.id));
        const int64_t unfinished = counts.Unfinished();
        if (unfinished > 0) {
          return FailedPrecondition(fmt::format(
              "experiment {} ({}) has {} that the next engine will run: let them finish, or "
              "cancel them through a daemon (drover serve, then drover cancel -e {})",
              e.id, e.name, Count(unfinished, "unfinished run"), e.id));
        }
        return PlanRemoval(store, store_dir, {e.id});
      },
      dry_run);
}

int Rm(Globals& g, const RmFlags& f) {
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  std::vector<Experiment> targets;
  for (const auto& text : f.experiments) {
    auto e = (*catalog)->FindExperiment(text);
    if (!e.ok()) return ReportError(e.status());
    targets.push_back(*e);
  }
  // Newest first: a run cached from another is always newer than it, so experiments removed
  // together go before those they stand on (removing one that others stand on is refused).
  std::sort(targets.begin(), targets.end(),
            [](const Experiment& a, const Experiment& b) { return a.id > b.id; });
  targets.erase(std::unique(targets.begin(), targets.end(),
                            [](const Experiment& a, const Experiment& b) { return a.id == b.id; }),
                targets.end());
  int code = kExitOk;
  for (const Experiment& e : targets) {
    auto plan = RemoveOne(g, e, /*dry_run=*/true);
    if (!plan.ok()) {
      code = ReportError(plan.status());
      continue;
    }
    const std::string what =
        fmt::format("experiment {} ({}): {}, {} of files", e.id, e.name, Count(plan->runs, "run"),
                    FormatBytes(plan->Bytes()));
    if (f.dry_run) {
      PrintCleanup(*plan, what, f.json);
      continue;
    }
    auto go = Confirm(fmt::format("Delete {} and everything recorded about it?", what), f.yes);
    if (!go.ok()) return ReportError(go.status());
    if (!*go) {
      std::printf("kept experiment %lld\n", static_cast<long long>(e.id));
      continue;
    }
    auto done = RemoveOne(g, e, /*dry_run=*/false);
    if (!done.ok()) {
      code = ReportError(done.status());
      continue;
    }
    if (f.json) {
      PrintCleanup(*done, "", true);
    } else {
      std::printf("deleted experiment %lld (%s): %s, %s of files\n",
                  static_cast<long long>(e.id), TerminalLine(e.name).c_str(), Count(done->runs, "run").c_str(),
                  FormatBytes(done->Bytes()).c_str());
    }
  }
  return code;
}

}  // namespace

Command RegisterRm(CLI::App& root, Globals& g) {
  auto f = std::make_shared<RmFlags>();
  CLI::App* app = root.add_subcommand(
      "rm", "Delete experiments with their runs, metrics, logs, working copies and checkpoints");
  app->add_option("experiments", f->experiments, "Experiment ids or names")->required();
  app->add_flag("--dry-run", f->dry_run, "Show what would be deleted; delete nothing");
  app->add_flag("-y,--yes", f->yes, "Do not ask first");
  app->add_flag("--json", f->json, "Print what was (or would be) deleted as JSON");
  return {app, [&g, f] { return Rm(g, *f); }};
}

}  // namespace drover::cli
