#include "slurm/cluster.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <fstream>

#include "common/strings.h"
#include "common/subprocess.h"

namespace drover::slurm {
namespace {

// sacct's -S: local time, as it prints its own.
std::string SacctTime(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

constexpr const char* kSacctFields = "JobID,JobName,State,ExitCode,Start,End,Partition,NodeList";

}  // namespace

Result<std::pair<int, std::string>> CommandCluster::Call(const std::vector<std::string>& argv) {
  ++commands_;
  // Through sh only to join stderr to stdout: what a refusal says is in stderr.
  std::vector<std::string> wrapped = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  CaptureOptions o;
  o.timeout_ms = options_.timeout_ms;
  o.max_output_bytes = 256LL << 20;  // squeue --json of a busy cluster is large
  DROVER_ASSIGN_OR_RETURN(Captured c, RunAndCapture(wrapped, o));
  if (c.exit_code == 127) {
    // The program, past `env -i NAME=VALUE...` where there is one.
    std::string program = argv.front();
    for (const std::string& a : argv) {
      if (a == "/usr/bin/env" || a == "-i" || a.find('=') != std::string::npos) continue;
      program = a;
      break;
    }
    return NotFound(fmt::format("{} is not installed here (Slurm's client commands: "
                                "apt-get install slurm-client)",
                                program));
  }
  return std::make_pair(c.exit_code, std::move(c.out));
}

Result<int64_t> CommandCluster::Submit(const Target& target, const Submission& s) {
  DROVER_ASSIGN_OR_RETURN(std::string script, BatchScript(s));
  {
    std::ofstream out(s.script_path, std::ios::trunc);
    out << script;
    out.close();
    if (!out) return Status(Code::kIo, "cannot write the job's script '" + s.script_path + "'");
  }
  chmod(s.script_path.c_str(), 0700);
  // sbatch runs with a small environment (what it needs to find Slurm), which the job inherits
  // (--export=ALL) and the script then sets the run's over: nothing else of the daemon's leaks in.
  std::vector<std::string> argv = {"/usr/bin/env", "-i"};
  for (const char* keep : {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ",
                           "SLURM_CONF"}) {
    if (const char* v = std::getenv(keep)) argv.push_back(std::string(keep) + "=" + v);
  }
  const std::vector<std::string> sbatch = SbatchArgv(target, s);
  argv.insert(argv.end(), sbatch.begin(), sbatch.end());
  DROVER_ASSIGN_OR_RETURN(auto r, Call(argv));
  const std::string text(Trim(r.second));
  // --parsable: "ID" or "ID;CLUSTER".
  const std::string first = text.substr(0, text.find_first_of(";\n"));
  if (r.first != 0 || first.empty() ||
      first.find_first_not_of("0123456789") != std::string::npos) {
    // The controller did not answer (down, restarting, overloaded): nothing is wrong with the
    // job, and it is asked again later; anything else is Slurm refusing this job.
    for (const char* down : {"Unable to contact slurm controller", "Socket timed out",
                             "Slurm temporarily unable", "Connection refused",
                             "Zero Bytes were transmitted"}) {
      if (text.find(down) != std::string::npos) {
        return Unavailable(fmt::format("the Slurm controller did not take job {}: {}",
                                       s.job_name, text.substr(0, 300)));
      }
    }
    return FailedPrecondition(fmt::format("sbatch refused the job {}: {}", s.job_name,
                                          text.empty() ? "(it said nothing)" : text));
  }
  return std::stoll(first);
}

Status CommandCluster::WouldAccept(const Target& target, const Submission& s) {
  std::vector<std::string> argv = SbatchArgv(target, s);
  argv.pop_back();  // the script: --wrap instead
  argv.insert(argv.begin() + 1, "--test-only");
  argv.push_back("--wrap=true");
  DROVER_ASSIGN_OR_RETURN(auto r, Call(argv));
  if (r.first != 0) {
    return FailedPrecondition("Slurm would not take these runs' jobs: " +
                              std::string(Trim(r.second)).substr(0, 500));
  }
  return Status::Ok();
}

Result<std::vector<Job>> CommandCluster::List() {
  // This user's jobs only (filtered by the controller), as text: a tenth of the JSON's cost to
  // make and to read, asked once a round.
  DROVER_ASSIGN_OR_RETURN(auto r, Call({"squeue", "-t", "all", "-u", std::to_string(getuid()),
                                        "-o", kSqueueFormat}));
  if (r.first != 0) {
    return Unavailable("squeue failed: " + std::string(Trim(r.second)).substr(0, 500));
  }
  return ParseSqueueText(r.second);
}

Result<std::vector<Job>> CommandCluster::Ended(int64_t since_s) {
  const std::vector<std::string> base = {"sacct", "-X", "-P", "-o", kSacctFields, "-S",
                                         SacctTime(since_s), "-E", "now"};
  if (database_ < 0) {
    database_ = options_.accounting == "database" ? 1 : options_.accounting == "jobcomp" ? 0 : -1;
  }
  if (database_ != 0) {
    DROVER_ASSIGN_OR_RETURN(auto r, Call(base));
    if (r.first == 0) {
      database_ = 1;
      return ParseSacctParsable(r.second);
    }
    // "Slurm accounting storage is disabled": the jobcomp file, from now on.
    if (database_ == 1) {
      return Unavailable("sacct failed: " + std::string(Trim(r.second)).substr(0, 500));
    }
    database_ = 0;
  }
  std::vector<std::string> argv = base;
  argv.insert(argv.begin() + 1, "-c");
  DROVER_ASSIGN_OR_RETURN(auto r, Call(argv));
  if (r.first != 0) {
    return Unavailable("sacct -c failed: " + std::string(Trim(r.second)).substr(0, 500));
  }
  return ParseSacctParsable(r.second);
}

Status CommandCluster::Cancel(int64_t job_id, int signal) {
  std::vector<std::string> argv = {"scancel"};
  if (signal > 0) {
    argv.push_back(fmt::format("--signal={}", signal));
    argv.push_back("--full");
  }
  argv.push_back(std::to_string(job_id));
  DROVER_ASSIGN_OR_RETURN(auto r, Call(argv));
  if (r.first != 0) {
    return Unavailable(fmt::format("scancel {} failed: {}", job_id,
                                   std::string(Trim(r.second)).substr(0, 500)));
  }
  return Status::Ok();
}

}  // namespace drover::slurm
