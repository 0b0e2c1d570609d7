#include "sched/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"

namespace drover::sched {
namespace {

int64_t Free(const GpuState& g) { return g.capacity - g.reserved; }

// Chooses `count` GPUs for the run, or nothing when it cannot be placed now.
std::vector<int> Place(const Resources& r, const std::vector<GpuState>& gpus) {
  std::vector<const GpuState*> fits;
  for (const auto& g : gpus) {
    if (g.exclusive) continue;
    if (r.gpu_memory > 0) {
      if (Free(g) >= r.gpu_memory) fits.push_back(&g);
    } else if (g.runs == 0) {
      fits.push_back(&g);
    }
  }
  if (static_cast<int>(fits.size()) < r.gpus) return {};
  // Best fit: the tightest holes first. For whole GPUs, the smallest idle GPUs first, keeping big
  // ones for runs that need them; ties by index so decisions are deterministic.
  std::stable_sort(fits.begin(), fits.end(), [&](const GpuState* a, const GpuState* b) {
    int64_t fa = r.gpu_memory > 0 ? Free(*a) : a->capacity;
    int64_t fb = r.gpu_memory > 0 ? Free(*b) : b->capacity;
    if (fa != fb) return fa < fb;
    return a->index < b->index;
  });
  std::vector<int> chosen;
  for (int i = 0; i < r.gpus; ++i) chosen.push_back(fits[i]->index);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace

std::vector<StartAction> Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster,
                                Millis now) {
  std::vector<const PendingRun*> order;
  order.reserve(queue.size());
  for (const auto& p : queue) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const PendingRun* a, const PendingRun* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    return a->seq < b->seq;
  });

  ClusterView c = cluster;  // updated as decisions take resources
  std::vector<StartAction> actions;
  for (const PendingRun* p : order) {
    if (p->not_before_ms > now) continue;
    auto limit = c.max_parallel.find(p->experiment_id);
    if (limit != c.max_parallel.end() && limit->second > 0 &&
        c.running[p->experiment_id] >= limit->second) {
      continue;
    }
    if (c.cpu_slots_total > 0 && c.cpu_slots_used + p->resources.cpus > c.cpu_slots_total) {
      continue;
    }
    StartAction a;
    a.run_id = p->run_id;
    if (p->resources.gpus > 0) {
      a.gpus = Place(p->resources, c.gpus);
      if (a.gpus.empty()) continue;
      a.exclusive = p->resources.gpu_memory == 0;
      for (auto& g : c.gpus) {
        if (std::find(a.gpus.begin(), a.gpus.end(), g.index) == a.gpus.end()) continue;
        int64_t take = a.exclusive ? Free(g) : p->resources.gpu_memory;
        a.gpu_memory = take;
        g.reserved += take;
        g.runs += 1;
        g.exclusive = a.exclusive;
      }
    }
    c.cpu_slots_used += p->resources.cpus;
    c.running[p->experiment_id] += 1;
    actions.push_back(std::move(a));
  }
  return actions;
}

Status CheckFits(const Resources& r, const std::vector<GpuState>& gpus, int cpu_slots_total) {
  if (cpu_slots_total > 0 && r.cpus > cpu_slots_total) {
    return InvalidArgument(fmt::format(
        "each run needs {} CPU slots but drover has {}; lower resources.cpus or pass --cpus {}",
        r.cpus, cpu_slots_total, r.cpus));
  }
  if (r.gpus == 0) return Status::Ok();
  if (gpus.empty()) {
    return InvalidArgument(fmt::format(
        "each run needs {} GPU(s) but this machine has none that drover can see; run on CPU with "
        "--set resources.gpus=0, or declare GPUs with --fake-gpus 2x16GiB",
        r.gpus));
  }
  int usable = 0;
  int64_t biggest = 0;
  for (const auto& g : gpus) {
    biggest = std::max(biggest, g.capacity);
    if (g.capacity >= r.gpu_memory) ++usable;
  }
  if (static_cast<int>(gpus.size()) < r.gpus) {
    return InvalidArgument(
        fmt::format("each run needs {} GPUs but this machine has {}; lower "
                    "resources.gpus",
                    r.gpus, gpus.size()));
  }
  if (usable < r.gpus) {
    return InvalidArgument(fmt::format(
        "each run needs {} per GPU but the largest GPU has {}; lower resources.gpu_memory",
        FormatBytes(r.gpu_memory), FormatBytes(biggest)));
  }
  return Status::Ok();
}

}  // namespace drover::sched
