#pragma once
// The commands drover runs against Slurm (issue 17's executor), behind one narrow interface so
// the executor can be tested with a fake: submit an attempt's job (sbatch), list every job
// (squeue as text, this user's: one query a round for all of drover's jobs, never one per job;
// jobs.h's kSqueueFormat), learn how jobs
// that squeue no longer lists ended (sacct over a bounded window: the accounting database where
// there is one, else the jobcomp file with -c), cancel or signal a job (scancel). Each command has
// a timeout, and the count of commands run is kept (bench/ reports it per run).
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "slurm/jobs.h"
#include "slurm/sbatch.h"

namespace drover::slurm {

class Cluster {
 public:
  virtual ~Cluster() = default;
  // Writes the batch script at s.script_path and submits it: the job id. An error carries what
  // sbatch said ("Requested node configuration is not available").
  virtual Result<int64_t> Submit(const Target& target, const Submission& s) = 0;
  // Every job of this user Slurm lists now.
  virtual Result<std::vector<Job>> List() = 0;
  // Jobs that ended since `since_s` (Unix seconds), as the accounting records them.
  virtual Result<std::vector<Job>> Ended(int64_t since_s) = 0;
  // scancel (signal 0) or scancel --signal=SIG --full (the job's whole process tree).
  virtual Status Cancel(int64_t job_id, int signal) = 0;
  // Slurm commands run so far.
  virtual int64_t commands() const = 0;
};

struct CommandClusterOptions {
  int64_t timeout_ms = 30'000;  // a command still running after this fails as Unavailable
  // Where sacct reads ended jobs: "auto" (the database when sacct answers without -c, else the
  // jobcomp file), "database", or "jobcomp" (-c).
  std::string accounting = "auto";
};

// Runs Slurm's own commands (found in PATH).
class CommandCluster : public Cluster {
 public:
  explicit CommandCluster(CommandClusterOptions options = {}) : options_(std::move(options)) {}
  Result<int64_t> Submit(const Target& target, const Submission& s) override;
  Result<std::vector<Job>> List() override;
  Result<std::vector<Job>> Ended(int64_t since_s) override;
  Status Cancel(int64_t job_id, int signal) override;
  int64_t commands() const override { return commands_; }
  // `sbatch --test-only`: whether Slurm would take a job asking for this (nothing is submitted);
  // FailedPrecondition with what sbatch said when it would not. `drover run --dry-run` asks it.
  Status WouldAccept(const Target& target, const Submission& s);

 private:
  // The command's stdout and stderr together, and its exit code.
  Result<std::pair<int, std::string>> Call(const std::vector<std::string>& argv);
  CommandClusterOptions options_;
  int64_t commands_ = 0;
  int database_ = -1;  // -1 not known yet, 0 no (sacct -c), 1 yes
};

}  // namespace drover::slurm
