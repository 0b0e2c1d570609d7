#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <queue>

#include "sched/gittins.h"
#include "sched/gpu_book.h"
#include "sched/predictor.h"
#include "sched/scheduler.h"

namespace drover::sim {
namespace {

constexpr double kMs = 1000.0;

Millis ToMs(double s) { return static_cast<Millis>(std::llround(s * kMs)); }

struct JobState {
  const TraceJob* job = nullptr;
  double remaining_s = 0;  // work left at its size (restart penalties included)
  bool waiting = false;
  bool running = false;
  bool done = false;
  bool started_once = false;
  double start_s = 0;         // this attempt
  double attained_gpu_s = 0;  // before this attempt
  std::vector<int> gpus;
  sched::StartAction placement;  // what it holds, given back to the book when it stops
  int preemptions = 0;
  int64_t epoch = 0;  // bumped when it stops, so its stale completion event is ignored
  double end_s = 0;
};

}  // namespace

Result<SimResult> Simulate(const Trace& trace, const SimOptions& o) {
  std::vector<int> sizes = o.node_gpus;
  if (sizes.empty() && o.nodes > 0) sizes.assign(static_cast<size_t>(o.nodes), o.gpus_per_node);
  int total = 0, largest = 0;
  for (int k : sizes) {
    if (k <= 0) {
      return InvalidArgument(
          "every machine of the cluster needs at least one GPU (--cluster 16x4)");
    }
    total += k;
    largest = std::max(largest, k);
  }
  if (sizes.empty()) {
    return InvalidArgument("the cluster needs at least one machine with one GPU (--cluster 16x4)");
  }
  int too_big = 0, biggest = 0;
  for (const TraceJob& j : trace.jobs) {
    // Up to a machine: one machine; more: whole machines.
    bool fits = j.gpus <= largest || j.gpus <= total;
    if (!fits) ++too_big;
    biggest = std::max(biggest, j.gpus);
  }
  if (too_big > 0) {
    return InvalidArgument(fmt::format(
        "{} job(s) of {} ask for more GPUs (up to {}) than the cluster has ({}); declare a "
        "larger --cluster",
        too_big, trace.source, biggest, total));
  }

  std::vector<JobState> jobs(trace.jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].job = &trace.jobs[i];
    jobs[i].remaining_s = trace.jobs[i].duration_s;
  }
  std::vector<sched::GpuState> gpus(total);
  for (int node = 0, g = 0; node < static_cast<int>(sizes.size()); ++node) {
    for (int k = 0; k < sizes[node]; ++k, ++g) {
      gpus[g].index = g;
      gpus[g].capacity = 1;  // whole GPUs only: memory plays no part in the trace
      gpus[g].node = node;
    }
  }
  // The same books the engine keeps: Decide()'s starts are applied and released through them.
  sched::GpuBook book(std::move(gpus));
  sched::DurationPredictor predictor;
  int64_t preempted_for = 0;  // the job the last preemption was for (ClusterView::first)
  // Fair share: every group (Philly: virtual cluster) weighs 1.
  std::map<std::string, sched::GroupShare> groups;
  if (o.fair_share) {
    for (const TraceJob& j : trace.jobs) groups[j.group];
  }
  sched::PolicyConfig policy = o.policy;
  std::vector<Millis> finished_sizes;  // GPU time of finished jobs, for the Gittins index
  std::vector<size_t> waiting;         // job positions
  std::vector<size_t> running;
  using Completion = std::tuple<double, size_t, int64_t>;  // end, job, epoch
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions;
  SimResult result;
  std::vector<double> log_errors;
  size_t next = 0, finished = 0;
  double now = 0, next_sample = trace.jobs.empty() ? 0 : trace.jobs.front().submit_s;
  int used = 0;

  auto predicted = [&](const JobState& s) -> std::optional<Millis> {
    if (o.oracle) return ToMs(s.job->duration_s);
    return predictor.Predict(s.job->group, s.job->gpus);
  };
  auto release = [&](JobState& s) {
    book.Release(s.placement, 0);
    s.placement = {};
    used -= static_cast<int>(s.gpus.size());
    s.gpus.clear();
    s.running = false;
    running.erase(std::find(running.begin(), running.end(), &s - jobs.data()));
  };

  while (finished < jobs.size()) {
    double t_arrival = next < jobs.size() ? trace.jobs[next].submit_s : INFINITY;
    double t_done = completions.empty() ? INFINITY : std::get<0>(completions.top());
    now = std::min(t_arrival, t_done);
    if (std::isinf(now)) {
      return Internal(
          fmt::format("the simulation stopped with {} job(s) waiting and nothing "
                      "running (a policy that places nothing?)",
                      waiting.size()));
    }
    while (next_sample <= now) {
      result.timeline.push_back({next_sample, static_cast<int>(waiting.size()), used});
      next_sample += o.sample_every_s;
    }
    while (!completions.empty() && std::get<0>(completions.top()) <= now) {
      auto [end, i, epoch] = completions.top();
      completions.pop();
      JobState& s = jobs[i];
      if (epoch != s.epoch || !s.running) continue;
      release(s);
      s.done = true;
      s.end_s = end;
      ++finished;
      predictor.Observe(s.job->group, s.job->gpus, ToMs(s.job->duration_s));
      finished_sizes.push_back(ToMs(s.job->duration_s * s.job->gpus));
      if (policy.kind == sched::PolicyKind::kGittins && finished_sizes.size() % 200 == 0) {
        policy.gittins = std::make_shared<const sched::GittinsIndex>(finished_sizes);
      }
    }
    while (next < jobs.size() && trace.jobs[next].submit_s <= now) {
      jobs[next].waiting = true;
      waiting.push_back(next);
      ++next;
    }
    // Decide until nothing more changes at this instant (a preemption frees GPUs for the next
    // call). Without a free GPU a non-preemptive policy has nothing to decide.
    for (;;) {
      if (waiting.empty()) break;
      if (used == total && !sched::Preemptive(o.policy.kind)) break;
      std::vector<sched::PendingRun> queue;
      queue.reserve(waiting.size());
      for (size_t i : waiting) {
        const JobState& s = jobs[i];
        sched::PendingRun p;
        p.run_id = static_cast<int64_t>(i);
        p.experiment_id = 1;
        p.seq = s.job->id;
        p.resources.gpus = s.job->gpus;
        p.resources.cpus = 0;
        p.submitted_ms = ToMs(s.job->submit_s);
        p.attained_gpu_ms = ToMs(s.attained_gpu_s);
        p.predicted_ms = predicted(s);
        if (o.fair_share) p.group = s.job->group;
        queue.push_back(std::move(p));
      }
      sched::ClusterView view;
      view.gpus = book.gpus();
      view.first = preempted_for;
      view.groups = groups;
      for (size_t i : running) {
        const JobState& s = jobs[i];
        sched::RunningRun r;
        r.run_id = static_cast<int64_t>(i);
        r.seq = s.job->id;
        r.gpus = s.gpus;
        r.started_ms = ToMs(s.start_s);
        r.attained_gpu_ms = ToMs(s.attained_gpu_s + (now - s.start_s) * s.job->gpus);
        r.predicted_ms = predicted(s);
        if (o.fair_share) r.group = s.job->group;
        view.active.push_back(std::move(r));
      }
      auto t0 = std::chrono::steady_clock::now();
      sched::Decision d = sched::Decide(queue, view, ToMs(now), policy);
      result.decide_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++result.decide_calls;
      preempted_for = d.preempt_for;
      for (int64_t id : d.preempt) {
        JobState& s = jobs[static_cast<size_t>(id)];
        double ran = now - s.start_s;
        s.remaining_s = std::max(0.0, s.remaining_s - ran) + o.restart_penalty_s;
        s.attained_gpu_s += ran * s.job->gpus;
        ++s.preemptions;
        ++s.epoch;
        release(s);
        s.waiting = true;
        waiting.push_back(static_cast<size_t>(id));
      }
      for (const sched::StartAction& a : d.starts) {
        JobState& s = jobs[static_cast<size_t>(a.run_id)];
        if (!s.started_once && !o.oracle) {
          if (auto p = predicted(s); p && s.job->duration_s > 0 && *p > 0) {
            log_errors.push_back(std::fabs(std::log(*p / kMs / s.job->duration_s)));
          }
        }
        s.started_once = true;
        s.waiting = false;
        s.running = true;
        s.start_s = now;
        s.gpus = a.gpus;
        s.placement = a;
        book.Apply(a, 0);
        used += static_cast<int>(a.gpus.size());
        running.push_back(static_cast<size_t>(a.run_id));
        completions.emplace(now + s.remaining_s, static_cast<size_t>(a.run_id), s.epoch);
      }
      if (!d.starts.empty()) {
        waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                     [&](size_t i) { return !jobs[i].waiting; }),
                      waiting.end());
      }
      if (d.preempt.empty()) break;
    }
  }
  result.timeline.push_back({now, static_cast<int>(waiting.size()), used});

  result.outcomes.reserve(jobs.size());
  for (const JobState& s : jobs) {
    result.outcomes.push_back(
        {s.job->submit_s, s.end_s, s.job->duration_s, s.job->gpus, s.preemptions, s.job->group});
  }
  result.summary = Summarize(result.outcomes, total);
  result.bound = LowerBoundAvgJct(trace.jobs, total);
  if (!log_errors.empty()) {
    std::nth_element(log_errors.begin(), log_errors.begin() + log_errors.size() / 2,
                     log_errors.end());
    result.prediction_median_abs_log_error = log_errors[log_errors.size() / 2];
    result.predicted_jobs = static_cast<int64_t>(log_errors.size());
  }
  return result;
}

}  // namespace drover::sim
