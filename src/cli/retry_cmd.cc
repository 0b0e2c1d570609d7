// drover retry EXP [RUN...] [--failed] [--cancelled]: finished runs of an experiment run again as
// new attempts of the same runs, with their checkpoint folders, so a script that checkpoints
// resumes. Through the daemon when one serves the store, else in the foreground as `drover run`.
#include <fmt/format.h>

#include <set>

#include "cli/catalog.h"
#include "cli/client.h"
#include "cli/common.h"
#include "common/terminal.h"
#include "cli/follow.h"
#include "cli/run_flags.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "protocol/api.h"
#include "spec/spec_parser.h"

namespace drover::cli {
namespace {

struct RetryFlags {
  std::string experiment;
  std::vector<std::string> runs;
  bool failed = false;
  bool cancelled = false;
  bool detach = false;
  std::string code = "submitted";
  RunFlags run;
};

std::string IdList(const std::vector<int64_t>& ids) {
  std::vector<std::string> parts;
  for (int64_t id : ids) parts.push_back(std::to_string(id));
  return Join(parts, ", ");
}

int Retry(Globals& g, RetryFlags& f) {
  cmd::Retry which;
  for (const auto& text : f.runs) {
    auto id = ParseRunId(text);
    if (!id.ok()) return ReportError(id.status());
    which.run_ids.push_back(*id);
  }
  // Neither said nor runs named: every failed and cancelled run.
  which.failed = f.failed || (!f.cancelled && which.run_ids.empty());
  which.cancelled = f.cancelled || (!f.failed && which.run_ids.empty());
  const std::optional<protocol::RetryCode> code = protocol::ParseRetryCode(f.code);
  if (!code) {
    return ReportError(InvalidArgument(fmt::format(
        "--code must be submitted (the code recorded at the submit) or current (the workdir as "
        "it is now), got '{}'",
        f.code)));
  }
  which.current_code = *code == protocol::RetryCode::kCurrent;

  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto exp = (*catalog)->FindExperiment(f.experiment);
  if (!exp.ok()) return ReportError(exp.status());
  which.experiment_id = exp->id;
  RunFilter filter;
  filter.experiment_id = exp->id;
  auto runs = (*catalog)->ListRuns(filter);
  if (!runs.ok()) return ReportError(runs.status());
  int matching = static_cast<int>(which.run_ids.size());
  for (const Run& r : *runs) {
    matching += (which.failed && r.state == RunState::kFailed) ||
                (which.cancelled && r.state == RunState::kCancelled);
  }
  if (matching == 0) {
    std::printf("nothing to retry: experiment %lld (%s) has no %s runs\n",
                static_cast<long long>(exp->id), TerminalLine(exp->name).c_str(),
                which.failed && which.cancelled ? "failed or cancelled"
                : which.failed                  ? "failed"
                                                : "cancelled");
    return kExitOk;
  }

  // What the retried runs run (the recorded snapshot), said before they do; the snapshot a
  // --code current retry takes is said once it is taken.
  if (!f.run.quiet && !f.run.json && !which.current_code) {
    std::fprintf(stderr, "drover: note: %s\n", protocol::RetryCodeNote(*exp).c_str());
  }
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    CatchInterruptsForFollow();
    protocol::RetryRequest req;
    req.failed = which.failed;
    req.cancelled = which.cancelled;
    req.runs = which.run_ids;
    req.code = *code;
    auto r = api.Post(fmt::format("/experiments/{}/retry", exp->id), protocol::ToJson(req));
    if (!r.ok()) return ReportError(r.status());
    auto reply = protocol::RetryResponseFromJson(*r);
    if (!reply.ok()) return ReportError(reply.status());
    if (which.current_code && !f.run.quiet && !f.run.json) {
      std::fprintf(stderr, "drover: note: %s\n", reply->code.c_str());
    }
    const std::string what = fmt::format("{} queued again ({})",
                                         Count(static_cast<int64_t>(reply->run_ids.size()), "run"),
                                         IdList(reply->run_ids));
    if (f.detach) {
      if (f.run.json) {
        std::printf("%s\n", protocol::ToJson(*reply).dump(2).c_str());
      } else if (!f.run.quiet) {
        std::printf("experiment %lld (%s): %s; follow it with drover ls -e %lld\n",
                    static_cast<long long>(exp->id), TerminalLine(exp->name).c_str(), what.c_str(),
                    static_cast<long long>(exp->id));
      }
      return kExitOk;
    }
    return FollowInDaemon(g, *daemon, exp->id, exp->name, what, f.run);
  }
  if (f.detach) {
    return ReportError(FailedPrecondition(fmt::format(
        "--detach needs a daemon serving the store {} (drover serve); without one the runs "
        "run here, in the foreground",
        StoreDir(g))));
  }
  auto spec = SpecFromJson(exp->spec);
  if (!spec.ok()) return ReportError(spec.status());
  const std::string metric = spec->objective ? spec->objective->metric : "";
  const Experiment e = *exp;
  RunFlags run = f.run;
  run.executor = spec->executor;  // a Slurm experiment's runs go back to Slurm
  return RunInForeground(g, run, [&](Engine& engine, Store&) -> Result<QueuedRuns> {
    QueuedRuns q;
    q.experiment_id = e.id;
    q.name = e.name;
    q.metric = metric;
    DROVER_ASSIGN_OR_RETURN(q.runs, engine.Retry(which));
    if (which.current_code && !q.runs.empty() && !f.run.quiet && !f.run.json) {
      std::fprintf(stderr, "drover: note: %s\n",
                   protocol::RetryCodeNote(e, q.runs.front().snapshot_hash).c_str());
    }
    std::vector<int64_t> ids;
    for (const Run& r : q.runs) ids.push_back(r.id);
    q.headline = fmt::format("experiment {} ({}): {} queued again ({})", e.id, e.name,
                             Count(static_cast<int64_t>(ids.size()), "run"), IdList(ids));
    return q;
  });
}

}  // namespace

Command RegisterRetry(CLI::App& root, Globals& g) {
  auto f = std::make_shared<RetryFlags>();
  CLI::App* app = root.add_subcommand(
      "retry",
      "Run finished runs of an experiment again, as new attempts of the same runs with their "
      "checkpoint folders (default: every failed and cancelled run)");
  app->add_option("experiment", f->experiment, "Experiment id or name (the newest of that name)")
      ->required();
  app->add_option("runs", f->runs, "Only these runs (ids), in any finished state");
  app->add_flag("--failed", f->failed, "The failed runs");
  app->add_flag("--cancelled", f->cancelled, "The cancelled runs");
  app->add_option("--code", f->code,
                  "Which code: submitted (default: the snapshot recorded at the submit) or current "
                  "(the workdir as it is now, e.g. after a fix; a new snapshot for these runs' "
                  "next attempts, their checkpoints kept)")
      ->check(CLI::IsMember({"submitted", "current"}));
  app->add_flag("-d,--detach", f->detach,
                "With a daemon: return once the runs are queued instead of following them");
  AddEngineRunOptions(app, &f->run);
  return {app, [&g, f] { return Retry(g, *f); }};
}

}  // namespace drover::cli
