#include "common/strings.h"
#include "slurm/sbatch.h"

#include <fmt/format.h>

#include <algorithm>

namespace drover::slurm {
namespace {

// 'text' for sh: single quotes, each ' as '\''.
std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Slurm's --time: minutes, rounded up, at least one.
std::string TimeLimit(Millis ms) {
  const int64_t minutes = std::max<int64_t>(1, (ms + 59'999) / 60'000);
  return fmt::format("{}-{:02}:{:02}:00", minutes / (24 * 60), (minutes / 60) % 24, minutes % 60);
}

}  // namespace

Result<std::string> BatchScript(const Submission& s) {
  if (s.argv.empty()) return InvalidArgument("no command to run in the job");
  std::string out = "#!/bin/sh\n# drover: " + s.job_name + "\n";
  for (const auto& [k, v] : s.env) {
    if (!IsShellName(k)) {
      return InvalidArgument(fmt::format("environment variable '{}' cannot be passed to a Slurm "
                                         "job: a name is letters, digits and _",
                                         k));
    }
    if (v.find('\0') != std::string::npos) {
      return InvalidArgument(fmt::format("environment variable '{}' holds a NUL byte", k));
    }
    out += "export " + k + "=" + Quote(v) + "\n";
  }
  for (const std::string& a : s.argv) {
    if (a.find('\0') != std::string::npos) return InvalidArgument("the command holds a NUL byte");
  }
  std::string command;
  for (const std::string& a : s.argv) command += " " + Quote(a);
  if (s.exit_path.empty()) {
    out += "cd " + Quote(s.workdir) + " || exit 127\n";
    return out + "exec" + command + "\n";
  }
  // The end, as the local shim records it: a signal while the command runs (scancel sends
  // SIGTERM to every process of the job) is taken after the command ends, so the record is
  // written; SIGKILL after Slurm's KillWait leaves none (the accounting says how it ended).
  const std::string record = Quote(s.exit_path);
  out += "drover_end() {\n";
  out += "  if [ \"$1\" -gt 128 ]; then c=-1; g=$(($1 - 128)); else c=$1; g=0; fi\n";
  out += "  printf '{\"exit_code\": %d, \"signal\": %d, \"ended_ms\": %s%s}\\n' \"$c\" \"$g\" "
         "\"$(date +%s%3N)\" \"$2\" >> " + record + "\n";
  out += "}\n";
  // The start line: the job id where the local shim writes its pid (kListed for start ticks).
  out += "printf '%s 1\\n' \"$SLURM_JOB_ID\" > " + record + "\n";
  out += "cd " + Quote(s.workdir) +
         " || { drover_end 127 ', \"error\": \"cannot enter the working copy\"'; exit 127; }\n";
  out += "trap : TERM INT HUP\n";
  out += command.substr(1) + "\n";
  out += "s=$?\n";
  out += "drover_end \"$s\" ''\n";
  out += "exit \"$s\"\n";
  return out;
}

std::vector<std::string> SbatchArgv(const Target& target, const Submission& s) {
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=" + s.job_name,
                                   "--output=" + s.stdout_path, "--error=" + s.stderr_path,
                                   // The script sets the run's environment over the small one
                                   // sbatch is run with (CommandCluster::Submit): --export=NONE
                                   // would make slurmd load the user's login environment first,
                                   // which costs each job more than a second. A preempted job
                                   // ends (drover starts the next attempt as a new job).
                                   "--export=ALL", "--no-requeue", "--chdir=" + s.workdir};
  if (!target.partition.empty()) argv.push_back("--partition=" + target.partition);
  if (!target.account.empty()) argv.push_back("--account=" + target.account);
  if (!target.qos.empty()) argv.push_back("--qos=" + target.qos);
  if (s.gpus > 0) argv.push_back(fmt::format("--gres=gpu:{}", s.gpus));
  if (s.cpus > 0) argv.push_back(fmt::format("--cpus-per-task={}", s.cpus));
  if (s.memory_bytes > 0) {
    argv.push_back(fmt::format("--mem={}M", (s.memory_bytes + (1 << 20) - 1) >> 20));
  }
  if (s.time_limit_ms > 0) argv.push_back("--time=" + TimeLimit(s.time_limit_ms));
  argv.insert(argv.end(), target.sbatch.begin(), target.sbatch.end());
  argv.push_back(s.script_path);
  return argv;
}

Millis NextPollMs(Millis since_activity_ms, Millis last_query_ms) {
  if (since_activity_ms < 10'000) return 1'000;
  if (since_activity_ms < 60'000) return 5'000;
  return std::max<Millis>(30'000, 5 * last_query_ms);
}

}  // namespace drover::slurm
