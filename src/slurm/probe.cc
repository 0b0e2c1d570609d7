#include "slurm/probe.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace drover::slurm {

namespace fs = std::filesystem;

Status ProbeSharedFolder(Cluster& cluster, const Target& target, const std::string& dir,
                         Millis timeout_ms) {
  std::random_device rd;
  const std::string nonce = fmt::format("{:08x}{:08x}", rd(), rd());
  const std::string base = dir + "/.drover-probe-" + nonce;
  {
    std::ofstream out(base);
    out << nonce << "\n";
    if (!out) return Status(Code::kIo, "cannot write '" + base + "' to probe the cluster");
  }
  struct Cleanup {
    std::string base;
    ~Cleanup() {
      std::error_code ec;
      for (const char* ext : {"", ".seen", ".sh", ".out", ".err"}) fs::remove(base + ext, ec);
    }
  } cleanup{base};
  Submission s;
  s.job_name = "drover-probe-" + nonce.substr(0, 8);
  s.argv = {"/bin/sh", "-c", "cat \"$1\" > \"$1.seen\"", "probe", base};
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.workdir = dir;
  s.script_path = base + ".sh";
  s.stdout_path = base + ".out";
  s.stderr_path = base + ".err";
  s.cpus = 1;
  s.time_limit_ms = 60'000;
  DROVER_ASSIGN_OR_RETURN(int64_t id, cluster.Submit(target, s));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Job last;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(std::vector<Job> jobs, cluster.List());
    auto it = std::find_if(jobs.begin(), jobs.end(),
                           [&](const Job& j) { return j.id == id && j.name == s.job_name; });
    if (it != jobs.end()) {
      last = *it;
      if (Judge(last, false).phase == Phase::kEnded) break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      (void)cluster.Cancel(id, 0);
      return Unavailable(fmt::format(
          "the job that checks the cluster sees {} did not end within {} s ({} {}); is the "
          "partition up (sinfo)?",
          dir, timeout_ms / 1000, ToString(last.state),
          last.reason.empty() || last.reason == "None" ? "" : "waiting: " + last.reason));
    }
    // Often: a `drover run` waits for this before its first job is submitted.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::ifstream in(base + ".seen");
  std::stringstream seen;
  seen << in.rdbuf();
  if (seen.str() != nonce + "\n") {
    std::ifstream err(base + ".err");
    std::stringstream why;
    why << err.rdbuf();
    return FailedPrecondition(fmt::format(
        "Slurm's node {} does not see {} as drover does (the job {}{}): mount the store's "
        "folder at the same path on every node (a shared file system), or keep the store on one "
        "that is",
        last.nodes.empty() ? "(unknown)" : last.nodes, dir,
        Judge(last, false).outcome == AttemptOutcome::kSucceeded ? "read another file"
                                                                  : "failed",
        why.str().empty() ? "" : ": " + why.str().substr(0, 300)));
  }
  return Status::Ok();
}

}  // namespace drover::slurm
