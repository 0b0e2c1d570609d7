// sched_bench [QUEUED] [MACHINES] [GPUS_PER_MACHINE] [PASSES] [POLICY]: the cost of one
// sched::Decide() pass at cluster scale (bench/README.md, "Scheduling"): QUEUED waiting runs
// (default 100,000; 1-8 GPUs, mostly 1, as in the Philly trace) on MACHINES x GPUS (default
// 1,250 x 8 = 10,000 GPUs) of which 90% are held by running runs, so each pass places some runs
// and (for preemptive policies) looks for runs to stop. Prints one JSON line: p50 and p99 time
// per pass, queued runs ranked per second, and decisions (starts and preemptions) per second.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

using namespace drover;

int main(int argc, char** argv) {
  long queued = argc > 1 ? std::atol(argv[1]) : 100'000;
  int machines = argc > 2 ? std::atoi(argv[2]) : 1'250;
  int per = argc > 3 ? std::atoi(argv[3]) : 8;
  int passes = argc > 4 ? std::atoi(argv[4]) : 30;
  auto kind = sched::ParsePolicy(argc > 5 ? argv[5] : "default");
  if (!kind.ok() || queued <= 0 || machines <= 0 || per <= 0 || passes <= 0) {
    std::fprintf(stderr, "usage: sched_bench [QUEUED] [MACHINES] [GPUS] [PASSES] [POLICY]\n");
    return 2;
  }
  sched::PolicyConfig policy;
  policy.kind = *kind;
  std::mt19937 rng(3);
  std::discrete_distribution<int> size({93, 3, 2, 2});  // 1, 2, 4, 8 GPUs
  const int sizes[] = {1, 2, 4, 8};
  const Millis hour = 3'600'000;
  std::vector<double> ms;
  long decided = 0, started = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<sched::PendingRun> queue(queued);
    for (long i = 0; i < queued; ++i) {
      auto& p = queue[i];
      p.run_id = i + 1;
      p.experiment_id = 1 + i % 100;
      p.seq = i + 1;
      p.resources.gpus = sizes[size(rng)];
      p.resources.cpus = 0;
      p.submitted_ms = static_cast<Millis>(rng() % (24 * hour));
      p.attained_gpu_ms = static_cast<Millis>(rng() % 4) * hour / 2;
      if (rng() % 2) p.predicted_ms = static_cast<Millis>(1 + rng() % (10 * hour));
    }
    sched::ClusterView c;
    int64_t id = queued + 1;
    for (int m = 0; m < machines; ++m) {
      for (int g = 0; g < per; ++g) {
        sched::GpuState s;
        s.index = m * per + g;
        s.node = m;
        s.capacity = 1;
        bool busy = rng() % 10 != 0;
        if (busy) {
          s.runs = 1;
          s.reserved = 1;
          s.exclusive = true;
          sched::RunningRun r;
          r.run_id = id++;
          r.seq = r.run_id;
          r.gpus = {s.index};
          r.started_ms = 0;
          r.attained_gpu_ms = static_cast<Millis>(rng() % 40) * hour;
          c.active.push_back(r);
        }
        c.gpus.push_back(s);
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    sched::Decision d = sched::Decide(queue, c, 24 * hour, policy);
    double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(took);
    decided += queued;
    started += static_cast<long>(d.starts.size() + d.preempt.size());
    if (pass == 0) {
      std::fprintf(stderr, "pass 0: %zu started, %zu preempted\n", d.starts.size(), d.preempt.size());
    }
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double total_s = 0;
  for (double x : ms) total_s += x / 1000;
  auto pct = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))]; };
  std::printf("{\"policy\": \"%s\", \"queued\": %ld, \"gpus\": %d, \"passes\": %d, \"p50_ms\": %.2f, "
              "\"p99_ms\": %.2f, \"runs_ranked_per_s\": %.0f, \"starts_and_preemptions_per_s\": %.0f}\n",
              std::string(sched::ToString(*kind)).c_str(), queued, machines * per, passes, pct(0.5),
              pct(0.99), decided / total_s, started / total_s);
  return 0;
}
