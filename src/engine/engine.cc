#include "engine/engine.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/strings.h"
#include "common/subprocess.h"
#include "drover_version.h"
#include "engine/environment_capture.h"
#include "engine/live.h"
#include "engine/metric_lines.h"
#include "engine/recovery.h"
#include "exec/snapshot.h"
#include "exec/working_copy.h"
#include "sched/gittins.h"
#include "model/run_state.h"
#include "spec/expand.h"

extern char** environ;

namespace drover {

namespace fs = std::filesystem;

namespace {

std::string Hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool IsPython(const std::string& program) {
  std::string base = fs::path(program).filename().string();
  return StartsWith(base, "python");
}

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

// Whether NaN/Inf in this metric means the run diverged (docs/spec.md, monitor.watch).
bool Watched(const Spec& spec, const std::string& name) {
  if (!spec.monitor.watch.empty()) return watch::IsLossLike(spec, name);
  return watch::IsLossLike(spec, name) || (spec.objective && spec.objective->metric == name);
}

// A SIGKILL already scheduled is never pushed later by a second reason to stop (cancel, timeout).
Millis KillTime(Millis scheduled, Millis proposed) {
  return scheduled > 0 ? std::min(scheduled, proposed) : proposed;
}

// The duration predictor's key for an experiment's runs: its name and the names of its
// parameters (the shape of its config), so a sweep submitted again is predicted from the last.
template <typename J>
std::string PredictorKey(const std::string& name, const J& params) {
  std::vector<std::string> keys;
  for (auto it = params.begin(); it != params.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  return name + "(" + Join(keys, ",") + ")";
}

}  // namespace

Engine::Engine(Store& store, ProcessLauncher& launcher, GpuProbe& gpus, Clock& clock,
               EngineOptions options)
    : store_(store),
      launcher_(launcher),
      probe_(gpus),
      clock_(clock),
      options_(std::move(options)),
      hostname_(Hostname()) {
  policy_ = options_.watch.scheduler.Policy();
  if (options_.cpu_slots <= 0) {
    options_.cpu_slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (options_.base_env.empty()) {
    for (char** e = environ; e && *e; ++e) options_.base_env.emplace_back(*e);
  }
  std::error_code ec;
  if (fs::exists(fs::path(DROVER_PYTHON_DIR) / "drover" / "__init__.py", ec)) {
    python_client_dir_ = DROVER_PYTHON_DIR;
  }
}

Engine::~Engine() { RefuseCommands(); }

Status Engine::InitGpus() {
  if (gpus_ready_) return Status::Ok();
  auto devices = probe_.Devices();
  if (!devices.ok()) return devices.status().WithContext("listing GPUs");
  devices_ = *devices;
  std::vector<sched::GpuState> gpus;
  for (const auto& d : *devices) {
    sched::GpuState g;
    g.index = d.index;
    // Memory already in use before drover starts anything belongs to someone else, and the
    // reserve stays free for the driver and monitoring (scheduler.gpu_reserve).
    g.capacity = std::max<int64_t>(
        0, d.memory_total - d.memory_used - options_.watch.scheduler.gpu_reserve);
    gpus.push_back(g);
  }
  book_ = sched::GpuBook(std::move(gpus));
  gpus_ready_ = true;
  return Status::Ok();
}

Status Engine::CheckSubmit(const Spec& spec) {
  DROVER_RETURN_IF_ERROR(InitGpus());
  if (Status fits = sched::CheckFits(spec.resources, book_.gpus(), options_.cpu_slots);
      !fits.ok()) {
    const int64_t reserve = options_.watch.scheduler.gpu_reserve;
    std::vector<sched::GpuState> whole = book_.gpus();
    for (auto& g : whole) g.capacity += reserve;
    if (reserve > 0 && sched::CheckFits(spec.resources, whole, options_.cpu_slots).ok()) {
      // It would fit but for the reserve: say so, or "the largest GPU has 15 GiB" puzzles the
      // owner of a 16 GiB GPU.
      return Status(fits.code(),
                    fits.message() + fmt::format(" (drover keeps {} of each GPU free for the "
                                                 "driver and monitoring: scheduler.gpu_reserve "
                                                 "in the config)",
                                                 FormatBytes(reserve)));
    }
    return fits;
  }
  return Status::Ok();
}

Result<PreparedSubmit> PrepareSubmit(const Spec& spec, const std::string& store_dir) {
  PreparedSubmit p;
  p.spec = spec;
  p.params = ExpandGrid(spec);
  p.argvs.reserve(p.params.size());
  for (const auto& params : p.params) {
    DROVER_ASSIGN_OR_RETURN(auto argv, RenderCommand(spec, params));
    p.argvs.push_back(std::move(argv));
  }
  DROVER_ASSIGN_OR_RETURN(p.snapshot, TakeSnapshot(spec.workdir, store_dir + "/snapshots"));
  return p;
}

Result<SubmitResult> Engine::Submit(const Spec& spec) {
  DROVER_RETURN_IF_ERROR(CheckSubmit(spec));
  DROVER_ASSIGN_OR_RETURN(PreparedSubmit prepared, PrepareSubmit(spec, options_.store_dir));
  return Commit(std::move(prepared));
}

Result<SubmitResult> Engine::Commit(PreparedSubmit prepared) {
  const Spec& spec = prepared.spec;
  // Again: the pool is the loop's, and the daemon prepared this off the loop.
  DROVER_RETURN_IF_ERROR(CheckSubmit(spec));
  if (const auto& groups = options_.watch.scheduler.groups;
      !spec.group.empty() && !groups.empty() && !groups.count(spec.group)) {
    // Not refused (a group needs no entry to exist), but a misspelt name would silently escape
    // its quota: say so where the daemon's owner looks.
    std::vector<std::string> names;
    for (const auto& [name, share] : groups) names.push_back(name);
    std::optional<std::string> close = ClosestMatch(spec.group, names);
    spdlog::warn("experiment '{}': group '{}' is not in the config's scheduler.groups, so no "
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

  SubmitResult result;
  result.snapshot = snap;
  // Its own transaction, even inside the loop's: a submit that fails leaves nothing behind.
  if (in_tx_) DROVER_RETURN_IF_ERROR(Flush());
  DROVER_RETURN_IF_ERROR(store_.Begin());
  auto commit = [&]() -> Status {
    DROVER_RETURN_IF_ERROR(store_.PutSnapshot(snap));
    DROVER_RETURN_IF_ERROR(store_.InsertExperiment(e));
    for (size_t i = 0; i < runs_params.size(); ++i) {
      Run r;
      r.experiment_id = e.id;
      r.index = static_cast<int>(i);
      r.params = runs_params[i];
      r.current_params = runs_params[i];
      r.fingerprint = Fingerprint(spec, argvs[i], runs_params[i], snap.hash);
      r.priority = spec.priority;
      r.resources = spec.resources;
      r.created_ms = e.created_ms;
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
    (void)store_.Rollback();
    return commit;
  }
  result.experiment_id = e.id;
  if (observer_) observer_->OnExperimentSubmitted(e, result.runs);
  if (options_.capture_environment) CaptureEnvironment(e.id, argvs, spec);

  ExperimentEntry* ep = entry.get();
  ep->unfinished = static_cast<int>(result.runs.size());
  experiments_[e.id] = std::move(entry);
  for (const Run& r : result.runs) {
    auto live = std::make_unique<Live>();
    live->run = r;
    live->exp = ep;
    live_[r.id] = std::move(live);
  }
  if (result.runs.empty()) {
    (void)store_.UpdateExperimentStatus(e.id, "done");
  }
  return result;
}

void Engine::CaptureEnvironment(int64_t experiment_id,
                                const std::vector<std::vector<std::string>>& argvs,
                                const Spec& spec) {
  // Once per experiment and interpreter, not per run: a sweep shares one interpreter.
  std::set<std::string> interpreters;
  for (const auto& argv : argvs) {
    if (argv.empty()) continue;
    std::string program = argv[0];
    if (spec.shell) program = "";  // the script's interpreter is not known
    interpreters.insert(IsPython(program) ? program : "");
  }
  if (!env_capture_) {
    env_capture_ = std::make_unique<EnvironmentCapture>(
        [this] { return probe_.Kind() == "none" ? std::string() : probe_.Describe(); },
        options_.watch.environment.package_list_timeout_ms);
  }
  EnvironmentRequest req;
  req.experiment_id = experiment_id;
  req.interpreters.assign(interpreters.begin(), interpreters.end());
  req.workdir = spec.workdir;
  req.hostname = hostname_;
  env_capture_->Start(std::move(req));
}

void Engine::StoreEnvironments(bool wait) {
  if (!env_capture_) return;
  if (wait) env_capture_->WaitIdle();
  for (const Environment& env : env_capture_->TakeFinished()) {
    Tx();
    if (Status st = store_.PutEnvironment(env); !st.ok()) Fail(st);
  }
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
    unsent_alerts_.clear();
    unsent_notes_.clear();
    return error_;
  }
  Status st = store_.Commit();
  if (!st.ok()) Fail(st);
  // Observers (the daemon's event stream, the live view) hear of a change once it is committed:
  // a client that reads the API when an event arrives finds what the event said.
  std::vector<std::function<void()>> notes;
  notes.swap(unsent_notes_);
  if (error_.ok()) {
    for (auto& note : notes) note();
  }
  // Alerts go out only once stored: a webhook never names an alert the store does not have.
  std::vector<Alert> alerts;
  alerts.swap(unsent_alerts_);
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
    if (!options_.stop_runs_on_drain) return;
    for (auto& [id, live] : live_) {
      if (!live->attempt) continue;
      Stop(*live, StopReason::kDrain, now, options_.kill_grace_ms);
      if (again) live->kill_at_mono = now.mono;
    }
    CheckDeadlines(now);
    return;
  }
  if (cancel_requested_) force_kill_ = true;  // a second Ctrl-C: no more grace
  cancel_requested_ = true;
  int running = 0;
  for (const auto& [id, live] : live_) running += live->attempt.has_value();
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
    std::string_view operator()(const cmd::ReadGpus&) const { return "read_gpus"; }
  };
  return std::visit(Name{}, c);
}

std::future<Result<CommandReply>> Engine::Post(Command command) {
  PostedCommand posted{std::move(command), {}};
  auto reply = posted.reply.get_future();
  std::lock_guard<std::mutex> lock(commands_mu_);
  commands_.push_back(std::move(posted));
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
    Result<CommandReply> operator()(cmd::ReadGpus&) {
      return CommandReply{GpuReading{e.GpuViews(), e.devices_, e.latest_samples_}};
    }
  };
  spdlog::debug("engine command {}", NameOf(command));
  return std::visit(Visitor{*this, nothing}, command);
}

void Engine::RefuseCommands() {
  std::vector<PostedCommand> batch;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    batch.swap(commands_);
  }
  for (auto& c : batch) {
    c.reply.set_value(Unavailable("the engine is stopping; " + std::string(NameOf(c.command)) +
                                  " was not carried out"));
  }
}

void Engine::RunCommands() {
  std::vector<PostedCommand> batch;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    batch.swap(commands_);
  }
  for (auto& c : batch) c.reply.set_value(Dispatch(c.command));
}

Status Engine::Loop(EngineObserver* observer, bool serve) {
  observer_ = observer;
  DROVER_RETURN_IF_ERROR(InitGpus());
  SeedPredictor();
  // A Ctrl-C while the experiment was being submitted (snapshot, package list) is pending: honour
  // it before anything starts.
  OnInterrupt(launcher_.Wait(0).interrupt_signal, clock_.At(), serve);
  next_tail_mono_ = clock_.Monotonic() + options_.tail_interval_ms;
  next_sample_mono_ = clock_.Monotonic();
  auto keep_going = [&] {
    if (!error_.ok()) return false;
    if (!serve) return !live_.empty();
    if (!draining_) return true;
    // Draining: with --stop-runs wait until every stopped run has ended; otherwise leave now and
    // let the next engine adopt what still runs.
    if (!options_.stop_runs_on_drain) return false;
    for (const auto& [id, live] : live_) {
      if (live->attempt) return true;
    }
    return false;
  };
  while (keep_going()) {
    Instant now = clock_.At();
    RunCommands();
    if (cancel_requested_) ApplyCancel(now);
    if (!draining_) Schedule(now);
    if (!Flush().ok()) break;
    Millis wait = NextWakeup(clock_.At());
    if (serve) wait = std::min(wait, options_.serve_poll_ms);
    WaitResult w = launcher_.Wait(wait);
    now = clock_.At();
    // Exits first: a run that ended before the interrupt keeps its real outcome, and its group id
    // is never signalled after it was reaped.
    for (const auto& exit : w.exits) HandleExit(exit, now);
    OnInterrupt(w.interrupt_signal, now, serve);
    CheckDeadlines(now);
    SampleTelemetry(now);
    if (now.mono >= next_tail_mono_) {
      for (auto& [id, live] : live_) {
        if (live->attempt) TailMetrics(*live, false, now);
      }
      next_tail_mono_ = now.mono + options_.tail_interval_ms;
    }
    StoreEnvironments(/*wait=*/false);
    if (!Flush().ok()) break;
    if (observer_) observer_->OnTick();
  }
  if (error_.ok()) {
    // What was read so far is kept; a restarted engine resumes at the stored offsets.
    for (auto& [id, live] : live_) {
      if (live->attempt) TailMetrics(*live, false, clock_.At());
    }
    StoreSamples({}, /*flush_all=*/true);
    // Environments still being captured are waited for (each helper is bounded by its timeout):
    // a finished experiment keeps its record.
    StoreEnvironments(/*wait=*/true);
    (void)Flush();
  }
  observer_ = nullptr;
  RefuseCommands();
  if (!error_.ok()) StopEverything();
  return error_;
}

void Engine::StopEverything() {
  // The store failed, so nobody would watch these runs: stop them rather than leave them holding
  // GPUs with no record of how they end.
  std::set<int> pids;
  for (auto& [id, live] : live_) {
    if (!live->attempt) continue;
    int pid = static_cast<int>(live->attempt->pid);
    launcher_.SignalGroup(pid, SIGKILL);
    pids.insert(pid);
  }
  Millis give_up = clock_.Now() + 10'000;
  while (!pids.empty() && clock_.Now() < give_up) {
    for (const auto& e : launcher_.Wait(100).exits) pids.erase(e.pid);
  }
}

void Engine::Schedule(Instant now) {
  const watch::SchedulerConfig& config = options_.watch.scheduler;
  std::vector<sched::PendingRun> queue;
  sched::ClusterView view;
  view.gpus = book_.gpus();
  // The latest telemetry, so a run that must share a GPU goes to the least busy one.
  for (const GpuSample& sample : latest_samples_) {
    for (auto& g : view.gpus) {
      if (g.index != sample.index) continue;
      g.utilization = sample.utilization;
      g.memory_used = sample.memory_used;
    }
  }
  view.cpu_slots_total = options_.cpu_slots;
  view.cpu_slots_used = book_.cpu_slots_used();
  view.groups = config.groups;
  bool stop_in_flight = false;
  // Runs of one experiment share their prediction (same key, same GPU count): one look-up each.
  std::map<int64_t, std::optional<Millis>> predicted;
  auto predict = [&](const Live& live) {
    auto it = predicted.find(live.run.experiment_id);
    if (it == predicted.end()) it = predicted.emplace(live.run.experiment_id, Predict(live)).first;
    return it->second;
  };
  for (const auto& [id, live] : live_) {
    const Run& r = live->run;
    const Spec& spec = live->exp->spec;
    view.max_parallel[r.experiment_id] = spec.max_parallel;
    if (live->attempt) {
      view.running[r.experiment_id] += 1;
      stop_in_flight = stop_in_flight || Stopping(*live);
      // Every policy needs the running runs: quotas and fair share count what groups hold,
      // backfill when GPUs free up, and preemptive policies what they may stop.
      if (!live->placement.gpus.empty()) {
        const Attempt& a = *live->attempt;
        sched::RunningRun rr;
        rr.run_id = r.id;
        rr.priority = r.priority;
        rr.seq = r.id;
        rr.gpus = live->placement.gpus;
        rr.exclusive = live->placement.exclusive;
        rr.started_ms = a.started_ms;
        Millis running_ms = std::max<Millis>(0, now.mono - live->started_mono);
        rr.attained_gpu_ms =
            live->attained_gpu_ms + static_cast<Millis>(a.gpus.size()) * running_ms;
        rr.predicted_ms = predict(*live);
        rr.preemptible = spec.preemptible;
        rr.group = spec.group;
        view.active.push_back(std::move(rr));
      }
      continue;
    }
    if (live->cancel_requested) continue;
    sched::PendingRun p;
    p.run_id = r.id;
    p.experiment_id = r.experiment_id;
    p.priority = r.priority;
    p.seq = r.id;
    p.resources = r.resources;
    // The backoff waits on the monotonic clock; Decide() compares with wall time, so it gets the
    // same moment expressed in wall time now.
    p.not_before_ms =
        live->retry_at_mono > now.mono ? now.wall + (live->retry_at_mono - now.mono) : 0;
    p.submitted_ms = r.created_ms;
    p.attained_gpu_ms = live->attained_gpu_ms;
    p.predicted_ms = predict(*live);
    p.group = spec.group;
    queue.push_back(std::move(p));
  }
  if (queue.empty()) return;
  if (sizes_changed_ && policy_.kind == sched::PolicyKind::kGittins) {
    policy_.gittins = std::make_shared<const sched::GittinsIndex>(finished_sizes_);
    sizes_changed_ = false;
  }
  // The run the last preemption was for is offered the GPUs its victims free, before any other.
  if (preempt_for_ != 0 && (now.mono > preempt_for_until_mono_ || !live_.count(preempt_for_) ||
                            live_.at(preempt_for_)->attempt)) {
    preempt_for_ = 0;
  }
  view.first = preempt_for_;
  sched::Decision decision = sched::Decide(queue, view, now.wall, policy_);
  for (const auto& action : decision.starts) {
    auto it = live_.find(action.run_id);
    if (it != live_.end()) Launch(*it->second, action, now);
    if (action.run_id == preempt_for_) preempt_for_ = 0;
  }
  // While a run is being stopped its GPUs are about to be free, and Decide() cannot tell them
  // from busy ones: preempting more now could stop runs that need not stop. Once the stop is
  // over, the next pass sees the freed GPUs and preempts again only if still needed.
  if (decision.preempt.empty() || stop_in_flight) return;
  for (int64_t run_id : decision.preempt) {
    auto it = live_.find(run_id);
    if (it == live_.end() || !it->second->attempt || Stopping(*it->second)) continue;
    Preempt(*it->second, decision.preempt_why, now);
  }
  // Held for it until its victims are gone (at most the grace and a minute more).
  preempt_for_ = decision.preempt_for;
  preempt_for_until_mono_ = now.mono + options_.watch.scheduler.grace_ms + 60'000;
}

bool Engine::Stopping(const Live& live) const {
  return live.attempt && live.attempt->stopping.has_value();
}

bool Engine::Stop(Live& live, StopReason why, Instant now, Millis grace) {
  Attempt& a = *live.attempt;
  // A SIGKILL already scheduled is never pushed later by a second reason to stop.
  live.kill_at_mono = KillTime(live.kill_at_mono, now.mono + grace);
  if (a.stopping) return false;  // the first reason stands
  // Stored with the attempt, so a daemon restarted during the grace goes on stopping it for the
  // same reason (a preempted run that checkpoints and exits 0 has not finished).
  a.stopping = why;
  Tx();
  if (Status st = store_.UpdateAttempt(a); !st.ok()) Fail(st);
  launcher_.SignalGroup(static_cast<int>(a.pid), SIGTERM);
  return true;
}

void Engine::Preempt(Live& live, const std::string& why, Instant now) {
  Millis grace = options_.watch.scheduler.grace_ms;
  spdlog::info("run {}: preempting attempt {} ({}): SIGTERM now, SIGKILL in {} if it still runs",
               live.run.id, live.attempt->number, why, FormatDuration(grace));
  if (Stop(live, StopReason::kPreempt, now, grace)) live.preempt_why = why;
}

std::optional<Millis> Engine::Predict(const Live& live) const {
  return predictor_.Predict(live.exp->predictor_key, live.run.resources.gpus);
}

void Engine::SeedPredictor() {
  if (predictor_seeded_) return;
  predictor_seeded_ = true;
  // The newest succeeded runs, fed oldest first (the EWMA weighs the latest most). A run's time
  // is that of its succeeded attempt plus its preempted ones (the work its checkpoints kept).
  RunFilter filter;
  filter.state = RunState::kSucceeded;
  filter.newest_first = true;
  filter.limit = 2000;
  auto runs = store_.ListRuns(filter);
  if (!runs.ok()) {
    spdlog::warn("reading past run times for the duration predictor: {}",
                 runs.status().message());
    return;
  }
  std::map<int64_t, std::string> keys;  // experiment -> predictor key
  for (auto r = runs->rbegin(); r != runs->rend(); ++r) {
    auto key = keys.find(r->experiment_id);
    if (key == keys.end()) {
      auto e = store_.GetExperiment(r->experiment_id);
      std::string k = e.ok() && *e ? PredictorKey((*e)->name, r->params) : "";
      key = keys.emplace(r->experiment_id, k).first;
    }
    auto attempts = store_.ListAttempts(r->id);
    if (!attempts.ok() || key->second.empty()) continue;
    Millis ran = 0;
    for (const Attempt& a : *attempts) {
      auto outcome = ParseAttemptOutcome(a.reason);
      if (a.ended &&
          (outcome == AttemptOutcome::kSucceeded || outcome == AttemptOutcome::kPreempted) &&
          a.ended_ms >= a.started_ms) {
        ran += a.ended_ms - a.started_ms;
      }
    }
    if (ran > 0) LearnRunTime(key->second, r->resources.gpus, ran);
  }
}

void Engine::LearnRunTime(const std::string& key, int gpus, Millis run_ms) {
  predictor_.Observe(key, gpus, run_ms);
  constexpr size_t kKeep = 2000;
  if (finished_sizes_.size() >= kKeep) finished_sizes_.erase(finished_sizes_.begin());
  finished_sizes_.push_back(run_ms * std::max(1, gpus));
  sizes_changed_ = true;
}

std::vector<std::string> Engine::RunEnv(const Live& live, const Attempt& attempt) const {
  std::map<std::string, std::string> env;
  for (const auto& kv : options_.base_env) {
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // Output reaches the log as it is printed, so metrics and progress are live.
  env["PYTHONUNBUFFERED"] = "1";
  if (attempt.gpus.size() > 1) {
    // Multi-GPU runs: NCCL says what it does (the first thing to read when a collective hangs),
    // and stays off InfiniBand unless the spec turns it back on.
    env["NCCL_DEBUG"] = "INFO";
    env["NCCL_IB_DISABLE"] = "1";
  }
  for (const auto& [k, v] : live.exp->spec.env) env[k] = v;
  // A run sees only the GPUs it was given; a CPU run sees none.
  env["CUDA_VISIBLE_DEVICES"] = attempt.cuda_visible_devices;
  env["DROVER_RUN_ID"] = std::to_string(live.run.id);
  env["DROVER_EXPERIMENT_ID"] = std::to_string(live.run.experiment_id);
  env["DROVER_ATTEMPT"] = std::to_string(attempt.number);
  env["DROVER_PARAMS"] = attempt.params.dump();
  env["DROVER_STORE"] = options_.store_dir;
  // One folder per run, kept across attempts, so a retried run can resume from a checkpoint.
  env["DROVER_CHECKPOINT_DIR"] =
      RunFiles::In(options_.store_dir, live.run.experiment_id, live.run.id).checkpoints;
  // `import drover` works in every run: the client that ships with this drover comes first.
  if (!python_client_dir_.empty()) {
    auto it = env.find("PYTHONPATH");
    env["PYTHONPATH"] = it == env.end() || it->second.empty()
                            ? python_client_dir_
                            : python_client_dir_ + ":" + it->second;
  }
  // The shell's idea of the current folder must match the working copy, not where drover ran.
  env["PWD"] = attempt.workdir;
  env.erase("OLDPWD");
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

void Engine::Launch(Live& live, const sched::StartAction& action, Instant now) {
  Tx();
  Run& run = live.run;
  Attempt a;
  a.run_id = run.id;
  a.number = run.attempts + 1;
  a.params = run.current_params;
  a.gpus = action.gpus;
  std::vector<std::string> ids;
  for (int g : action.gpus) ids.push_back(std::to_string(g));
  a.cuda_visible_devices = Join(ids, ",");
  a.started_ms = now.wall;
  a.hostname = hostname_;
  a.drover_version = DROVER_VERSION;
  const RunFiles files = RunFiles::In(options_.store_dir, run.experiment_id, run.id);
  a.workdir = files.work;
  a.stdout_path = files.Stdout(a.number);
  a.stderr_path = files.Stderr(a.number);
  if (options_.use_shim) a.exit_path = files.Exit(a.number);

  live.last_output_mono = now.mono;
  live.started_mono = now.mono;
  live.output_bytes = 0;
  live.metric_lines = 0;
  live.watch = std::make_unique<watch::RunWatch>(live.exp->spec, options_.watch.detectors);
  run.attempts = a.number;
  if (run.started_ms == 0) run.started_ms = now.wall;
  run.final_metrics = Json::object();
  // Resources are held from now until the attempt ends, even if the launch fails below.
  Reserve(live, action);

  OverlayMount overlay;
  Status prepared = [&]() -> Status {
    DROVER_ASSIGN_OR_RETURN(a.argv, RenderCommand(live.exp->spec, a.params));
    if (!live.exp->logs_ready) {
      // One log folder per experiment, not per run (each folder is an inode).
      std::error_code ec;
      fs::create_directories(files.logs, ec);
      if (ec) return Status(Code::kIo, "creating " + files.logs + ": " + ec.message());
      live.exp->logs_ready = true;
    }
    // One working copy per run, from the immutable snapshot; retries reuse it.
    if (!working_copies_) {
      working_copies_ = std::make_unique<WorkingCopies>(
          options_.overlay_working_copies
              ? WorkingCopies::Probe(options_.store_dir + "/runs")
              : WorkingCopies::CopyOnly("overlay_working_copies is off"));
      if (!working_copies_->overlay()) {
        spdlog::info("working copies are copied, not mounted: {}", working_copies_->why_not());
      }
    }
    DROVER_ASSIGN_OR_RETURN(WorkingCopy wc, working_copies_->Prepare(live.exp->snapshot, files));
    overlay = wc.overlay;
    return Status::Ok();
  }();

  // The attempt is on disk before its process exists: an engine that dies right after the start
  // leaves a record that names the shim (by its exit file), so the next engine finds the run
  // instead of starting it a second time.
  Status st = store_.InsertAttempt(a);
  if (st.ok()) st = store_.UpdateRun(run);
  if (!st.ok()) Fail(st);
  if (options_.use_shim && !Flush().ok()) return;

  Status launch = prepared;
  if (launch.ok()) {
    LaunchSpec ls;
    ls.argv = a.argv;
    ls.env = RunEnv(live, a);
    ls.cwd = a.workdir;
    ls.stdout_path = a.stdout_path;
    ls.stderr_path = a.stderr_path;
    // The run starts under a shim that records how it ended here, so the end is known even if
    // this engine is gone by then.
    ls.exit_path = a.exit_path;
    ls.overlay = overlay;
    auto pid = launcher_.Start(ls);
    if (pid.ok()) {
      a.pid = *pid;
      a.pid_start = launcher_.StartTicks(*pid);
    } else {
      launch = pid.status();
    }
  }
  Tx();
  st = store_.UpdateAttempt(a);
  if (!st.ok()) Fail(st);
  live.attempt = a;
  if (!launch.ok()) {
    // Leave the reason where `drover logs --stderr` looks.
    std::error_code ec;
    fs::create_directories(files.logs, ec);
    if (FILE* f = std::fopen(a.stderr_path.c_str(), "a")) {
      std::fprintf(f, "drover: %s\n", launch.message().c_str());
      std::fclose(f);
    }
    SetState(live, RunEvent::kStart, "", now);
    EndAttempt(live, AttemptOutcome::kLaunchError, launch.message(), now);
    return;
  }
  pid_to_run_[a.pid] = run.id;
  live.deadline_mono = live.exp->spec.timeout_ms > 0 ? now.mono + live.exp->spec.timeout_ms : 0;
  live.kill_at_mono = 0;
  SetState(live, RunEvent::kStart,
           a.cuda_visible_devices.empty() ? "on CPU" : "on GPU " + a.cuda_visible_devices, now);
}

void Engine::Reserve(Live& live, const sched::StartAction& action) {
  live.placement = action;
  book_.Apply(action, live.run.resources.cpus);
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
  book_.Release(live.placement, live.run.resources.cpus);
  live.placement = {};
}

void Engine::HandleExit(const ProcessExit& exit, Instant now) {
  auto pit = pid_to_run_.find(exit.pid);
  if (pit == pid_to_run_.end()) return;
  auto it = live_.find(pit->second);
  pid_to_run_.erase(pit);
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
  AttemptOutcome outcome =
      exit.lost ? AttemptOutcome::kInterrupted
      : a.stopping
          ? OutcomeOf(*a.stopping, exit.exit_code == 0 && exit.signal == 0)
          : ClassifyExit(ExitFacts{exit.exit_code, exit.signal, tail});
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
    detail = "ran past the timeout of " + FormatDuration(live.exp->spec.timeout_ms);
  }
  if (outcome == AttemptOutcome::kStalled) {
    detail = "no output for " + FormatDuration(live.exp->spec.monitor.stall_ms);
  }
  if (outcome == AttemptOutcome::kPreempted) {
    size_t gpus = a.gpus.size();
    detail = fmt::format("preempted: {}; ran {} on {} GPU{}", live.preempt_why,
                         FormatDuration(now.mono - live.started_mono), gpus, gpus == 1 ? "" : "s");
  }
  EndAttempt(live, outcome, detail, now);
}

void Engine::EndAttempt(Live& live, AttemptOutcome outcome, const std::string& detail, Instant now) {
  Attempt& a = *live.attempt;
  a.ended = true;
  a.ended_ms = now.wall;
  a.reason = std::string(ToString(outcome));
  a.stopping.reset();
  Tx();
  Status st = store_.UpdateAttempt(a);
  if (!st.ok()) Fail(st);
  Release(live);
  // Every attempt's GPU time counts for the policies that rank by attained service (las,
  // default), a preempted one's too: that is what lets a long run wait its turn.
  const Millis ran = std::max<Millis>(0, now.mono - live.started_mono);
  live.attained_gpu_ms += ran * static_cast<Millis>(a.gpus.size());
  if (outcome == AttemptOutcome::kPreempted) live.preempted_ms += ran;
  live.preempt_why.clear();

  Run& run = live.run;
  run.reason = a.reason;
  Recovery rec = DecideRecovery(live.exp->spec, a.params, run.retries_used, outcome);
  // The same config failing again and again is not helped by another try: alert (also when the
  // retries are spent anyway) and stop retrying.
  bool may_retry = rec.event == RunEvent::kRetry;
  if ((may_retry || rec.event == RunEvent::kFail) && !live.cancel_requested &&
      RepeatedFailure(live, outcome, now.wall) && may_retry) {
    rec.event = RunEvent::kFail;
    rec.note = fmt::format("not retried: the same config failed {} times in a row",
                           options_.watch.detectors.failure_streak);
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
    LearnRunTime(live.exp->predictor_key, run.resources.gpus, live.preempted_ms + ran);
  }
  SetState(live, next, note, now);
  live.attempt.reset();
  live.deadline_mono = live.kill_at_mono = 0;
  if (IsFinal(run.state)) Retire(run.id);
}

void Engine::Retire(int64_t run_id) {
  auto it = live_.find(run_id);
  if (it == live_.end()) return;
  ExperimentEntry* exp = it->second->exp;
  live_.erase(it);
  if (--exp->unfinished == 0) {
    Tx();
    Status st = store_.UpdateExperimentStatus(exp->experiment.id, "done");
    if (!st.ok()) Fail(st);
  }
}

void Engine::CancelLive(Live& live, Instant now) {
  const bool again = live.cancel_requested;
  live.cancel_requested = true;
  if (live.attempt) {
    if (!again) Stop(live, StopReason::kCancel, now, options_.kill_grace_ms);
    if (force_kill_) live.kill_at_mono = now.mono;
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
  std::vector<int64_t> ids;
  for (const auto& [id, live] : live_) {
    if (live->run.experiment_id == experiment_id) ids.push_back(id);
  }
  Instant now = clock_.At();
  for (int64_t id : ids) {
    Live& live = *live_.at(id);
    CancelLive(live, now);
    if (!live.attempt) Retire(id);
  }
  return Flush();
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
  Tx();
  Status st = store_.UpdateRun(it->second->run);
  if (!st.ok()) Fail(st);
  return Flush();
}

std::vector<GpuView> Engine::GpuViews() const {
  std::vector<GpuView> out;
  for (const auto& g : book_.gpus()) {
    GpuView v;
    v.state = g;
    for (const auto& [id, live] : live_) {
      const auto& p = live->placement.gpus;
      if (live->attempt && std::find(p.begin(), p.end(), g.index) != p.end()) v.runs.push_back(id);
    }
    out.push_back(std::move(v));
  }
  return out;
}

Result<RecoverySummary> Engine::Recover() {
  DROVER_RETURN_IF_ERROR(InitGpus());
  RecoverySummary summary;
  DROVER_ASSIGN_OR_RETURN(auto experiments, store_.ListExperiments());
  Instant now = clock_.At();
  // Oldest first, so runs keep their submit order.
  for (auto e = experiments.rbegin(); e != experiments.rend(); ++e) {
    if (e->status != "active" || experiments_.count(e->id)) continue;
    RunFilter filter;
    filter.experiment_id = e->id;
    DROVER_ASSIGN_OR_RETURN(auto runs, store_.ListRuns(filter));
    auto entry = std::make_unique<ExperimentEntry>();
    entry->experiment = *e;
    DROVER_ASSIGN_OR_RETURN(entry->spec, SpecFromJson(e->spec));
    entry->predictor_key = PredictorKey(entry->spec.name, entry->spec.params);
    DROVER_ASSIGN_OR_RETURN(auto snap, store_.GetSnapshot(e->snapshot_hash));
    if (snap) entry->snapshot = *snap;
    ExperimentEntry* ep = entry.get();
    experiments_[e->id] = std::move(entry);
    ++summary.experiments;
    std::vector<std::pair<int64_t, ProcessExit>> ended;
    for (const Run& r : runs) {
      if (IsFinal(r.state)) continue;
      auto live = std::make_unique<Live>();
      live->run = r;
      live->exp = ep;
      if (r.not_before_ms > now.wall) live->retry_at_mono = now.mono + (r.not_before_ms - now.wall);
      ep->unfinished += 1;
      Live& l = *live;
      live_[r.id] = std::move(live);
      std::vector<Attempt> attempts;
      if (r.attempts > 0 || r.state == RunState::kRunning) {
        DROVER_ASSIGN_OR_RETURN(attempts, store_.ListAttempts(r.id));
      }
      // The GPU time its earlier attempts had still counts (las, default).
      for (const Attempt& a : attempts) {
        if (!a.ended || a.ended_ms < a.started_ms) continue;
        l.attained_gpu_ms += (a.ended_ms - a.started_ms) * static_cast<Millis>(a.gpus.size());
        if (ParseAttemptOutcome(a.reason) == AttemptOutcome::kPreempted) {
          l.preempted_ms += a.ended_ms - a.started_ms;
        }
      }
      if (r.state != RunState::kRunning) {
        ++summary.queued;
        continue;
      }
      if (attempts.empty() || attempts.back().ended) {
        // Recorded as running with no live attempt: the engine died between two writes.
        SetState(l, RunEvent::kRetry, "requeued: it had no live attempt after a restart", now);
        ++summary.requeued;
        continue;
      }
      const Attempt& a = attempts.back();
      sched::StartAction placement;
      placement.run_id = r.id;
      placement.gpus = a.gpus;
      placement.exclusive = r.resources.gpus > 0 && r.resources.gpu_memory == 0;
      for (const auto& g : book_.gpus()) {
        if (std::find(a.gpus.begin(), a.gpus.end(), g.index) == a.gpus.end()) continue;
        placement.gpu_memory = placement.exclusive ? g.capacity : r.resources.gpu_memory;
      }
      l.attempt = a;
      if (a.stopping) {
        // Being stopped when the last engine went: it still is, for the same reason (SIGKILL
        // after a new grace).
        const bool preempt = *a.stopping == StopReason::kPreempt;
        if (preempt) l.preempt_why = "it was being preempted when the daemon restarted";
        if (*a.stopping == StopReason::kCancel) l.cancel_requested = true;
        l.kill_at_mono =
            now.mono + (preempt ? options_.watch.scheduler.grace_ms : options_.kill_grace_ms);
      }
      l.watch = std::make_unique<watch::RunWatch>(l.exp->spec, options_.watch.detectors);
      Reserve(l, placement);
      // What the last engine knew as wall times becomes monotonic deadlines from here on.
      l.started_mono = now.mono - std::max<Millis>(0, now.wall - a.started_ms);
      l.deadline_mono = l.exp->spec.timeout_ms > 0 ? l.started_mono + l.exp->spec.timeout_ms : 0;
      l.last_output_mono = now.mono;
      if (a.pid == 0 && !a.exit_path.empty()) {
        // The engine died between recording the attempt and learning its pid: the shim's pid
        // file names it. Without one, the shim never got to start the run.
        if (auto start = ReadShimStart(a.exit_path); start.ok()) {
          l.attempt->pid = start->pid;
          l.attempt->pid_start = start->start_ticks;
          Tx();
          if (Status st = store_.UpdateAttempt(*l.attempt); !st.ok()) Fail(st);
        }
      }
      const Attempt& known = *l.attempt;
      int pid = static_cast<int>(known.pid);
      bool alive = pid > 0 && known.pid_start > 0 && launcher_.StartTicks(pid) == known.pid_start;
      if (alive && known.exit_path.empty()) {
        // Started without a shim by an engine that is gone: nobody can learn how it ends, so it
        // is stopped and run again rather than left running unwatched.
        launcher_.SignalGroup(pid, SIGKILL);
        alive = false;
      }
      if (alive) {
        launcher_.Adopt(pid, known.pid_start, known.exit_path);
        pid_to_run_[pid] = r.id;
        ++summary.adopted;
        continue;
      }
      ProcessExit exit;
      exit.pid = pid;
      auto recorded = a.exit_path.empty() ? Result<ProcessExit>(NotFound("no exit file"))
                                          : ReadExitFile(a.exit_path);
      if (recorded.ok()) {
        exit.exit_code = recorded->exit_code;
        exit.signal = recorded->signal;
        ++summary.finished;
      } else {
        exit.lost = true;
        ++summary.requeued;
      }
      ended.emplace_back(r.id, exit);
    }
    // Ends are handled after the experiment's runs are all registered, so Retire counts right.
    for (auto& [run_id, exit] : ended) {
      pid_to_run_[exit.pid] = run_id;
      HandleExit(exit, now);
    }
    if (ep->unfinished == 0) {
      Tx();
      if (Status st = store_.UpdateExperimentStatus(e->id, "done"); !st.ok()) Fail(st);
    }
  }
  DROVER_RETURN_IF_ERROR(Flush());
  return summary;
}

void Engine::CheckDeadlines(Instant now) {
  for (auto& [id, live] : live_) {
    if (!live->attempt) continue;
    int pid = static_cast<int>(live->attempt->pid);
    if (live->deadline_mono > 0 && now.mono >= live->deadline_mono && !Stopping(*live)) {
      Stop(*live, StopReason::kTimeout, now, options_.kill_grace_ms);
    }
    Millis stall = live->exp->spec.monitor.stall_ms;
    if (stall > 0 && !Stopping(*live) && now.mono - live->last_output_mono >= stall) {
      watch::Finding f;
      f.kind = "stalled";
      f.message = fmt::format(
          "run {} printed nothing for {}: stopping attempt {} (retried per the spec's retries)",
          live->run.id, FormatDuration(stall), live->attempt->number);
      f.data = {{"stall_ms", stall},
                {"last_output_ms", now.wall - (now.mono - live->last_output_mono)}};
      RaiseRunAlert(*live, f, "stalled", now.wall);
      Stop(*live, StopReason::kStall, now, options_.kill_grace_ms);
    }
    if (live->kill_at_mono > 0 && now.mono >= live->kill_at_mono) {
      launcher_.SignalGroup(pid, SIGKILL);
      live->kill_at_mono = 0;
    }
  }
}

Millis Engine::NextWakeup(Instant now) const {
  Millis next = now.mono + options_.tail_interval_ms;
  if (!devices_.empty() && options_.watch.telemetry_period_ms > 0) {
    next = std::min(next, next_sample_mono_);
  }
  for (const auto& [id, live] : live_) {
    if (live->attempt) {
      const bool stopping = Stopping(*live);
      if (live->deadline_mono > 0 && !stopping) next = std::min(next, live->deadline_mono);
      if (live->kill_at_mono > 0) next = std::min(next, live->kill_at_mono);
      Millis stall = live->exp->spec.monitor.stall_ms;
      if (stall > 0 && !stopping) next = std::min(next, live->last_output_mono + stall);
    } else if (live->retry_at_mono > now.mono) {
      next = std::min(next, live->retry_at_mono);
    }
  }
  return std::max<Millis>(0, next - now.mono);
}

void Engine::TailMetrics(Live& live, bool final, Instant now) {
  Attempt& a = *live.attempt;
  std::vector<MetricPoint> points;
  auto offset = ReadNewLines(a.stdout_path, a.stdout_offset, final, [&](std::string_view line) {
    OnRunAlertLine(live, line, now.wall);
    auto m = ParseMetricLine(line, live.metric_lines);
    if (!m) return;
    ++live.metric_lines;
    for (auto& [name, value] : m->values) {
      MetricPoint p;
      p.run_id = a.run_id;
      p.attempt_id = a.id;
      p.step = m->step;
      p.name = name;
      p.value = value;
      p.t_ms = now.wall;
      live.run.final_metrics[name] = value;
      if (!std::isfinite(value) && !Stopping(live) && live.exp->spec.monitor.stop_on_nan &&
          Watched(live.exp->spec, name)) {
        // A diverged run only burns GPU time from here on: stop it now.
        Stop(live, StopReason::kDiverged, now, options_.kill_grace_ms);
        spdlog::info("run {}: {} is {} at step {}: stopping it as diverged", a.run_id, name, value,
                     m->step);
        watch::Finding f;
        f.kind = "diverged";
        f.severity = "error";
        f.message = fmt::format("{} became {} at step {}: stopped the run as diverged", name,
                                std::isnan(value) ? "NaN" : "infinite", m->step);
        f.data = {{"metric", name}, {"step", m->step}};
        RaiseRunAlert(live, f, "diverged", now.wall);
      }
      points.push_back(std::move(p));
    }
  });
  if (!offset.ok()) {
    spdlog::warn("run {}: {}", a.run_id, offset.status().message());
    return;
  }
  if (live.exp->spec.monitor.stall_ms > 0) {
    // Any output counts as progress, stderr too (tqdm bars, warnings).
    std::error_code ec;
    int64_t bytes = static_cast<int64_t>(fs::file_size(a.stdout_path, ec));
    if (ec) bytes = 0;
    int64_t err_bytes = static_cast<int64_t>(fs::file_size(a.stderr_path, ec));
    if (!ec) bytes += err_bytes;
    if (bytes != live.output_bytes) {
      live.output_bytes = bytes;
      live.last_output_mono = now.mono;
    }
  }
  if (*offset == a.stdout_offset) return;
  a.stdout_offset = *offset;
  Tx();
  // Points and the offset they reach land in one transaction, so none is lost or stored twice.
  Status st = store_.InsertMetrics(points);
  if (st.ok()) st = store_.UpdateAttempt(a);
  if (st.ok()) st = store_.UpdateRun(live.run);
  if (!st.ok()) Fail(st);
  WatchPoints(live, points, now.wall);
  if (!points.empty()) {
    Notify([this, run = live.run, points] { observer_->OnMetrics(run, points); });
  }
}

}  // namespace drover
