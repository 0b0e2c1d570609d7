// Pipelines, a component of the engine (engine/pipelines.h, docs/pipelines.md).
#include "engine/pipelines.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>

#include "common/hash.h"
#include "exec/artifacts.h"
#include "spec/expand.h"

namespace drover {

namespace fs = std::filesystem;

void Pipelines::InitStages(ExperimentEntry& ep) {
  ep.stages.clear();
  for (const StageSpec& st : ep.spec.stages) ep.stages[st.name] = StageView(ep.spec, st);
}

bool Pipelines::AwaitNeeds(LiveRun& live) {
  if (live.run.needs.empty()) return false;
  std::vector<int64_t> unfinished;
  for (int64_t n : live.run.needs) {
    if (runs_.Find(n)) unfinished.push_back(n);
  }
  return gate_.AwaitNeeds(live.run.id, unfinished);
}

void Pipelines::WakeDependents(int64_t run_id, Instant now) {
  for (const PipelineGate::Woken& w : gate_.Ended(run_id)) {
    LiveRun* l = runs_.Find(w.run_id);
    if (l == nullptr) continue;
    // Cancelled meanwhile (an experiment's runs are all marked before they are retired): it is
    // retired by the cancel, not looked at again.
    if (l->cancel_requested || IsFinal(l->run.state)) continue;
    if (w.was == PipelineGate::Wait::kTwin) {
      gate_.Release(w.run_id);
      Admit(*l, now);  // cached from its twin, or run (its twin did not succeed)
      continue;
    }
    NeedsChanged(*l, now);
  }
}

void Pipelines::NeedsChanged(LiveRun& live, Instant now) {
  std::vector<Run> needs;
  for (int64_t id : live.run.needs) {
    if (runs_.Find(id)) return;  // not ended yet: woken again when it does
  }
  for (int64_t id : live.run.needs) {
    Result<std::optional<Run>> need = ctx_.store().GetRun(id);
    if (!need.ok()) {
      ctx_.Fail(need.status());
      return;
    }
    if (!*need || (*need)->state != RunState::kSucceeded) {
      gate_.Release(live.run.id);
      live.run.reason = "upstream_failed";
      const std::string note =
          *need ? fmt::format("not run: it needs run {} (stage {}), which {}", id,
                              (*need)->stage, ToString((*need)->state))
                : fmt::format("not run: it needs run {}, which is gone", id);
      runs_.SetState(live, RunEvent::kCancel, note, now);
      runs_.Retire(live.run.id);
      return;
    }
    needs.push_back(**need);
  }
  gate_.Release(live.run.id);
  Result<std::string> print = StageFingerprintOf(live, needs);
  if (!print.ok()) {
    ctx_.Fail(print.status());
    return;
  }
  live.run.fingerprint = *print;
  Update(live.run);
  Admit(live, now);
}

Result<std::string> Pipelines::StageFingerprintOf(const LiveRun& live, const std::vector<Run>& needs) {
  // Its own command, parameters, code and declared inputs, and what each need was (its
  // fingerprint) and gave (its outputs).
  const Spec& spec = SpecOf(live);
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> argv,
                          RenderCommand(spec, live.run.current_params));
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  std::vector<NeedPrint> prints;
  for (const Run& n : needs) {
    DROVER_ASSIGN_OR_RETURN(std::vector<Artifact> outputs,
                            ctx_.store().ListArtifacts(n.cached_from ? n.cached_from : n.id));
    prints.push_back({n.fingerprint, ArtifactsHash(outputs)});
  }
  // spec/expand.h: the dry run fingerprints with the same function (cli/cache_plan.h).
  return StageFingerprint(Fingerprint(spec, argv, live.run.params, live.exp->snapshot.hash),
                          live.run.stage,
                          stage ? stage->input_hashes : std::map<std::string, std::string>{},
                          prints);
}

void Pipelines::FingerprintTakenOverStage(LiveRun& live) {
  if (live.run.stage.empty() || !live.run.fingerprint.empty()) return;
  // The last engine started it, so its needs had all succeeded: its fingerprint is what it would
  // have been given then, and a later run of the same stage may be cached from it.
  std::vector<Run> needs;
  for (int64_t id : live.run.needs) {
    Result<std::optional<Run>> need = ctx_.store().GetRun(id);
    if (!need.ok()) {
      ctx_.Fail(need.status());
      return;
    }
    if (!*need || (*need)->state != RunState::kSucceeded) return;  // no fingerprint to give it
    needs.push_back(**need);
  }
  Result<std::string> print = StageFingerprintOf(live, needs);
  if (!print.ok()) return;  // it runs unfingerprinted, as it did before
  live.run.fingerprint = *print;
  Update(live.run);
}

bool Pipelines::Dedups(const LiveRun& live) const {
  // spec/expand.h: the dry run asks the same (cli/cache_plan.h).
  return !live.run.fingerprint.empty() &&
         CacheBypassOf(live.exp->spec, live.run.stage) == CacheBypass::kNone;
}

void Pipelines::Admit(LiveRun& live, Instant now) {
  if (TryCache(live, now)) return;
  if (Dedups(live) && live.run.attempts == 0) {
    const std::string key = PipelineGate::TwinKey(live.run);
    const int64_t holder = gate_.TwinOf(key);
    LiveRun* twin = holder == 0 || holder == live.run.id ? nullptr : runs_.Find(holder);
    if (twin != nullptr) {
      // Its twin is queued or running: this one waits for it, and is cached from it when it
      // succeeds (or runs, when it does not). A twin still queued is given this one's priority
      // when that is higher, so a waiting run is never held back by a lower-ranked twin.
      LiveRun& t = *twin;
      if (!t.attempt && !gate_.Holds(t.run.id) && t.run.priority < live.run.priority) {
        t.run.priority = live.run.priority;
        runs_.Queue(t);
        Update(t.run);
      }
      gate_.AwaitTwin(live.run.id, holder);
      return;
    }
    gate_.SetTwin(key, live.run.id);
  }
  runs_.Queue(live);
}

void Pipelines::ClaimTwin(const LiveRun& live) {
  if (Dedups(live)) gate_.ClaimTwin(PipelineGate::TwinKey(live.run), live.run.id);
}

bool Pipelines::TryCache(LiveRun& live, Instant now) {
  if (!Dedups(live) || live.run.attempts > 0) return false;
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  Result<std::optional<Run>> found =
      ctx_.store().LatestSuccess(live.run.fingerprint, live.run.id, live.run.user);
  if (!found.ok() || !*found) return false;
  const Run& earlier = **found;
  const int64_t source = earlier.cached_from ? earlier.cached_from : earlier.id;
  // Its outputs must still be there (a gc, a hand): else it runs again.
  std::error_code ec;
  for (const std::string& o : stage ? stage->outputs : std::vector<std::string>{}) {
    if (!fs::exists(OutputsDir(store_dir_, source) + "/" + o, ec)) return false;
  }
  live.run.cached_from = source;
  live.run.final_metrics = earlier.final_metrics;
  live.run.reason = "cached";
  live.run.started_ms = now.wall;
  runs_.SetState(live, RunEvent::kCached, fmt::format("cached from run {}", source), now);
  runs_.Retire(live.run.id);
  return true;
}

Result<std::vector<DataMount>> Pipelines::NeedMounts(LiveRun& live, const std::string& workdir) {
  std::vector<DataMount> mounts;
  if (live.run.needs.empty()) return mounts;
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  Json inputs = Json::array();
  for (int64_t id : live.run.needs) {
    DROVER_ASSIGN_OR_RETURN(std::optional<Run> need, ctx_.store().GetRun(id));
    if (!need) return NotFound(fmt::format("run {} needs run {}, which is gone", live.run.id, id));
    const int64_t source = need->cached_from ? need->cached_from : need->id;
    const StageSpec* from = FindStage(live.exp->spec, need->stage);
    Json outputs = Json::object();
    for (const std::string& o : from ? from->outputs : std::vector<std::string>{}) {
      const std::string path = OutputsDir(store_dir_, source) + "/" + o;
      outputs[o] = path;
      // A run of its needs' runs sees their outputs where they were written; a gather reads
      // them from $DROVER_INPUTS (its needs' outputs share their paths).
      if (stage && !stage->gather) {
        mounts.push_back(
            {path, workdir + "/" + o, /*trusted=*/true, OutputsDir(store_dir_, source)});
      }
    }
    inputs.push_back({{"run", need->id},
                      {"stage", need->stage},
                      {"params", need->params},
                      {"metrics", need->final_metrics},
                      {"outputs", outputs},
                      {"cached_from", source == need->id ? Json(nullptr) : Json(source)}});
  }
  const std::string file = runs_.FilesOf(live).log_prefix + "inputs.json";
  std::ofstream out(file, std::ios::trunc);
  // Replaced, never thrown: a file name a run wrote need not be UTF-8 (the loop must not throw).
  out << inputs.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  out.close();
  if (!out) return Status(Code::kIo, "cannot write '" + file + "'");
  if (live.exp->run_as && live.exp->run_as->set()) {
    // The run's to read (0600 theirs, in the daemon's log folder).
    if (lchown(file.c_str(), static_cast<uid_t>(live.exp->run_as->uid),
               static_cast<gid_t>(live.exp->run_as->gid)) != 0) {
      return Status(Code::kIo, "cannot give '" + file + "' to its run's user");
    }
  }
  return mounts;
}

void Pipelines::CollectOutputs(LiveRun& live) {
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  const RunFiles& files = runs_.FilesOf(live);
  CollectJob job;
  job.run_id = live.run.id;
  job.store_dir = store_dir_;
  struct stat st {};
  if (stat(files.changes.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    job.tree = RunTree{files.work, files.changes, CodeOf(live).path};
  } else {
    job.tree = RunTree{files.work, "", ""};
  }
  // A user's tree, read with the daemon's rights: nothing is followed out of it.
  job.tree.confined = live.exp->run_as && live.exp->run_as->set();
  job.outputs = stage->outputs;
  outputs_.Start(std::move(job));
}

void Pipelines::TakeCollected(Instant now) {
  if (!outputs_.busy()) return;
  auto look = [this](int64_t run_id) {
    const LiveRun* live = runs_.Find(run_id);
    if (live == nullptr) return OutputCollection::Fate::kGone;
    return live->cancel_requested ? OutputCollection::Fate::kCancelled
                                        : OutputCollection::Fate::kWaiting;
  };
  for (const OutputCollection::Due& due : outputs_.TakeDue(now, look)) {
    LiveRun* found = runs_.Find(due.run_id);
    if (found == nullptr) continue;
    LiveRun& live = *found;
    if (!due.cancelled) {
      CollectOutputs(live);
      continue;
    }
    runs_.SetState(live, RunEvent::kCancel, "cancelled while its outputs waited for room", now);
    live.attempt.reset();
    runs_.Retire(live.run.id);
  }
  for (OutputCollection::Stored& done : outputs_.TakeFinished(now, look)) {
    LiveRun* found = runs_.Find(done.run_id);
    if (found == nullptr) continue;
    LiveRun& live = *found;
    std::string note;
    RunEvent event = RunEvent::kSucceed;
    if (done.status.ok()) {
      ctx_.Tx();
      if (Status st = ctx_.store().PutArtifacts(done.artifacts); !st.ok()) ctx_.Fail(st);
      int64_t bytes = 0;
      for (const Artifact& a : done.artifacts) bytes += a.bytes;
      note = fmt::format("outputs stored: {} file{}, {}", done.artifacts.size(),
                         done.artifacts.size() == 1 ? "" : "s", FormatBytes(bytes));
    } else {
      event = RunEvent::kFail;
      // Not written by the run, or not storable (a full disk): said apart.
      live.run.reason = done.status.code() == Code::kFailedPrecondition ? "missing_output"
                                                                         : "outputs_not_stored";
      note = done.status.message();
    }
    if (live.cancel_requested) event = RunEvent::kCancel;
    runs_.SetState(live, event, note, now);
    live.attempt.reset();
    runs_.Retire(live.run.id);
  }
}

void Pipelines::Update(const Run& run) {
  ctx_.Tx();
  if (Status st = ctx_.store().UpdateRun(run); !st.ok()) ctx_.Fail(st);
}

}  // namespace drover
