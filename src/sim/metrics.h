#pragma once
// What a trace replay is judged by (issue 7): job completion time (JCT = end - submit), queueing
// delay (JCT - duration), bounded slowdown (max(1, JCT / max(duration, 60 s))), makespan, GPU
// utilisation and preemptions, next to lower bounds no schedule can beat. Pure arithmetic.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace.h"

namespace drover::sim {

// How one job fared in a replay.
struct JobOutcome {
  double submit_s = 0;
  double end_s = 0;
  double duration_s = 0;  // its run time at its size (what it would take with no waiting)
  int gpus = 0;
  int preemptions = 0;
  std::string group;  // Philly: the virtual cluster (team)
};

// How one group (team) fared. Finish-time fairness (Themis) compares a job's completion time in
// the shared cluster with its time alone; here "alone" is its run time with no wait, so a job's
// ratio is max(1, JCT / max(duration, 60 s)) (its bounded slowdown) and the group's is the mean.
struct GroupSummary {
  std::string group;
  size_t jobs = 0;
  double avg_jct_s = 0;
  double avg_queue_s = 0;
  double finish_time_fairness = 0;  // mean of the group's jobs' ratios (1 = as if alone)
};

struct Summary {
  size_t jobs = 0;
  double avg_jct_s = 0;
  double p99_jct_s = 0;  // nearest rank
  double avg_queue_s = 0;
  double mean_bounded_slowdown = 0;
  double makespan_s = 0;   // first submit to last end
  double utilization = 0;  // GPU-seconds of work / (total GPUs x makespan)
  int64_t preemptions = 0;
  std::vector<GroupSummary> groups;  // by name
  // The worst group's finish-time fairness over the best's (1 = every group fared alike), and
  // Jain's index over the groups' values (1 = equal, 1/groups = one group took all the delay).
  double fairness_max_over_min = 1;
  double fairness_jain = 1;
};

inline constexpr double kSlowdownFloorS = 60;

Summary Summarize(const std::vector<JobOutcome>& jobs, int total_gpus);

// Lower bounds of the average JCT on a cluster of `total_gpus` GPUs:
//   per_job: each JCT is at least the job's duration, so the mean duration;
//   srpt: the preemptive SRPT optimum of the single-machine relaxation (one machine working at
//         total_gpus GPU-seconds per second, a job's size gpus x duration, released at submit),
//         which is optimal for the sum of completion times there.
// Both bound every schedule; `best` is the larger.
struct LowerBound {
  double per_job_avg_jct_s = 0;
  double srpt_avg_jct_s = 0;
  double best_avg_jct_s = 0;
};
LowerBound LowerBoundAvgJct(const std::vector<TraceJob>& jobs, int total_gpus);

}  // namespace drover::sim
