#pragma once
// Small hand-made pools and queues for the scheduler's unit tests.
#include <optional>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace drover::sched::testing {

constexpr Millis kHour = 3600LL * 1000;

// n machines of k whole GPUs (80 GiB each).
inline ClusterView Machines(int n, int k) {
  ClusterView c;
  for (int m = 0; m < n; ++m) {
    for (int g = 0; g < k; ++g) {
      GpuState s;
      s.index = m * k + g;
      s.capacity = 80LL << 30;
      s.node = m;
      c.gpus.push_back(s);
    }
  }
  return c;
}

inline PendingRun Job(int64_t id, int gpus, Millis submitted = 0, std::string group = {}) {
  PendingRun p;
  p.run_id = id;
  p.experiment_id = 1;
  p.seq = id;
  p.resources.gpus = gpus;
  p.resources.cpus = 0;
  p.submitted_ms = submitted;
  p.group = std::move(group);
  return p;
}

// Marks GPUs as held by a running run and records it for preemption.
inline void Hold(ClusterView& c, int64_t id, std::vector<int> gpus, Millis started,
                 Millis attained, std::optional<Millis> predicted = {}, std::string group = {}) {
  RunningRun r;
  r.run_id = id;
  r.seq = id;
  r.gpus = gpus;
  r.started_ms = started;
  r.attained_gpu_ms = attained;
  r.predicted_ms = predicted;
  r.group = std::move(group);
  for (int g : gpus) {
    c.gpus[g].runs = 1;
    c.gpus[g].exclusive = true;
    c.gpus[g].reserved = c.gpus[g].capacity;
  }
  c.active.push_back(r);
}

inline std::vector<int64_t> Started(const Decision& d) {
  std::vector<int64_t> ids;
  for (const auto& s : d.starts) ids.push_back(s.run_id);
  return ids;
}

}  // namespace drover::sched::testing
