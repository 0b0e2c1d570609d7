#include "slurm/tracker.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <limits>

namespace drover::slurm {
namespace {

// Rounds in which neither squeue nor the accounting lists a job before it counts as lost (one
// round may fall between sbatch's answer and the controller's listing of the job).
constexpr int kMissingRoundsToLose = 2;

bool Final(Phase p) { return p == Phase::kEnded || p == Phase::kRequeued || p == Phase::kLost; }

}  // namespace

void Tracker::Activity(Millis now) {
  last_activity_ = now;
  next_poll_at_ = now + NextPollMs(0, last_query_ms_);  // soon: something was just asked for
}

Result<int64_t> Tracker::Submit(const Target& target, Submission s, int64_t run_id, int attempt,
                                Millis now) {
  s.job_name = JobName(store_id_, run_id, attempt);
  DROVER_ASSIGN_OR_RETURN(int64_t id, cluster_.Submit(target, s));
  Followed f;
  f.who = {store_id_, run_id, attempt};
  f.name = s.job_name;
  f.submitted_s = static_cast<int64_t>(std::time(nullptr));
  jobs_[id] = std::move(f);
  Activity(now);
  return id;
}

Status Tracker::Cancel(int64_t run_id, int attempt, Millis now) {
  for (auto& [id, f] : jobs_) {
    if (f.who.run_id != run_id || f.who.attempt != attempt) continue;
    f.cancel_requested = true;
    Activity(now);
    return cluster_.Cancel(id, 0);
  }
  return NotFound("no Slurm job of run " + std::to_string(run_id) + " attempt " +
                  std::to_string(attempt) + " is followed");
}

const Job* Tracker::Last(int64_t run_id, int attempt) const {
  for (const auto& [id, f] : jobs_) {
    if (f.who.run_id == run_id && f.who.attempt == attempt) return &f.last;
  }
  return nullptr;
}

Result<std::vector<JobEvent>> Tracker::Adopt(Millis now) {
  DROVER_ASSIGN_OR_RETURN(std::vector<Job> listed, cluster_.List());
  std::vector<JobEvent> out;
  for (const Job& j : listed) {
    std::optional<JobIdentity> who = ParseJobName(j.name);
    if (!who || who->store_id != store_id_ || jobs_.count(j.id)) continue;
    const Verdict v = Judge(j, false);
    out.push_back({*who, j.id, v, j});
    if (Final(v.phase)) continue;  // ended while no engine followed it: reported, not followed
    Followed f;
    f.who = *who;
    f.name = j.name;
    f.phase = v.phase;
    f.submitted_s = j.start_s > 0 ? j.start_s : static_cast<int64_t>(std::time(nullptr));
    f.last = j;
    jobs_[j.id] = std::move(f);
  }
  Activity(now);
  return out;
}

Result<std::vector<JobEvent>> Tracker::Poll(Millis now, bool force) {
  std::vector<JobEvent> events;
  if (jobs_.empty() || (!force && now < next_poll_at_)) return events;
  const auto t0 = std::chrono::steady_clock::now();
  DROVER_ASSIGN_OR_RETURN(std::vector<Job> listed, cluster_.List());
  last_query_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  std::map<int64_t, const Job*> by_id;
  for (const Job& j : listed) by_id[j.id] = &j;

  std::vector<int64_t> done, missing;
  auto judge = [&](int64_t id, Followed& f, const Job& j) {
    f.missing_rounds = 0;
    const Job before = std::move(f.last);
    f.last = j;
    Verdict v = Judge(j, f.cancel_requested);
    // Seen running, pending again: Slurm requeued it (squeue's text has no requeue count).
    if (f.phase == Phase::kRunning && v.phase == Phase::kWaiting) {
      v.phase = Phase::kRequeued;
      v.why = "REQUEUED";
    }
    if (v.phase == f.phase) {
      // Still waiting or running, and what the views show changed (the pending reason, the node).
      if (before.state != j.state || before.reason != j.reason || before.nodes != j.nodes) {
        events.push_back({f.who, id, v, j});
      }
      return;
    }
    f.phase = v.phase;
    events.push_back({f.who, id, v, j});
    if (Final(v.phase)) done.push_back(id);
    // Requeued by Slurm (an admin's requeue): the next start would be unfollowed, so it is
    // cancelled; drover makes the next attempt a job of its own.
    if (v.phase == Phase::kRequeued && j.state == JobState::kPending) (void)cluster_.Cancel(id, 0);
  };
  for (auto& [id, f] : jobs_) {
    auto it = by_id.find(id);
    // The same id under another name: Slurm reused it; ours is gone from squeue.
    if (it == by_id.end() || it->second->name != f.name) {
      missing.push_back(id);
      continue;
    }
    judge(id, f, *it->second);
  }
  if (!missing.empty()) {
    // How the jobs squeue no longer lists ended, from the accounting, over a window that starts
    // a minute before the oldest of them was submitted.
    int64_t since = std::numeric_limits<int64_t>::max();
    for (int64_t id : missing) since = std::min(since, jobs_[id].submitted_s);
    DROVER_ASSIGN_OR_RETURN(std::vector<Job> ended, cluster_.Ended(since - 60));
    std::map<int64_t, const Job*> accounted;
    for (const Job& j : ended) accounted[j.id] = &j;
    for (int64_t id : missing) {
      Followed& f = jobs_[id];
      auto it = accounted.find(id);
      if (it != accounted.end() && it->second->name == f.name) {
        judge(id, f, *it->second);
        continue;
      }
      if (++f.missing_rounds < kMissingRoundsToLose) continue;
      Verdict lost;
      lost.phase = Phase::kLost;
      lost.why = "Slurm no longer knows the job (not in squeue, not in the accounting)";
      events.push_back({f.who, id, lost, f.last});
      done.push_back(id);
    }
  }
  for (int64_t id : done) jobs_.erase(id);
  if (!events.empty()) last_activity_ = now;
  next_poll_at_ = now + NextPollMs(now - last_activity_, last_query_ms_);
  return events;
}

}  // namespace drover::slurm
