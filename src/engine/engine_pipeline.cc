// Pipelines (docs/pipelines.md): runs that wait for the runs they need, fingerprints that take
// in their needs' outputs, runs that an earlier success with the same fingerprint stands for,
// needs' outputs shown in a run's working copy, and outputs stored off the loop when a stage
// succeeds.
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
#include "engine/engine.h"
#include "engine/live.h"
#include "exec/artifacts.h"
#include "spec/expand.h"

namespace drover {

namespace fs = std::filesystem;

const Spec& Engine::SpecOf(const Live& live) const {
  if (!live.run.stage.empty()) {
    auto it = live.exp->stages.find(live.run.stage);
    if (it != live.exp->stages.end()) return it->second;
  }
  return live.exp->spec;
}

void Engine::InitStages(ExperimentEntry& ep) {
  ep.stages.clear();
  for (const StageSpec& st : ep.spec.stages) ep.stages[st.name] = StageView(ep.spec, st);
}

bool Engine::AwaitNeeds(Live& live) {
  if (live.run.needs.empty()) return false;
  std::vector<int64_t> unfinished;
  for (int64_t n : live.run.needs) {
    if (live_.count(n)) unfinished.push_back(n);
  }
  return gate_.AwaitNeeds(live.run.id, unfinished);
}

void Engine::WakeDependents(int64_t run_id, Instant now) {
  for (const PipelineGate::Woken& w : gate_.Ended(run_id)) {
    auto l = live_.find(w.run_id);
    if (l == live_.end()) continue;
    // Cancelled meanwhile (an experiment's runs are all marked before they are retired): it is
    // retired by the cancel, not looked at again.
    if (l->second->cancel_requested || IsFinal(l->second->run.state)) continue;
    if (w.was == PipelineGate::Wait::kTwin) {
      gate_.Release(w.run_id);
      Admit(*l->second, now);  // cached from its twin, or run (its twin did not succeed)
      continue;
    }
    NeedsChanged(*l->second, now);
  }
}

void Engine::NeedsChanged(Live& live, Instant now) {
  std::vector<Run> needs;
  for (int64_t id : live.run.needs) {
    if (live_.count(id)) return;  // not ended yet: woken again when it does
  }
  for (int64_t id : live.run.needs) {
    Result<std::optional<Run>> need = store_.GetRun(id);
    if (!need.ok()) {
      Fail(need.status());
      return;
    }
    if (!*need || (*need)->state != RunState::kSucceeded) {
      gate_.Release(live.run.id);
      live.run.reason = "upstream_failed";
      const std::string note =
          *need ? fmt::format("not run: it needs run {} (stage {}), which {}", id,
                              (*need)->stage, ToString((*need)->state))
                : fmt::format("not run: it needs run {}, which is gone", id);
      SetState(live, RunEvent::kCancel, note, now);
      Retire(live.run.id);
      return;
    }
    needs.push_back(**need);
  }
  gate_.Release(live.run.id);
  Result<std::string> print = StageFingerprintOf(live, needs);
  if (!print.ok()) {
    Fail(print.status());
    return;
  }
  live.run.fingerprint = *print;
  Tx();
  if (Status st = store_.UpdateRun(live.run); !st.ok()) Fail(st);
  Admit(live, now);
}

Result<std::string> Engine::StageFingerprintOf(const Live& live, const std::vector<Run>& needs) {
  // Its own command, parameters, code and declared inputs, and what each need was (its
  // fingerprint) and gave (its outputs).
  const Spec& spec = SpecOf(live);
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> argv,
                          RenderCommand(spec, live.run.current_params));
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  std::vector<NeedPrint> prints;
  for (const Run& n : needs) {
    DROVER_ASSIGN_OR_RETURN(std::vector<Artifact> outputs,
                            store_.ListArtifacts(n.cached_from ? n.cached_from : n.id));
    prints.push_back({n.fingerprint, ArtifactsHash(outputs)});
  }
  // spec/expand.h: the dry run fingerprints with the same function (cli/cache_plan.h).
  return StageFingerprint(Fingerprint(spec, argv, live.run.params, live.exp->snapshot.hash),
                          live.run.stage,
                          stage ? stage->input_hashes : std::map<std::string, std::string>{},
                          prints);
}

void Engine::FingerprintTakenOverStage(Live& live) {
  if (live.run.stage.empty() || !live.run.fingerprint.empty()) return;
  // The last engine started it, so its needs had all succeeded: its fingerprint is what it would
  // have been given then, and a later run of the same stage may be cached from it.
  std::vector<Run> needs;
  for (int64_t id : live.run.needs) {
    Result<std::optional<Run>> need = store_.GetRun(id);
    if (!need.ok()) {
      Fail(need.status());
      return;
    }
    if (!*need || (*need)->state != RunState::kSucceeded) return;  // no fingerprint to give it
    needs.push_back(**need);
  }
  Result<std::string> print = StageFingerprintOf(live, needs);
  if (!print.ok()) return;  // it runs unfingerprinted, as it did before
  live.run.fingerprint = *print;
  Tx();
  if (Status st = store_.UpdateRun(live.run); !st.ok()) Fail(st);
}

bool Engine::Dedups(const Live& live) const {
  // spec/expand.h: the dry run asks the same (cli/cache_plan.h).
  return !live.run.fingerprint.empty() &&
         CacheBypassOf(live.exp->spec, live.run.stage) == CacheBypass::kNone;
}

void Engine::Admit(Live& live, Instant now) {
  if (TryCache(live, now)) return;
  if (Dedups(live) && live.run.attempts == 0) {
    const std::string key = PipelineGate::TwinKey(live.run);
    const int64_t holder = gate_.TwinOf(key);
    auto twin = holder == 0 || holder == live.run.id ? live_.end() : live_.find(holder);
    if (twin != live_.end()) {
      // Its twin is queued or running: this one waits for it, and is cached from it when it
      // succeeds (or runs, when it does not). A twin still queued is given this one's priority
      // when that is higher, so a waiting run is never held back by a lower-ranked twin.
      Live& t = *twin->second;
      if (!t.attempt && !gate_.Holds(t.run.id) && t.run.priority < live.run.priority) {
        t.run.priority = live.run.priority;
        Queue(t);
        Tx();
        if (Status st = store_.UpdateRun(t.run); !st.ok()) Fail(st);
      }
      gate_.AwaitTwin(live.run.id, holder);
      return;
    }
    gate_.SetTwin(key, live.run.id);
  }
  Queue(live);
}

void Engine::ClaimTwin(const Live& live) {
  if (Dedups(live)) gate_.ClaimTwin(PipelineGate::TwinKey(live.run), live.run.id);
}

bool Engine::TryCache(Live& live, Instant now) {
  if (!Dedups(live) || live.run.attempts > 0) return false;
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  Result<std::optional<Run>> found =
      store_.LatestSuccess(live.run.fingerprint, live.run.id, live.run.user);
  if (!found.ok() || !*found) return false;
  const Run& earlier = **found;
  const int64_t source = earlier.cached_from ? earlier.cached_from : earlier.id;
  // Its outputs must still be there (a gc, a hand): else it runs again.
  std::error_code ec;
  for (const std::string& o : stage ? stage->outputs : std::vector<std::string>{}) {
    if (!fs::exists(OutputsDir(options_.store_dir, source) + "/" + o, ec)) return false;
  }
  live.run.cached_from = source;
  live.run.final_metrics = earlier.final_metrics;
  live.run.reason = "cached";
  live.run.started_ms = now.wall;
  SetState(live, RunEvent::kCached, fmt::format("cached from run {}", source), now);
  Retire(live.run.id);
  return true;
}

Result<std::vector<DataMount>> Engine::NeedMounts(Live& live, const std::string& workdir) {
  std::vector<DataMount> mounts;
  if (live.run.needs.empty()) return mounts;
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  Json inputs = Json::array();
  for (int64_t id : live.run.needs) {
    DROVER_ASSIGN_OR_RETURN(std::optional<Run> need, store_.GetRun(id));
    if (!need) return NotFound(fmt::format("run {} needs run {}, which is gone", live.run.id, id));
    const int64_t source = need->cached_from ? need->cached_from : need->id;
    const StageSpec* from = FindStage(live.exp->spec, need->stage);
    Json outputs = Json::object();
    for (const std::string& o : from ? from->outputs : std::vector<std::string>{}) {
      const std::string path = OutputsDir(options_.store_dir, source) + "/" + o;
      outputs[o] = path;
      // A run of its needs' runs sees their outputs where they were written; a gather reads
      // them from $DROVER_INPUTS (its needs' outputs share their paths).
      if (stage && !stage->gather) {
        mounts.push_back(
            {path, workdir + "/" + o, /*trusted=*/true, OutputsDir(options_.store_dir, source)});
      }
    }
    inputs.push_back({{"run", need->id},
                      {"stage", need->stage},
                      {"params", need->params},
                      {"metrics", need->final_metrics},
                      {"outputs", outputs},
                      {"cached_from", source == need->id ? Json(nullptr) : Json(source)}});
  }
  const std::string file = FilesOf(live).log_prefix + "inputs.json";
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

void Engine::CollectOutputs(Live& live, Instant now) {
  (void)now;
  const StageSpec* stage = FindStage(live.exp->spec, live.run.stage);
  const RunFiles& files = FilesOf(live);
  CollectJob job;
  job.run_id = live.run.id;
  job.store_dir = options_.store_dir;
  struct stat st {};
  if (stat(files.changes.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    job.tree = RunTree{files.work, files.changes, live.exp->snapshot.path};
  } else {
    job.tree = RunTree{files.work, "", ""};
  }
  // A user's tree, read with the daemon's rights: nothing is followed out of it.
  job.tree.confined = live.exp->run_as && live.exp->run_as->set();
  job.outputs = stage->outputs;
  outputs_.Start(std::move(job));
}

void Engine::TakeCollected(Instant now) {
  if (!outputs_.busy()) return;
  auto look = [this](int64_t run_id) {
    auto it = live_.find(run_id);
    if (it == live_.end()) return OutputCollection::Fate::kGone;
    return it->second->cancel_requested ? OutputCollection::Fate::kCancelled
                                        : OutputCollection::Fate::kWaiting;
  };
  for (const OutputCollection::Due& due : outputs_.TakeDue(now, look)) {
    Live& live = *live_.at(due.run_id);
    if (!due.cancelled) {
      CollectOutputs(live, now);
      continue;
    }
    SetState(live, RunEvent::kCancel, "cancelled while its outputs waited for room", now);
    live.attempt.reset();
    Retire(live.run.id);
  }
  for (OutputCollection::Stored& done : outputs_.TakeFinished(now, look)) {
    Live& live = *live_.at(done.run_id);
    std::string note;
    RunEvent event = RunEvent::kSucceed;
    if (done.status.ok()) {
      Tx();
      if (Status st = store_.PutArtifacts(done.artifacts); !st.ok()) Fail(st);
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
    SetState(live, event, note, now);
    live.attempt.reset();
    Retire(live.run.id);
  }
}

}  // namespace drover
