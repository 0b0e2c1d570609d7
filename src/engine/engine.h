#pragma once
// The engine owns the loop: it asks the scheduler what to start, starts attempts through the
// ProcessLauncher, reads their metrics from the log files, decides retries, and is the only
// writer to the store (one transaction per loop iteration). `drover run` hosts it in the
// foreground; the same code will sit behind the daemon.
#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/alert_desk.h"
#include "engine/attempt_setup.h"
#include "engine/commands.h"
#include "engine/engine_observer.h"
#include "engine/engine_options.h"
#include "engine/environments.h"
#include "engine/fail_fast.h"
#include "engine/gpu_pool.h"
#include "engine/health_watch.h"
#include "engine/pipelines.h"
#include "engine/pool.h"
#include "engine/prepared_submit.h"
#include "engine/retrying.h"
#include "engine/run_queue.h"
#include "engine/scheduling.h"
#include "engine/search_driver.h"
#include "engine/telemetry_sampler.h"
#include "exec/process_launcher.h"
#include "gpu/gpu_probe.h"
#include "metrics/metric_tail.h"
#include "model/run.h"
#include "model/run_state.h"
#include "model/spec.h"
#include "sched/scheduler.h"
#include "store/store.h"
#include "watch/watchers.h"

namespace drover {

class Engine {
 public:
  Engine(Store& store, ProcessLauncher& launcher, GpuProbe& gpus, Clock& clock,
         EngineOptions options);
  ~Engine();

  // Snapshots the workdir, expands the grid, records the experiment and its queued runs:
  // CheckSubmit, PrepareSubmit and Commit in one call (drover run, before its loop).
  Result<SubmitResult> Submit(const Spec& spec);
  // Whether runs of this spec could ever start on this pool (loop thread).
  Status CheckSubmit(const Spec& spec);
  // Records a prepared experiment and queues its runs; its environment is captured in the
  // background and stored when ready (loop thread).
  Result<SubmitResult> Commit(PreparedSubmit prepared);

  // Takes over every unfinished run in the store: queued ones are scheduled again, running ones
  // whose shim still lives (same pid and start time) are adopted, those that ended meanwhile get
  // their end from the shim's exit file, the rest are marked interrupted and requeued. Call once,
  // before the loop.
  Result<RecoverySummary> Recover();

  // Runs until every submitted run is final. An interrupt (SIGINT/SIGTERM to drover) cancels
  // every run: SIGTERM to each process group, SIGKILL after the grace period, at once on a second
  // interrupt. Returns an error only when the store fails.
  Status RunUntilDone(EngineObserver* observer);

  // The daemon's loop: like RunUntilDone but it keeps running when idle, picks up posted
  // commands, and on SIGINT/SIGTERM drains (nothing new starts; runs are left for adoption, or
  // stopped and requeued with options.stop_runs_on_drain) and returns.
  Status Serve(EngineObserver* observer);
  // From any thread, before the interrupt that drains the daemon: stop its runs when it drains
  // (as --stop-runs), e.g. because its store folder is gone and no engine will adopt them.
  void StopRunsOnDrain() { stop_runs_on_drain_ = true; }
  // Queues a command for the loop's thread and returns the future of its reply (thread-safe;
  // the daemon's HTTP workers use it). Commands not dispatched when the loop ends are refused.
  std::future<Result<CommandReply>> Post(Command command);
  // Carries out one command (on the loop's thread: Serve calls it for each posted one).
  Result<CommandReply> Dispatch(Command& command);

  // The commands of commands.h, on the loop's thread (each documented at its definition): what
  // Dispatch carries out, called directly by drover run before its loop and by tests.
  Result<std::vector<Run>> Retry(const cmd::Retry& which);
  Result<Cleanup> Remove(const cmd::Remove& which);
  Result<Cleanup> CollectGarbage(const cmd::CollectGarbage& how);
  Status CancelRun(int64_t run_id);
  Status CancelExperiment(int64_t experiment_id);
  Status SetPriority(int64_t run_id, int priority);
  // The GPUs, the runs on each and the latest telemetry reading (empty before the first).
  GpuReading ReadGpus() const;
  bool interrupted() const { return interrupted_; }
  const std::vector<sched::GpuState>& gpus() const { return pool_.gpus(); }
  int cpu_slots() const { return options_.cpu_slots; }
  const std::string& store_dir() const { return options_.store_dir; }
  bool runs_as_submitter() const { return options_.runs_as_submitter; }
  // For tests: whether the index of running and waiting runs (engine/run_queue.h) agrees with the
  // runs themselves; an error names the first run where it does not.
  Status CheckIndex() const;
  // Why queued runs wait (drover why), as of the engine's last look (at most
  // Scheduling::kExplainEveryMs old). Any thread.
  const WaitBoard& waiting() const { return scheduling_.waiting(); }

 private:
  using Live = LiveRun;
  class Context;  // the engine as its components' EngineContext, SearchHost, RunTable (engine.cc)
  class TailHostFor;  // engine_metrics.cc

  // The loop (engine.cc): one pass, its transaction, a store stall, interrupts, commands.
  Status Loop(EngineObserver* observer, bool serve);
  Status InitGpus();
  void Tx();
  Status Flush();
  void Fail(Status st);
  // Calls the observer now, or after the open transaction commits (dropped if it rolls back).
  void Notify(std::function<void()> note);
  void EnterStall(const Status& why, Instant now);
  Status StallRefusal(std::string_view what) const;
  void StalledPass(Instant now);
  void LeaveStall(Instant now);
  void RunCommands();
  void RefuseCommands();
  void TakeRequests();
  void TakeNews(const WaitResult& w, Instant now, bool serve);
  void OnInterrupt(int signal, Instant now, bool serve);
  void ApplyCancel(Instant now);
  void StopEverything();
  void CheckDeadlines(Instant now);
  Millis NextWakeup(Instant now) const;

  // What a scheduling pass decided (Scheduling, through Context), and drover why (engine_why.cc).
  void Preempt(Live& live, const std::string& why, Instant now);
  void ExplainWaiting(Instant now);

  // The run table and an attempt's life (engine_attempt.cc, engine_adopt.cc, engine_submit.cc).
  Result<ExperimentEntry*> EntryFor(const Experiment& e);
  static void CountEarlierAttempts(Live& live, const std::vector<Attempt>& attempts);
  bool Launch(Live& live, const sched::StartAction& action, Instant now);
  void HoldStarts(const Live& live, const Status& why, Instant now);
  void ReleaseStarts(Instant now);
  void Reserve(Live& live, const sched::StartAction& action);
  void Release(Live& live);
  int SlotsOf(const Live& live) const;
  void RecordStart(Live& live, Attempt a, const Status& launch, Instant now);
  void HandleStarted(const StartOutcome& started, Instant now);
  void HandlePlacement(const PlacementNews& news, Instant now);
  void HandleExit(const ProcessExit& exit, Instant now);
  void EndAttempt(Live& live, AttemptOutcome outcome, const std::string& detail, Instant now);
  bool ForgetUnrecordedStart(Live& live, Instant now);
  bool RecordUnrecordedStart(Live& live, Instant now);
  bool StartedUnrecorded(Live& live);
  bool Stop(Live& live, StopReason why, Instant now, Millis grace);
  bool EndHeld(const Live& live) const;
  void CancelLive(Live& live, Instant now);
  void SetState(Live& live, RunEvent event, const std::string& note, Instant now);
  void Queue(const Live& live);
  void Retire(int64_t run_id);
  // Whether attempts run as jobs of an executor that places them (Slurm): then drover's pool is
  // executor.max_jobs attempts at once, each one slot, and the GPUs are the executor's to give.
  bool placed_by_executor() const { return launcher_.kind() != ExecutorKind::kLocal; }
  static ExecHandle HandleOf(const Attempt& a) { return ExecHandle(a.pid); }

  // What a running attempt shows (engine_metrics.cc, engine_watch.cc).
  void NoteOutput(Live& live, Instant now);
  void TailMetrics(Live& live, bool final, Instant now);
  void WatchPoints(Live& live, const std::vector<MetricPoint>& points, Millis now);
  void SampleTelemetry(Instant now);

  // Searches (engine_search.cc): the search driver asks for trials (SearchHost::MakeTrial).
  void TopUpSearch(ExperimentEntry& ep);
  void TakeProposals();
  void MaybeDone(ExperimentEntry& ep);
  Result<Run> MakeTrial(ExperimentEntry& ep, Json params, int index, TrialOrigin origin);
  Result<ExperimentEntry*> SearchOf(int64_t experiment_id);
  Result<CommandReply> AskTell(Command& command);
  int StopFailing(int64_t experiment_id, const std::string& note, Instant now);

  Store& store_;
  ProcessLauncher& launcher_;
  GpuProbe& probe_;
  Clock& clock_;
  EngineOptions options_;
  std::string hostname_;

  std::map<int64_t, std::unique_ptr<ExperimentEntry>> experiments_;
  std::map<int64_t, std::unique_ptr<Live>> live_;  // runs not yet final, by run id
  RunQueue queue_;  // live_ indexed: running ones, waiting ones by class
  std::map<ExecHandle, int64_t> by_handle_;  // running attempts' runs, by the executor's handle
  std::map<int64_t, int64_t> starting_;  // BeginStart ticket -> run id, until it is reported
  bool in_tx_ = false;
  Status error_;
  // A commit that failed for want of room and is retried with backoff (EnterStall).
  std::optional<StoreStall> stall_;
  // No run starts before retry_mono: the last one could not be prepared (Launch).
  std::optional<StartHold> start_hold_;
  bool cancel_requested_ = false;
  bool force_kill_ = false;
  bool interrupted_ = false;
  bool draining_ = false;
  bool serve_ = false;  // Serve (a daemon) rather than RunUntilDone
  CommandInbox inbox_;  // posted by other threads, dispatched by RunCommands
  Millis next_tail_mono_ = 0;
  Millis next_request_mono_ = 0;  // a foreground engine next looks for requests (requests.h)
  Millis last_commit_mono_ = 0;
  std::vector<std::function<void()>> unsent_notes_;   // observer calls, made after commit
  EngineObserver* observer_ = nullptr;
  std::atomic<bool> stop_runs_on_drain_{false};
  // Components (docs/architecture.md): each keeps its own state by run or experiment; those in
  // components_ are told of a run's life through RunLifecycle, in that order.
  std::unique_ptr<Context> context_;
  AlertDesk alerts_;  // alerts stored, deduplicated, budgeted, sent after their commit
  MetricTail tail_;     // the running attempts' metric sources
  watch::RunWatchers watchers_;  // each running attempt's detectors
  GpuPool pool_;  // the GPUs, what runs hold of them and of the CPU slots, the machine's leases
  Pipelines pipelines_;  // needs, twins, the cache, stages' outputs (engine/pipelines.h)
  SearchDriver search_;  // searches' trials and pruners, the proposer
  FailFast fail_fast_;   // experiments whose first runs all failed the same way, stopped
  HealthWatch health_;   // GPU health findings and drains (the drain book)
  TelemetrySampler sampler_;  // GPU readings: stored, to health and the detectors
  AttemptSetup setup_;  // an attempt's files, working copy, environment, rights
  Environments environments_;  // each experiment's packages and machine, listed off the loop
  Scheduling scheduling_;  // passes of the scheduler over the run table; why runs wait
  std::vector<RunLifecycle*> components_;
};

}  // namespace drover
