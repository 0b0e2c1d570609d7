// drover gc: frees the store's disk of what no run needs any more: the working copies of runs
// that ended long ago (and with --checkpoints, their checkpoints), snapshots no experiment uses,
// folders of removed runs and experiments. Through the daemon when one serves the store (which
// spares what it runs or has queued); otherwise here, holding the engine lock.
#include <fmt/format.h>

#include "cli/cleanup_view.h"
#include "cli/client.h"
#include "cli/common.h"
#include "common/clock.h"
#include "common/strings.h"
#include "engine/cleanup.h"
#include "protocol/api.h"

namespace drover::cli {
namespace {

struct GcFlags {
  std::string older_than = "7d";
  bool checkpoints = false;
  bool dry_run = false;
  bool yes = false;
  bool json = false;
};

Result<Cleanup> Collect(const Globals& g, const protocol::GcRequest& req) {
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    DROVER_ASSIGN_OR_RETURN(Json reply, api.Post("/store/gc", protocol::ToJson(req)));
    return protocol::CleanupFromJson(reply);
  }
  GcOptions options;
  options.older_than_ms = req.older_than_ms;
  options.checkpoints = req.checkpoints;
  return CleanUpHere(
      g,
      [&](Store& store, const std::string& store_dir) {
        // No engine runs now (the lock is ours); runs left unfinished wait for the next one.
        std::set<int64_t> waiting;
        RunFilter filter;
        auto runs = store.ListRuns(filter);
        if (runs.ok()) {
          for (const Run& r : *runs) {
            if (!IsFinal(r.state)) waiting.insert(r.id);
          }
        }
        return PlanGc(store, store_dir, options, RealClock().Now(), waiting);
      },
      req.dry_run);
}

int Gc(Globals& g, const GcFlags& f) {
  protocol::GcRequest req;
  auto older = ParseDurationMs(f.older_than);
  if (!older.ok()) return ReportError(older.status().WithContext("--older-than"));
  req.older_than_ms = *older;
  req.checkpoints = f.checkpoints;
  req.dry_run = true;
  auto plan = Collect(g, req);
  if (!plan.ok()) return ReportError(plan.status());
  const std::string what =
      fmt::format("{} of files in {} places (runs that ended over {} ago{})",
                  FormatBytes(plan->Bytes()), plan->files.size(), f.older_than,
                  f.checkpoints ? ", checkpoints of succeeded runs included" : "");
  if (f.dry_run || plan->files.empty()) {
    if (plan->files.empty() && plan->snapshots.empty() && !f.json) {
      std::printf("nothing to collect (runs that ended over %s ago; --older-than changes it)\n",
                  f.older_than.c_str());
      return kExitOk;
    }
    PrintCleanup(*plan, what, f.json);
    return kExitOk;
  }
  if (!f.json) PrintCleanup(*plan, what, false);
  auto go = Confirm("Delete these?", f.yes);
  if (!go.ok()) return ReportError(go.status());
  if (!*go) return kExitOk;
  req.dry_run = false;
  auto done = Collect(g, req);
  if (!done.ok()) return ReportError(done.status());
  if (f.json) {
    PrintCleanup(*done, "", true);
  } else {
    std::printf("deleted %s in %zu places\n", FormatBytes(done->Bytes()).c_str(),
                done->files.size());
  }
  return kExitOk;
}

}  // namespace

Command RegisterGc(CLI::App& root, Globals& g) {
  auto f = std::make_shared<GcFlags>();
  CLI::App* app = root.add_subcommand(
      "gc",
      "Free disk: working copies of runs that ended long ago, unused snapshots, folders of "
      "removed runs (--dry-run shows what would go)");
  app->add_option("--older-than", f->older_than,
                  "Only runs that ended at least this long ago (default 7d)");
  app->add_flag("--checkpoints", f->checkpoints,
                "Also the checkpoints of succeeded runs that ended that long ago");
  app->add_flag("--dry-run", f->dry_run, "Show what would be deleted; delete nothing");
  app->add_flag("-y,--yes", f->yes, "Do not ask first");
  app->add_flag("--json", f->json, "Print what was (or would be) deleted as JSON");
  return {app, [&g, f] { return Gc(g, *f); }};
}

}  // namespace drover::cli
