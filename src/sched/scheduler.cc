#include "sched/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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

// Idle whole GPUs per machine, kept up to date while one call hands GPUs out.
class IdleIndex {
 public:
  explicit IdleIndex(const std::vector<GpuState>& gpus) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      const GpuState& g = gpus[i];
      Node& n = nodes_[g.node];
      ++n.size;
      if (g.runs == 0 && !g.exclusive) {
        n.idle.push_back(i);
        ++idle_;
      }
    }
    for (auto& [id, n] : nodes_) {
      // Within a machine: the smallest idle GPUs first, ties by index (deterministic).
      std::stable_sort(n.idle.begin(), n.idle.end(), [&](size_t a, size_t b) {
        if (gpus[a].capacity != gpus[b].capacity) return gpus[a].capacity < gpus[b].capacity;
        return gpus[a].index < gpus[b].index;
      });
      max_size_ = std::max(max_size_, n.size);
    }
  }

  int idle() const { return idle_; }

  // Positions (in the GPU vector) for a gang of `count` whole GPUs, or nothing.
  std::vector<size_t> Choose(int count) const {
    if (count > idle_) return {};
    if (count <= max_size_) {
      // Best fit: the machine with the fewest idle GPUs that still fits the gang.
      const Node* best = nullptr;
      for (const auto& [id, n] : nodes_) {
        if (static_cast<int>(n.idle.size()) < count) continue;
        if (best == nullptr || n.idle.size() < best->idle.size()) best = &n;
      }
      if (best == nullptr) return {};
      return {best->idle.begin(), best->idle.begin() + count};
    }
    // Larger than a machine: whole idle machines, in order.
    std::vector<size_t> out;
    for (const auto& [id, n] : nodes_) {
      if (static_cast<int>(n.idle.size()) != n.size) continue;
      for (size_t g : n.idle) {
        if (static_cast<int>(out.size()) < count) out.push_back(g);
      }
      if (static_cast<int>(out.size()) == count) return out;
    }
    return {};
  }

  void Take(const std::vector<GpuState>& gpus, size_t pos) { Remove(gpus[pos].node, pos); }
  void Give(const std::vector<GpuState>& gpus, size_t pos) {
    nodes_[gpus[pos].node].idle.push_back(pos);
    ++idle_;
  }

 private:
  struct Node {
    int size = 0;
    std::vector<size_t> idle;
  };
  void Remove(int node, size_t pos) {
    auto& v = nodes_[node].idle;
    auto it = std::find(v.begin(), v.end(), pos);
    if (it != v.end()) {
      v.erase(it);
      --idle_;
    }
  }
  std::map<int, Node> nodes_;
  int idle_ = 0;
  int max_size_ = 0;
};

RankInput InputOf(const PendingRun& p, Millis now) {
  return {p.priority, p.seq, std::max(1, p.resources.gpus),
          std::max<Millis>(0, now - p.submitted_ms), p.attained_gpu_ms, p.predicted_ms};
}

RankInput InputOf(const RunningRun& r) {
  return {r.priority, r.seq, std::max<int>(1, static_cast<int>(r.gpus.size())), 0,
          r.attained_gpu_ms, r.predicted_ms};
}

}  // namespace

Decision Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
                const PolicyConfig& policy) {
  struct Entry {
    Rank rank;
    const PendingRun* run;
  };
  std::vector<Entry> order;
  order.reserve(queue.size());
  for (const auto& p : queue) order.push_back({RankOf(policy, InputOf(p, now)), &p});
  std::stable_sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
    if (a.rank < b.rank) return true;
    if (b.rank < a.rank) return false;
    return a.run->seq < b.run->seq;
  });

  ClusterView c = cluster;  // updated as decisions take resources
  std::map<int, size_t> position;  // GPU index -> position in c.gpus
  for (size_t i = 0; i < c.gpus.size(); ++i) position[c.gpus[i].index] = i;
  IdleIndex idle(c.gpus);
  Decision d;
  const Entry* blocked = nullptr;  // the best-ranked run that could not be placed
  for (const Entry& e : order) {
    const PendingRun* p = e.run;
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
      a.exclusive = p->resources.gpu_memory == 0;
      if (a.exclusive) {
        std::vector<size_t> chosen = idle.Choose(p->resources.gpus);
        if (chosen.empty()) {
          if (blocked == nullptr) blocked = &e;
          continue;
        }
        for (size_t pos : chosen) {
          GpuState& g = c.gpus[pos];
          a.gpus.push_back(g.index);
          a.gpu_memory = Free(g);
          g.reserved += Free(g);
          g.runs += 1;
          g.exclusive = true;
          idle.Take(c.gpus, pos);
        }
        std::sort(a.gpus.begin(), a.gpus.end());
      } else {
        a.gpus = Place(p->resources, c.gpus);
        if (a.gpus.empty()) {
          if (blocked == nullptr) blocked = &e;
          continue;
        }
        for (int index : a.gpus) {
          GpuState& g = c.gpus[position[index]];
          a.gpu_memory = p->resources.gpu_memory;
          g.reserved += p->resources.gpu_memory;
          if (g.runs++ == 0) idle.Take(c.gpus, position[index]);
        }
      }
    }
    c.cpu_slots_used += p->resources.cpus;
    c.running[p->experiment_id] += 1;
    d.starts.push_back(std::move(a));
  }

  // Preemption: for the best-ranked run that did not fit, stop worse-ranked whole-GPU runs, worst
  // first, when that frees room for it. One run per call: the next call (after the stopped runs
  // let go of their GPUs) starts it.
  if (!Preemptive(policy.kind) || blocked == nullptr || c.gpus.empty() ||
      blocked->run->resources.gpu_memory != 0) {
    return d;
  }
  int allocated = static_cast<int>(c.gpus.size()) - idle.idle();
  if (allocated < policy.preempt_above_allocated * static_cast<double>(c.gpus.size())) return d;
  std::vector<std::pair<Rank, const RunningRun*>> victims;
  for (const RunningRun& r : c.active) {
    if (!r.preemptible || !r.exclusive || now - r.started_ms < policy.min_runtime_ms) continue;
    Rank rank = RankOf(policy, InputOf(r));
    if (blocked->rank < rank) victims.emplace_back(rank, &r);
  }
  std::stable_sort(victims.begin(), victims.end(), [](const auto& a, const auto& b) {
    if (b.first < a.first) return true;  // worst first
    if (a.first < b.first) return false;
    return a.second->seq > b.second->seq;
  });
  std::vector<int64_t> stop;
  for (const auto& [rank, r] : victims) {
    stop.push_back(r->run_id);
    for (int index : r->gpus) {
      auto it = position.find(index);
      if (it != position.end()) idle.Give(c.gpus, it->second);
    }
    if (!idle.Choose(blocked->run->resources.gpus).empty()) {
      d.preempt = std::move(stop);
      return d;
    }
  }
  return d;  // stopping every candidate would not make room: stop none
}

std::vector<StartAction> Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster,
                                Millis now) {
  return Decide(queue, cluster, now, PolicyConfig{}).starts;
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
