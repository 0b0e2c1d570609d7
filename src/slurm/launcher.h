#pragma once
// The Slurm executor (docs/slurm.md): the engine's launcher when attempts run as Slurm jobs. Each
// attempt is one job (sbatch), its handle the job id; its state comes from one batched query a
// round for all of drover's jobs (Tracker); a cancel or a kill is scancel; a job that Slurm ends,
// preempts, requeues or forgets is reported as the attempt's end, with the outcome Slurm knows
// (TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY) where the exit status alone would not say it.
// Placement is Slurm's: CUDA_VISIBLE_DEVICES is what Slurm gives the job, not drover's.
//
// Interrupts (Ctrl-C, SIGTERM to the daemon) and Wake() come from a local launcher that this one
// waits on between rounds: its signalfd and eventfd are the engine's (exec/posix_launcher.h).
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "exec/process_launcher.h"
#include "slurm/cluster.h"
#include "slurm/tracker.h"

namespace drover::slurm {

class SlurmLauncher : public ProcessLauncher {
 public:
  // `defaults`: the daemon's (or drover run's) executor; a spec's executor: overrides its
  // partition, account and QOS and adds sbatch flags. `local` is waited on for interrupts and
  // wakes; it starts nothing here.
  SlurmLauncher(Cluster& cluster, ProcessLauncher& local, Clock& clock, std::string store_id,
                ExecutorSpec defaults);

  ExecutorKind kind() const override { return ExecutorKind::kSlurm; }
  // Submits the attempt (LaunchSpec::request says which and what it asks for); the job id.
  Result<ExecHandle> Start(const LaunchSpec& spec) override;
  // kTerminate: scancel (Slurm sends SIGTERM, then SIGKILL after its KillWait); kKill: scancel
  // --signal=KILL.
  void Stop(ExecHandle job, StopSignal how) override;
  WaitResult Wait(int64_t timeout_ms) override;
  // kListed for a job of this store that Slurm lists (or listed when this launcher started), so
  // the engine adopts it; 0 otherwise (it then reads the job's exit record).
  int64_t Identity(ExecHandle job) override;
  // No local GPUs are booked for a job: an attempt started by the last engine is taken over as
  // it is ("" for CUDA_VISIBLE_DEVICES).
  std::optional<std::string> EnvOf(ExecHandle job, const std::string& name) override;
  void Adopt(ExecHandle job, int64_t identity, const ExitRecordAt& record) override;
  Json PlacedAs(ExecHandle job) override;
  std::string StartNote(ExecHandle job) override;
  // Its state is SUBMITTED or PENDING (or not known yet).
  bool WaitsToRun(const Json& placement) const override;
  void Wake() override { local_.Wake(); }

  // Before the engine's recovery: the store's jobs Slurm lists (one squeue) and those the
  // accounting says ended in the last kAccountingWindowS (one sacct), so adoption can tell which
  // live and how the others ended.
  Status BeginRecovery() override;
  // After it: jobs of this store that Slurm lists and no attempt was adopted for (a submit the
  // last engine did not get to record, or a run since removed) are cancelled, so nothing runs
  // twice.
  void EndRecovery() override;

  // The value Identity gives a listed job (and what an attempt's pid_start holds).
  static constexpr int64_t kListed = 1;
  // How far back a restart reads the accounting for jobs that ended while no daemon ran.
  static constexpr int64_t kAccountingWindowS = 14 * 24 * 3600;
  int64_t commands() const { return cluster_.commands(); }
  size_t followed() const { return tracker_.followed(); }

 private:
  struct Attempt {
    int64_t run_id = 0;
    int number = 0;
    std::string record;  // the exit file
    std::string partition;
  };
  void Report(const JobEvent& e, WaitResult* out);
  Json Placement(int64_t job_id, const Job& job, const std::string& state) const;

  Cluster& cluster_;
  ProcessLauncher& local_;
  Clock& clock_;
  std::string store_id_;
  ExecutorSpec defaults_;
  Tracker tracker_;
  std::map<int64_t, Attempt> attempts_;   // followed jobs, by id
  std::map<int64_t, JobEvent> listed_;    // Discover(): the store's jobs Slurm listed
  std::set<int64_t> claimed_;             // adopted or started by this launcher
  WaitResult pending_;                    // reported at the next Wait()
  std::string poll_error_;                // the last failed round's error, logged once
};

}  // namespace drover::slurm
