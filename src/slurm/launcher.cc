#include "common/strings.h"
#include "slurm/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/hash.h"

namespace drover::slurm {
namespace {

// The variables the run's environment must not carry into the job: the GPUs are Slurm's to
// give, and the shell sets its own.
bool Dropped(const std::string& name) {
  return name == "CUDA_VISIBLE_DEVICES" || name == "PWD" || name == "OLDPWD" || name == "SHLVL" ||
         name == "_";
}

}  // namespace

SlurmLauncher::SlurmLauncher(Cluster& cluster, ProcessLauncher& local, Clock& clock,
                             std::string store_id, ExecutorSpec defaults)
    : cluster_(cluster),
      local_(local),
      clock_(clock),
      store_id_(std::move(store_id)),
      defaults_(std::move(defaults)),
      tracker_(cluster_, store_id_) {}

Result<ExecHandle> SlurmLauncher::Start(const LaunchSpec& spec) {
  const AttemptRequest& req = spec.request;
  if (req.run_id <= 0 || req.attempt <= 0) {
    return Status(Code::kInternal, "a Slurm job needs the run and attempt it is for");
  }
  Target target;
  target.partition = req.executor.partition.empty() ? defaults_.partition : req.executor.partition;
  target.account = req.executor.account.empty() ? defaults_.account : req.executor.account;
  target.qos = req.executor.qos.empty() ? defaults_.qos : req.executor.qos;
  target.sbatch = defaults_.sbatch;
  target.sbatch.insert(target.sbatch.end(), req.executor.sbatch.begin(), req.executor.sbatch.end());

  Submission s;
  s.argv = spec.argv;
  for (const std::string& kv : spec.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    // A name a shell cannot export (an exported bash function, say) stays behind.
    if (!IsShellName(name) || Dropped(name)) continue;
    s.env[name] = kv.substr(eq + 1);
  }
  s.workdir = spec.cwd;
  s.stdout_path = spec.stdout_path;
  s.stderr_path = spec.stderr_path;
  s.exit_path = spec.exit_path;
  s.script_path = (spec.exit_path.empty() ? spec.stdout_path : spec.exit_path) + ".sbatch";
  s.gpus = req.resources.gpus;
  s.cpus = std::max(1, req.resources.cpus);
  s.memory_bytes = req.resources.memory;
  s.time_limit_ms = req.time_limit_ms;
  // An earlier engine's record of this attempt number would be read as this job's.
  if (!spec.exit_path.empty()) unlink(spec.exit_path.c_str());
  const Millis now = clock_.Monotonic();
  Result<int64_t> id = tracker_.Submit(target, std::move(s), req.run_id, req.attempt, now);
  if (!id.ok()) return id.status();
  const ExecHandle job(*id);
  attempts_[*id] = {req.run_id, req.attempt, spec.exit_path, target.partition};
  claimed_.insert(*id);
  Job submitted;
  submitted.id = *id;
  submitted.partition = target.partition;
  pending_.placements.push_back({job, Placement(*id, submitted, "SUBMITTED")});
  return job;
}

Json SlurmLauncher::Placement(int64_t job_id, const Job& job, const std::string& state) const {
  Json j = {{"kind", "slurm"}, {"job_id", job_id}, {"state", state}};
  if (!job.partition.empty()) j["partition"] = job.partition;
  if (!job.nodes.empty()) j["node"] = job.nodes;
  if (!job.reason.empty() && job.reason != "None") j["reason"] = job.reason;
  if (job.restarts > 0) j["restarts"] = job.restarts;
  return j;
}

void SlurmLauncher::Stop(ExecHandle job, StopSignal how) {
  auto it = attempts_.find(job.id);
  const Millis now = clock_.Monotonic();
  Status st = Status::Ok();
  if (how == StopSignal::kTerminate) {
    st = it != attempts_.end() ? tracker_.Cancel(it->second.run_id, it->second.number, now)
                               : cluster_.Cancel(job.id, 0);
  } else {
    if (it != attempts_.end()) (void)tracker_.Cancel(it->second.run_id, it->second.number, now);
    st = cluster_.Cancel(job.id, SIGKILL);
  }
  if (!st.ok()) spdlog::warn("Slurm job {}: {}", job.id, st.message());
}

void SlurmLauncher::Report(const JobEvent& e, WaitResult* out) {
  auto it = attempts_.find(e.job_id);
  if (it == attempts_.end()) return;  // a job cancelled as unclaimed, or one not ours
  const ExecHandle job(e.job_id);
  const Verdict& v = e.verdict;
  const std::string state(ToString(e.job.state));
  out->placements.push_back({job, Placement(e.job_id, e.job, state)});
  if (v.phase == Phase::kWaiting || v.phase == Phase::kRunning) return;
  ProcessExit x;
  x.handle = job;
  x.ended_ms = e.job.end_s > 0 ? e.job.end_s * 1000 : clock_.Now();
  switch (v.phase) {
    case Phase::kEnded: {
      x.exit_code = v.exit_code;
      x.signal = v.signal;
      const bool by_status = v.outcome == AttemptOutcome::kSucceeded ||
                             v.outcome == AttemptOutcome::kExitCode ||
                             (v.outcome == AttemptOutcome::kSignal &&
                              e.job.state == JobState::kFailed);
      // The job's own record of the command's end is exact where the accounting gives the
      // batch shell's status (a cancelled command that caught SIGTERM may have exited 0).
      const bool cancelled = v.outcome == AttemptOutcome::kCancelled;
      bool recorded = false;
      if ((by_status || cancelled) && !it->second.record.empty()) {
        if (auto rec = ReadExitRecord({it->second.record, ""}); rec.ok()) {
          x.exit_code = rec->exit_code;
          x.signal = rec->signal;
          if (!rec->error.empty()) x.error = rec->error;
          recorded = true;
        }
      }
      if (cancelled && !recorded && x.signal == 0) x.signal = SIGTERM;  // scancel's
      if (x.exit_code < 0 && x.signal == 0) {
        // Failed with no record of its status (killed before its script could write it): a
        // failure all the same, never a success.
        x.exit_code = v.outcome == AttemptOutcome::kSucceeded ? 0 : 1;
      }
      if (v.outcome == AttemptOutcome::kTimeout || v.outcome == AttemptOutcome::kLaunchError ||
          (v.outcome == AttemptOutcome::kSignal && !by_status)) {
        x.outcome = v.outcome;
        x.detail = "Slurm: " + v.why;
      }
      break;
    }
    case Phase::kRequeued:
      x.outcome = AttemptOutcome::kPreempted;
      x.signal = SIGTERM;
      x.detail = fmt::format("Slurm: {} on {}; it continues as a new attempt (no retry spent)",
                             v.why, e.job.nodes.empty() ? "its node" : e.job.nodes);
      break;
    case Phase::kLost:
      x.lost = true;
      x.detail = v.why;
      break;
    default:
      break;
  }
  out->exits.push_back(std::move(x));
  attempts_.erase(it);
}

WaitResult SlurmLauncher::Wait(int64_t timeout_ms) {
  WaitResult r = std::move(pending_);
  pending_ = WaitResult{};
  if (!r.exits.empty() || !r.placements.empty()) return r;
  Millis now = clock_.Monotonic();
  int64_t wait = timeout_ms;
  if (tracker_.followed() > 0) {
    const int64_t until = std::max<int64_t>(0, tracker_.next_poll_at() - now);
    wait = wait < 0 ? until : std::min(wait, until);
  }
  WaitResult local = local_.Wait(wait);
  r.interrupt_signal = local.interrupt_signal;
  now = clock_.Monotonic();
  if (tracker_.followed() == 0 || now < tracker_.next_poll_at()) return r;
  Result<std::vector<JobEvent>> events = tracker_.Poll(now);
  if (!events.ok()) {
    // The controller is down or slow: the jobs go on; asked again at the next round.
    if (events.status().message() != poll_error_) {
      poll_error_ = events.status().message();
      spdlog::warn("asking Slurm about drover's jobs: {} (asked again soon)", poll_error_);
    }
    return r;
  }
  if (!poll_error_.empty()) spdlog::info("Slurm answers again");
  poll_error_.clear();
  for (const JobEvent& e : *events) Report(e, &r);
  return r;
}

int64_t SlurmLauncher::Identity(ExecHandle job) {
  return attempts_.count(job.id) || listed_.count(job.id) ? kListed : 0;
}

std::optional<std::string> SlurmLauncher::EnvOf(ExecHandle job, const std::string& name) {
  if (name == "CUDA_VISIBLE_DEVICES") return std::string();
  return std::nullopt;
}

void SlurmLauncher::Adopt(ExecHandle job, int64_t identity, const ExitRecordAt& record) {
  claimed_.insert(job.id);
  auto it = listed_.find(job.id);
  if (it == listed_.end()) return;
  const JobEvent& e = it->second;
  attempts_[job.id] = {e.who.run_id, e.who.attempt, record.file, e.job.partition};
  // Ended while no engine followed it: how, at the next Wait().
  Report(e, &pending_);
}

Json SlurmLauncher::PlacedAs(ExecHandle job) {
  if (auto it = listed_.find(job.id); it != listed_.end()) {
    return Placement(job.id, it->second.job, std::string(ToString(it->second.job.state)));
  }
  return {{"kind", std::string(ToString(ExecutorKind::kSlurm))}, {"job_id", job.id},
          {"state", "SUBMITTED"}};
}

std::string SlurmLauncher::StartNote(ExecHandle job) {
  return fmt::format("submitted as Slurm job {}", job.id);
}

bool SlurmLauncher::WaitsToRun(const Json& placement) const {
  const std::string state = PlacementText(placement, "state");
  return state.empty() || state == "SUBMITTED" || state == "PENDING";
}

Status SlurmLauncher::BeginRecovery() {
  DROVER_ASSIGN_OR_RETURN(std::vector<JobEvent> events, tracker_.Adopt(clock_.Monotonic()));
  for (JobEvent& e : events) listed_[e.job_id] = std::move(e);
  // Jobs that ended while no daemon followed them and that squeue has since forgotten: how they
  // ended, from the accounting, over a bounded window (older ones are taken as lost and rerun).
  const int64_t since = clock_.Now() / 1000 - kAccountingWindowS;
  Result<std::vector<Job>> ended = cluster_.Ended(since);
  if (!ended.ok()) {
    spdlog::warn("reading how drover's Slurm jobs ended from the accounting: {} (a job squeue no "
                 "longer lists is taken as lost and run again)",
                 ended.status().message());
    return Status::Ok();
  }
  for (const Job& j : *ended) {
    std::optional<JobIdentity> who = ParseJobName(j.name);
    if (!who || who->store_id != store_id_ || listed_.count(j.id)) continue;
    const Verdict v = Judge(j, false);
    if (v.phase == Phase::kWaiting || v.phase == Phase::kRunning) continue;  // squeue would list it
    listed_[j.id] = JobEvent{*who, j.id, v, j};
  }
  return Status::Ok();
}

void SlurmLauncher::EndRecovery() {
  for (const auto& [id, e] : listed_) {
    if (claimed_.count(id)) continue;
    const Phase p = e.verdict.phase;
    if (p != Phase::kWaiting && p != Phase::kRunning) continue;
    spdlog::warn("Slurm job {} ({}) belongs to no attempt drover runs now: cancelled", id,
                 e.job.name);
    (void)tracker_.Cancel(e.who.run_id, e.who.attempt, clock_.Monotonic());
  }
  listed_.clear();
}

}  // namespace drover::slurm
