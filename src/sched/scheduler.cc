#include "sched/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

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

// Idle whole GPUs per machine, kept up to date while one call hands GPUs out. Machines are kept
// in buckets by how many idle GPUs they have, so the best fit for a gang is found without looking
// at every machine (10,000 GPUs are 1,250 machines: bench/README.md, "Scheduling").
class IdleIndex {
 public:
  explicit IdleIndex(const std::vector<GpuState>& gpus) {
    std::map<int, std::vector<size_t>> by_node;  // node id -> GPU positions, ordered by id
    std::map<int, int> sizes;
    for (size_t i = 0; i < gpus.size(); ++i) {
      ++sizes[gpus[i].node];
      auto& v = by_node[gpus[i].node];
      if (gpus[i].runs == 0 && !gpus[i].exclusive) v.push_back(i);
    }
    for (auto& [id, idle] : by_node) {
      // Within a machine: the smallest idle GPUs first, ties by index (deterministic).
      std::stable_sort(idle.begin(), idle.end(), [&](size_t a, size_t b) {
        if (gpus[a].capacity != gpus[b].capacity) return gpus[a].capacity < gpus[b].capacity;
        return gpus[a].index < gpus[b].index;
      });
      slot_[id] = static_cast<int>(nodes_.size());
      nodes_.push_back({sizes[id], std::move(idle)});
      max_size_ = std::max(max_size_, sizes[id]);
    }
    by_idle_.resize(max_size_ + 1);
    for (size_t s = 0; s < nodes_.size(); ++s) {
      by_idle_[nodes_[s].idle.size()].insert(static_cast<int>(s));
      idle_ += static_cast<int>(nodes_[s].idle.size());
    }
  }

  int idle() const { return idle_; }

  // Positions (in the GPU vector) for a gang of `count` whole GPUs, or nothing.
  std::vector<size_t> Choose(int count) const {
    if (count > idle_ || count <= 0) return {};
    if (count <= max_size_) {
      // Best fit: the machine with the fewest idle GPUs that still fits the gang (the first such
      // machine by id).
      for (int k = count; k <= max_size_; ++k) {
        if (by_idle_[k].empty()) continue;
        const Node& n = nodes_[*by_idle_[k].begin()];
        return {n.idle.begin(), n.idle.begin() + count};
      }
      return {};
    }
    // Larger than a machine: whole idle machines, by id.
    std::vector<size_t> out;
    std::vector<int> whole;
    for (int k = 1; k <= max_size_; ++k) {
      for (int s : by_idle_[k]) {
        if (nodes_[s].size == k) whole.push_back(s);
      }
    }
    std::sort(whole.begin(), whole.end());
    for (int s : whole) {
      for (size_t g : nodes_[s].idle) {
        if (static_cast<int>(out.size()) < count) out.push_back(g);
      }
      if (static_cast<int>(out.size()) == count) return out;
    }
    return {};
  }

  void Take(const std::vector<GpuState>& gpus, size_t pos) {
    int s = slot_.at(gpus[pos].node);
    auto& v = nodes_[s].idle;
    auto it = std::find(v.begin(), v.end(), pos);
    if (it == v.end()) return;
    by_idle_[v.size()].erase(s);
    v.erase(it);
    by_idle_[v.size()].insert(s);
    --idle_;
  }
  void Give(const std::vector<GpuState>& gpus, size_t pos) {
    int s = slot_.at(gpus[pos].node);
    auto& v = nodes_[s].idle;
    if (std::find(v.begin(), v.end(), pos) != v.end()) return;
    by_idle_[v.size()].erase(s);
    v.push_back(pos);
    by_idle_[std::min<size_t>(v.size(), max_size_)].insert(s);
    ++idle_;
  }

 private:
  struct Node {
    int size = 0;
    std::vector<size_t> idle;
  };
  std::vector<Node> nodes_;                // ordered by node id
  std::unordered_map<int, int> slot_;      // node id -> position in nodes_
  std::vector<std::set<int>> by_idle_;     // idle GPUs -> machines (positions) with that many
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
  // Runs are taken best first from a heap rather than a sorted list: a pass usually ends long
  // before the queue does (the pool is full), and building a heap is linear where sorting 100,000
  // runs is not (bench/README.md, "Scheduling").
  auto worse = [](const Entry& a, const Entry& b) {
    if (a.rank < b.rank) return false;
    if (b.rank < a.rank) return true;
    return a.run->seq > b.run->seq;
  };
  std::make_heap(order.begin(), order.end(), worse);

  // What this pass hands out is taken from a copy of the pool (not of the running runs, which it
  // only reads).
  struct Pool {
    std::vector<GpuState> gpus;
    int cpu_slots_total;
    int cpu_slots_used;
    const std::map<int64_t, int>& max_parallel;
    std::map<int64_t, int> running;
    const std::vector<RunningRun>& active;
  } c{cluster.gpus, cluster.cpu_slots_total, cluster.cpu_slots_used, cluster.max_parallel,
      cluster.running, cluster.active};
  std::unordered_map<int, size_t> position;  // GPU index -> position in c.gpus
  position.reserve(c.gpus.size());
  for (size_t i = 0; i < c.gpus.size(); ++i) position[c.gpus[i].index] = i;
  IdleIndex idle(c.gpus);
  Decision d;
  std::optional<Entry> blocked;  // the best-ranked run that could not be placed
  // Whether a run that shares GPUs by memory could still fit on a GPU that is not idle (idle ones
  // are counted by `idle`).
  bool shared_room = false;
  for (const GpuState& g : c.gpus) {
    shared_room = shared_room || (g.runs > 0 && !g.exclusive && Free(g) > 0);
  }
  for (auto end = order.end(); end != order.begin(); --end) {
    std::pop_heap(order.begin(), end, worse);
    const Entry& e = *(end - 1);
    const PendingRun* p = e.run;
    // Nothing left to hand out: the rest of the queue cannot start this pass.
    if (blocked && idle.idle() == 0 && !shared_room) break;
    if (p->not_before_ms > now) continue;
    if (auto limit = c.max_parallel.find(p->experiment_id);
        limit != c.max_parallel.end() && limit->second > 0) {
      auto it = c.running.find(p->experiment_id);
      if (it != c.running.end() && it->second >= limit->second) continue;
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
          if (!blocked) blocked = e;
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
          if (!blocked) blocked = e;
          continue;
        }
        for (int index : a.gpus) {
          GpuState& g = c.gpus[position[index]];
          a.gpu_memory = p->resources.gpu_memory;
          g.reserved += p->resources.gpu_memory;
          if (g.runs++ == 0) idle.Take(c.gpus, position[index]);
          shared_room = shared_room || Free(g) > 0;
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
  if (!Preemptive(policy.kind) || !blocked || c.gpus.empty() ||
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
      d.preempt_for = blocked->run->run_id;
      d.preempt_why = fmt::format("run {} ranks higher under the {} policy and waits for GPUs",
                                  blocked->run->run_id, ToString(policy.kind));
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
