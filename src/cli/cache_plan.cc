#include "cli/cache_plan.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "common/strings.h"
#include "exec/artifacts.h"
#include "exec/file_hashes.h"
#include "spec/expand.h"
#include "spec/pipeline.h"

namespace drover::cli {

namespace fs = std::filesystem;

std::string_view ToString(RunReason r) {
  switch (r) {
    case RunReason::kNew:
      return "new";
    case RunReason::kParams:
      return "params";
    case RunReason::kCode:
      return "code";
    case RunReason::kInputs:
      return "inputs";
    case RunReason::kNeedReran:
      return "need_reran";
    case RunReason::kForced:
      return "forced";
    case RunReason::kNotCached:
      return "not_cached";
    case RunReason::kOutputsGone:
      return "outputs_gone";
    case RunReason::kOther:
      return "other";
  }
  return "?";
}

std::string Reason::Label() const {
  switch (kind) {
    case RunReason::kNew:
      return "new";
    case RunReason::kParams:
      return (detail.find(", ") == std::string::npos ? "param " : "params ") + detail;
    case RunReason::kCode:
      return detail.empty() ? "code changed" : "code changed: " + detail;
    case RunReason::kInputs:
      return "input changed: " + detail;
    case RunReason::kNeedReran:
      return "need " + detail + " reran";
    case RunReason::kForced:
      return "forced (" + detail + ")";
    case RunReason::kNotCached:
      return "never cached (" + detail + ")";
    case RunReason::kOutputsGone:
      return "outputs of " + detail + " gone";
    case RunReason::kOther:
      return "changed: " + detail;
  }
  return "?";
}

std::string FewNames(const std::vector<std::string>& names, size_t few) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(few, names.size()));
  std::string out = Join(shown, ", ");
  if (names.size() > few) out += fmt::format(" and {} more", names.size() - few);
  return out;
}

std::string StagePlan::Line(const std::string& name) const {
  std::vector<std::string> parts;
  if (cached > 0) parts.push_back(fmt::format("{} cached", cached));
  if (to_run > 0) parts.push_back(fmt::format("{} to run", to_run));
  if (parts.empty()) parts.push_back("no runs");
  std::string out = name + ": " + Join(parts, ", ");
  if (!reasons.empty()) {
    std::vector<std::string> why;
    for (const auto& [label, n] : reasons) why.push_back(fmt::format("{}: {}", label, n));
    out += " (" + Join(why, ", ") + ")";
  }
  return out;
}

namespace {

// An earlier run of the spec's name, with its experiment's snapshot and stored spec.
struct Earlier {
  Run run;
  const Experiment* exp = nullptr;
};

// The names of the params that differ between two runs' (either side's keys), sorted.
std::vector<std::string> ParamsDiffering(const Json& a, const Json& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  std::vector<std::string> out;
  for (const std::string& k : keys) {
    if (!a.contains(k) || !b.contains(k) || a[k] != b[k]) out.push_back(k);
  }
  return out;
}

// The files of the snapshot now that differ from an earlier one's manifest (changed, added or
// gone), by path; nullopt when that snapshot has no manifest to compare with.
std::optional<std::vector<std::string>> FilesChanged(const std::vector<SnapshotFile>& now,
                                                     const std::string& snapshots_dir,
                                                     const std::string& hash) {
  std::optional<std::vector<SnapshotFile>> was = ReadSnapshotManifest(snapshots_dir, hash);
  if (!was) return std::nullopt;
  std::map<std::string, const SnapshotFile*> before;
  for (const SnapshotFile& f : *was) before[f.path] = &f;
  std::set<std::string> changed;
  for (const SnapshotFile& f : now) {
    auto it = before.find(f.path);
    if (it == before.end() || it->second->hash != f.hash || it->second->mode != f.mode) {
      changed.insert(f.path);
    }
    if (it != before.end()) before.erase(it);
  }
  for (const auto& [path, f] : before) changed.insert(path);
  return std::vector<std::string>(changed.begin(), changed.end());
}

// A stage's (or a plain spec's) recorded settings that go into a fingerprint, as SpecToJson
// writes them.
Json SettingsOf(const Json& spec, const std::string& stage) {
  Json out = Json::object();
  for (const char* key : {"env", "container", "metrics", "tensorboard", "tensorboard_off"}) {
    if (spec.contains(key)) out[key] = spec[key];
  }
  const Json* where = &spec;
  if (!stage.empty() && spec.contains("stages") && spec["stages"].is_array()) {
    for (const Json& st : spec["stages"]) {
      if (st.is_object() && st.value("name", "") == stage) where = &st;
    }
  }
  for (const char* key : {"command", "shell"}) {
    if (where->contains(key)) out[key] = (*where)[key];
  }
  if (where != &spec && where->contains("env")) out["stage env"] = (*where)["env"];
  if (where->contains("input_hashes")) out["input_hashes"] = (*where)["input_hashes"];
  return out;
}

// Why run `r` would run, against the earlier runs of its stage: what differs from the nearest.
void Explain(PlannedRun& r, const Json& settings_now, const std::vector<Earlier>& earlier,
             const CachePlanContext& ctx) {
  if (earlier.empty()) {
    if (r.reasons.empty()) r.reasons.push_back({RunReason::kNew, ""});
    return;
  }
  // The nearest: the fewest params apart, a success before a failure, the newest.
  const Earlier* nearest = nullptr;
  size_t best = 0;
  for (const Earlier& e : earlier) {
    const size_t apart = ParamsDiffering(r.params, e.run.params).size();
    const bool better =
        !nearest || apart < best ||
        (apart == best && (e.run.state == RunState::kSucceeded) >
                              (nearest->run.state == RunState::kSucceeded)) ||
        (apart == best && (e.run.state == RunState::kSucceeded) ==
                              (nearest->run.state == RunState::kSucceeded) &&
         e.run.id > nearest->run.id);
    if (better) {
      nearest = &e;
      best = apart;
    }
  }
  const std::vector<std::string> params = ParamsDiffering(r.params, nearest->run.params);
  if (!params.empty()) r.reasons.push_back({RunReason::kParams, Join(params, ", ")});
  if (nearest->exp->snapshot_hash != ctx.snapshot_hash) {
    auto files = FilesChanged(ctx.files, ctx.snapshots_dir, nearest->exp->snapshot_hash);
    r.reasons.push_back({RunReason::kCode, files ? FewNames(*files) : ""});
  }
  const Json then = SettingsOf(nearest->exp->spec, r.stage);
  const Json ins_now = settings_now.value("input_hashes", Json::object());
  const Json ins_then = then.value("input_hashes", Json::object());
  std::vector<std::string> inputs;
  for (const auto& [path, hash] : ins_now.items()) {
    if (!ins_then.contains(path) || ins_then[path] != hash) inputs.push_back(path);
  }
  if (!inputs.empty()) r.reasons.push_back({RunReason::kInputs, FewNames(inputs)});
  if (!r.reasons.empty()) return;
  // Same params, code and inputs: something else that goes into the fingerprint.
  std::vector<std::string> other;
  for (const auto& [key, value] : settings_now.items()) {
    if (key == "input_hashes") continue;
    if (!then.contains(key) || then[key] != value) other.push_back(key);
  }
  for (const auto& [key, value] : then.items()) {
    if (key != "input_hashes" && !settings_now.contains(key)) other.push_back(key);
  }
  if (other.empty()) {
    // What its needs gave (their outputs), or a run that did not succeed.
    other.push_back(nearest->run.state == RunState::kSucceeded
                        ? (r.needs.empty() ? "fingerprint" : "what its needs gave")
                        : fmt::format("run {} did not succeed", nearest->run.id));
  }
  r.reasons.push_back({RunReason::kOther, Join(other, ", ")});
}

// Why a run that is never cached from an earlier success would run.
Reason BypassReason(const Spec& spec, const std::string& stage, CacheBypass bypass) {
  switch (bypass) {
    case CacheBypass::kRerun:
      return {RunReason::kForced, "--rerun"};
    case CacheBypass::kForced:
      return {RunReason::kForced,
              std::find(spec.force.begin(), spec.force.end(), "all") != spec.force.end()
                  ? "--force all"
                  : "--force " + stage};
    case CacheBypass::kSearch:
      return {RunReason::kNotCached, "a search's trial"};
    case CacheBypass::kData:
      return {RunReason::kNotCached, "it reads data: folders"};
    default:
      return {RunReason::kNotCached, std::string(ToString(bypass))};
  }
}

}  // namespace

Result<CachePlan> PlanCache(const Spec& spec, Store* store, const CachePlanContext& ctx) {
  CachePlan plan;
  // The runs as the submit makes them (engine_submit.cc: PrepareSubmit).
  std::vector<const StageSpec*> stage_of;
  if (!spec.stages.empty()) {
    for (StageRun& sr : ExpandPipeline(spec)) {
      PlannedRun r;
      r.index = static_cast<int>(plan.runs.size());
      r.stage = spec.stages[sr.stage].name;
      r.params = std::move(sr.params);
      r.needs = std::move(sr.needs);
      plan.runs.push_back(std::move(r));
      stage_of.push_back(&spec.stages[sr.stage]);
    }
  } else {
    for (Json& params : ExpandGrid(spec)) {
      PlannedRun r;
      r.index = static_cast<int>(plan.runs.size());
      r.params = std::move(params);
      plan.runs.push_back(std::move(r));
      stage_of.push_back(nullptr);
    }
  }

  // The earlier runs of this name by this user, by stage, from the newest experiments.
  std::vector<Experiment> experiments;
  std::map<std::string, std::vector<Earlier>> earlier;
  if (store) {
    DROVER_ASSIGN_OR_RETURN(std::vector<Experiment> all, store->ListExperiments());
    for (Experiment& e : all) {
      if (e.name != spec.name || e.user != ctx.user) continue;  // as LatestSuccess counts them
      experiments.push_back(std::move(e));
      if (static_cast<int>(experiments.size()) >= ctx.history) break;
    }
    for (const Experiment& e : experiments) {
      RunFilter f;
      f.experiment_id = e.id;
      DROVER_ASSIGN_OR_RETURN(std::vector<Run> runs, store->ListRuns(f));
      for (Run& run : runs) {
        // A cached run stands for its source: the same params, code and settings.
        earlier[run.stage].push_back({std::move(run), &e});
      }
    }
  }

  const Json spec_json = SpecToJson(spec);
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    PlannedRun& r = plan.runs[i];
    const StageSpec* st = stage_of[i];
    const Spec view = st ? StageView(spec, *st) : spec;
    DROVER_ASSIGN_OR_RETURN(std::vector<std::string> argv, RenderCommand(view, r.params));
    const std::string base = Fingerprint(view, argv, r.params, ctx.snapshot_hash);
    // What each need was and gave: known where the need would be cached (its source's outputs).
    std::vector<std::string> rerun;
    if (!st) {
      r.fingerprint = base;
    } else {
      std::vector<NeedPrint> prints;
      for (int n : r.needs) {
        const PlannedRun& need = plan.runs[n];
        if (need.cached_from == 0) {
          if (std::find(rerun.begin(), rerun.end(), need.stage) == rerun.end()) {
            rerun.push_back(need.stage);
          }
          continue;
        }
        std::vector<Artifact> outputs;
        if (store) {
          DROVER_ASSIGN_OR_RETURN(outputs, store->ListArtifacts(need.cached_from));
        }
        prints.push_back({need.fingerprint, ArtifactsHash(outputs)});
      }
      if (rerun.empty()) r.fingerprint = StageFingerprint(base, st->name, st->input_hashes, prints);
    }

    const CacheBypass bypass = CacheBypassOf(spec, r.stage);
    if (bypass != CacheBypass::kNone) {
      r.reasons.push_back(BypassReason(spec, r.stage, bypass));
      continue;
    }
    if (!rerun.empty()) {
      // Its fingerprint takes in what its needs give, which is not known before they run.
      r.reasons.push_back({RunReason::kNeedReran, Join(rerun, ", ")});
      Explain(r, SettingsOf(spec_json, r.stage), earlier[r.stage], ctx);
      // Nothing apart but the need: "changed: what its needs gave" would only repeat it.
      if (r.reasons.size() == 2 && r.reasons[1].kind == RunReason::kOther) r.reasons.pop_back();
      continue;
    }

    // As the engine looks it up (Engine::TryCache): the newest success with its fingerprint by
    // the same submitter, whose outputs are still in the store.
    if (store) {
      DROVER_ASSIGN_OR_RETURN(std::optional<Run> found,
                              store->LatestSuccess(r.fingerprint, 0, ctx.user));
      if (found) {
        const int64_t source = found->cached_from ? found->cached_from : found->id;
        bool present = true;
        std::error_code ec;
        for (const std::string& o : st ? st->outputs : std::vector<std::string>{}) {
          if (!fs::exists(OutputsDir(ctx.store_dir, source) + "/" + o, ec)) present = false;
        }
        if (present) {
          r.cached_from = source;
          continue;
        }
        r.reasons.push_back({RunReason::kOutputsGone, fmt::format("run {}", source)});
      }
    }
    Explain(r, SettingsOf(spec_json, r.stage), earlier[r.stage], ctx);
  }
  // Stage by stage, in the spec's order (a plain spec: one).
  if (spec.stages.empty()) plan.stages.push_back({});
  for (const StageSpec& st : spec.stages) plan.stages.push_back({st.name});
  for (const PlannedRun& r : plan.runs) {
    auto it = std::find_if(plan.stages.begin(), plan.stages.end(),
                           [&](const StagePlan& s) { return s.stage == r.stage; });
    if (it == plan.stages.end()) continue;
    if (!r.WillRun()) {
      ++it->cached;
      continue;
    }
    ++it->to_run;
    for (const Reason& why : r.reasons) {
      const std::string label = why.Label();
      auto at = std::find_if(it->reasons.begin(), it->reasons.end(),
                             [&](const auto& p) { return p.first == label; });
      if (at == it->reasons.end()) it->reasons.push_back({label, 1});
      else ++at->second;
    }
  }
  return plan;
}

Result<CachePlan> PlanCacheNow(const Spec& given, const std::string& store_dir,
                               const UnixUser* owner) {
  const std::string snapshots_dir = store_dir + "/snapshots";
  CachePlanContext ctx;
  ctx.snapshots_dir = snapshots_dir;
  ctx.store_dir = store_dir;
  ctx.user = DisplayName(owner ? *owner : LookupUser(::geteuid(), ::getegid()));
  std::error_code ec;
  if (!fs::exists(store_dir + "/drover.db", ec)) {
    // No store yet: nothing earlier to be cached from, so nothing to hash.
    return PlanCache(given, nullptr, ctx);
  }
  Spec spec = given;
  // The stages' declared inputs, hashed as the submit hashes them (engine_submit.cc), from the
  // store's hash cache where a file is known (read, never saved).
  HashCache cache(snapshots_dir);
  for (StageSpec& st : spec.stages) {
    for (const std::string& in : st.inputs) {
      const fs::path path(in);
      const std::string abs =
          path.is_absolute() ? in : (fs::path(spec.project_dir) / path).lexically_normal().string();
      Result<std::string> hash = HashTree(abs, &cache);
      if (!hash.ok()) {
        return Status(hash.status().code(), fmt::format("stage {}: input '{}': {}", st.name, in,
                                                        hash.status().message()));
      }
      st.input_hashes[in] = *hash;
    }
  }
  DROVER_ASSIGN_OR_RETURN(SnapshotDigest code,
                          HashSnapshot(spec.workdir, snapshots_dir,
                                       {.excluded = store_dir,
                                        .spec_file = spec.source_path,
                                        .owner = owner}));
  ctx.snapshot_hash = code.hash;
  ctx.files = std::move(code.files);
  DROVER_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(store_dir + "/drover.db"));
  return PlanCache(spec, store.get(), ctx);
}

}  // namespace drover::cli
