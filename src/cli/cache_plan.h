#pragma once
// `drover run --dry-run`: which of a spec's runs an earlier success in the store would stand for
// (cached), and, for each run that would run, why (issue 40). Fingerprints are made with the
// engine's own functions (spec/expand.h: Fingerprint, StageFingerprint, CacheBypassOf) over the
// code snapshot as it would be taken now (exec/snapshot.h: HashSnapshot), so the dry run and the
// submit cannot disagree. Nothing is written: the store is only read.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/users.h"
#include "exec/snapshot.h"
#include "model/spec.h"
#include "store/store.h"

namespace drover::cli {

// Why a run would run rather than be cached.
enum class RunReason {
  kNew,          // nothing earlier with this experiment name (and stage) by this user
  kParams,       // no earlier run of the stage had these params; detail: those that differ
  kCode,         // the code snapshot differs from the nearest earlier run's; detail: the files
  kInputs,       // a declared input of the stage changed; detail: which
  kNeedReran,    // a run it needs would run, so its fingerprint is not known; detail: the stages
  kForced,       // --force STAGE, --rerun; detail: which
  kNotCached,    // never cached: a search's trials, a plain run that reads data: folders
  kOutputsGone,  // an earlier run had its fingerprint but its outputs are gone; detail: the run
  kOther,        // same params and code as the nearest earlier run, yet another fingerprint;
                 // detail: what else differs (command, env, ...)
};
std::string_view ToString(RunReason r);  // "new", "params", "code", ...

struct Reason {
  RunReason kind = RunReason::kNew;
  std::string detail;
  // As a person reads it: "new", "param lr", "code changed: train.py", "need prepare reran".
  std::string Label() const;
  bool operator==(const Reason&) const = default;
};

struct PlannedRun {
  int index = 0;       // in expansion order (0-based), as the dry run's table numbers them + 1
  std::string stage;   // "" for a plain spec's run
  Json params = Json::object();
  std::vector<int> needs;       // indexes of the runs it needs
  std::string fingerprint;      // "" where it cannot be known yet (a need would run)
  int64_t cached_from = 0;      // the run it would be cached from (0: none)
  std::vector<Reason> reasons;  // why it would run (empty when cached)
  bool WillRun() const { return cached_from == 0; }
};

struct StagePlan {
  std::string stage;  // "" for a plain spec
  int cached = 0;
  int to_run = 0;
  std::vector<std::pair<std::string, int>> reasons;  // label -> runs, in first-seen order
  // "train: 2 cached, 3 to run (param lr: 2, code changed: train.py: 1)"; `name` leads it.
  std::string Line(const std::string& name) const;
};

struct CachePlan {
  std::vector<PlannedRun> runs;
  std::vector<StagePlan> stages;  // a pipeline's in the spec's order; a plain spec's one
};

// What the plan is made against.
struct CachePlanContext {
  std::string snapshot_hash;           // the code snapshot's hash as it would be taken now
  std::vector<SnapshotFile> files;     // and its files, to name those that changed
  std::string snapshots_dir;           // <store>/snapshots: earlier snapshots' manifests
  std::string store_dir;               // where runs' stored outputs are (<store>/outputs)
  std::string user;                    // the submitter: only their runs are cached from
  int history = 50;                    // the newest experiments of the name looked at for why
};

// Pure over its arguments: `spec` as the submit would record it (its stages' input_hashes made),
// `store` read only (null: there is no store yet, so every run is new). Errors: a command that
// does not render, a store that cannot be read.
Result<CachePlan> PlanCache(const Spec& spec, Store* store, const CachePlanContext& ctx);

// The same for the spec as it is on disk now: hashes the code snapshot (HashSnapshot) and the
// stages' declared inputs as the submit would, without writing, and reads the store at
// `store_dir` when there is one. `owner`: whose snapshot (a shared daemon's submitter), else null.
Result<CachePlan> PlanCacheNow(const Spec& spec, const std::string& store_dir,
                               const UnixUser* owner);

// A few names, then "and N more": "a.py, b.py, c.py and 4 more".
std::string FewNames(const std::vector<std::string>& names, size_t few = 3);

}  // namespace drover::cli
