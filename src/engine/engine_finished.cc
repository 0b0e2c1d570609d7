// Commands on finished experiments: Retry (finished runs go back to the queue as new attempts of
// the same runs: drover retry, drover run --resume, POST /experiments/{id}/retry, MCP retry), and
// Remove and CollectGarbage (drover rm, drover gc: engine/cleanup.h).
#include <fmt/format.h>

#include <set>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/live.h"
#include "exec/snapshot.h"
#include "spec/expand.h"

namespace drover {

// Queues finished runs of an experiment again (drover retry, drover run --resume): each goes
// back to queued and its next start is a new attempt of the same run, with the same checkpoint
// folder ($DROVER_CHECKPOINT_DIR), so a script that checkpoints resumes. Its retry budget and
// failure streak start afresh: an explicit retry is never blocked by them. Returns the runs
// queued again (none when nothing matched); runs named that are not finished are an error.
Result<std::vector<Run>> Engine::Retry(const cmd::Retry& which) {
  if (!which.failed && !which.cancelled && which.run_ids.empty()) {
    return InvalidArgument("say which runs to retry: the failed ones, the cancelled ones or runs by id");
  }
  if (stall_) return StallRefusal("retry");
  DROVER_ASSIGN_OR_RETURN(auto exp, store_.GetExperiment(which.experiment_id));
  if (!exp) return NotFound(fmt::format("no experiment {}", which.experiment_id));
  RunFilter filter;
  filter.experiment_id = exp->id;
  DROVER_ASSIGN_OR_RETURN(auto runs, store_.ListRuns(filter));

  std::set<int64_t> named(which.run_ids.begin(), which.run_ids.end());
  std::vector<Run> chosen;
  for (const Run& r : runs) {
    const bool asked = named.erase(r.id) > 0;
    if (asked && !IsFinal(r.state)) {
      return FailedPrecondition(fmt::format(
          "run {} is {}: only finished runs can be retried (drover cancel {} first to restart it)",
          r.id, ToString(r.state), r.id));
    }
    if (asked || (which.failed && r.state == RunState::kFailed) ||
        (which.cancelled && r.state == RunState::kCancelled)) {
      chosen.push_back(r);
    }
  }
  if (!named.empty()) {
    return InvalidArgument(fmt::format("run {} is not in experiment {} ({})", *named.begin(),
                                       exp->id, exp->name));
  }
  if (chosen.empty()) return chosen;

  // Its own commit, as a submit: the loop's writes so far land first.
  if (in_tx_) DROVER_RETURN_IF_ERROR(Flush());
  DROVER_ASSIGN_OR_RETURN(ExperimentEntry * ep, EntryFor(*exp));
  // --code current: the workdir as it is now, snapshotted as a submit would (read with the
  // submitter's rights), for these runs from their next attempt on.
  std::optional<Snapshot> code;
  if (which.current_code) {
    if (!ep->spec.stages.empty()) {
      return FailedPrecondition(fmt::format(
          "experiment {} ({}) is a pipeline: run it again (drover run PIPELINE.yaml) and the "
          "stages whose code changed rerun, the rest are cached",
          exp->id, exp->name));
    }
    DROVER_ASSIGN_OR_RETURN(
        Snapshot snap,
        TakeSnapshot(ep->spec.workdir, options_.store_dir + "/snapshots",
                     {.excluded = options_.store_dir,
                      .spec_file = ep->spec.source_path,
                      .owner = ep->submitter ? &*ep->submitter : nullptr,
                      .now = clock_.Now()}));
    DROVER_RETURN_IF_ERROR(store_.PutSnapshot(snap));
    code = std::move(snap);
  }
  fail_fast_.Watch(ep->experiment, ep->spec);  // a retry after a fix is watched afresh
  Instant now = clock_.At();
  if (exp->status != ExperimentStatus::kActive) {
    Tx();
    ep->experiment.status = ExperimentStatus::kActive;
    if (Status st = store_.UpdateExperimentStatus(exp->id, ExperimentStatus::kActive); !st.ok()) Fail(st);
  }
  std::vector<Run> queued;
  for (Run& r : chosen) {
    DROVER_ASSIGN_OR_RETURN(auto attempts, store_.ListAttempts(r.id));
    auto live = std::make_unique<Live>();
    Live& l = *live;
    l.exp = ep;
    l.run = r;
    // A fresh start: no backoff, the retry budget the spec gives, no failure streak (Live's
    // failures_in_a_row starts at 0). The attempts so far stay: the next is number attempts + 1,
    // in the same run folder and checkpoint folder.
    l.run.retries_used = 0;
    l.run.not_before_ms = 0;
    l.run.ended_ms = 0;
    // Run for real now: a run that was cached stands on its own results from here on.
    l.run.cached_from = 0;
    l.run.final_metrics = Json::object();
    const std::string was = std::string(ToString(r.state));
    l.run.reason.clear();
    if (code) {
      l.code = *code;
      l.run.snapshot_hash = code->hash;
      l.run.snapshot_from = r.attempts + 1;
      // Its fingerprint names the code it now runs, so nothing is cached from it as the old.
      DROVER_ASSIGN_OR_RETURN(auto argv, RenderCommand(ep->spec, r.params));
      l.run.fingerprint = Fingerprint(ep->spec, argv, r.params, code->hash);
    } else if (!r.snapshot_hash.empty()) {
      // Retried as recorded: the code its last attempts ran (an earlier --code current's).
      DROVER_ASSIGN_OR_RETURN(auto own, store_.GetSnapshot(r.snapshot_hash));
      if (own) l.code = *own;
    }
    CountEarlierAttempts(l, attempts);
    ep->unfinished += 1;
    live_[r.id] = std::move(live);
    SetState(l, RunEvent::kRequeue,
             fmt::format("retried (it had {}): attempt {} is next{}", was, r.attempts + 1,
                         code ? fmt::format(", on the workdir as it is now (snapshot {})",
                                            code->hash.substr(0, 12))
                              : std::string()),
             now);
    Queue(l);
    pipelines_.ClaimTwin(l);  // duplicates submitted meanwhile wait for it
    queued.push_back(l.run);
  }
  DROVER_RETURN_IF_ERROR(Flush());
  return queued;
}

// drover rm: deletes experiments with their records and files (moved to the trash: EmptyTrash
// deletes them); refused while one has unfinished runs.
Result<Cleanup> Engine::Remove(const cmd::Remove& which) {
  for (int64_t id : which.experiment_ids) {
    auto it = experiments_.find(id);
    if (it != experiments_.end() && it->second->unfinished > 0) {
      return FailedPrecondition(fmt::format(
          "experiment {} ({}) has {} unfinished: cancel {} first (drover cancel -e {})", id,
          it->second->experiment.name, Count(it->second->unfinished, "run"),
          it->second->unfinished == 1 ? "it" : "them", id));
    }
    if (it != experiments_.end() && search_.Proposing(id)) {
      // Its last trial ended and the next ones are being proposed: it is still going.
      return FailedPrecondition(fmt::format(
          "experiment {} ({}) is a search making its next trials: cancel it first (drover "
          "cancel -e {})",
          id, it->second->experiment.name, id));
    }
  }
  DROVER_ASSIGN_OR_RETURN(Cleanup plan, PlanRemoval(store_, options_.store_dir, which.experiment_ids));
  if (which.dry_run) return plan;
  if (in_tx_) DROVER_RETURN_IF_ERROR(Flush());
  if (stall_) return StallRefusal("remove");
  DROVER_RETURN_IF_ERROR(ApplyCleanup(store_, options_.store_dir, plan));
  for (int64_t id : which.experiment_ids) {
    experiments_.erase(id);
    search_.Forget(id);
    fail_fast_.Forget(id);
  }
  return plan;
}

// drover gc, sparing every run the engine is running or has queued.
Result<Cleanup> Engine::CollectGarbage(const cmd::CollectGarbage& how) {
  std::set<int64_t> busy;
  for (const auto& [id, live] : live_) busy.insert(id);
  GcOptions options = how.options;
  // Collections start on this loop, so none starts between the plan and its application.
  options.storing_outputs = pipelines_.busy();
  DROVER_ASSIGN_OR_RETURN(Cleanup plan,
                          PlanGc(store_, options_.store_dir, options, clock_.Now(), busy));
  if (how.dry_run) return plan;
  if (in_tx_) DROVER_RETURN_IF_ERROR(Flush());
  if (stall_) return StallRefusal("gc");
  DROVER_RETURN_IF_ERROR(ApplyCleanup(store_, options_.store_dir, plan));
  return plan;
}

}  // namespace drover
