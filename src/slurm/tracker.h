#pragma once
// drover's jobs in Slurm, followed (issue 17's executor): each attempt's job as submitted, one
// batched query a round for all of them (squeue; sacct over a bounded window for the ones squeue
// no longer lists), the next round scheduled by the back-off (sbatch.h's NextPollMs), and what
// changed reported as events: a job that started, ended (with the attempt's outcome), went back
// to the queue (a new attempt, no retry spent) or was lost. A job is known by its id and its name
// together, so a job id Slurm reuses is never taken for drover's. At a restart, Adopt() finds the
// store's jobs by name. Not thread-safe: the engine's loop drives it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "slurm/cluster.h"

namespace drover::slurm {

struct JobEvent {
  JobIdentity who;  // run and attempt
  int64_t job_id = 0;
  Verdict verdict;  // its phase now: kRunning (it started), kEnded, kRequeued or kLost
  Job job;          // as Slurm last listed it (partition, node, reason)
};

class Tracker {
 public:
  Tracker(Cluster& cluster, std::string store_id) : cluster_(cluster), store_id_(std::move(store_id)) {}

  // Submits an attempt's job (its name made here) and follows it; the job id.
  Result<int64_t> Submit(const Target& target, Submission s, int64_t run_id, int attempt,
                         Millis now);
  // Cancels a followed attempt's job; its end comes as an event (kCancelled) at a round soon.
  Status Cancel(int64_t run_id, int attempt, Millis now);
  // The store's jobs Slurm still lists (after a restart): followed from now on.
  Result<std::vector<JobEvent>> Adopt(Millis now);
  // A round when one is due (or `force`): the events of the jobs whose phase changed, and of those
  // still waiting or running whose state, pending reason or node changed (for the views). A job
  // that ended or was lost is no longer followed.
  Result<std::vector<JobEvent>> Poll(Millis now, bool force = false);

  Millis next_poll_at() const { return next_poll_at_; }
  size_t followed() const { return jobs_.size(); }
  // The job of a followed attempt as last listed (a pending job's Reason, its node), or null.
  const Job* Last(int64_t run_id, int attempt) const;

 private:
  struct Followed {
    JobIdentity who;
    std::string name;
    Phase phase = Phase::kWaiting;
    bool cancel_requested = false;
    int64_t submitted_s = 0;  // Unix seconds: the accounting window starts before it
    int missing_rounds = 0;   // rounds in which neither squeue nor sacct had it
    Job last;
  };
  void Activity(Millis now);
  Cluster& cluster_;
  std::string store_id_;
  std::map<int64_t, Followed> jobs_;  // by job id
  Millis last_activity_ = 0;
  Millis last_query_ms_ = 0;
  Millis next_poll_at_ = 0;
};

}  // namespace drover::slurm
