#pragma once
// What drover hands Slurm for one attempt (issue 17's executor): the batch script (drover's
// environment, the working folder, the command) and the `sbatch` command line that submits it
// (job name, partition, account, QOS, GPUs, CPUs, memory, time limit, output files, no requeue:
// a preempted job ends, and drover makes the next attempt a new job). And how often drover asks
// Slurm about its jobs: one batched query a round, soon after a change, then backing off. Pure.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace drover::slurm {

// Where and how jobs go (the config's or the spec's `executor:`).
struct Target {
  std::string partition;
  std::string account;
  std::string qos;
  std::vector<std::string> sbatch;  // extra flags, as written ("--constraint=a100")
};

struct Submission {
  std::string job_name;  // JobName(store, run, attempt)
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the run's whole environment
  std::string workdir;
  std::string script_path;  // where the script is written (in the attempt's folder)
  std::string stdout_path;
  std::string stderr_path;
  // Where the job records how the command ended, in the local shim's format (exec/shim.h): one
  // JSON line {"exit_code", "signal", "ended_ms"} appended after the start line drover wrote at
  // submit. "": not recorded.
  std::string exit_path;
  int gpus = 0;
  int cpus = 0;
  int64_t memory_bytes = 0;  // 0: the partition's default
  Millis time_limit_ms = 0;  // 0: the partition's
};

// The batch script: exports the environment, enters the working folder, runs the command and
// appends how it ended to exit_path (a signal that killed it as the shell reports it, 128+N);
// without an exit_path it execs the command.
// InvalidArgument for an environment name that is not a shell name, or a NUL in any value.
Result<std::string> BatchScript(const Submission& s);
// `sbatch --parsable ...  SCRIPT`: the argv, flags from the target and the submission; the
// target's extra flags last (so a site can override).
std::vector<std::string> SbatchArgv(const Target& target, const Submission& s);

// How long to wait before the next query of drover's jobs: 1 s for the first 10 s after a
// submit or a change of state, 5 s up to a minute, then the larger of 30 s and five times what
// the last query took (a slow controller is asked less).
Millis NextPollMs(Millis since_activity_ms, Millis last_query_ms);

}  // namespace drover::slurm
