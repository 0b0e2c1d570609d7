// An attempt's lifecycle: launching it (working copy, environment, the attempt recorded before
// its process exists), stopping it for one reason, its end (the outcome, what the run does
// next through the state machine), and cancels and priorities asked of the engine.
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/file_faults.h"
#include "common/strings.h"
#include "drover_version.h"
#include "engine/engine.h"
#include "engine/live.h"
#include "metrics/metric_lines.h"
#include "engine/recovery.h"
#include "exec/snapshot.h"
#include "exec/working_copy.h"
#include "model/run_state.h"
#include "spec/expand.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

// The last non-empty line of `text`, cut to a readable length.
std::string LastLine(std::string_view text) {
  auto lines = Split(text, '\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string_view l = Trim(*it);
    if (l.empty()) continue;
    std::string out(l.substr(0, 160));
    if (l.size() > 160) out += "...";
    return out;
  }
  return "";
}

}  // namespace

// Stops the running attempt for `why`: SIGTERM to its group and SIGKILL `grace` later. The
// first reason is the attempt's (recorded with it); a later one only brings the SIGKILL
// closer. Returns whether `why` was the first.
bool Engine::Stop(Live& live, StopReason why, Instant now, Millis grace) {
  // Its process has ended and its outputs are being stored: nothing to stop (its handle may be
  // another process's by now); a cancel is taken when they are (TakeCollected).
  if (pipelines_.Collecting(live.run.id)) return false;
  Attempt& a = *live.attempt;
  // A SIGKILL already scheduled is never pushed later by a second reason to stop.
  live.clock.kill_at_mono = KillTime(live.clock.kill_at_mono, now.mono + grace);
  if (a.stopping) return false;  // the first reason stands
  // Stored with the attempt, so a daemon restarted during the grace goes on stopping it for the
  // same reason (a preempted run that checkpoints and exits 0 has not finished).
  a.stopping = why;
  // Still starting: it is stored with the reason, and signalled, once it has started.
  if (live.clock.starting) return true;
  Tx();
  if (Status st = store_.UpdateAttempt(a); !st.ok()) Fail(st);
  launcher_.Stop(HandleOf(a), StopSignal::kTerminate);
  return true;
}

// SIGTERM to a running run so a better-ranked one gets its GPUs; SIGKILL after the grace.
void Engine::Preempt(Live& live, const std::string& why, Instant now) {
  Millis grace = options_.scheduler.grace_ms;
  spdlog::info("run {}: preempting attempt {} ({}): SIGTERM now, SIGKILL in {} if it still runs",
               live.run.id, live.attempt->number, why, FormatDuration(grace));
  if (Stop(live, StopReason::kPreempt, now, grace)) live.preempt_why = why;
}

// False when the run could not be prepared for the machine's sake (HoldStarts): it stays queued.
bool Engine::Launch(Live& live, const sched::StartAction& action, Instant now) {
  // The working copy first, before anything is recorded or reserved: a disk that is full or
  // failing is the machine's fault, not the run's, so it costs no attempt. The run stays queued
  // and no run starts until a working copy can be made again (HoldStarts).
  Result<WorkingCopy> wc = setup_.MakeWorkingCopy(
      live, [&](const std::string& workdir) { return pipelines_.NeedMounts(live, workdir); });
  if (!wc.ok() && wc.status().code() == Code::kIo) {
    HoldStarts(live, wc.status(), now);
    return false;
  }
  // (Under an executor that places runs, the hold may be the executor's: it ends when a start
  // goes through, below.)
  if (wc.ok() && start_hold_ && !placed_by_executor()) ReleaseStarts(now);
  Tx();
  Run& run = live.run;
  // An attempt number whose exit file already names a process was started by an engine that
  // did not get to record it (it died before its commit, whatever it recorded of the run since):
  // that one is stopped and kept as interrupted, and this start takes the next number. Only a
  // run taken over from the last engine can have one, and only before its first start here.
  if (options_.use_shim && live.from_last_engine) {
    while (ForgetUnrecordedStart(live, now)) {
    }
  }
  live.from_last_engine = false;
  // What this start changes in the run, kept in case the executor cannot take it (below).
  const int attempts_before = run.attempts;
  const Millis started_before = run.started_ms;
  const Json metrics_before = run.final_metrics;
  Attempt a;
  a.run_id = run.id;
  a.number = run.attempts + 1;
  a.params = run.current_params;
  a.gpus = action.gpus;
  a.cuda_visible_devices = CudaVisibleDevices(pool_.devices(), action.gpus);  // MIG: by UUID
  a.started_ms = now.wall;
  a.hostname = hostname_;
  a.drover_version = DROVER_VERSION;
  const RunFiles files = setup_.FilesOf(live);
  a.workdir = files.work;
  a.stdout_path = files.Stdout(a.number);
  a.stderr_path = files.Stderr(a.number);
  if (options_.use_shim) a.exit_path = files.Exit(a.number);
  if (placed_by_executor()) live.clock.placed_pending = true;

  live.clock.started_mono = now.mono;
  watchers_.OutputClockStarts(run.id, now.mono);
  watchers_.Start(run.id, SpecOf(live));
  run.attempts = a.number;
  if (run.started_ms == 0) run.started_ms = now.wall;
  run.final_metrics = Json::object();
  // Resources are held from now until the attempt ends, even if the launch fails below.
  Reserve(live, action);

  OverlayMount overlay;
  std::vector<DataMount> data;
  Status prepared = [&]() -> Status {
    DROVER_ASSIGN_OR_RETURN(a.argv, RenderCommand(SpecOf(live), a.params));
    DROVER_RETURN_IF_ERROR(wc.status());  // a missing snapshot: this run's, recorded as such
    overlay = wc->overlay;
    data = wc->data;
    return Status::Ok();
  }();

  Status launch = prepared;
  if (launch.ok()) {
    LaunchSpec ls;
    ls.argv = a.argv;
    ls.env = setup_.RunEnv(live, a, files.checkpoints);
    ls.cwd = a.workdir;
    if (live.exp->run_as) ls.run_as = *live.exp->run_as;
    ls.stdout_path = a.stdout_path;
    ls.stderr_path = a.stderr_path;
    // The daemon's runs are started by its supervisor (or under a shim), which records how each
    // ended here, so the end is known even if this engine is gone by then.
    ls.exit_path = a.exit_path;
    ls.overlay = overlay;
    if (!overlay.empty()) ls.data = data;
    ls.request.run_id = run.id;
    ls.request.attempt = a.number;
    ls.request.resources = SpecOf(live).resources;
    ls.request.time_limit_ms = SpecOf(live).timeout_ms;
    ls.request.executor = SpecOf(live).executor;
    if (live.exp->spec.container) {
      ls.request.container = live.exp->spec.container;
      ls.request.experiment_id = run.experiment_id;
      for (int g : a.gpus) {
        for (const GpuDevice& d : pool_.devices()) {
          if (d.index == g) ls.request.gpu_uuids.push_back(d.uuid);
        }
      }
      ls.request.binds = setup_.ContainerBinds(live, files, data, ls.env);
    }
    if (launcher_.StartsInBackground() && !ls.exit_path.empty()) {
      // The supervisor starts it while this loop goes on; HandleStarted records it once it has
      // a handle. Meanwhile it holds its resources as a running attempt would.
      Result<int64_t> ticket = launcher_.BeginStart(ls);
      if (ticket.ok()) {
        live.attempt = std::move(a);
        live.clock.starting = true;
        queue_.Run(run.id);
        starting_[*ticket] = run.id;
        return true;
      }
      launch = ticket.status();
    } else {
      Result<ExecHandle> started = launcher_.Start(ls);
      if (!started.ok() && placed_by_executor() &&
          started.status().code() == Code::kUnavailable) {
        // The executor's controller does not answer (Slurm down or restarting): not the run's
        // fault. It stays queued, charged nothing, and no run starts until a retry gets through.
        Release(live);
        watchers_.Stop(run.id);
        live.clock.placed_pending = false;
        run.attempts = attempts_before;
        run.started_ms = started_before;
        run.final_metrics = metrics_before;
        HoldStarts(live, started.status(), now);
        return false;
      }
      if (started.ok() && start_hold_) ReleaseStarts(now);
      if (started.ok()) {
        a.pid = started->id;
        a.pid_start = launcher_.Identity(*started);
        a.executor = launcher_.PlacedAs(*started);  // where the executor put it (a Slurm job)
      } else {
        launch = started.status();
      }
    }
  }
  RecordStart(live, std::move(a), launch, now);
  return true;
}

void Engine::HoldStarts(const Live& live, const Status& why, Instant now) {
  const bool first = !start_hold_;
  if (first) start_hold_.emplace();
  start_hold_->Failed(why, now);
  spdlog::warn("run {}: {}; no run starts until that is fixed (next try in {})",
               live.run.id, why.message(), FormatDuration(start_hold_->backoff_ms));
  if (observer_) observer_->OnStartsHeld(live.run.id, why, start_hold_->backoff_ms);
  if (!first) return;
  Alert a;
  a.kind = "starts_held";
  a.severity = "error";
  a.key = "engine:starts_held";
  a.message = fmt::format(
      "drover cannot start run {}: {}. Running runs keep running; queued runs wait, charged "
      "nothing, until it can ({}).",
      live.run.id, why.message(),
      why.code() == Code::kUnavailable
          ? "the executor's controller answers again: starts are retried with backoff"
          : "free space on the disk that holds the store's runs folder, or fix what the error "
            "names");
  a.data = Json{{"run_id", live.run.id}};
  alerts_.Raise(std::move(a), now.wall);
}

void Engine::ReleaseStarts(Instant now) {
  StartHold hold = std::move(*start_hold_);
  start_hold_.reset();
  const Millis held_ms = now.mono - hold.since_mono;
  spdlog::info("runs start again after {} ({} no longer stops them)", FormatDuration(held_ms),
               hold.why.message());
  Alert a;
  a.kind = "starts_held";
  a.severity = "error";
  a.key = "engine:starts_held";
  a.message = fmt::format(
      "no run could start for {} ({}); they start again now, and none was charged an attempt",
      FormatDuration(held_ms), hold.why.message());
  a.data = Json{{"held_ms", held_ms}, {"tries", hold.tries}};
  alerts_.Raise(std::move(a), hold.since_wall);
  if (observer_) observer_->OnStartsResumed(held_ms);
}

// A start handed over with BeginStart has been reported.
void Engine::HandleStarted(const StartOutcome& started, Instant now) {
  auto sit = starting_.find(started.ticket);
  if (sit == starting_.end()) return;
  auto it = live_.find(sit->second);
  starting_.erase(sit);
  if (it == live_.end() || !it->second->clock.starting) return;
  Live& live = *it->second;
  live.clock.starting = false;
  Attempt a = std::move(*live.attempt);
  live.attempt.reset();
  a.pid = started.handle.id;
  a.pid_start = started.identity;
  // Its clocks (stall, timeout) start now, not when it was handed over.
  watchers_.OutputClockStarts(live.run.id, now.mono);
  live.clock.started_mono = now.mono;
  const bool stop = a.stopping.has_value();
  RecordStart(live, std::move(a), started.error, now);
  // Stopped while it was starting (cancel, preemption, drain): now it has a group to signal.
  if (stop && started.error.ok() && live.attempt) {
    launcher_.Stop(HandleOf(*live.attempt), StopSignal::kTerminate);
  }
}

// Records an attempt that has started (launch ok, `a` with its handle) or failed to.
void Engine::RecordStart(Live& live, Attempt a, const Status& launch, Instant now) {
  Run& run = live.run;
  // Recorded once it has a handle (the run by SetState below), committed with the rest of this loop
  // iteration (or interval): however many runs start and end in it. An engine that dies after
  // the start but before the commit leaves the exit file's start line (written before the start
  // is reported), which the next engine finds (ForgetUnrecordedStart): the run is never started
  // twice under one attempt.
  Tx();
  if (Status st = store_.InsertAttempt(a); !st.ok()) Fail(st);
  live.attempt = a;
  queue_.Run(run.id);
  // Its pid is known now: its GPU leases name it, so they outlive this engine while it runs.
  if (!live.placement.gpus.empty() && launch.ok()) scheduling_.PublishLeases();
  if (!launch.ok()) {
    // Leave the reason where `drover logs --stderr` looks.
    std::error_code ec;
    fs::create_directories(fs::path(a.stderr_path).parent_path(), ec);
    if (FILE* f = FileFault(a.stderr_path) ? nullptr : std::fopen(a.stderr_path.c_str(), "a")) {
      std::fprintf(f, "drover: %s\n", launch.message().c_str());
      std::fclose(f);
    }
    SetState(live, RunEvent::kStart, "", now);
    EndAttempt(live, AttemptOutcome::kLaunchError, launch.message(), now);
    return;
  }
  by_handle_[HandleOf(a)] = run.id;
  const Millis timeout = SpecOf(live).timeout_ms;
  live.clock.deadline_mono = timeout > 0 && !live.clock.placed_pending ? now.mono + timeout : 0;
  if (!a.stopping) live.clock.kill_at_mono = 0;  // else stopped while it was starting: the kill stands
  std::string where = launcher_.StartNote(HandleOf(a));  // "submitted as Slurm job 12"
  if (where.empty()) {
    where = a.cuda_visible_devices.empty() ? "on CPU" : "on GPU " + a.cuda_visible_devices;
  }
  SetState(live, RunEvent::kStart, where, now);
}

void Engine::Reserve(Live& live, const sched::StartAction& action) {
  live.placement = action;
  pool_.Apply(action, SlotsOf(live));
}

// The CPU slots a run holds in the pool: its cpus, or one attempt's slot under an executor that
// places attempts.
int Engine::SlotsOf(const Live& live) const {
  return placed_by_executor() ? 1 : live.run.resources.cpus;
}

// Where an executor that places attempts (Slurm) has one now: stored with the attempt; its
// timeout and stall clocks start when it first runs.
void Engine::HandlePlacement(const PlacementNews& news, Instant now) {
  auto pit = by_handle_.find(news.handle);
  if (pit == by_handle_.end()) return;
  auto it = live_.find(pit->second);
  if (it == live_.end() || !it->second->attempt) return;
  Live& live = *it->second;
  Attempt& a = *live.attempt;
  if (live.clock.placed_pending && !launcher_.WaitsToRun(news.executor)) {
    // It runs (or ended) now: its run time, timeout and stall clocks start here.
    live.clock.placed_pending = false;
    live.clock.started_mono = now.mono;
    watchers_.OutputClockStarts(live.run.id, now.mono);
    const Millis timeout = SpecOf(live).timeout_ms;
    live.clock.deadline_mono = timeout > 0 ? now.mono + timeout : 0;
  }
  if (a.executor == news.executor) return;
  a.executor = news.executor;
  Tx();
  if (Status st = store_.UpdateAttempt(a); !st.ok()) Fail(st);
  const Run run = live.run;
  const Attempt copy = a;
  Notify([this, run, copy] { observer_->OnRunChanged(run, &copy, ""); });
}

void Engine::SetState(Live& live, RunEvent event, const std::string& note, Instant now) {
  // Every change of a run's state goes through the pure state machine, adoption included.
  Run& run = live.run;
  auto next = Transition(run.state, event);
  if (!next.ok()) {
    Fail(Internal("run " + std::to_string(run.id) + ": " + next.status().message()));
    return;
  }
  run.state = *next;
  if (IsFinal(run.state)) run.ended_ms = now.wall;
  Tx();
  Status st = store_.UpdateRun(run);
  if (!st.ok()) Fail(st);
  Event e;
  e.t_ms = now.wall;
  e.kind = std::string(ToString(EventKind::kRunState));
  e.experiment_id = run.experiment_id;
  e.run_id = run.id;
  e.data = {{"state", ToString(run.state)}, {"attempt", run.attempts}};
  if (!run.reason.empty()) e.data["reason"] = run.reason;
  if (!note.empty()) e.data["note"] = note;
  st = store_.InsertEvent(e);
  if (!st.ok()) Fail(st);
  std::optional<Attempt> attempt = live.attempt;
  Notify([this, run, attempt, note] {
    observer_->OnRunChanged(run, attempt ? &*attempt : nullptr, note);
  });
}

void Engine::Release(Live& live) {
  pool_.Release(live.placement, SlotsOf(live));
  const bool held_gpus = !live.placement.gpus.empty();
  live.placement = {};
  if (held_gpus) scheduling_.PublishLeases();
}

void Engine::HandleExit(const ProcessExit& exit, Instant now) {
  auto pit = by_handle_.find(exit.handle);
  if (pit == by_handle_.end()) return;
  auto it = live_.find(pit->second);
  by_handle_.erase(pit);
  if (it == live_.end() || !it->second->attempt) return;
  Live& live = *it->second;
  Attempt& a = *live.attempt;
  a.exit_code = exit.exit_code;
  a.signal = exit.signal;
  TailMetrics(live, true, now);
  std::string tail;
  if (exit.exit_code != 0 || exit.signal != 0) tail = ReadTail(a.stderr_path, 16 * 1024);
  // One reason: an end the engine cannot know (its shim vanished without a record) requeues the
  // run; one the engine caused is that stop's reason; otherwise the process's own exit.
  AttemptOutcome outcome = exit.lost ? AttemptOutcome::kInterrupted
                           : a.stopping
                               ? OutcomeOf(*a.stopping, exit.exit_code == 0 && exit.signal == 0)
                           : exit.outcome ? *exit.outcome
                                          : ClassifyExit(ExitFacts{exit.exit_code, exit.signal, tail});
  // The executor's own account of an end it caused (Slurm's TIMEOUT, a preemption by Slurm).
  if (!a.stopping && exit.outcome == AttemptOutcome::kPreempted) live.preempt_why = exit.detail;
  // Why it failed in its own words, kept with the attempt (the log may be gone by the time
  // someone asks): the last lines of stderr.
  if (outcome == AttemptOutcome::kExitCode || outcome == AttemptOutcome::kSignal ||
      outcome == AttemptOutcome::kCudaOom) {
    a.error = LastLines(tail, kAttemptErrorLines, kAttemptErrorBytes);
  }
  // An executor's launch error in its words (a container runtime that could not start it).
  if (outcome == AttemptOutcome::kLaunchError && !exit.error.empty()) a.error = exit.error;
  std::string detail;
  if (outcome == AttemptOutcome::kExitCode) detail = fmt::format("exit code {}", exit.exit_code);
  if (outcome == AttemptOutcome::kExitCode || outcome == AttemptOutcome::kSignal) {
    // The last thing the run said is usually why it failed ("ValueError: ...").
    std::string last = LastLine(tail);
    if (!last.empty()) detail += fmt::format(" ({})", last);
  }
  if (outcome == AttemptOutcome::kSignal) {
    detail = fmt::format("killed by signal {} ({})", exit.signal, strsignal(exit.signal));
  }
  if (outcome == AttemptOutcome::kInterrupted) {
    detail = exit.lost ? "its shim ended without recording how the run ended"
                       : "stopped because the daemon shut down";
  }
  if (outcome == AttemptOutcome::kTimeout) {
    detail = "ran past the timeout of " + FormatDuration(SpecOf(live).timeout_ms);
  }
  if (outcome == AttemptOutcome::kStalled) {
    detail = "no output for " + FormatDuration(SpecOf(live).monitor.stall_ms);
  }
  if (outcome == AttemptOutcome::kPreempted) {
    size_t gpus = a.gpus.size();
    detail = placed_by_executor()
                 ? fmt::format("preempted: {}; ran {}", live.preempt_why,
                               FormatDuration(now.mono - live.clock.started_mono))
                 : fmt::format("preempted: {}; ran {} on {} GPU{}", live.preempt_why,
                               FormatDuration(now.mono - live.clock.started_mono), gpus,
                               gpus == 1 ? "" : "s");
    // What the stop cost: the time since the run's last checkpoint (it resumes from there).
    if (a.checkpoint) {
      detail += fmt::format("; its checkpoint of step {} was saved {} before the stop: that much "
                            "work is redone",
                            a.checkpoint->step,
                            FormatDuration(std::max<Millis>(0, now.wall - a.checkpoint->t_ms)));
    } else if (SpecOf(live).checkpoint) {
      detail += "; it reported no checkpoint in this attempt: it starts over";
    }
  }
  if (!exit.detail.empty() && !a.stopping && outcome != AttemptOutcome::kPreempted) {
    detail = exit.detail;  // the executor's words (Slurm: TIMEOUT, a job Slurm forgot)
  }
  if (outcome == AttemptOutcome::kPruned) {
    if (std::string why = search_.PrunedWhy(live.run.experiment_id, live.run.id); !why.empty()) {
      detail = std::move(why);
    }
  }
  // It ended when its exit record says, not when this engine heard of it: an attempt that ended
  // while no engine watched it (adopted after a restart) took its own time, not the downtime's.
  Instant ended = now;
  if (exit.ended_ms > a.started_ms && exit.ended_ms < now.wall) {
    const Millis early = now.wall - exit.ended_ms;
    ended.wall -= early;
    ended.mono -= early;
  }
  EndAttempt(live, outcome, detail, ended);
}

void Engine::EndAttempt(Live& live, AttemptOutcome outcome, const std::string& detail,
                        Instant now) {
  Attempt& a = *live.attempt;
  a.ended = true;
  a.ended_ms = now.wall;
  a.reason = std::string(ToString(outcome));
  // Why it could not start is the attempt's record (drover show, the web UI), not only a note.
  if (outcome == AttemptOutcome::kLaunchError && a.error.empty()) a.error = detail;
  a.stopping.reset();
  Tx();
  Status st = store_.UpdateAttempt(a);
  if (!st.ok()) Fail(st);
  Release(live);
  // Every attempt's GPU time counts for the policies that rank by attained service (las,
  // default), a preempted one's too: that is what lets a long run wait its turn.
  const Millis ran = std::max<Millis>(0, now.mono - live.clock.started_mono);
  live.past.attained_gpu_ms += ran * static_cast<Millis>(a.gpus.size());
  if (outcome == AttemptOutcome::kPreempted) live.past.preempted_ms += ran;
  live.preempt_why.clear();

  Run& run = live.run;
  run.reason = a.reason;
  Recovery rec = DecideRecovery(SpecOf(live), a.params, run.retries_used, outcome);
  // The same config failing again and again: alert (also when the retries are spent anyway).
  // Its retries stop early only where the spec left `retries` to a default, and only for this
  // run's own failures in a row: retries the spec wrote are honoured, and a resubmitted copy of
  // the config gets its attempts whatever its history (docs/spec.md, `retries`).
  const bool may_retry = rec.event == RunEvent::kRetry;
  const Streak streak_kind = StreakOf(outcome);
  live.past.failures_in_a_row = streak_kind == Streak::kFailure ? live.past.failures_in_a_row + 1
                           : streak_kind == Streak::kBreaks ? 0
                                                            : live.past.failures_in_a_row;
  if ((may_retry || rec.event == RunEvent::kFail) && !live.cancel_requested) {
    alerts_.RepeatedFailure(live.run, outcome, now.wall);
  }
  const int streak = options_.watch.detectors.failure_streak;
  if (may_retry && !live.cancel_requested && !SpecOf(live).retries_given && streak > 0 &&
      live.past.failures_in_a_row >= streak) {
    rec.event = RunEvent::kFail;
    rec.note = fmt::format(
        "not retried: it failed {} times in a row (the spec sets no retries: write retries: N "
        "to have N retries honoured)",
        live.past.failures_in_a_row);
  }
  std::string note = detail;
  auto add_note = [&](const std::string& n) {
    if (n.empty()) return;
    note = note.empty() ? n : note + "; " + n;
  };
  add_note(rec.note);
  // The user's cancel, even one that came while the attempt was already being stopped for
  // another reason, wins over a retry or a failure.
  RunEvent next = rec.event;
  if (live.cancel_requested && next != RunEvent::kSucceed) next = RunEvent::kCancel;
  if (next == RunEvent::kRetry) {
    run.current_params = rec.next_params;
    run.not_before_ms = now.wall + rec.delay_ms;  // the record; the wait is retry_at_mono
    live.retry_at_mono = now.mono + rec.delay_ms;
    if (rec.counts_as_retry) run.retries_used += 1;
  }
  if (next == RunEvent::kSucceed) {
    scheduling_.Learn(live.exp->predictor_key, run.resources.gpus, live.past.preempted_ms + ran);
    // A stage's outputs are stored before it counts as succeeded (TakeCollected ends it).
    if (const StageSpec* st = FindStage(live.exp->spec, run.stage); st && !st->outputs.empty()) {
      if (!note.empty()) spdlog::info("run {}: {}", run.id, note);
      live.clock.deadline_mono = live.clock.kill_at_mono = 0;
      pipelines_.CollectOutputs(live);
      return;
    }
  }
  SetState(live, next, note, now);
  live.attempt.reset();
  live.clock.deadline_mono = live.clock.kill_at_mono = 0;
  if (IsFinal(run.state)) {
    Retire(run.id);
  } else {
    Queue(live);
  }
}

void Engine::Retire(int64_t run_id) {
  auto it = live_.find(run_id);
  if (it == live_.end()) return;
  ExperimentEntry* exp = it->second->exp;
  queue_.Drop(run_id);
  for (RunLifecycle* c : components_) c->OnFinal(it->second->run);
  live_.erase(it);
  --exp->unfinished;
  pipelines_.WakeDependents(run_id, clock_.At());  // the runs that need it go on, or are not run
  TopUpSearch(*exp);  // a search's next trials, asked for (TakeProposals makes them)
}

void Engine::CancelLive(Live& live, Instant now) {
  const bool again = live.cancel_requested;
  live.cancel_requested = true;
  if (live.attempt) {
    if (!again) Stop(live, StopReason::kCancel, now, options_.kill_grace_ms);
    if (force_kill_) live.clock.kill_at_mono = now.mono;
    return;
  }
  live.run.reason = std::string(ToString(AttemptOutcome::kCancelled));
  SetState(live, RunEvent::kCancel, "cancelled before it started", now);
}

void Engine::ApplyCancel(Instant now) {
  std::vector<int64_t> finished;
  for (auto& [id, live] : live_) {
    CancelLive(*live, now);
    if (!live->attempt) finished.push_back(id);
  }
  for (int64_t id : finished) Retire(id);
  if (force_kill_) CheckDeadlines(now);
}

Status Engine::CancelRun(int64_t run_id) {
  auto it = live_.find(run_id);
  if (it == live_.end()) {
    DROVER_ASSIGN_OR_RETURN(auto run, store_.GetRun(run_id));
    if (!run) return NotFound(fmt::format("no run {}", run_id));
    return FailedPrecondition(
        fmt::format("run {} is already {}; only queued or running runs can be cancelled", run_id,
                    ToString(run->state)));
  }
  Instant now = clock_.At();
  CancelLive(*it->second, now);
  if (!it->second->attempt) Retire(run_id);
  return Flush();
}

Status Engine::CancelExperiment(int64_t experiment_id) {
  if (!experiments_.count(experiment_id)) {
    DROVER_ASSIGN_OR_RETURN(auto exp, store_.GetExperiment(experiment_id));
    if (!exp) return NotFound(fmt::format("no experiment {}", experiment_id));
    return FailedPrecondition(
        fmt::format("experiment {} ({}) has no unfinished runs", experiment_id, exp->name));
  }
  search_.Stop(experiment_id);
  std::vector<int64_t> ids;
  for (const auto& [id, live] : live_) {
    if (live->run.experiment_id == experiment_id) ids.push_back(id);
  }
  Instant now = clock_.At();
  for (int64_t id : ids) {
    // Retiring one may have retired others (runs that needed it, a twin cached from it).
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    CancelLive(live, now);
    if (!live.attempt) Retire(id);
  }
  return Flush();
}

// Fail fast's stop (engine/fail_fast.h): the search proposes no more trials and the waiting runs
// are cancelled with `note`; running ones go on. Returns how many were cancelled.
int Engine::StopFailing(int64_t experiment_id, const std::string& note, Instant now) {
  search_.Stop(experiment_id);
  std::vector<int64_t> waiting;
  for (const auto& [id, live] : live_) {
    if (live->run.experiment_id == experiment_id && !live->attempt && !live->cancel_requested) {
      waiting.push_back(id);
    }
  }
  int cancelled = 0;
  for (int64_t id : waiting) {
    // Retiring one may have retired others (runs that needed it, a twin cached from it).
    auto it = live_.find(id);
    if (it == live_.end() || it->second->attempt) continue;
    Live& live = *it->second;
    live.cancel_requested = true;
    live.run.reason = std::string(ToString(AttemptOutcome::kCancelled));
    SetState(live, RunEvent::kCancel, note, now);
    Retire(id);
    ++cancelled;
  }
  // With nothing left to run or propose, the experiment is done now.
  if (auto it = experiments_.find(experiment_id); it != experiments_.end()) MaybeDone(*it->second);
  return cancelled;
}

Status Engine::SetPriority(int64_t run_id, int priority) {
  auto it = live_.find(run_id);
  if (it == live_.end()) {
    DROVER_ASSIGN_OR_RETURN(auto run, store_.GetRun(run_id));
    if (!run) return NotFound(fmt::format("no run {}", run_id));
    return FailedPrecondition(
        fmt::format("run {} is already {}; priority matters only before a run starts", run_id,
                    ToString(run->state)));
  }
  it->second->run.priority = priority;
  // In the class of its new priority (a run waiting for its needs or its twin stays out).
  if (!it->second->attempt && !pipelines_.Holds(run_id)) Queue(*it->second);
  Tx();
  Status st = store_.UpdateRun(it->second->run);
  if (!st.ok()) Fail(st);
  return Flush();
}

}  // namespace drover
