#pragma once
// The trace-driven simulator (issue 7): replays a trace on a declared cluster with the same
// sched::Decide() the engine calls. The model (docs/scheduling.md):
//   - jobs are rigid gangs: the GPU count is fixed at submit and all GPUs start together; a job of
//     up to a machine's GPUs runs on one machine, a larger one on whole machines;
//   - a job runs for its trace duration once started; a preempted job keeps its progress (it
//     checkpoints) and pays `restart_penalty_s` when it starts again;
//   - a run younger than the policy's min_runtime_ms is never preempted;
//   - durations are predicted from finished jobs (DurationPredictor, keyed by the job's group),
//     or, with `oracle`, known exactly.
#include <cstdint>
#include <vector>

#include "sched/policy.h"
#include "sim/metrics.h"
#include "sim/trace.h"

namespace drover::sim {

struct SimOptions {
  int nodes = 16;
  int gpus_per_node = 4;
  // A node list instead (GPUs of each machine, e.g. {8, 8, 4}): overrides the two above.
  std::vector<int> node_gpus;
  sched::PolicyConfig policy;
  bool oracle = false;
  bool fair_share = false;  // offer GPUs to the trace's groups by GPUs held (each weighs 1)
  double restart_penalty_s = 30;
  double sample_every_s = 3600;  // the timeline's resolution
};

struct TimelinePoint {
  double t_s = 0;
  int queued = 0;     // jobs waiting
  int gpus_used = 0;  // GPUs held
};

struct SimResult {
  Summary summary;
  LowerBound bound;
  std::vector<JobOutcome> outcomes;  // in trace order
  std::vector<TimelinePoint> timeline;
  int64_t decide_calls = 0;
  double decide_seconds = 0;  // time spent in Decide(), for the scale figures
  // Prediction error over jobs that had a prediction when they first started: the median of
  // |log(predicted / actual)| (0 = perfect; 0.69 = off by 2x either way).
  double prediction_median_abs_log_error = 0;
  int64_t predicted_jobs = 0;
};

// InvalidArgument when a job asks for more GPUs than the cluster has (naming how many do).
Result<SimResult> Simulate(const Trace& trace, const SimOptions& options);

}  // namespace drover::sim
