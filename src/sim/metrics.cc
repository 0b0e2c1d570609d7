#include "sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

namespace drover::sim {

Summary Summarize(const std::vector<JobOutcome>& jobs, int total_gpus) {
  Summary s;
  s.jobs = jobs.size();
  if (jobs.empty()) return s;
  std::vector<double> jct;
  jct.reserve(jobs.size());
  double first = jobs.front().submit_s, last = jobs.front().end_s, work = 0;
  double sum_jct = 0, sum_queue = 0, sum_slowdown = 0;
  for (const JobOutcome& j : jobs) {
    double t = j.end_s - j.submit_s;
    jct.push_back(t);
    sum_jct += t;
    sum_queue += std::max(0.0, t - j.duration_s);
    sum_slowdown += std::max(1.0, t / std::max(j.duration_s, kSlowdownFloorS));
    first = std::min(first, j.submit_s);
    last = std::max(last, j.end_s);
    work += j.gpus * j.duration_s;
    s.preemptions += j.preemptions;
  }
  double n = static_cast<double>(jobs.size());
  s.avg_jct_s = sum_jct / n;
  s.avg_queue_s = sum_queue / n;
  s.mean_bounded_slowdown = sum_slowdown / n;
  std::sort(jct.begin(), jct.end());
  size_t rank = static_cast<size_t>(std::ceil(0.99 * n));  // nearest rank, 1-based
  s.p99_jct_s = jct[std::clamp<size_t>(rank, 1, jct.size()) - 1];
  s.makespan_s = last - first;
  if (total_gpus > 0 && s.makespan_s > 0) s.utilization = work / (total_gpus * s.makespan_s);

  std::map<std::string, GroupSummary> groups;
  for (const JobOutcome& j : jobs) {
    GroupSummary& g = groups[j.group];
    double t = j.end_s - j.submit_s;
    ++g.jobs;
    g.avg_jct_s += t;
    g.avg_queue_s += std::max(0.0, t - j.duration_s);
    g.finish_time_fairness += std::max(1.0, t / std::max(j.duration_s, kSlowdownFloorS));
  }
  double lo = INFINITY, hi = 0, sum = 0, sum_sq = 0;
  for (auto& [name, g] : groups) {
    double k = static_cast<double>(g.jobs);
    g.group = name;
    g.avg_jct_s /= k;
    g.avg_queue_s /= k;
    g.finish_time_fairness /= k;
    lo = std::min(lo, g.finish_time_fairness);
    hi = std::max(hi, g.finish_time_fairness);
    sum += g.finish_time_fairness;
    sum_sq += g.finish_time_fairness * g.finish_time_fairness;
    s.groups.push_back(g);
  }
  s.fairness_max_over_min = hi / lo;
  s.fairness_jain = sum * sum / (static_cast<double>(groups.size()) * sum_sq);
  return s;
}

LowerBound LowerBoundAvgJct(const std::vector<TraceJob>& jobs, int total_gpus) {
  LowerBound b;
  if (jobs.empty() || total_gpus <= 0) return b;
  double sum_duration = 0;
  for (const TraceJob& j : jobs) sum_duration += j.duration_s;
  b.per_job_avg_jct_s = sum_duration / static_cast<double>(jobs.size());

  // SRPT on one machine of speed total_gpus: between releases, serve the smallest remaining work.
  std::vector<const TraceJob*> order;
  for (const TraceJob& j : jobs) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(),
                   [](const TraceJob* a, const TraceJob* c) { return a->submit_s < c->submit_s; });
  using Item = std::pair<double, double>;  // remaining work (GPU-s), release time
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  const double speed = total_gpus;
  double now = 0, sum_jct = 0;
  size_t next = 0;
  while (next < order.size() || !ready.empty()) {
    if (ready.empty()) now = std::max(now, order[next]->submit_s);
    while (next < order.size() && order[next]->submit_s <= now) {
      ready.emplace(order[next]->gpus * order[next]->duration_s, order[next]->submit_s);
      ++next;
    }
    auto [work, release] = ready.top();
    ready.pop();
    double finish = now + work / speed;
    double until = next < order.size() ? order[next]->submit_s : finish;
    if (finish <= until) {
      now = finish;
      sum_jct += finish - release;
    } else {  // a new job arrives first: serve until then, and decide again
      ready.emplace(work - (until - now) * speed, release);
      now = until;
    }
  }
  b.srpt_avg_jct_s = sum_jct / static_cast<double>(jobs.size());
  b.best_avg_jct_s = std::max(b.per_job_avg_jct_s, b.srpt_avg_jct_s);
  return b;
}

}  // namespace drover::sim
