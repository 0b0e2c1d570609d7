// drover reproduce RUN: runs a run again from what was recorded (its code snapshot, parameters
// and environment variables, its stage's command; spec/reproduce.h), in this process or in the
// store's daemon (POST /runs/{id}/reproduce, followed), then compares the metrics
// with the original's within a tolerance and says what differs in the environment (interpreter,
// packages, host, GPUs) when they do not match (docs/pipelines.md, "Reproduce").
#include <fmt/format.h>

#include <cmath>

#include "cli/catalog.h"
#include "cli/client.h"
#include "cli/common.h"
#include "cli/follow.h"
#include "cli/run_flags.h"
#include "common/strings.h"
#include "common/terminal.h"
#include "engine/engine.h"
#include "protocol/api.h"
#include "spec/reproduce.h"
#include "store/store.h"

namespace drover::cli {
namespace {

struct ReproduceFlags {
  std::string run;
  double tolerance = 1e-6;
  RunFlags run_flags;
};

const Environment* FindEnv(const std::vector<Environment>& envs) {
  return envs.empty() ? nullptr : &envs.front();
}

// The original's metrics against the reproduction's, within the tolerance; what else differed
// between the two runs' environments where they do not match. Exit 0 when the same.
int CompareReproduction(const protocol::RunDetail& original, const protocol::RunDetail& again,
                        const ReproduceFlags& f) {
  const Run& r = again.run;
  Json report = {{"run", original.run.id}, {"reproduced_as", r.id}, {"state", ToString(r.state)},
                 {"tolerance", f.tolerance}, {"metrics", Json::object()}};
  bool same = r.state == RunState::kSucceeded || r.state == original.run.state;
  std::string text = fmt::format("\nrun {} reproduced as run {} ({}); metrics within {}:\n",
                                 original.run.id, r.id, ToString(r.state), f.tolerance);
  const Json& was = original.run.final_metrics;
  for (auto it = was.begin(); it != was.end(); ++it) {
    const Json& now = r.final_metrics.contains(it.key()) ? r.final_metrics[it.key()] : Json();
    bool match = false;
    if (it.value().is_number() && now.is_number()) {
      const double a = it.value().get<double>(), b = now.get<double>();
      match = std::fabs(a - b) <= f.tolerance * std::max(1.0, std::fabs(a));
    }
    same = same && match;
    report["metrics"][it.key()] = {{"original", it.value()}, {"reproduced", now}, {"match", match}};
    text += fmt::format("  {:<16} {} -> {}  {}\n", it.key(), it.value().dump(),
                        now.is_null() ? "(none)" : now.dump(-1, ' ', false, Json::error_handler_t::replace), match ? "same" : "DIFFERENT");
  }
  const Environment* a = FindEnv(original.environments);
  const Environment* b = FindEnv(again.environments);
  Json env = Json::object();
  if (a && b) {
    if (a->interpreter != b->interpreter) env["interpreter"] = {a->interpreter, b->interpreter};
    if (a->hostname != b->hostname) env["host"] = {a->hostname, b->hostname};
    if (a->gpu_info != b->gpu_info) env["gpus"] = "differ";
    if (a->packages != b->packages) env["packages"] = "differ";
  }
  report["environment"] = env;
  report["same"] = same;
  if (!same) {
    text += env.empty() ? "  the interpreter, packages, host and GPUs recorded are the same\n"
                        : fmt::format("  the environment differs: {} (drover diff {} {})\n",
                                      env.dump(-1, ' ', false, Json::error_handler_t::replace), original.run.id, r.id);
  }
  text += same ? "reproduced: the same metrics\n" : "not reproduced\n";
  if (f.run_flags.json) {
    std::fputs((report.dump(2, ' ', false, Json::error_handler_t::replace) + "\n").c_str(), stdout);
  } else if (!f.run_flags.quiet) {
    PrintText(text);  // metric names and values are the run's
  }
  return same ? kExitOk : 1;
}

// The record of a run, from the store's daemon when one serves (a shared daemon's store is its
// own: its users read it through the daemon, as themselves), else from the store.
Result<protocol::RunDetail> RecordOf(Globals& g, int64_t run_id) {
  DROVER_ASSIGN_OR_RETURN(auto catalog, OpenCatalog(g));
  return catalog->GetRunDetail(run_id);
}

int Reproduce(Globals& g, ReproduceFlags& f) {
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  auto original = RecordOf(g, *id);
  if (!original.ok()) return ReportError(original.status());
  const std::string snap_hash = original->snapshot ? original->snapshot->hash : "";
  int64_t new_run = 0;
  // With --json only the comparison is printed (one JSON document).
  RunFlags run_flags = f.run_flags;
  if (run_flags.json) {
    run_flags.json = false;
    run_flags.quiet = true;
  }
  int code = kExitOk;
  if (auto daemon = FindDaemon(g)) {
    // The daemon makes the spec from the same records (POST /runs/{id}/reproduce), checks the
    // code is as recorded, and runs it as the run's submitter; this process follows it, then
    // compares.
    ApiClient api(*daemon);
    auto reply = api.Post(fmt::format("/runs/{}/reproduce", *id), Json::object());
    if (!reply.ok()) return ReportError(reply.status());
    auto made = protocol::ReproduceResponseFromJson(*reply);
    if (!made.ok()) return ReportError(made.status());
    new_run = made->run_id;
    if (!run_flags.quiet) {
      std::fprintf(stderr, "experiment %lld (%s-reproduce): run %lld again from snapshot %s, in "
                   "the daemon\n",
                   static_cast<long long>(made->experiment_id),
                   TerminalLine(original->experiment.name).c_str(),
                   static_cast<long long>(*id), snap_hash.substr(0, 12).c_str());
    }
    FollowOptions follow;
    follow.quiet = run_flags.quiet;
    follow.cancel_on_exit = run_flags.cancel_on_exit;
    code = FollowExperiment(api, made->experiment_id, follow);
    if (code == kExitInterrupted) return code;
  } else {
    Result<Spec> spec = Internal("no spec");
    Snapshot snap;
    {
      auto store = OpenStore(g, false);
      if (!store.ok()) return ReportError(store.status());
      auto e = (*store)->GetExperiment(original->run.experiment_id);
      if (!e.ok() || !*e) return ReportError(Internal("the run's experiment is gone"));
      auto s = (*store)->GetSnapshot((*e)->snapshot_hash);
      if (!s.ok() || !*s) {
        return ReportError(NotFound("snapshot " + (*e)->snapshot_hash.substr(0, 16) +
                                    " is not in the store (drover gc removes unused ones)"));
      }
      snap = **s;
      spec = ReproduceSpec(original->run, **e, snap);
    }
    if (!spec.ok()) return ReportError(spec.status());
    const std::string metric = spec->objective ? spec->objective->metric : "";
    run_flags.executor = spec->executor;  // where the original ran: Slurm or here
    code = RunInForeground(g, run_flags, [&](Engine& engine, Store&) -> Result<QueuedRuns> {
    DROVER_ASSIGN_OR_RETURN(SubmitResult sub, engine.Submit(*spec));
    if (sub.snapshot.hash != snap.hash) {
      std::fprintf(stderr,
                   "drover: note: the snapshot read back hashes to %s, not %s: its files changed "
                   "since (drover verify %lld names them)\n",
                   sub.snapshot.hash.substr(0, 16).c_str(), snap.hash.substr(0, 16).c_str(),
                   static_cast<long long>(*id));
    }
    QueuedRuns q;
    q.experiment_id = sub.experiment_id;
    q.name = spec->name;
    q.metric = metric;
    q.runs = sub.runs;
    // The run of its stage (a pipeline's other runs are its needs, cached where they can be).
    for (const Run& r : sub.runs) {
      if (r.stage == original->run.stage) {
        new_run = r.id;
        break;
      }
    }
    q.headline = fmt::format("experiment {} ({}): run {} again from snapshot {}",
                             sub.experiment_id, spec->name, *id, snap.hash.substr(0, 12));
    return q;
    });
  }
  if (new_run == 0) return code;
  auto again = RecordOf(g, new_run);
  if (!again.ok()) return ReportError(again.status());
  return CompareReproduction(*original, *again, f);
}

}  // namespace

Command RegisterReproduce(CLI::App& root, Globals& g) {
  auto f = std::make_shared<ReproduceFlags>();
  CLI::App* app = root.add_subcommand(
      "reproduce", "Run a run again from its recorded snapshot, params and env; compare metrics");
  app->add_option("run", f->run, "The run's id")->required();
  app->add_option("--tolerance", f->tolerance,
                  "Relative difference allowed between the metrics (default 1e-6)")
      ->check(CLI::Range(0.0, 1e9));
  AddEngineRunOptions(app, &f->run_flags);
  return {app, [&g, f] { return Reproduce(g, *f); }};
}

}  // namespace drover::cli
