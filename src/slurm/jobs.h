#pragma once
// What drover reads of Slurm about its jobs, and what that means for an attempt (issue 17's
// Slurm executor; docs/slurm.md): the answers of `squeue --json -t all` (openapi v0.0.38, Slurm
// 22.05) and of `sacct -P` / `sacct -c -P` (with or without an accounting database), parsed into
// typed jobs; each job's state judged as waiting, running, ended (with the attempt's outcome, exit
// code and signal), back in the queue (preempted or requeued: a new attempt that spends no retry)
// or lost (Slurm forgot it or says UNKNOWN: retried, never a success); the job name that carries
// an attempt's identity, so a reused job id is never taken for drover's. Pure: the executor runs
// the commands. Test data: tests/slurm/data/ (written by a real Slurm, tests/slurm/README.md).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/run.h"

namespace drover::slurm {

// Slurm's job states (squeue's job_state, sacct's State without "by <uid>").
enum class JobState {
  kPending,
  kRunning,
  kCompleting,
  kSuspended,
  kCompleted,
  kFailed,
  kTimeout,
  kCancelled,
  kPreempted,
  kNodeFail,
  kOutOfMemory,
  kBootFail,
  kDeadline,
  kRequeued,  // REQUEUED, REQUEUE_FED, REQUEUE_HOLD
  kUnknown,   // a state this drover does not know, or none
};
std::string_view ToString(JobState s);
// "CANCELLED by 0" is CANCELLED; unknown text is kUnknown.
JobState ParseJobState(std::string_view text);

struct Job {
  int64_t id = 0;
  std::string name;
  JobState state = JobState::kUnknown;
  std::string reason;      // Slurm's Reason= ("None", "Priority", "Resources", "BeginTime", ...)
  int exit_code = -1;      // when it ended by exiting (-1: not known)
  int signal = 0;          // when it ended by a signal
  std::string partition;
  std::string nodes;       // "" while pending
  int restarts = 0;        // requeues so far (SLURM_RESTART_COUNT of its next start)
  int64_t start_s = 0;     // Unix seconds; 0 when not started
  int64_t end_s = 0;
};

// `squeue --json -t all`: every job listed. (Slurm 22.05's --json lists every job whatever -j,
// --name or -u say: the caller picks its own by id and name.) InvalidArgument naming what is wrong for an answer that
// is not one (not JSON, no "jobs" list, a job without id or state).
Result<std::vector<Job>> ParseSqueueJson(std::string_view text);
// `squeue -t all -u UID -o "%i|%j|%T|%r|%P|%N|%S|%e"` (kSqueueFormat; a header line, then one
// job a line): what a round asks for, a tenth of the JSON's cost. It has no exit code (the job's
// exit record has it, slurm/sbatch.h) and no requeue count (a job seen running that is pending
// again was requeued: the tracker tells). A name holding '|' is kept whole. InvalidArgument for
// an answer that is not one (no header, a line without an id or state).
inline constexpr char kSqueueFormat[] = "%i|%j|%T|%r|%P|%N|%S|%e";
Result<std::vector<Job>> ParseSqueueText(std::string_view text);
// `sacct -P -o JobID,JobName,State,ExitCode,Start,End [-c]` (a header line, '|'-separated):
// one Job per line for the job itself (its steps, "12.batch", are left out). A job listed twice
// (its requeue, then its end) comes out once, as its last line says.
Result<std::vector<Job>> ParseSacctParsable(std::string_view text);

// What an attempt's job is now.
enum class Phase {
  kWaiting,   // pending in Slurm (reason says why)
  kRunning,   // running, completing or suspended
  kEnded,     // ended: outcome, exit_code and signal say how
  kRequeued,  // preempted, requeued or its node failed: a new attempt, no retry spent
  kLost,      // Slurm says UNKNOWN or forgot it: retried, never a success
};
struct Verdict {
  Phase phase = Phase::kLost;
  AttemptOutcome outcome = AttemptOutcome::kLaunchError;  // when ended
  int exit_code = -1;
  int signal = 0;
  std::string why;  // for the attempt's record: "TIMEOUT", "OUT_OF_MEMORY (host memory)", ...
};
// The job's state judged for drover. `cancel_requested`: drover asked to cancel it (a CANCELLED
// job is then kCancelled; otherwise someone else cancelled it: a signal).
Verdict Judge(const Job& job, bool cancel_requested);

// The name of an attempt's job: drover-<store>-<run>-<attempt>, <store> a short id of the store
// (so two stores on one cluster never read each other's jobs), and back.
std::string JobName(std::string_view store_id, int64_t run_id, int attempt);
struct JobIdentity {
  std::string store_id;
  int64_t run_id = 0;
  int attempt = 0;
};
std::optional<JobIdentity> ParseJobName(std::string_view name);

}  // namespace drover::slurm
