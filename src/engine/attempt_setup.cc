// What an attempt is given before it starts, a component of the engine
// (engine/attempt_setup.h).
#include "engine/attempt_setup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <map>

#include "common/file_faults.h"
#include "exec/snapshot.h"

namespace drover {

namespace fs = std::filesystem;

std::string PythonClientDir() {
  std::error_code ec;
  if (fs::exists(fs::path(DROVER_PYTHON_DIR) / "drover" / "__init__.py", ec)) {
    return DROVER_PYTHON_DIR;
  }
  return "";
}

namespace {

// Only ever an entry of one of the store's own folders (checkpoints/<id>): a path no user can
// swap for a link.
Status GiveTo(const std::string& path, const RunAs& who) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      lchown(path.c_str(), static_cast<uid_t>(who.uid), static_cast<gid_t>(who.gid)) != 0) {
    return ErrnoStatus("cannot give '" + path + "' to uid " + std::to_string(who.uid));
  }
  return Status::Ok();
}

// The store's folder of such folders only lets users through to their own (0711).
void OpenToUsers(const std::string& child) {
  chmod(fs::path(child).parent_path().c_str(), 0711);
}

}  // namespace

AttemptSetup::~AttemptSetup() = default;

std::vector<std::string> AttemptSetup::RunEnv(const LiveRun& live, const Attempt& attempt,
                                        const std::string& checkpoint_dir) const {
  ExperimentEntry& exp = *live.exp;
  if (!exp.base_env_ready) {
    // What every run of the experiment shares, made once.
    std::map<std::string, std::string>& env = exp.base_env;
    // A container has its own environment (the image's): drover's own is not carried in.
    const bool host = !exp.spec.container;
    // A run as its submitter starts from their login's environment, not the daemon's.
    const std::vector<std::string> start =
        !host ? std::vector<std::string>{}
              : exp.submitter ? LoginEnvironment(*exp.submitter) : options_.base_env;
    for (const auto& kv : start) {
      auto eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    // Output reaches the log as it is printed, so metrics and progress are live.
    env["PYTHONUNBUFFERED"] = "1";
    for (const auto& [k, v] : exp.spec.env) env[k] = v;
    // `import drover` works in every run: the client that ships with this drover comes first.
    if (!python_client_dir_.empty()) {
      auto it = env.find("PYTHONPATH");
      env["PYTHONPATH"] = it == env.end() || it->second.empty()
                              ? python_client_dir_
                              : python_client_dir_ + ":" + it->second;
    }
    env.erase("OLDPWD");
    exp.base_env_ready = true;
  }
  // This run's own, over the shared ones.
  std::map<std::string, std::string> own;
  if (attempt.gpus.size() > 1) {
    // Multi-GPU runs: NCCL says what it does (the first thing to read when a collective hangs),
    // and stays off InfiniBand unless the spec turns it back on.
    if (!exp.spec.env.count("NCCL_DEBUG")) own["NCCL_DEBUG"] = "INFO";
    if (!exp.spec.env.count("NCCL_IB_DISABLE")) own["NCCL_IB_DISABLE"] = "1";
  }
  // A run sees only the GPUs it was given; a CPU run sees none.
  own["CUDA_VISIBLE_DEVICES"] = attempt.cuda_visible_devices;
  own["DROVER_RUN_ID"] = std::to_string(live.run.id);
  own["DROVER_EXPERIMENT_ID"] = std::to_string(live.run.experiment_id);
  own["DROVER_ATTEMPT"] = std::to_string(attempt.number);
  own["DROVER_PARAMS"] = attempt.params.dump();
  own["DROVER_STORE"] = options_.store_dir;
  // Where the spec came from: what the snapshot left out (a data set kept out by .gitignore) is
  // found there; the working copy is a copy, elsewhere.
  if (!exp.spec.project_dir.empty()) own["DROVER_PROJECT_DIR"] = exp.spec.project_dir;
  // Each of the spec's data by name: where it is in the working copy (read-only).
  for (const auto& [name, path] : exp.spec.data) {
    std::string var = "DROVER_DATA_";
    for (char c : name) var += std::isalnum(static_cast<unsigned char>(c)) ? std::toupper(c) : '_';
    own[var] = attempt.workdir + "/" + name;
  }
  // A pipeline's stage: its name, its env over the pipeline's, and what its needs gave.
  if (!live.run.stage.empty()) {
    own["DROVER_STAGE"] = live.run.stage;
    for (const auto& [k, v] : SpecOf(live).env) own[k] = v;
    if (!live.run.needs.empty() && live.files) {
      own["DROVER_INPUTS"] = live.files->log_prefix + "inputs.json";
    }
  }
  // One folder per run, kept across attempts, so a retried run can resume from a checkpoint.
  own["DROVER_CHECKPOINT_DIR"] = checkpoint_dir;
  // The shell's idea of the current folder must match the working copy, not where drover ran.
  own["PWD"] = attempt.workdir;
  // Both sorted by name: merge them, this run's winning.
  std::vector<std::string> out;
  out.reserve(exp.base_env.size() + own.size());
  auto b = exp.base_env.begin();
  auto o = own.begin();
  while (b != exp.base_env.end() || o != own.end()) {
    if (o == own.end() || (b != exp.base_env.end() && b->first < o->first)) {
      out.push_back(b->first + "=" + b->second);
      ++b;
    } else {
      if (b != exp.base_env.end() && b->first == o->first) ++b;
      out.push_back(o->first + "=" + o->second);
      ++o;
    }
  }
  return out;
}

std::vector<std::pair<std::string, bool>> AttemptSetup::ContainerBinds(
    const LiveRun& live, const RunFiles& files, const std::vector<DataMount>& data,
    const std::vector<std::string>& env) const {
  std::vector<std::pair<std::string, bool>> out;
  // The checkpoint folder is the run's to write, kept across attempts; it must exist to be bound.
  std::error_code ec;
  fs::create_directories(files.checkpoints, ec);
  out.emplace_back(files.checkpoints, true);
  // Data and a stage's needs' outputs: shown in the working copy (bound in an overlay, linked in
  // a copy), so their sources are bound where the links point.
  for (const DataMount& d : data) out.emplace_back(d.source, false);
  const std::string& project = live.exp->spec.project_dir;
  if (!project.empty() && fs::is_directory(project, ec)) out.emplace_back(project, false);
  if (!python_client_dir_.empty() && fs::is_directory(python_client_dir_, ec)) {
    out.emplace_back(python_client_dir_, false);
  }
  for (const std::string& kv : env) {
    if (kv.rfind("DROVER_INPUTS=", 0) == 0) out.emplace_back(kv.substr(14), false);
  }
  return out;
}


const RunFiles& AttemptSetup::FilesOf(LiveRun& live) {
  if (!live.files) {
    // A run this engine queued and never started has the new layout (no stat per launch).
    // A user's run (a root daemon's) has the new layout, whatever is on disk: its folders are
    // the user's, so what is in them decides nothing.
    const bool begun =
        !options_.runs_as_submitter && (live.run.attempts > 0 || live.from_last_engine);
    live.files = RunFiles::In(options_.store_dir, live.run.experiment_id, live.run.id, begun);
  }
  return *live.files;
}

Result<std::optional<RunAs>> AttemptSetup::RunAsOf(ExperimentEntry& exp) const {
  if (!options_.runs_as_submitter) return std::optional<RunAs>();
  {
    // Looked up at every launch, as a login would: groups changed since take effect, and a
    // user removed since (whose uid may be someone else's by now) runs nothing.
    const Experiment& e = exp.experiment;
    RunAs r;
    exp.submitter.reset();
    if (e.uid < 0) {
      // Recorded before drover knew submitters: whose rights it should have is unknown, and
      // the daemon's (root's) are not to be given away.
      return FailedPrecondition(
          "its experiment was recorded before drover kept submitters, so this daemon does not "
          "know whose rights it runs with; submit it again");
    }
    if (e.uid != static_cast<int64_t>(::geteuid())) {
      UnixUser who = LookupUser(e.uid, e.gid);
      if (who.name.empty() || (!e.user.empty() && who.name != e.user)) {
        return FailedPrecondition("its submitter " + e.user + " (uid " + std::to_string(e.uid) +
                                  ") is no longer a user of this machine; runs execute as their "
                                  "submitter on this daemon");
      }
      r.uid = who.uid;
      r.gid = who.gid;
      for (int64_t g : who.groups) r.groups.push_back(static_cast<uint32_t>(g));
      exp.submitter = std::move(who);
    }
    exp.run_as = std::move(r);
  }
  if (!exp.run_as->set()) return std::optional<RunAs>();
  return exp.run_as;
}

Result<WorkingCopy> AttemptSetup::MakeWorkingCopy(LiveRun& live, const NeedMounts& need_mounts) {
  const RunFiles& files = FilesOf(live);
  DROVER_ASSIGN_OR_RETURN(const std::optional<RunAs> run_as, RunAsOf(*live.exp));
  if (!live.exp->logs_ready) {
    // One log folder per experiment, not per run (each folder is an inode).
    std::error_code ec;
    if (FileFault(files.logs)) ec = std::error_code(errno, std::generic_category());
    else fs::create_directories(files.logs, ec);
    if (ec) return IoStatus("cannot create '" + files.logs + "'", ec);
    if (run_as) {
      // The log folder stays the daemon's (no user may put a link where the daemon opens the
      // next attempt's logs), and lets the submitter through to their log files (0600, theirs).
      chmod(files.logs.c_str(), 0711);
      OpenToUsers(files.logs);
    }
    live.exp->logs_ready = true;
  }
  if (run_as && live.exp->submitter) {
    // The submitter can reach their snapshot (it is theirs): one they changed since it was
    // sealed does not start, so nothing runs code other than what was recorded (issue 39).
    DROVER_ASSIGN_OR_RETURN(std::vector<std::string> changed,
                            CheckSnapshotSeal(CodeOf(live), options_.store_dir + "/snapshots"));
    if (!changed.empty()) {
      return FailedPrecondition(fmt::format(
          "its code snapshot {} changed since it was recorded ({}{}); it would not run what was "
          "submitted: submit the experiment again",
          CodeOf(live).hash.substr(0, 12), changed.front(),
          changed.size() > 1 ? fmt::format(" and {} more", changed.size() - 1) : ""));
    }
  }
  // One working copy per run, from the immutable snapshot; retries reuse it.
  if (!working_copies_) {
    working_copies_ = std::make_unique<WorkingCopies>(
        options_.overlay_working_copies ? WorkingCopies::Deferred(options_.store_dir + "/runs")
                                        : WorkingCopies::CopyOnly("overlay_working_copies is off"));
  }
  // A run this engine queued and never started has no working copy yet; one taken over from the
  // last engine may have (it can have died between making it and recording the start).
  bool fresh = live.run.attempts == 0 && !live.from_last_engine;
  // The first attempt on code of its own (drover retry --code current): a new working copy of
  // that code; what earlier attempts wrote in the old one goes (their checkpoints stay).
  if (!live.run.snapshot_hash.empty() && live.run.snapshot_from == live.run.attempts + 1) {
    fresh = true;
    std::error_code ec;
    for (const std::string& dir : {files.work, files.changes, files.overlay_scratch}) {
      fs::remove_all(dir, ec);
      if (ec) return IoStatus("cannot remove the old working copy '" + dir + "'", ec);
    }
  }
  // What it shows read-only: the spec's data, and a pipeline stage's needs' outputs.
  std::vector<DataMount> data;
  for (const auto& [name, path] : live.exp->spec.data) data.push_back({path, files.work + "/" + name});
  if (!live.run.needs.empty()) {
    DROVER_ASSIGN_OR_RETURN(std::vector<DataMount> needs, need_mounts(files.work));
    data.insert(data.end(), needs.begin(), needs.end());
  }
  DROVER_ASSIGN_OR_RETURN(
      WorkingCopy wc,
      working_copies_->Prepare(CodeOf(live), files, fresh, data,
                               run_as && live.exp->submitter ? &*live.exp->submitter : nullptr));
  wc.data = std::move(data);
  if (run_as) {
    // What the run writes is its submitter's: its working copy (made theirs by Prepare) and its
    // checkpoints.
    if (!wc.overlay.empty()) OpenToUsers(wc.overlay.upper);
    OpenToUsers(wc.path);
    std::error_code ec;
    fs::create_directories(files.checkpoints, ec);
    if (ec) return IoStatus("cannot create '" + files.checkpoints + "'", ec);
    DROVER_RETURN_IF_ERROR(GiveTo(files.checkpoints, *run_as));
    OpenToUsers(files.checkpoints);
  }
  if (!copies_said_ && working_copies_->probed()) {
    copies_said_ = true;
    if (!working_copies_->overlay()) {
      spdlog::info("working copies are copied, not mounted: {}", working_copies_->why_not());
    }
  }
  return wc;
}

}  // namespace drover
