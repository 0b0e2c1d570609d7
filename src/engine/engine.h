#pragma once
// The engine owns the loop: it asks the scheduler what to start, starts attempts through the
// ProcessLauncher, reads their metrics from the log files, decides retries, and is the only
// writer to the store (one transaction per loop iteration). `drover run` hosts it in the
// foreground; the same code will sit behind the daemon.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "exec/process_launcher.h"
#include "gpu/gpu_probe.h"
#include "model/run.h"
#include "model/spec.h"
#include "sched/scheduler.h"
#include "store/store.h"

namespace drover {

struct EngineOptions {
  std::string store_dir;              // holds drover.db, snapshots/ and runs/
  int cpu_slots = 0;                  // CPU slots shared by all runs; <= 0: the number of CPUs
  Millis kill_grace_ms = 5000;        // SIGTERM, then SIGKILL this much later
  Millis tail_interval_ms = 250;      // how often running attempts' stdout is read for metrics
  std::vector<std::string> base_env;  // environment every run inherits ("K=V"); default: ours
  bool capture_environment = true;    // package list of the interpreter, GPU info
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // A run changed state (attempt is the attempt that started or ended, if any).
  virtual void OnRunChanged(const Run& run, const Attempt* attempt, const std::string& note) {}
  virtual void OnMetrics(const Run& run, const std::vector<MetricPoint>& points) {}
  virtual void OnTick() {}  // once per loop iteration, for redrawing a live view
  // An interrupt is stopping `running` runs: SIGTERM now and SIGKILL after `grace_ms`, or SIGKILL
  // at once when `force` (a second interrupt).
  virtual void OnStopping(int running, bool force, Millis grace_ms) {}
};

struct SubmitResult {
  int64_t experiment_id = 0;
  std::vector<Run> runs;
  Snapshot snapshot;
};

class Engine {
 public:
  Engine(Store& store, ProcessLauncher& launcher, GpuProbe& gpus, Clock& clock,
         EngineOptions options);
  ~Engine();

  // Snapshots the workdir, expands the grid, records the experiment and its queued runs.
  Result<SubmitResult> Submit(const Spec& spec);

  // Runs until every submitted run is final. An interrupt (SIGINT/SIGTERM to drover) cancels
  // every run: SIGTERM to each process group, SIGKILL after the grace period, at once on a second
  // interrupt. Returns an error only when the store fails.
  Status RunUntilDone(EngineObserver* observer);

  void RequestCancelAll() { cancel_requested_ = true; }
  bool interrupted() const { return interrupted_; }
  const std::vector<sched::GpuState>& gpus() const { return gpus_; }
  int cpu_slots() const { return options_.cpu_slots; }

 private:
  struct Live;
  struct ExperimentEntry;

  Status InitGpus();
  void Tx();
  Status Flush();
  void Fail(Status st);
  void Schedule(Millis now);
  void Launch(Live& live, const sched::StartAction& action, Millis now);
  void HandleExit(const ProcessExit& exit, Millis now);
  void EndAttempt(Live& live, AttemptOutcome outcome, const std::string& detail, Millis now);
  void ApplyCancel(Millis now);
  void OnInterrupt(int signal, Millis now);
  void StopEverything();
  void CheckDeadlines(Millis now);
  void TailMetrics(Live& live, bool final, Millis now);
  Millis NextWakeup(Millis now) const;
  void SetState(Live& live, RunState state, const std::string& note, Millis now);
  void Release(Live& live);
  void Retire(int64_t run_id);
  std::vector<std::string> RunEnv(const Live& live, const Attempt& attempt) const;
  void CaptureEnvironment(int64_t experiment_id, const std::vector<Run>& runs, const Spec& spec);

  Store& store_;
  ProcessLauncher& launcher_;
  GpuProbe& probe_;
  Clock& clock_;
  EngineOptions options_;
  std::string hostname_;

  std::vector<sched::GpuState> gpus_;
  bool gpus_ready_ = false;
  int cpu_slots_used_ = 0;
  std::map<int64_t, std::unique_ptr<ExperimentEntry>> experiments_;
  std::map<int64_t, std::unique_ptr<Live>> live_;  // runs not yet final, by run id
  std::map<int, int64_t> pid_to_run_;
  bool in_tx_ = false;
  Status error_;
  bool cancel_requested_ = false;
  bool force_kill_ = false;
  bool interrupted_ = false;
  Millis next_tail_ms_ = 0;
  EngineObserver* observer_ = nullptr;
};

}  // namespace drover
