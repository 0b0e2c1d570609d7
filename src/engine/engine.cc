#include "engine/engine.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <thread>

#include "common/strings.h"
#include "container/runtime.h"
#include "engine/environment_capture.h"
#include "engine/requests.h"
#include "engine/live.h"
#include "exec/working_copy.h"
#include "gpu/drain_book.h"
#include "model/run_state.h"
#include "sched/gittins.h"

extern char** environ;

namespace drover {

namespace fs = std::filesystem;

namespace {

std::string Hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

// What the engine's components are given of it (engine_context.h, search_driver.h, run_table.h).
class Engine::Context : public EngineContext,
                        public SearchHost,
                        public RunTable,
                        public SchedulingHost,
                        public FailFastHost {
 public:
  explicit Context(Engine& e) : e_(e) {}
  Store& store() override { return e_.store_; }
  void Tx() override { e_.Tx(); }
  void Fail(Status st) override { e_.Fail(std::move(st)); }
  Instant Now() override { return e_.clock_.At(); }
  void Wake() override { e_.launcher_.Wake(); }
  bool Winding() const override { return e_.cancel_requested_ || e_.draining_ || e_.stall_; }
  bool CancellingAll() const override { return e_.cancel_requested_; }
  void Alert(drover::Alert alert, Millis now) override { e_.alerts_.Raise(std::move(alert), now); }
  int Unfinished(int64_t experiment_id) const override {
    auto it = e_.experiments_.find(experiment_id);
    return it == e_.experiments_.end() ? 0 : it->second->unfinished;
  }
  Result<Run> MakeTrial(int64_t experiment_id, Json params, int index,
                        TrialOrigin origin) override {
    auto it = e_.experiments_.find(experiment_id);
    if (it == e_.experiments_.end()) {
      return Status(Code::kInternal, fmt::format("no experiment {} in the engine", experiment_id));
    }
    return e_.MakeTrial(*it->second, std::move(params), index, origin);
  }
  LiveRun* Find(int64_t run_id) override {
    auto it = e_.live_.find(run_id);
    return it == e_.live_.end() ? nullptr : it->second.get();
  }
  void Queue(LiveRun& live) override { e_.Queue(live); }
  void SetState(LiveRun& live, RunEvent event, const std::string& note, Instant now) override {
    e_.SetState(live, event, note, now);
  }
  void Retire(int64_t run_id) override { e_.Retire(run_id); }
  const RunFiles& FilesOf(LiveRun& live) override { return e_.setup_.FilesOf(live); }
  bool Start(LiveRun& live, const sched::StartAction& action, Instant now) override {
    return e_.Launch(live, action, now);
  }
  void Preempt(LiveRun& live, const std::string& why, Instant now) override {
    e_.Preempt(live, why, now);
  }
  int StopExperiment(int64_t experiment_id, const std::string& note, Instant now) override {
    return e_.StopFailing(experiment_id, note, now);
  }

 private:
  Engine& e_;
};

Engine::Engine(Store& store, ProcessLauncher& launcher, GpuProbe& gpus, Clock& clock,
               EngineOptions options)
    : store_(store),
      launcher_(launcher),
      probe_(gpus),
      clock_(clock),
      options_(std::move(options)),
      hostname_(Hostname()),
      context_(std::make_unique<Context>(*this)),
      alerts_(*context_, options_.watch,
              [this](int64_t id) -> const Experiment* {
                auto it = experiments_.find(id);
                return it == experiments_.end() ? nullptr : &it->second->experiment;
              }),
      watchers_(options_.watch.detectors),
      pool_(options_.gpu_ledger, options_.scheduler.gpu_reserve, placed_by_executor()),
      pipelines_(*context_, *context_, options_.store_dir, [this] { launcher_.Wake(); },
                 options_.proposals_off_loop),
      search_(*context_, *context_, options_.proposals_off_loop),
      fail_fast_(*context_, *context_),
      health_(*context_, DrainBookPath(options_.store_dir)),
      sampler_(*context_, probe_, options_.watch, health_, watchers_, alerts_),
      setup_(options_, PythonClientDir()),
      environments_(*context_, probe_, options_, hostname_),
      scheduling_(options_, placed_by_executor(),
                  {live_, experiments_, queue_, pool_, health_, sampler_}, *context_) {
  components_ = {&tail_, &pipelines_, &watchers_, &search_, &fail_fast_};
  if (placed_by_executor()) {
    // Slurm places each attempt: drover's pool is how many may be submitted at once; every job
    // outlives this engine and records its end (the exit record, slurm/sbatch.h); its working
    // copy is a copy the nodes can read (an overlay is mounted in a local namespace).
    options_.cpu_slots = std::max(1, options_.executor_max_jobs);
    options_.use_shim = true;
    options_.overlay_working_copies = false;
  }
  if (options_.cpu_slots <= 0) {
    options_.cpu_slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (options_.base_env.empty()) {
    for (char** e = environ; e && *e; ++e) options_.base_env.emplace_back(*e);
  }
}

Engine::~Engine() {
  RefuseCommands();
  // What the last iteration wrote lands (an engine used only to submit leaves the runs' first
  // looks in an open transaction, which the next user of the store would otherwise find open).
  if (in_tx_ && error_.ok()) (void)store_.Commit();
}

Status Engine::InitGpus() {
  return pool_.Init(probe_, options_.cdi_dirs);
}

void Engine::Tx() {
  if (in_tx_ || !error_.ok()) return;
  Status st = store_.Begin();
  if (!st.ok()) {
    Fail(st);
    return;
  }
  in_tx_ = true;
}

Status Engine::Flush() {
  if (!in_tx_) return error_;
  in_tx_ = false;
  if (!error_.ok()) {
    // Half an iteration must not land: metric points without their offset would be read twice.
    (void)store_.Rollback();
    alerts_.DropUnsent();
    unsent_notes_.clear();
    return error_;
  }
  Status st = store_.Commit();
  if (!st.ok()) {
    if (store_.CommitPending()) {
      // Nothing is lost: the store replays these writes at the next Begin. Observers and sinks
      // hear of them once they land.
      EnterStall(st, clock_.At());
      return error_;
    }
    Fail(st);
  }
  // Observers (the daemon's event stream, the live view) hear of a change once it is committed:
  // a client that reads the API when an event arrives finds what the event said.
  std::vector<std::function<void()>> notes;
  notes.swap(unsent_notes_);
  if (error_.ok()) {
    for (auto& note : notes) note();
  }
  // Alerts go out only once stored: a webhook never names an alert the store does not have.
  const std::vector<Alert> alerts = alerts_.TakeUnsent();
  if (error_.ok()) {
    for (const Alert& a : alerts) {
      if (options_.alert_sink) options_.alert_sink->Notify(a);
      if (observer_) observer_->OnAlert(a);
    }
  }
  return error_;
}

void Engine::Notify(std::function<void()> note) {
  if (observer_ == nullptr) return;
  if (in_tx_) {
    unsent_notes_.push_back(std::move(note));
  } else {
    note();
  }
}

void Engine::Fail(Status st) {
  if (error_.ok()) error_ = st.WithContext("store");
}

void Engine::OnInterrupt(int signal, Instant now, bool serve) {
  if (signal == 0) return;
  interrupted_ = true;
  if (serve) {
    // A daemon drains: nothing new starts. Runs are left for the next engine to adopt, or, with
    // --stop-runs, stopped and recorded as interrupted, to be requeued by the next engine.
    bool again = draining_;
    draining_ = true;
    if (!options_.stop_runs_on_drain && !stop_runs_on_drain_) return;
    for (auto& [id, live] : live_) {
      if (!live->attempt) continue;
      Stop(*live, StopReason::kDrain, now, options_.kill_grace_ms);
      if (again) live->clock.kill_at_mono = now.mono;
    }
    CheckDeadlines(now);
    return;
  }
  if (cancel_requested_) force_kill_ = true;  // a second Ctrl-C: no more grace
  cancel_requested_ = true;
  const int running = static_cast<int>(queue_.running().size());
  if (observer_ && running > 0) observer_->OnStopping(running, force_kill_, options_.kill_grace_ms);
  ApplyCancel(now);
}

Status Engine::RunUntilDone(EngineObserver* observer) { return Loop(observer, /*serve=*/false); }

Status Engine::Serve(EngineObserver* observer) { return Loop(observer, /*serve=*/true); }

std::string_view NameOf(const Command& c) {
  struct Name {
    std::string_view operator()(const cmd::CheckSubmit&) const { return "check_submit"; }
    std::string_view operator()(const cmd::Commit&) const { return "commit"; }
    std::string_view operator()(const cmd::CancelRun&) const { return "cancel_run"; }
    std::string_view operator()(const cmd::CancelExperiment&) const { return "cancel_experiment"; }
    std::string_view operator()(const cmd::SetPriority&) const { return "set_priority"; }
    std::string_view operator()(const cmd::Retry&) const { return "retry"; }
    std::string_view operator()(const cmd::Remove&) const { return "remove"; }
    std::string_view operator()(const cmd::CollectGarbage&) const { return "collect_garbage"; }
    std::string_view operator()(const cmd::ReadGpus&) const { return "read_gpus"; }
    std::string_view operator()(const cmd::Suggest&) const { return "suggest"; }
    std::string_view operator()(const cmd::Tell&) const { return "tell"; }
    std::string_view operator()(const cmd::AddTrial&) const { return "add_trial"; }
  };
  return std::visit(Name{}, c);
}

std::future<Result<CommandReply>> Engine::Post(Command command) {
  auto reply = inbox_.Post(std::move(command));
  // The loop may be waiting for a run to end: it takes the command now, not at its next wake-up.
  launcher_.Wake();
  return reply;
}

Result<CommandReply> Engine::Dispatch(Command& command) {
  auto nothing = [](Status st) -> Result<CommandReply> {
    if (!st.ok()) return st;
    return CommandReply{};
  };
  struct Visitor {
    Engine& e;
    decltype(nothing)& done;
    Result<CommandReply> operator()(cmd::CheckSubmit& c) { return done(e.CheckSubmit(c.spec)); }
    Result<CommandReply> operator()(cmd::Commit& c) {
      if (!c.prepared) return Internal("commit without a prepared experiment");
      DROVER_ASSIGN_OR_RETURN(SubmitResult r, e.Commit(std::move(*c.prepared)));
      return CommandReply{std::make_shared<SubmitResult>(std::move(r))};
    }
    Result<CommandReply> operator()(cmd::CancelRun& c) { return done(e.CancelRun(c.run_id)); }
    Result<CommandReply> operator()(cmd::CancelExperiment& c) {
      return done(e.CancelExperiment(c.experiment_id));
    }
    Result<CommandReply> operator()(cmd::SetPriority& c) {
      return done(e.SetPriority(c.run_id, c.priority));
    }
    Result<CommandReply> operator()(cmd::Remove& c) {
      DROVER_ASSIGN_OR_RETURN(Cleanup done, e.Remove(c));
      return CommandReply{std::move(done)};
    }
    Result<CommandReply> operator()(cmd::CollectGarbage& c) {
      DROVER_ASSIGN_OR_RETURN(Cleanup done, e.CollectGarbage(c));
      return CommandReply{std::move(done)};
    }
    Result<CommandReply> operator()(cmd::Retry& c) {
      DROVER_ASSIGN_OR_RETURN(std::vector<Run> runs, e.Retry(c));
      return CommandReply{std::move(runs)};
    }
    Result<CommandReply> operator()(cmd::ReadGpus&) { return CommandReply{e.ReadGpus()}; }
    Result<CommandReply> operator()(cmd::Suggest&) { return e.AskTell(cmd); }
    Result<CommandReply> operator()(cmd::Tell&) { return e.AskTell(cmd); }
    Result<CommandReply> operator()(cmd::AddTrial&) { return e.AskTell(cmd); }
    Command& cmd;
  };
  spdlog::debug("engine command {}", NameOf(command));
  return std::visit(Visitor{*this, nothing, command}, command);
}

void Engine::RefuseCommands() {
  for (auto& c : inbox_.Take()) {
    c.reply.set_value(Unavailable("the engine is stopping; " + std::string(NameOf(c.command)) +
                                  " was not carried out"));
  }
}

// The reply to a write asked for during a stall: why, and what to do.
Status Engine::StallRefusal(std::string_view what) const {
  return Unavailable(fmt::format(
      "drover cannot write to its store now ({}); running runs keep running and nothing is "
      "lost, but {} waits until the store has room again (retrying every {} s): free space "
      "on the disk that holds the store",
      stall_->why.message(), what, std::max<Millis>(1, stall_->backoff_ms / 1000)));
}

void Engine::RunCommands() {
  for (auto& c : inbox_.Take()) {
    if (stall_ && !std::holds_alternative<cmd::ReadGpus>(c.command)) {
      c.reply.set_value(StallRefusal(NameOf(c.command)));
      continue;
    }
    // A command never takes the loop down with it: whatever it throws becomes its error reply.
    try {
      Result<CommandReply> reply = Dispatch(c.command);
      // What a command changed is committed before its caller hears back, so a client that reads
      // the store (or the API) next finds it.
      if (in_tx_ && !Flush().ok() && reply.ok()) reply = error_;
      c.reply.set_value(std::move(reply));
    } catch (const std::exception& e) {
      spdlog::error("engine command {} failed: {}", NameOf(c.command), e.what());
      c.reply.set_value(Internal(std::string(NameOf(c.command)) + " failed: " + e.what()));
    }
  }
}

// A foreground engine's requests from another terminal (engine/requests.h).
void Engine::TakeRequests() {
  for (const auto& [name, request] : TakeEngineRequests(options_.store_dir)) {
    Status st;
    if (request.cancel_experiment > 0) st = CancelExperiment(request.cancel_experiment);
    for (int64_t id : request.cancel_runs) {
      Status one = CancelRun(id);
      if (st.ok()) st = one;
    }
    spdlog::debug("request {} from another terminal: {}", name, st.ok() ? "ok" : st.message());
    AnswerEngineRequest(options_.store_dir, name, st);
  }
}

// What one Wait() reported: starts, placements and exits handled, then the interrupt.
void Engine::TakeNews(const WaitResult& w, Instant now, bool serve) {
  // Exits first: a run that ended before the interrupt keeps its real outcome, and its group id
  // is never signalled after it was reaped.
  // Starts before exits: a run that started and ended within one wait has its handle recorded.
  for (const auto& started : w.started) HandleStarted(started, now);
  for (const auto& news : w.placements) HandlePlacement(news, now);
  for (const auto& exit : w.exits) HandleExit(exit, now);
  OnInterrupt(w.interrupt_signal, now, serve);
}

Status Engine::Loop(EngineObserver* observer, bool serve) {
  observer_ = observer;
  serve_ = serve;
  DROVER_RETURN_IF_ERROR(InitGpus());
  scheduling_.Seed(store_);
  // A Ctrl-C while the experiment was being submitted (snapshot, package list) is pending: honour
  // it before anything starts. Whatever else this first look collects counts too: an adopted run
  // that ended since Recover() (its end is reported once, here) must not stay running for ever.
  TakeNews(launcher_.Wait(0), clock_.At(), serve);
  next_tail_mono_ = clock_.Monotonic() + options_.tail_interval_ms;
  auto keep_going = [&] {
    if (!error_.ok()) return false;
    if (!starting_.empty()) return true;  // every start handed over is heard back and recorded
    // A search's next trials being proposed: made when they come back (not while draining: the
    // next engine asks again; not after Ctrl-C: they would not be made).
    if (search_.busy() && !draining_ && !cancel_requested_) return true;
    // A stage's outputs being stored: its run ends when they are (not while draining: the next
    // engine runs it again).
    if (pipelines_.busy() && !draining_) return true;
    // Writes the store could not take yet (a full disk) are kept only in memory: an engine that
    // left now would lose them, a run's end among them (issue 39: `drover run --foreground`
    // exited with its run still `running` and none of its points). It waits for room instead;
    // a second Ctrl-C gives up (StalledPass). A draining daemon still leaves: its runs are
    // adopted and re-read by the next one.
    if (stall_ && !draining_) return true;
    if (!serve) return !live_.empty();
    if (!draining_) return true;
    // Draining: with --stop-runs wait until every stopped run has ended; otherwise leave now and
    // let the next engine adopt what still runs.
    if (!options_.stop_runs_on_drain && !stop_runs_on_drain_) return false;
    return !queue_.running().empty();
  };
  while (keep_going()) {
    Instant now = clock_.At();
    if (stall_) {
      StalledPass(now);
      continue;
    }
    RunCommands();
    if (stall_) continue;  // a command's commit failed for want of room
    fail_fast_.Apply(now);  // before proposals come in: a stopped search makes none
    TakeProposals();
    pipelines_.TakeCollected(now);
    if (cancel_requested_) ApplyCancel(now);
    if (!draining_ && (!start_hold_ || now.mono >= start_hold_->retry_mono)) scheduling_.Pass(now);
    ExplainWaiting(now);
    if (options_.check_index) {
      if (Status st = CheckIndex(); !st.ok()) Fail(st);
    }
    // One transaction for what the last wait brought (exits, output, deadlines) and what this
    // pass started, however many runs that is; while runs end faster than commit_interval_ms, one
    // for all the iterations of that interval (a commit per run would cost more than launching a
    // short one). Nothing is lost to a crash meanwhile: a run's start and end are in its exit
    // file first (docs/execution.md, "One commit per interval"). Observers hear of a change once
    // it is committed.
    const Millis mono = clock_.Monotonic();
    if (!in_tx_ || mono - last_commit_mono_ >= options_.commit_interval_ms) {
      if (in_tx_) last_commit_mono_ = mono;
      if (!Flush().ok()) break;
      if (observer_) observer_->OnTick();
    }
    if (stall_) continue;  // the commit failed for want of room: StalledPass waits from here
    Millis wait = NextWakeup(clock_.At());
    if (in_tx_) wait = std::min(wait, last_commit_mono_ + options_.commit_interval_ms - mono);
    if (serve) wait = std::min(wait, options_.serve_poll_ms);
    // In the foreground, requests from another terminal (drover cancel) are looked for too.
    if (!serve) wait = std::min(wait, std::max<Millis>(0, next_request_mono_ - mono));
    WaitResult w = launcher_.Wait(wait);
    now = clock_.At();
    TakeNews(w, now, serve);
    if (!serve && now.mono >= next_request_mono_) {
      next_request_mono_ = now.mono + kRequestPollMs;
      TakeRequests();
    }
    CheckDeadlines(now);
    SampleTelemetry(now);
    if (now.mono >= next_tail_mono_) {
      const std::vector<int64_t> running(queue_.running().begin(), queue_.running().end());
      for (int64_t id : running) {
        auto it = live_.find(id);
        if (it != live_.end() && it->second->attempt && !it->second->clock.starting) {
          TailMetrics(*it->second, false, now);
        }
      }
      next_tail_mono_ = now.mono + options_.tail_interval_ms;
    }
    environments_.Store(/*wait=*/false);
  }
  if (error_.ok()) {
    // What was read so far is kept; a restarted engine resumes at the stored offsets.
    for (auto& [id, live] : live_) {
      if (live->attempt && !live->clock.starting) TailMetrics(*live, false, clock_.At());
    }
    sampler_.Flush();
    // Environments still being captured are waited for (each helper is bounded by its timeout):
    // a finished experiment keeps its record.
    environments_.Store(/*wait=*/true);
  }
  (void)Flush();  // commits the last iteration, or rolls it back after an error
  observer_ = nullptr;
  RefuseCommands();
  if (!error_.ok()) StopEverything();
  return error_;
}

void Retrying::Failed(const Status& status, Instant now) {
  constexpr Millis kFirstRetryMs = 1000;
  constexpr Millis kLongestRetryMs = 30'000;
  if (tries == 0) {
    since_wall = now.wall;
    since_mono = now.mono;
    backoff_ms = kFirstRetryMs;
  } else {
    backoff_ms = std::min(kLongestRetryMs, backoff_ms * 2);
  }
  why = status;
  tries += 1;
  retry_mono = now.mono + backoff_ms;
}

// Flush's commit failed for want of room and the store kept its writes (Store::CommitPending).
void Engine::EnterStall(const Status& why, Instant now) {
  const bool first = !stall_;
  if (first) stall_.emplace();
  stall_->Failed(why, now);
  if (first) {
    // Sent now, not stored (the store cannot take it); stored once the store recovers.
    Alert a;
    a.kind = "store_unavailable";
    a.severity = "error";
    a.key = "store:unavailable";
    a.message = fmt::format("drover cannot commit to its store: {}. Running runs keep running; no "
                            "run starts until there is room.",
                            why.message());
    a.first_ms = a.last_ms = now.wall;
    if (options_.alert_sink) options_.alert_sink->Notify(a);
    if (observer_) observer_->OnAlert(a);
  }
  if (observer_) observer_->OnStoreStalled(why, stall_->backoff_ms);
}

// One pass of the loop while stalled: commands (reads only), the launcher's news held in
// memory, and the commit retried when its backoff is up.
void Engine::StalledPass(Instant now) {
  RunCommands();  // reads are answered; writes are refused with the reason
  if (now.mono >= stall_->retry_mono) {
    // A transaction a write opened since the failure began with the replay already.
    Status begun = in_tx_ ? Status::Ok() : store_.Begin();  // Begin replays what was kept
    if (begun.ok()) {
      in_tx_ = true;
      (void)Flush();  // lands everything, or EnterStall again with a longer backoff
    } else if (store_.CommitPending()) {
      EnterStall(begun, now);
    } else {
      Fail(begun);
    }
    if (!error_.ok()) return;
    if (!store_.CommitPending()) {
      LeaveStall(clock_.At());
      return;
    }
  }
  Millis wait = std::max<Millis>(0, stall_->retry_mono - now.mono);
  wait = std::min(wait, NextWakeup(now));
  WaitResult w = launcher_.Wait(std::min(wait, options_.serve_poll_ms));
  WaitResult& held = stall_->held;
  for (auto& started : w.started) held.started.push_back(std::move(started));
  for (auto& news : w.placements) held.placements.push_back(std::move(news));
  for (auto& exit : w.exits) {
    if (exit.ended_ms == 0) exit.ended_ms = clock_.Now();  // its end time, not the recovery's
    held.exits.push_back(std::move(exit));
  }
  if (w.interrupt_signal != 0) {
    if (held.interrupt_signal != 0) {
      // A second interrupt while the store cannot commit: give up, as on any store error (the
      // runs are stopped; the next engine finds them and requeues them).
      Fail(stall_->why);
      return;
    }
    held.interrupt_signal = w.interrupt_signal;
  }
  // A timeout or a run that prints nothing is stopped while the store is full too (the stop is
  // journaled with the rest and lands at recovery): a full disk never lets a run overstay. Its
  // output is not read meanwhile, but whether it grew is known from the log's size.
  const Instant at = clock_.At();
  for (int64_t id : queue_.running()) {
    auto it = live_.find(id);
    if (it != live_.end() && it->second->attempt && !it->second->clock.starting) {
      NoteOutput(*it->second, at);
    }
  }
  CheckDeadlines(at);
}

void Engine::LeaveStall(Instant now) {
  StoreStall stall = std::move(*stall_);
  stall_.reset();
  const Millis stalled_ms = now.mono - stall.since_mono;
  Alert a;
  a.kind = "store_unavailable";
  a.severity = "error";
  a.key = "store:unavailable";
  a.message = fmt::format(
      "drover could not commit to its store for {} ({}); nothing was lost, and no run started "
      "meanwhile",
      FormatDuration(stalled_ms), stall.why.message());
  a.data = Json{{"stalled_ms", stalled_ms}, {"retries", stall.tries}};
  alerts_.Raise(std::move(a), stall.since_wall);
  // What the launcher reported meanwhile, in the order it came.
  for (const auto& started : stall.held.started) HandleStarted(started, now);
  for (const auto& news : stall.held.placements) HandlePlacement(news, now);
  for (const auto& exit : stall.held.exits) {
    Instant at = now;  // recorded as ending when it ended, not when the store came back
    if (exit.ended_ms > 0 && exit.ended_ms < now.wall) at.wall = exit.ended_ms;
    HandleExit(exit, at);
  }
  OnInterrupt(stall.held.interrupt_signal, now, serve_);
  if (observer_) observer_->OnStoreRecovered(stalled_ms);
}

void Engine::StopEverything() {
  // The store failed, so nobody would watch these runs: stop them rather than leave them holding
  // GPUs with no record of how they end.
  std::set<ExecHandle> attempts;
  for (auto& [id, live] : live_) {
    if (!live->attempt || live->clock.starting) continue;  // a start not reported has no handle yet
    const ExecHandle h = HandleOf(*live->attempt);
    launcher_.Stop(h, StopSignal::kKill);
    attempts.insert(h);
  }
  Millis give_up = clock_.Now() + 10'000;
  while (!attempts.empty() && clock_.Now() < give_up) {
    for (const auto& e : launcher_.Wait(100).exits) attempts.erase(e.handle);
  }
}

// Tells the index that the run waits now (in the class its fields make).
void Engine::Queue(const Live& live) {
  WaitClass c;
  c.experiment_id = live.run.experiment_id;
  c.priority = live.run.priority;
  c.created_ms = live.run.created_ms;
  c.attained_gpu_ms = live.past.attained_gpu_ms;
  queue_.Wait(live.run.id, c);
  if (live.retry_at_mono > 0) queue_.Backoff(live.run.id, live.retry_at_mono);
}

Status Engine::CheckIndex() const {
  size_t waiting = 0;
  size_t awaiting = 0;
  for (const auto& [id, live] : live_) {
    const bool running = queue_.running().count(id) > 0;
    const WaitClass* c = queue_.ClassOf(id);
    if (pipelines_.Holds(id)) {
      // A pipeline run waiting for its needs (or a duplicate for its twin) is in no index.
      if (running || c || live->attempt) {
        return Internal(fmt::format("run {} awaits its needs but is indexed", id));
      }
      ++awaiting;
      continue;
    }
    if (live->attempt.has_value() != running || (c != nullptr) == live->attempt.has_value()) {
      return Internal(fmt::format("run {}: {} an attempt but the index has it {}", id,
                                  live->attempt ? "has" : "has no",
                                  running ? "running" : (c ? "waiting" : "nowhere")));
    }
    if (c == nullptr) continue;
    ++waiting;
    if (c->experiment_id != live->run.experiment_id || c->priority != live->run.priority ||
        c->created_ms != live->run.created_ms || c->attained_gpu_ms != live->past.attained_gpu_ms) {
      return Internal(fmt::format("run {} waits in the index under another class", id));
    }
    auto cls = queue_.waiting().find(*c);
    if (cls == queue_.waiting().end() || !cls->second.count(id)) {
      return Internal(fmt::format("run {} is missing from its class", id));
    }
  }
  if (waiting != queue_.waiting_count() ||
      queue_.running().size() + waiting + awaiting != live_.size()) {
    return Internal(fmt::format("the index has {} running and {} waiting for {} runs",
                                queue_.running().size(), queue_.waiting_count(), live_.size()));
  }
  return Status::Ok();
}

bool Engine::EndHeld(const Live& live) const {
  if (!stall_ || !live.attempt) return false;
  const auto& exits = stall_->held.exits;
  return std::any_of(exits.begin(), exits.end(),
                     [&](const ProcessExit& e) { return e.handle == HandleOf(*live.attempt); });
}

GpuReading Engine::ReadGpus() const {
  std::vector<GpuView> out;
  for (const auto& g : pool_.gpus()) {
    GpuView v;
    v.state = g;
    for (const auto& [id, live] : live_) {
      const auto& p = live->placement.gpus;
      if (live->attempt && std::find(p.begin(), p.end(), g.index) != p.end()) v.runs.push_back(id);
    }
    out.push_back(std::move(v));
  }
  return GpuReading{std::move(out), pool_.devices(), sampler_.latest()};
}

// Timeouts, kills after the grace, and runs that print nothing for their monitor's stall_ms.
// Runs whose exit is held during a store stall (EndHeld) are past signalling: their pid may be
// another process's by now.
void Engine::CheckDeadlines(Instant now) {
  // A copy: stopping a run may change the index.
  const std::vector<int64_t> running(queue_.running().begin(), queue_.running().end());
  for (int64_t id : running) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    Live* live = it->second.get();
    if (!live->attempt || live->clock.starting) continue;  // its clocks start once it has started
    if (live->clock.placed_pending) continue;  // waiting in Slurm: its clocks start when it runs
    if (pipelines_.Collecting(id)) continue;  // ended: its outputs are being stored
    if (EndHeld(*live)) continue;  // ended during a stall: nothing left to stop or kill
    if (live->clock.deadline_mono > 0 && now.mono >= live->clock.deadline_mono && !Stopping(*live)) {
      Stop(*live, StopReason::kTimeout, now, options_.kill_grace_ms);
    }
    Millis stall = SpecOf(*live).monitor.stall_ms;
    const Millis last_output = watchers_.LastOutput(id);
    if (stall > 0 && !Stopping(*live) && now.mono - last_output >= stall) {
      watch::Finding f;
      f.kind = "stalled";
      f.message = fmt::format(
          "run {} printed nothing for {}: stopping attempt {} (retried per the spec's retries)",
          live->run.id, FormatDuration(stall), live->attempt->number);
      f.data = {{"stall_ms", stall},
                {"last_output_ms", now.wall - (now.mono - last_output)}};
      alerts_.RaiseForRun(live->run, AttemptNumber(*live), f, "stalled", now.wall);
      Stop(*live, StopReason::kStall, now, options_.kill_grace_ms);
    }
    if (live->clock.kill_at_mono > 0 && now.mono >= live->clock.kill_at_mono) {
      launcher_.Stop(HandleOf(*live->attempt), StopSignal::kKill);
      live->clock.kill_at_mono = 0;
    }
  }
}

Millis Engine::NextWakeup(Instant now) const {
  Millis next = now.mono + options_.tail_interval_ms;
  if (std::optional<Millis> due = sampler_.NextDue(pool_.devices())) next = std::min(next, *due);
  for (int64_t id : queue_.running()) {
    auto found = live_.find(id);
    if (found == live_.end()) continue;
    const Live& live = *found->second;
    if (live.clock.starting) continue;  // its report wakes the wait
    if (EndHeld(live)) continue;  // ended during a stall: handled at recovery
    if (pipelines_.Collecting(live.run.id)) continue;  // the collector's report wakes the wait
    const bool stopping = Stopping(live);
    if (live.clock.deadline_mono > 0 && !stopping) next = std::min(next, live.clock.deadline_mono);
    if (live.clock.kill_at_mono > 0) next = std::min(next, live.clock.kill_at_mono);
    Millis stall = SpecOf(live).monitor.stall_ms;
    if (stall > 0 && !stopping) next = std::min(next, watchers_.LastOutput(id) + stall);
  }
  // A waiting run's backoff ends: it may start then.
  if (Millis retry = queue_.NextRetry(now.mono); retry > 0) next = std::min(next, retry);
  if (start_hold_) next = std::min(next, start_hold_->retry_mono);
  return std::max<Millis>(0, next - now.mono);
}

}  // namespace drover
