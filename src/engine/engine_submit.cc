// Submitting an experiment: whether it fits, the grid, the code snapshot (off the loop in the
// daemon: PrepareSubmit), recording it with its queued runs (Commit), and its environment,
// captured in the background and stored when ready.
#include <fcntl.h>
#include <unistd.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "common/hash.h"
#include "common/strings.h"
#include "container/runtime.h"
#include "engine/engine.h"
#include "engine/environment_capture.h"
#include "engine/live.h"
#include "exec/snapshot.h"
#include "exec/file_hashes.h"
#include "spec/expand.h"
#include "spec/pipeline.h"

namespace drover {

namespace fs = std::filesystem;

Status CheckFitsPool(const Resources& resources, const std::vector<sched::GpuState>& pool,
                     int64_t gpu_reserve, int cpu_slots) {
  Status fits = sched::CheckFits(resources, pool, cpu_slots);
  if (fits.ok() || gpu_reserve <= 0) return fits;
  std::vector<sched::GpuState> whole = pool;
  for (auto& g : whole) g.capacity += gpu_reserve;
  if (!sched::CheckFits(resources, whole, cpu_slots).ok()) return fits;
  // It would fit but for the reserve: say so, or "the largest GPU has 15 GiB" puzzles the owner
  // of a 16 GiB GPU.
  return Status(fits.code(),
                fits.message() + fmt::format(" (drover keeps {} of each GPU free for the driver "
                                             "and monitoring: scheduler.gpu_reserve in the "
                                             "config)",
                                             FormatBytes(gpu_reserve)));
}

Status CheckSpecFits(const Spec& spec, const std::vector<sched::GpuState>& pool,
                     int64_t gpu_reserve, int cpu_slots) {
  if (spec.stages.empty()) return CheckFitsPool(spec.resources, pool, gpu_reserve, cpu_slots);
  // A stage that can never start would leave every stage after it waiting for ever.
  for (const StageSpec& st : spec.stages) {
    Status fits = CheckFitsPool(st.resources, pool, gpu_reserve, cpu_slots);
    if (!fits.ok()) return Status(fits.code(), "stage " + st.name + ": " + fits.message());
  }
  return Status::Ok();
}

Status Engine::CheckSubmit(const Spec& spec) {
  DROVER_RETURN_IF_ERROR(InitGpus());
  const ExecutorKind here = launcher_.kind();
  if (spec.executor.given && spec.executor.kind != here) {
    return FailedPrecondition(
        here == ExecutorKind::kLocal
            ? "the spec says executor: {kind: slurm}, and the daemon serving this store runs "
              "attempts on this machine; stop it (`drover daemon stop`) and `drover run` again "
              "(the daemon it starts submits to Slurm), run it with `drover run --foreground`, "
              "or serve with `drover serve --executor slurm` (docs/slurm.md)"
            : "the spec says executor: {kind: local}, and this daemon submits every attempt to "
              "Slurm (its config's executor:); leave executor out of the spec, or run it with "
              "`drover run --store OTHER` on a machine of its own");
  }
  if (spec.container) {
    const ContainerSpec& c = *spec.container;
    if (c.runtime == ContainerRuntime::kPyxis && here == ExecutorKind::kLocal) {
      return FailedPrecondition(
          "container.runtime pyxis starts containers through Slurm's srun, and this drover runs "
          "attempts on this machine; write runtime: podman (or docker), or run it under "
          "executor: {kind: slurm} (docs/containers.md)");
    }
    // The environment goes into the container by name: each must be one.
    std::vector<const std::map<std::string, std::string>*> envs = {&spec.env};
    for (const StageSpec& st : spec.stages) envs.push_back(&st.env);
    for (const auto* env : envs) {
      for (const auto& [k, v] : *env) {
        const bool name = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0])) &&
                          std::all_of(k.begin(), k.end(), [](char ch) {
                            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                          });
        if (!name) {
          return InvalidArgument(fmt::format(
              "env: '{}' cannot be passed into a container: a name there is letters, digits and "
              "'_', not starting with a digit; rename it",
              k.substr(0, 80)));
        }
      }
    }
    // GPUs reach a podman container by their CDI names: checked at every submit that needs
    // them, so a driver update that left the CDI spec behind is said here, not by a failed run.
    bool gpus = spec.resources.gpus > 0;
    for (const StageSpec& st : spec.stages) gpus = gpus || st.resources.gpus > 0;
    const bool podman = c.runtime == ContainerRuntime::kPodman &&
                        (c.runtime_given || container::Installed(ContainerRuntime::kPodman));
    if (gpus && here == ExecutorKind::kLocal && podman) {
      DROVER_RETURN_IF_ERROR(container::CheckCdi(pool_.devices(), options_.cdi_dirs));
    }
  }
  // Slurm says whether a job can ever run (sbatch refuses it at once otherwise).
  if (here != ExecutorKind::kLocal) return Status::Ok();
  return CheckSpecFits(spec, pool_.gpus(), options_.scheduler.gpu_reserve, options_.cpu_slots);
}

namespace {

// Runs that ask for no GPU see none (CUDA_VISIBLE_DEVICES empty), and on a machine with GPUs
// PyTorch then trains on the CPU without a word. Said at the submit when the spec did not write
// resources.gpus at all (`gpus: 0` says a CPU run is meant) and no stage asks for a GPU.
std::string NoGpuNote(const Spec& spec, size_t machine_gpus) {
  if (machine_gpus == 0 || spec.gpus_given || spec.resources.gpus > 0) return "";
  for (const StageSpec& st : spec.stages) {
    if (st.resources.gpus > 0) return "";
  }
  return fmt::format(
      "the runs ask for no GPU (the spec does not set resources.gpus), so they see none "
      "(CUDA_VISIBLE_DEVICES is empty) though this machine has {}: write resources: {{gpus: 1}} "
      "to give each run one, or resources: {{gpus: 0}} to say the CPU is meant",
      machine_gpus);
}

// A path the spec names for its runs to read (data:, a stage's inputs:), opened with the
// submitter's rights on a root daemon: the runs could not read it either, and "missing" and "not
// yours to read" get one answer, so a submit cannot probe another user's private folders.
Status CheckReadable(const std::string& what, const std::string& path, const UnixUser* reader) {
  ActingAs as(reader);
  if (!as.status().ok()) return as.status();
  // O_NONBLOCK: a FIFO is not waited on; a folder opens read-only as well as a file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd >= 0) {
    ::close(fd);
    return Status::Ok();
  }
  return NotFound(fmt::format("{} '{}' does not exist or {} cannot read it; fix the path, or make "
                              "it readable to {}",
                              what, path, reader ? DisplayName(*reader) : "drover",
                              reader ? "them" : "the user drover runs as"));
}

}  // namespace

Result<PreparedSubmit> PrepareSubmit(const Spec& spec, const std::string& store_dir, Millis now,
                                     const UnixUser* reader) {
  for (const auto& [name, path] : spec.data) {
    DROVER_RETURN_IF_ERROR(CheckReadable("data." + name, path, reader));
  }
  PreparedSubmit p;
  p.spec = spec;
  if (p.spec.container) {
    // The image is pinned to its id now: every attempt, retry and reproduction runs this one,
    // whatever its tag names later. One that cannot be found fails the submit, not the runs.
    ContainerSpec& c = *p.spec.container;
    DROVER_RETURN_IF_ERROR(container::PinImage(&c, [&](std::string_view line) {
      spdlog::info("experiment {}: pull {}: {}", spec.name, c.image,
                   std::string(line.substr(0, line.find_last_not_of('\n') + 1)));
    }));
  }
  if (spec.search && spec.search->sampler != SamplerKind::kGrid) {
    // A search: its first trials (as many as may run at once), proposed with no history yet.
    if (!p.spec.search->seeded) {
      p.spec.search->seed = std::random_device{}() & ((uint64_t{1} << 53) - 1);
      p.spec.search->seeded = true;  // stored with the spec: a restart proposes the same
    }
    DROVER_ASSIGN_OR_RETURN(SearchState s, NewSearchState(p.spec));
    const int64_t first = std::min<int64_t>(s.trials, s.parallel);
    const ProposalJob job = JobFor(s, 0, static_cast<int>(first));
    p.params = job.Propose();
    p.origin = job.Origin();
  } else if (!spec.stages.empty()) {
    for (StageRun& r : ExpandPipeline(spec)) {
      p.params.push_back(std::move(r.params));
      p.stages.push_back(r.stage);
      p.needs.push_back(std::move(r.needs));
    }
    // Declared inputs, hashed here (off the loop in the daemon); an unchanged folder is known by
    // its files' keys without being read (exec/file_hashes.h).
    HashCache cache(store_dir + "/snapshots");
    for (StageSpec& st : p.spec.stages) {
      for (const std::string& in : st.inputs) {
        const fs::path path(in);
        const std::string abs =
            path.is_absolute() ? in : (fs::path(spec.project_dir) / path).lexically_normal().string();
        DROVER_RETURN_IF_ERROR(CheckReadable("stage " + st.name + ": input", abs, reader));
        Result<std::string> hash = [&]() -> Result<std::string> {
          ActingAs as(reader);  // the submitter's files, read with their rights
          if (!as.status().ok()) return as.status();
          return HashTree(abs, &cache);
        }();
        if (!hash.ok()) {
          return Status(hash.status().code(), fmt::format("stage {}: input '{}': {}", st.name, in,
                                                          hash.status().message()));
        }
        st.input_hashes[in] = *hash;
      }
    }
    fs::create_directories(store_dir + "/snapshots");
    cache.Save();
  } else {
    p.params = ExpandGrid(spec);
  }
  p.argvs.reserve(p.params.size());
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Spec& view = p.stages.empty() ? spec : StageView(spec, spec.stages[p.stages[i]]);
    DROVER_ASSIGN_OR_RETURN(auto argv, RenderCommand(view, p.params[i]));
    p.argvs.push_back(std::move(argv));
  }
  DROVER_ASSIGN_OR_RETURN(p.snapshot, TakeSnapshot(spec.workdir, store_dir + "/snapshots",
                                                {.excluded = store_dir,
                                                 .spec_file = spec.source_path,
                                                 .owner = reader,
                                                 .now = now}));
  return p;
}

Result<SubmitResult> Engine::Submit(const Spec& spec) {
  DROVER_RETURN_IF_ERROR(CheckSubmit(spec));
  DROVER_ASSIGN_OR_RETURN(PreparedSubmit prepared, PrepareSubmit(spec, options_.store_dir, clock_.Now()));
  return Commit(std::move(prepared));
}

Result<SubmitResult> Engine::Commit(PreparedSubmit prepared) {
  const Spec& spec = prepared.spec;
  // Again: the pool is the loop's, and the daemon prepared this off the loop.
  DROVER_RETURN_IF_ERROR(CheckSubmit(spec));
  if (const auto& groups = options_.scheduler.groups;
      !spec.group.empty() && !groups.empty() && !groups.count(spec.group)) {
    // Not refused (a group needs no entry to exist), but a misspelt name would silently escape
    // its quota: say so where the daemon's owner looks.
    std::vector<std::string> names;
    for (const auto& [name, share] : groups) names.push_back(name);
    std::optional<std::string> close = ClosestMatch(spec.group, names);
    spdlog::warn(
        "experiment '{}': group '{}' is not in the config's scheduler.groups, so no "
        "weight or quota applies to it{}",
        spec.name, spec.group,
        close ? fmt::format(" (did you mean '{}'?)", *close) : std::string());
  }
  const auto& runs_params = prepared.params;
  const auto& argvs = prepared.argvs;
  const Snapshot& snap = prepared.snapshot;

  auto entry = std::make_unique<ExperimentEntry>();
  entry->spec = spec;
  entry->snapshot = snap;
  entry->predictor_key = PredictorKey(spec.name, spec.params);
  Experiment& e = entry->experiment;
  e.name = spec.name;
  e.spec_yaml = spec.source_text;
  e.spec = SpecToJson(spec);
  e.snapshot_hash = snap.hash;
  e.git_commit = snap.git_commit;
  e.git_diff = snap.git_diff;
  e.created_ms = clock_.Now();
  const UnixUser who = prepared.submitter.uid >= 0
                           ? prepared.submitter
                           : LookupUser(::geteuid(), ::getegid());
  e.user = DisplayName(who);
  e.uid = who.uid;
  e.gid = who.gid;

  SubmitResult result;
  result.snapshot = snap;
  if (!placed_by_executor()) {
    if (std::string note = NoGpuNote(spec, pool_.gpus().size()); !note.empty()) {
      result.notes.push_back(std::move(note));
    }
  }
  // Its own transaction, even inside the loop's: a submit that fails leaves nothing behind.
  if (in_tx_) DROVER_RETURN_IF_ERROR(Flush());
  // That commit found the disk full: what it held is kept for the retry, and a submit on top of
  // it would land (or be rolled back) with it. Refused, with the reason, and nothing recorded.
  if (stall_) return StallRefusal("submit");
  DROVER_RETURN_IF_ERROR(store_.Begin());
  auto commit = [&]() -> Status {
    DROVER_RETURN_IF_ERROR(store_.PutSnapshot(snap));
    DROVER_RETURN_IF_ERROR(store_.InsertExperiment(e));
    for (size_t i = 0; i < runs_params.size(); ++i) {
      Run r;
      r.experiment_id = e.id;
      r.user = e.user;
      r.index = static_cast<int>(i);
      r.params = runs_params[i];
      r.current_params = runs_params[i];
      r.priority = spec.priority;
      r.resources = spec.resources;
      if (prepared.stages.empty()) {
        r.fingerprint = Fingerprint(spec, argvs[i], runs_params[i], snap.hash);
      } else {
        // A stage's fingerprint takes in what its needs gave: made when they have succeeded
        // (Engine::NeedsChanged).
        const StageSpec& st = spec.stages[prepared.stages[i]];
        r.stage = st.name;
        r.resources = st.resources;
        for (int n : prepared.needs[i]) r.needs.push_back(result.runs[n].id);
      }
      r.created_ms = e.created_ms;
      r.origin = prepared.origin;
      DROVER_RETURN_IF_ERROR(store_.InsertRun(r));
      result.runs.push_back(r);
    }
    Event ev;
    ev.t_ms = e.created_ms;
    ev.kind = std::string(ToString(EventKind::kExperimentSubmitted));
    ev.experiment_id = e.id;
    ev.data = {{"name", e.name}, {"runs", runs_params.size()}, {"snapshot", snap.hash}};
    DROVER_RETURN_IF_ERROR(store_.InsertEvent(ev));
    return store_.Commit();
  }();
  if (!commit.ok()) {
    // Only this submit's writes are in it (the loop's were committed above): dropped, not kept
    // for a retry, since the caller is told it failed.
    (void)store_.Rollback();
    if (commit.code() == Code::kUnavailable) {
      return Status(Code::kUnavailable,
                    commit.message() + ". The experiment was not recorded: submit it again once "
                                       "the disk that holds the store has room");
    }
    return commit;
  }
  result.experiment_id = e.id;
  if (observer_) observer_->OnExperimentSubmitted(e, result.runs);
  if (options_.capture_environment) environments_.Capture(e, argvs, spec);

  ExperimentEntry* ep = entry.get();
  ep->unfinished = static_cast<int>(result.runs.size());
  if (Status st = search_.Load(e, ep->spec, result.runs); !st.ok()) return st;
  fail_fast_.Watch(e, ep->spec);
  Pipelines::InitStages(*ep);
  experiments_[e.id] = std::move(entry);
  std::vector<Live*> ready;  // pipeline runs that need nothing: fingerprinted, maybe cached
  for (const Run& r : result.runs) {
    auto live = std::make_unique<Live>();
    live->run = r;
    live->exp = ep;
    Live* l = live.get();
    live_[r.id] = std::move(live);  // registered first: the runs after it may need it
    if (r.stage.empty()) ready.push_back(l);
    else if (!pipelines_.AwaitNeeds(*l)) ready.push_back(l);
  }
  const Instant now = clock_.At();
  for (Live* l : ready) {
    if (l->run.stage.empty()) pipelines_.Admit(*l, now);  // cached, waiting for its twin, or queued
    else pipelines_.NeedsChanged(*l, now);
  }
  if (result.runs.empty()) {
    (void)store_.UpdateExperimentStatus(e.id, ExperimentStatus::kDone);
  }
  return result;
}

}  // namespace drover
