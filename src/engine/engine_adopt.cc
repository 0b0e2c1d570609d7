// Adoption: a new engine takes over the store's unfinished runs (Engine::Recover), adopting live
// shims, reading how ended ones ended, requeuing those whose end is unknown, and going on
// stopping those the last engine was stopping.
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "common/strings.h"
#include "drover_version.h"
#include "engine/engine.h"
#include "engine/live.h"
#include "engine/requests.h"
#include "exec/process_launcher.h"
#include "exec/working_copy.h"

namespace drover {

namespace {

// Where an attempt of a run that outlives the engine has its start and end recorded.
ExitRecordAt RecordOf(const Attempt& a) { return {a.exit_path, a.stdout_path}; }

// When an attempt the last engine did not record was started: its exit file was written then;
// a record on the log's attribute has no file, and the log was made just before the start.
int64_t StartedMs(const Attempt& a, int64_t fallback_ms) {
  struct stat st;
  if (stat(a.exit_path.c_str(), &st) == 0) {
    return int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  }
  struct statx sx;
  if (statx(AT_FDCWD, a.stdout_path.c_str(), 0, STATX_BTIME, &sx) == 0 &&
      (sx.stx_mask & STATX_BTIME)) {
    return int64_t{sx.stx_btime.tv_sec} * 1000 + sx.stx_btime.tv_nsec / 1'000'000;
  }
  return fallback_ms;
}

}  // namespace

// The engine's entry for a stored experiment, made (spec, snapshot) when it has none yet.
Result<ExperimentEntry*> Engine::EntryFor(const Experiment& e) {
  if (auto it = experiments_.find(e.id); it != experiments_.end()) return it->second.get();
  auto entry = std::make_unique<ExperimentEntry>();
  entry->experiment = e;
  DROVER_ASSIGN_OR_RETURN(entry->spec, SpecFromJson(e.spec));
  Pipelines::InitStages(*entry);
  entry->predictor_key = PredictorKey(entry->spec.name, entry->spec.params);
  DROVER_ASSIGN_OR_RETURN(auto snap, store_.GetSnapshot(e.snapshot_hash));
  if (snap) entry->snapshot = *snap;
  if (entry->spec.search || entry->spec.prune) {
    RunFilter filter;
    filter.experiment_id = e.id;
    DROVER_ASSIGN_OR_RETURN(auto runs, store_.ListRuns(filter));
    DROVER_RETURN_IF_ERROR(search_.Load(e, entry->spec, runs));
  }
  fail_fast_.Watch(e, entry->spec);
  ExperimentEntry* ep = entry.get();
  experiments_[e.id] = std::move(entry);
  return ep;
}

// What a run's ended attempts count for (its GPU time; the work of its preempted attempts).
void Engine::CountEarlierAttempts(Live& live, const std::vector<Attempt>& attempts) {
  // The GPU time its earlier attempts had still counts (las, default).
  for (const Attempt& a : attempts) {
    if (!a.ended || a.ended_ms < a.started_ms) continue;
    live.past.attained_gpu_ms += (a.ended_ms - a.started_ms) * static_cast<Millis>(a.gpus.size());
    if (ParseAttemptOutcome(a.reason) == AttemptOutcome::kPreempted) {
      live.past.preempted_ms += a.ended_ms - a.started_ms;
    }
  }
}

Result<RecoverySummary> Engine::Recover() {
  DROVER_RETURN_IF_ERROR(InitGpus());
  DROVER_RETURN_IF_ERROR(launcher_.BeginRecovery());
  // Requests left for an engine that is gone are not for this one.
  ClearEngineRequests(options_.store_dir);
  RecoverySummary summary;
  DROVER_ASSIGN_OR_RETURN(auto experiments, store_.ListExperiments());
  Instant now = clock_.At();
  // Runs looked at once every experiment's runs are registered, and those running hold their
  // fingerprints: pipeline runs not yet queued, and queued runs an earlier success or a twin may
  // stand for (Admit).
  std::vector<int64_t> unevaluated, admit_later;
  // Oldest first, so runs keep their submit order.
  for (auto e = experiments.rbegin(); e != experiments.rend(); ++e) {
    if (e->status != ExperimentStatus::kActive || experiments_.count(e->id)) continue;
    RunFilter filter;
    filter.experiment_id = e->id;
    DROVER_ASSIGN_OR_RETURN(auto runs, store_.ListRuns(filter));
    DROVER_ASSIGN_OR_RETURN(ExperimentEntry * ep, EntryFor(*e));
    ++summary.experiments;
    std::vector<std::pair<int64_t, ProcessExit>> ended;
    for (const Run& r : runs) {
      if (IsFinal(r.state)) continue;
      auto live = std::make_unique<Live>();
      live->run = r;
      live->exp = ep;
      live->from_last_engine = true;
      if (!r.snapshot_hash.empty()) {  // retried on code of its own (drover retry --code current)
        DROVER_ASSIGN_OR_RETURN(auto code, store_.GetSnapshot(r.snapshot_hash));
        if (code) live->code = *code;
      }
      if (r.not_before_ms > now.wall) live->retry_at_mono = now.mono + (r.not_before_ms - now.wall);
      ep->unfinished += 1;
      Live& l = *live;
      live_[r.id] = std::move(live);
      std::vector<Attempt> attempts;
      if (r.attempts > 0 || r.state == RunState::kRunning) {
        DROVER_ASSIGN_OR_RETURN(attempts, store_.ListAttempts(r.id));
      }
      CountEarlierAttempts(l, attempts);
      // A pipeline run not yet queued for its needs (no fingerprint yet): it waits for them, or
      // is looked at again below, once every run is registered.
      // One the last engine started without getting to record it (nor its fingerprint, made
      // when its needs were met) is not held: it is taken over below, never run twice, and
      // given its fingerprint then (FingerprintTakenOverStage).
      if (!r.stage.empty() && r.state == RunState::kQueued && r.attempts == 0 &&
          r.fingerprint.empty() && !(options_.use_shim && StartedUnrecorded(l))) {
        pipelines_.Hold(r.id);  // its needs are counted once every run is registered
        unevaluated.push_back(r.id);
        ++summary.queued;
        continue;
      }
      Queue(l);
      // A start the last engine made and did not get to record (it is committed with its loop's
      // interval): its exit file names the process. It is taken over as a running attempt (or
      // as one that ended meanwhile, its end in the file), so the run is not started twice.
      const bool adopted_start =
          r.state != RunState::kRunning && options_.use_shim && RecordUnrecordedStart(l, now);
      if (adopted_start) {
        pipelines_.FingerprintTakenOverStage(l);
        attempts.push_back(*l.attempt);
        l.attempt.reset();
        ++summary.unrecorded_adopted;
      }
      if (r.state != RunState::kRunning && !adopted_start) {
        ++summary.queued;
        if (options_.use_shim && ForgetUnrecordedStart(l, now)) ++summary.unrecorded;
        if (r.attempts == 0 && pipelines_.Dedups(l)) {
          queue_.Drop(r.id);
          admit_later.push_back(r.id);
        } else {
          pipelines_.ClaimTwin(l);
        }
        continue;
      }
      pipelines_.ClaimTwin(l);
      if (!attempts.empty() && attempts.back().ended &&
          attempts.back().reason == ToString(AttemptOutcome::kSucceeded)) {
        const StageSpec* stage = FindStage(ep->spec, r.stage);
        if (stage && !stage->outputs.empty()) {
          // A stage's run that succeeded while its outputs were being stored when the last
          // engine went: they are stored now; it is not run again.
          l.attempt = attempts.back();
          queue_.Run(r.id);
          pipelines_.CollectOutputs(l);
          ++summary.finished;
          continue;
        }
      }
      if ((attempts.empty() || attempts.back().ended) && options_.use_shim &&
          RecordUnrecordedStart(l, now)) {
        // Recorded as running, its attempt not yet: the start was handed to the supervisor and
        // the engine died before it heard back. The exit file names the process: taken over
        // (running, or ended with its end in the file), not run a second time.
        attempts.push_back(*l.attempt);
        l.attempt.reset();
        ++summary.unrecorded_adopted;
      }
      if (attempts.empty() || attempts.back().ended) {
        // Recorded as running with no live attempt: the engine died between two writes.
        SetState(l, RunEvent::kRetry, "requeued: it had no live attempt after a restart", now);
        ++summary.requeued;
        if (options_.use_shim && ForgetUnrecordedStart(l, now)) ++summary.unrecorded;
        continue;
      }
      const Attempt& a = attempts.back();
      sched::StartAction placement;
      placement.run_id = r.id;
      placement.gpus = a.gpus;
      placement.exclusive = r.resources.gpus > 0 && r.resources.gpu_memory == 0;
      for (const auto& g : pool_.gpus()) {
        if (std::find(a.gpus.begin(), a.gpus.end(), g.index) == a.gpus.end()) continue;
        placement.gpu_memory = placement.exclusive ? g.capacity : r.resources.gpu_memory;
      }
      l.attempt = a;
      queue_.Run(r.id);
      if (a.stopping) {
        // Being stopped when the last engine went: it still is, for the same reason (SIGKILL
        // after a new grace).
        const bool preempt = *a.stopping == StopReason::kPreempt;
        if (preempt) l.preempt_why = "it was being preempted when the daemon restarted";
        if (*a.stopping == StopReason::kCancel) l.cancel_requested = true;
        l.clock.kill_at_mono =
            now.mono + (preempt ? options_.scheduler.grace_ms : options_.kill_grace_ms);
      }
      watchers_.Start(r.id, SpecOf(l));
      Reserve(l, placement);
      // What the last engine knew as wall times becomes monotonic deadlines from here on.
      l.clock.started_mono = now.mono - std::max<Millis>(0, now.wall - a.started_ms);
      const Millis timeout = SpecOf(l).timeout_ms;
      l.clock.deadline_mono = timeout > 0 ? l.clock.started_mono + timeout : 0;
      if (placed_by_executor() && launcher_.WaitsToRun(a.executor)) {
        l.clock.placed_pending = true;  // still waiting in Slurm: its clocks start when it runs
        l.clock.deadline_mono = 0;
      }
      watchers_.OutputClockStarts(r.id, now.mono);
      if (a.pid == 0 && !a.exit_path.empty()) {
        // The engine died between recording the attempt and learning its pid: the shim's pid
        // file names it. Without one, the shim never got to start the run.
        if (auto start = ReadRecordedStart(RecordOf(a)); start.ok()) {
          l.attempt->pid = start->pid;
          l.attempt->pid_start = start->start_ticks;
          Tx();
          if (Status st = store_.UpdateAttempt(*l.attempt); !st.ok()) Fail(st);
        }
      }
      const Attempt& known = *l.attempt;
      const ExecHandle handle = HandleOf(known);
      // An attempt another executor ran (a Slurm job's id is no pid here, nor the reverse) is
      // not this launcher's to look up or signal: its end is read from its record, or it is lost.
      const std::string kind = PlacementText(known.executor, "kind");
      const bool other_executor =
          (kind.empty() ? std::string(ToString(ExecutorKind::kLocal)) : kind) !=
          ToString(launcher_.kind());
      bool alive = !other_executor && handle.valid() && known.pid_start > 0 &&
                   launcher_.Identity(handle) == known.pid_start;
      if (alive && known.exit_path.empty()) {
        // Started without a shim by an engine that is gone: nobody can learn how it ends, so it
        // is stopped and run again rather than left running unwatched.
        launcher_.Stop(handle, StopSignal::kKill);
        alive = false;
      }
      if (alive) {
        launcher_.Adopt(handle, known.pid_start, RecordOf(known));
        by_handle_[handle] = r.id;
        ++summary.adopted;
        continue;
      }
      ProcessExit exit;
      exit.handle = handle;
      auto recorded = a.exit_path.empty() ? Result<ProcessExit>(NotFound("no exit record"))
                                          : ReadExitRecord(RecordOf(a));
      if (recorded.ok()) {
        exit.exit_code = recorded->exit_code;
        exit.signal = recorded->signal;
        exit.ended_ms = recorded->ended_ms;  // when it ended, not when this engine found out
        ++summary.finished;
      } else {
        exit.lost = true;
        ++summary.requeued;
      }
      ended.emplace_back(r.id, exit);
    }
    // Ends are handled after the experiment's runs are all registered, so Retire counts right.
    for (auto& [run_id, exit] : ended) {
      by_handle_[exit.handle] = run_id;
      HandleExit(exit, now);
    }
    TopUpSearch(*ep);  // a search the last engine left short of its trials goes on
  }
  // Pipeline runs not yet queued: they wait for their unfinished needs, or are looked at now.
  for (int64_t id : unevaluated) {
    auto it = live_.find(id);
    if (it != live_.end() && pipelines_.Holds(id) && !pipelines_.AwaitNeeds(*it->second)) {
      pipelines_.NeedsChanged(*it->second, now);
    }
  }
  for (int64_t id : admit_later) {
    auto it = live_.find(id);
    if (it != live_.end() && !pipelines_.Holds(id)) pipelines_.Admit(*it->second, now);
  }
  launcher_.EndRecovery();
  scheduling_.PublishLeases();  // the adopted runs' GPUs are held again under this engine's name
  DROVER_RETURN_IF_ERROR(Flush());
  return summary;
}

// Whether the run's next attempt was started by the last engine (its exit file names the
// process) without being recorded.
bool Engine::StartedUnrecorded(Live& live) {
  const RunFiles& files = setup_.FilesOf(live);
  Attempt a;
  a.number = live.run.attempts + 1;
  a.exit_path = files.Exit(a.number);
  a.stdout_path = files.Stdout(a.number);
  return ReadRecordedStart(RecordOf(a)).ok();
}

// The same start taken over instead: recorded as the run's running attempt, with its GPUs
// read from the process's environment (or as ended, when it has). False when it cannot be (no
// start line, or a live process whose GPUs cannot be read): ForgetUnrecordedStart then.
bool Engine::RecordUnrecordedStart(Live& live, Instant now) {
  Run& r = live.run;
  const RunFiles& files = setup_.FilesOf(live);
  Attempt a;
  a.number = r.attempts + 1;
  a.exit_path = files.Exit(a.number);
  a.stdout_path = files.Stdout(a.number);
  auto start = ReadRecordedStart(RecordOf(a));
  if (!start.ok()) return false;
  a.pid = start->pid;
  a.pid_start = start->start_ticks;
  const ExecHandle handle = HandleOf(a);
  // Its end in the record says it ended, whatever its pid still shows: a shim that wrote its end
  // stays a zombie until its parent reaps it, with the same start time and nothing left to read
  // in /proc (an attempt that had succeeded was run again for that).
  auto ended = [&] { return ReadExitRecord(RecordOf(a)).ok(); };
  bool alive = !ended() && handle.valid() && launcher_.Identity(handle) == a.pid_start;
  std::optional<std::string> devices;
  if (alive) devices = launcher_.EnvOf(handle, "CUDA_VISIBLE_DEVICES");
  if (alive && !devices) {
    // Its GPUs cannot be read back: still running, it cannot be booked (ForgetUnrecordedStart
    // stops it instead); or it ended since the look above, its end now in its record.
    if (!ended()) return false;
    alive = false;
  }
  if (alive) {
    // Its GPUs, as the last engine gave them: the process's own CUDA_VISIBLE_DEVICES.
    a.cuda_visible_devices = *devices;
    for (const std::string& g : Split(a.cuda_visible_devices, ',')) {
      if (g.empty()) continue;
      char* rest = nullptr;
      long index = std::strtol(g.c_str(), &rest, 10);
      if (rest == g.c_str() || *rest != '\0') {
        // A MIG instance goes by its UUID.
        auto mig = std::find_if(pool_.devices().begin(), pool_.devices().end(),
                                [&](const GpuDevice& d) { return IsMig(d) && d.uuid == g; });
        if (mig == pool_.devices().end()) return false;  // not a list drover made
        index = mig->index;
      }
      a.gpus.push_back(static_cast<int>(index));
    }
  }
  a.run_id = r.id;
  a.params = r.current_params;
  a.workdir = files.work;
  a.stdout_path = files.Stdout(a.number);
  a.stderr_path = files.Stderr(a.number);
  a.hostname = hostname_;
  a.drover_version = DROVER_VERSION;
  a.started_ms = StartedMs(a, now.wall);
  a.executor = launcher_.PlacedAs(handle);
  spdlog::info("run {}: attempt {} was started by the last engine, which stopped before recording "
               "it; taken over ({})",
               r.id, a.number, alive ? "still running" : "ended since");
  Tx();
  if (Status st2 = store_.InsertAttempt(a); !st2.ok()) Fail(st2);
  r.attempts = a.number;
  if (r.started_ms == 0) r.started_ms = a.started_ms;
  live.attempt = a;  // for the notification; Recover books it as any running attempt
  if (r.state == RunState::kRunning) {
    // Recorded as running already (the start was handed over before the engine went).
    if (Status st = store_.UpdateRun(r); !st.ok()) Fail(st);
  } else {
    SetState(live, RunEvent::kStart, "taken over after a restart", now);
  }
  return true;
}

// At recovery, for a run the store has as not running: whether the last engine started its
// next attempt and died before that was committed (the attempt's exit file has a start line).
// Such a process was never recorded (nor its GPUs), so it is stopped, and the attempt is
// recorded as interrupted: the next start is a new attempt with files of its own.
bool Engine::ForgetUnrecordedStart(Live& live, Instant now) {
  Run& r = live.run;
  const RunFiles files = RunFiles::In(options_.store_dir, r.experiment_id, r.id);
  Attempt a;
  a.number = r.attempts + 1;
  a.exit_path = files.Exit(a.number);
  a.stdout_path = files.Stdout(a.number);
  // Launches are committed with the rest of their loop iteration, after the process exists: the
  // exit record (its start line is written before the launcher returns) is what records them
  // first.
  auto start = ReadRecordedStart(RecordOf(a));
  if (!start.ok()) return false;
  a.run_id = r.id;
  a.params = r.current_params;
  a.pid = start->pid;
  a.pid_start = start->start_ticks;
  a.workdir = files.work;
  a.stdout_path = files.Stdout(a.number);
  a.stderr_path = files.Stderr(a.number);
  a.hostname = hostname_;
  a.started_ms = now.wall;
  a.ended_ms = now.wall;
  a.ended = true;
  a.reason = std::string(ToString(AttemptOutcome::kInterrupted));
  const ExecHandle handle = HandleOf(a);
  const bool alive = launcher_.Identity(handle) == a.pid_start;
  spdlog::warn(
      "run {}: attempt {} was started by the last engine, which stopped before recording it{}; "
      "it runs again as attempt {}",
      r.id, a.number, alive ? " (stopped now: its GPUs were never recorded)" : "", a.number + 1);
  if (alive) launcher_.Stop(handle, StopSignal::kKill);
  r.attempts = a.number;
  Tx();
  Status st = store_.InsertAttempt(a);
  if (st.ok()) st = store_.UpdateRun(r);
  if (!st.ok()) Fail(st);
  return true;
}

}  // namespace drover
