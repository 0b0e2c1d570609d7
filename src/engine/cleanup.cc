#include "engine/cleanup.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdlib>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "common/strings.h"
#include "exec/working_copy.h"

namespace drover {
namespace fs = std::filesystem;

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// Bytes under `path`, symlinks not followed; what cannot be read counts as nothing.
int64_t DiskBytes(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? st.st_size : 0;
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat s;
    if (lstat(it->path().c_str(), &s) == 0 && S_ISREG(s.st_mode)) total += s.st_size;
  }
  return total;
}

Millis MtimeMs(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return 0;
  return int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

void Add(Cleanup& plan, const std::string& path, std::string why) {
  if (!Exists(path)) return;
  for (const auto& f : plan.files) {
    if (f.path == path) return;
  }
  plan.files.push_back({path, std::move(why), 0, ""});
}

std::string Ago(Millis ms) {
  const Millis day = 24LL * 3600 * 1000;
  if (ms >= 2 * day) return fmt::format("{} days ago", ms / day);
  const Millis hour = 3600 * 1000;
  if (ms >= 2 * hour) return fmt::format("{} hours ago", ms / hour);
  return fmt::format("{} minutes ago", std::max<Millis>(0, ms / 60'000));
}

// The number a store folder's entry names ("12", ".12" for overlayfs' scratch), or -1.
int64_t IdOf(const std::string& name) {
  std::string digits = !name.empty() && name[0] == '.' ? name.substr(1) : name;
  if (digits.empty() || digits.size() > 18) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoll(digits);
}

// Makes a folder tree deletable by its owner: overlayfs leaves its scratch `work` folder with no
// permissions at all.
void OpenUp(const std::string& path) {
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
  for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat s;
    if (lstat(it->path().c_str(), &s) == 0 && S_ISDIR(s.st_mode)) {
      std::error_code e2;
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, e2);
    }
  }
}

// Runs of other experiments recorded as cached from runs that would go: their outputs, metrics
// and curves are those runs'. Refused, naming them (stored data is never lost by a side effect).
Status CheckNoCachedDependents(Store& store, const std::vector<int64_t>& experiment_ids,
                               const std::set<int64_t>& removed_runs) {
  DROVER_ASSIGN_OR_RETURN(auto all, store.ListRuns(RunFilter{}));
  std::map<int64_t, std::vector<std::string>> dependents;  // by experiment
  const std::set<int64_t> going(experiment_ids.begin(), experiment_ids.end());
  for (const Run& r : all) {
    if (r.cached_from == 0 || going.count(r.experiment_id) || !removed_runs.count(r.cached_from)) {
      continue;
    }
    auto& list = dependents[r.experiment_id];
    if (list.size() < 5) list.push_back(fmt::format("run {} (cached from run {})", r.id, r.cached_from));
  }
  if (dependents.empty()) return Status::Ok();
  std::vector<std::string> parts, ids;
  for (const auto& [exp, runs] : dependents) {
    parts.push_back(fmt::format("experiment {}: {}", exp, Join(runs, ", ")));
    ids.push_back(std::to_string(exp));
  }
  return FailedPrecondition(fmt::format(
      "runs of other experiments stand on these runs' results and outputs ({}); remove those "
      "experiments too (drover rm {} ...), or keep these",
      Join(parts, "; "), Join(ids, " ")));
}

// Stored outputs (exec/artifacts.h: <store>/artifacts/<h[0:2]>/<h>, hard-linked into each run's
// outputs folder) that no run's outputs folder links any more: their runs were removed. An
// object's other names are counted, less those in the trash (which this gc empties). Copies left
// half-written by an engine that stopped go too. Only called when no engine is storing outputs
// (GcOptions::storing_outputs).
void AddUnreferencedArtifacts(Cleanup& plan, const std::string& store_dir) {
  const std::string root = store_dir + "/artifacts";
  struct Object {
    std::string path, name;
    dev_t dev;
    ino_t ino;
    nlink_t links;
  };
  std::vector<Object> linked;  // objects with other names: unreferenced if all are in the trash
  std::error_code ec;
  for (fs::directory_iterator d(root, ec), end; !ec && d != end; d.increment(ec)) {
    // Copies are written beside the prefix folders (artifacts/.tmp-XXXXXX) before their rename.
    if (d->path().filename().string().starts_with(".tmp-")) {
      Add(plan, d->path().string(), "a stored output half written when its engine stopped");
      continue;
    }
    std::error_code ec2;
    for (fs::directory_iterator it(d->path(), ec2), e2; !ec2 && it != e2; it.increment(ec2)) {
      const std::string path = it->path().string();
      const std::string name = it->path().filename().string();
      struct stat st;
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (name.starts_with(".tmp-")) {
        Add(plan, path, "a stored output half written when its engine stopped");
      } else if (st.st_nlink <= 1) {
        Add(plan, path, fmt::format("stored output {} (no run has it any more)", name.substr(0, 12)));
      } else {
        linked.push_back({path, name, st.st_dev, st.st_ino, st.st_nlink});
      }
    }
  }
  if (linked.empty()) return;
  std::map<std::pair<dev_t, ino_t>, nlink_t> in_trash;
  for (const Object& o : linked) in_trash[{o.dev, o.ino}] = 0;
  for (fs::recursive_directory_iterator it(store_dir + "/trash",
                                           fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (auto f = in_trash.find({st.st_dev, st.st_ino}); f != in_trash.end()) ++f->second;
  }
  for (const Object& o : linked) {
    if (o.links - in_trash[{o.dev, o.ino}] <= 1) {
      Add(plan, o.path,
          fmt::format("stored output {} (only removed runs had it)", o.name.substr(0, 12)));
    }
  }
}

}  // namespace

Result<Cleanup> PlanRemoval(Store& store, const std::string& store_dir,
                            const std::vector<int64_t>& experiment_ids) {
  Cleanup plan;
  std::set<int64_t> removed_runs;
  for (int64_t id : experiment_ids) {
    DROVER_ASSIGN_OR_RETURN(auto exp, store.GetExperiment(id));
    if (!exp) return NotFound(fmt::format("no experiment {}", id));
    plan.experiments.push_back(id);
    RunFilter filter;
    filter.experiment_id = id;
    DROVER_ASSIGN_OR_RETURN(auto runs, store.ListRuns(filter));
    plan.runs += static_cast<int64_t>(runs.size());
    for (const Run& r : runs) removed_runs.insert(r.id);
    const std::string logs = RunFiles::Folder(store_dir, "logs") + "/" + std::to_string(id);
    Add(plan, logs, fmt::format("logs of experiment {}", id));
    for (const Run& r : runs) {
      const RunFiles f = RunFiles::In(store_dir, id, r.id);
      if (f.logs != logs) {
        Add(plan, f.logs, fmt::format("folder of run {}", r.id));  // an older drover's layout
        continue;
      }
      Add(plan, f.work, fmt::format("working copy of run {}", r.id));
      Add(plan, f.changes, fmt::format("what run {} wrote", r.id));
      Add(plan, f.overlay_scratch, fmt::format("overlay scratch of run {}", r.id));
      Add(plan, f.checkpoints, fmt::format("checkpoints of run {}", r.id));
      Add(plan, store_dir + "/outputs/" + std::to_string(r.id),
          fmt::format("outputs of run {}", r.id));
    }
    std::error_code ec;
    const std::string suffix = fmt::format("-{}.html", id);
    for (fs::directory_iterator it(store_dir + "/reports", ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        Add(plan, it->path().string(), fmt::format("report of experiment {}", id));
      }
    }
  }
  DROVER_RETURN_IF_ERROR(CheckNoCachedDependents(store, experiment_ids, removed_runs));
  return plan;
}

Result<Cleanup> PlanGc(Store& store, const std::string& store_dir, const GcOptions& options,
                       Millis now_wall, const std::set<int64_t>& busy_runs) {
  Cleanup plan;
  DROVER_ASSIGN_OR_RETURN(auto runs, store.ListRuns(RunFilter{}));
  std::map<int64_t, const Run*> by_id;
  std::set<int64_t> experiments;
  for (const Run& r : runs) {
    by_id[r.id] = &r;
    experiments.insert(r.experiment_id);
  }
  DROVER_ASSIGN_OR_RETURN(auto all_experiments, store.ListExperiments());
  for (const auto& e : all_experiments) experiments.insert(e.id);

  const Millis cutoff = now_wall - options.older_than_ms;
  for (const Run& r : runs) {
    if (busy_runs.count(r.id) || !IsFinal(r.state) || r.ended_ms <= 0 || r.ended_ms > cutoff) {
      continue;
    }
    const RunFiles f = RunFiles::In(store_dir, r.experiment_id, r.id);
    const std::string when = fmt::format("run {} ended {}", r.id, Ago(now_wall - r.ended_ms));
    Add(plan, f.work, "working copy: " + when);
    Add(plan, f.changes, "what it wrote in its working copy: " + when);
    Add(plan, f.overlay_scratch, "overlay scratch: " + when);
    if (options.checkpoints && r.state == RunState::kSucceeded) {
      Add(plan, f.checkpoints, "checkpoints: " + when + ", succeeded");
    }
  }

  // Snapshots no experiment refers to (their experiments were removed).
  DROVER_ASSIGN_OR_RETURN(auto unreferenced, store.UnreferencedSnapshots());
  std::set<std::string> unreferenced_set(unreferenced.begin(), unreferenced.end());
  for (const std::string& hash : unreferenced) {
    DROVER_ASSIGN_OR_RETURN(auto snap, store.GetSnapshot(hash));
    const std::string path = snap && !snap->path.empty() ? snap->path : store_dir + "/snapshots/" + hash;
    if (now_wall - MtimeMs(path) < kSnapshotGraceMs && Exists(path)) continue;
    plan.snapshots.push_back(hash);
    Add(plan, path, fmt::format("snapshot {} (no experiment uses it)", hash.substr(0, 12)));
    Add(plan, store_dir + "/snapshots/.manifests/" + hash,
        fmt::format("the file list of snapshot {}", hash.substr(0, 12)));
    Add(plan, store_dir + "/snapshots/.seals/" + hash,
        fmt::format("the seal of snapshot {}", hash.substr(0, 12)));
  }

  // Folders the store no longer knows: of removed runs and experiments, or snapshots never
  // recorded (a submit that failed).
  std::error_code ec;
  for (const char* sub : {"runs", "changes", "checkpoints", "outputs"}) {
    for (fs::directory_iterator it(store_dir + "/" + sub, ec), end; !ec && it != end;
         it.increment(ec)) {
      const int64_t id = IdOf(it->path().filename().string());
      if (id < 0 || by_id.count(id)) continue;
      Add(plan, it->path().string(), fmt::format("{} of run {}, which the store no longer has",
                                                 sub, id));
    }
  }
  for (fs::directory_iterator it(store_dir + "/logs", ec), end; !ec && it != end;
       it.increment(ec)) {
    const int64_t id = IdOf(it->path().filename().string());
    if (id < 0 || experiments.count(id)) continue;
    Add(plan, it->path().string(),
        fmt::format("logs of experiment {}, which the store no longer has", id));
  }
  for (fs::directory_iterator it(store_dir + "/snapshots", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (unreferenced_set.count(name)) continue;
    // The content hashes of workdir files, the snapshots' file lists and their seals
    // (exec/snapshot.h).
    if (name == ".hashes" || name == ".manifests" || name == ".seals") continue;
    DROVER_ASSIGN_OR_RETURN(auto snap, store.GetSnapshot(name));
    if (snap || now_wall - MtimeMs(it->path().string()) < kSnapshotGraceMs) continue;
    Add(plan, it->path().string(), "a snapshot folder no experiment was recorded with");
  }
  if (!options.storing_outputs) AddUnreferencedArtifacts(plan, store_dir);
  Add(plan, store_dir + "/trash", "left by an earlier drover rm or gc");
  return plan;
}

Status ApplyCleanup(Store& store, const std::string& store_dir, Cleanup& plan) {
  if (!plan.experiments.empty() || !plan.snapshots.empty()) {
    DROVER_RETURN_IF_ERROR(store.Begin());
    auto records = [&]() -> Status {
      for (int64_t id : plan.experiments) DROVER_RETURN_IF_ERROR(store.DeleteExperiment(id));
      for (const auto& hash : plan.snapshots) DROVER_RETURN_IF_ERROR(store.DeleteSnapshot(hash));
      return store.Commit();
    }();
    if (!records.ok()) {
      (void)store.Rollback();
      return records.WithContext("deleting the records");
    }
  }
  // The records are gone; the files follow, first out of the way (a rename), then deleted.
  const std::string trash = store_dir + "/trash";
  // A fresh folder for this batch (no clock: only its name must be new).
  std::error_code ec;
  fs::create_directories(trash, ec);
  std::string batch = trash + "/batch-XXXXXX";
  if (!ec && ::mkdtemp(batch.data()) == nullptr) ec = std::error_code(errno, std::generic_category());
  int n = 0;
  for (auto& f : plan.files) {
    if (f.path == trash) continue;
    const std::string dest = fmt::format("{}/{}", batch, n++);
    if (!ec && ::rename(f.path.c_str(), dest.c_str()) == 0) {
      f.moved_to = dest;
      continue;
    }
    std::error_code rm;
    OpenUp(f.path);
    fs::remove_all(f.path, rm);
    if (rm) {
      return Internal(fmt::format("could not delete {}: {}; the records are deleted, delete it by "
                                  "hand or run drover gc again",
                                  f.path, rm.message()));
    }
  }
  plan.applied = true;
  return Status::Ok();
}

void MeasureCleanup(Cleanup& plan) {
  for (auto& f : plan.files) f.bytes = DiskBytes(f.moved_to.empty() ? f.path : f.moved_to);
}

Status EmptyTrash(const std::string& store_dir) {
  const std::string trash = store_dir + "/trash";
  if (!Exists(trash)) return Status::Ok();
  std::error_code ec;
  fs::remove_all(trash, ec);
  if (ec) {
    OpenUp(trash);
    ec.clear();
    fs::remove_all(trash, ec);
  }
  if (ec) return Internal(fmt::format("could not empty {}: {}", trash, ec.message()));
  return Status::Ok();
}

}  // namespace drover
