#include "sched/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/strings.h"
#include "sched/gpu_book.h"

namespace drover::sched {
namespace {

int64_t Free(const GpuState& g) { return g.capacity - g.reserved; }

// Chooses `count` GPUs for a run that shares GPUs by memory, or nothing when it cannot be
// placed now. Spread before share: on real GPUs two runs on one GPU each train at about half
// speed, so a run goes to an idle GPU when one fits it and shares only when none does, or when
// `keep_whole` (a whole-GPU run or a gang waits, a machine is held, or the caller expects such
// runs): then it shares first, keeping idle GPUs whole. Among GPUs that are shared, the least
// busy by measured utilisation, then by measured memory in use, then the tightest fit.
std::vector<int> Place(const Resources& r, const std::vector<GpuState>& gpus, bool keep_whole) {
  std::vector<const GpuState*> idle;
  std::vector<const GpuState*> busy;
  for (const auto& g : gpus) {
    if (g.exclusive || Free(g) < r.gpu_memory) continue;
    (g.runs == 0 ? idle : busy).push_back(&g);
  }
  if (static_cast<int>(idle.size() + busy.size()) < r.gpus) return {};
  // Idle GPUs per machine: among equally good GPUs, the machine with the fewest idle GPUs, so a
  // run does not break up the machine a gang could still have whole.
  std::unordered_map<int, int> idle_on;
  for (const auto& g : gpus) {
    if (g.runs == 0 && !g.exclusive) ++idle_on[g.node];
  }
  // Idle GPUs: the smallest first (big ones stay for runs that need them), ties by index so
  // decisions are deterministic.
  std::stable_sort(idle.begin(), idle.end(), [&](const GpuState* a, const GpuState* b) {
    if (a->capacity != b->capacity) return a->capacity < b->capacity;
    if (idle_on[a->node] != idle_on[b->node]) return idle_on[a->node] < idle_on[b->node];
    return a->index < b->index;
  });
  // Shared GPUs: a reading that is not known (-1) counts as 0, so without telemetry (fake GPUs,
  // the simulator) this is best fit.
  auto util = [](const GpuState* g) { return std::max(0.0, g->utilization); };
  auto used = [](const GpuState* g) { return std::max<int64_t>(0, g->memory_used); };
  std::stable_sort(busy.begin(), busy.end(), [&](const GpuState* a, const GpuState* b) {
    if (util(a) != util(b)) return util(a) < util(b);
    if (used(a) != used(b)) return used(a) < used(b);
    if (Free(*a) != Free(*b)) return Free(*a) < Free(*b);
    if (idle_on[a->node] != idle_on[b->node]) return idle_on[a->node] < idle_on[b->node];
    return a->index < b->index;
  });
  std::vector<const GpuState*> order = keep_whole ? busy : idle;
  const auto& then = keep_whole ? idle : busy;
  order.insert(order.end(), then.begin(), then.end());
  std::vector<int> chosen;
  for (int i = 0; i < r.gpus; ++i) chosen.push_back(order[i]->index);
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
  std::vector<Node> nodes_;             // ordered by node id
  std::unordered_map<int, int> slot_;   // node id -> position in nodes_
  std::vector<std::set<int>> by_idle_;  // idle GPUs -> machines (positions) with that many
  int idle_ = 0;
  int max_size_ = 0;
};

// The runs to stop so a gang of `need` whole GPUs fits, chosen machine by machine: on each machine
// the worst-ranked runs first (the smaller of equally ranked ones first), and of all machines the
// one whose set spares the better-ranked runs, then stops the fewest GPUs. A larger gang clears
// whole machines, the cheapest first. Choosing victims worst-first across the whole pool instead
// stops runs on every machine before one has room (1,900 runs for one 8-GPU gang on a busy
// 10,000-GPU pool).
std::vector<int64_t> PackedVictims(int need,
                                   const std::vector<std::pair<Rank, const RunningRun*>>& victims,
                                   const std::vector<GpuState>& gpus) {
  struct NodeInfo {
    int size = 0;
    int idle = 0;
    std::vector<std::pair<Rank, const RunningRun*>> cands;
  };
  std::map<int, NodeInfo> nodes;
  std::unordered_map<int, int> node_of;  // GPU index -> node
  for (const GpuState& g : gpus) {
    NodeInfo& n = nodes[g.node];
    ++n.size;
    if (g.runs == 0 && !g.exclusive) ++n.idle;
    node_of[g.index] = g.node;
  }
  std::vector<int> on;
  for (const auto& v : victims) {
    on.clear();
    for (int index : v.second->gpus) {
      auto it = node_of.find(index);
      if (it != node_of.end() && std::find(on.begin(), on.end(), it->second) == on.end()) {
        on.push_back(it->second);
      }
    }
    for (int n : on) nodes[n].cands.push_back(v);
  }
  auto freed_on = [&](const RunningRun& r, int node) {
    int k = 0;
    for (int index : r.gpus) {
      if (auto it = node_of.find(index); it != node_of.end() && it->second == node) ++k;
    }
    return k;
  };
  struct Cost {
    double best = 0;  // the best-ranked victim's primary rank: larger is cheaper
    int gpus = 0;     // GPUs stopped: fewer is cheaper
    bool operator<(const Cost& o) const {  // cheaper than
      if (best != o.best) return best > o.best;
      return gpus < o.gpus;
    }
  };
  auto add = [](Cost& cost, const std::pair<Rank, const RunningRun*>& v, bool first) {
    cost.best = first ? v.first.primary : std::min(cost.best, v.first.primary);
    cost.gpus += static_cast<int>(v.second->gpus.size());
  };
  int node_size = 0;
  for (const auto& [id, n] : nodes) node_size = std::max(node_size, n.size);
  if (need <= node_size) {
    std::optional<std::pair<Cost, std::vector<int64_t>>> best;
    for (auto& [id, n] : nodes) {
      if (n.size < need || n.cands.empty()) continue;
      std::stable_sort(n.cands.begin(), n.cands.end(), [](const auto& a, const auto& b) {
        if (a.first.primary != b.first.primary) return a.first.primary > b.first.primary;
        if (a.second->gpus.size() != b.second->gpus.size()) {
          return a.second->gpus.size() < b.second->gpus.size();
        }
        return a.second->seq > b.second->seq;
      });
      int have = n.idle;
      Cost cost;
      std::vector<int64_t> stop;
      for (const auto& v : n.cands) {
        if (have >= need) break;
        add(cost, v, stop.empty());
        stop.push_back(v.second->run_id);
        have += freed_on(*v.second, id);
      }
      if (have < need || stop.empty()) continue;
      if (!best || cost < best->first) best.emplace(cost, std::move(stop));
    }
    return best ? best->second : std::vector<int64_t>{};
  }
  // Whole machines: those every run on which may be stopped, the cheapest first.
  std::vector<std::pair<Cost, int>> clearable;
  for (auto& [id, n] : nodes) {
    if (n.size != node_size) continue;
    int have = n.idle;
    Cost cost;
    for (size_t i = 0; i < n.cands.size(); ++i) {
      add(cost, n.cands[i], i == 0);
      have += freed_on(*n.cands[i].second, id);
    }
    if (have == n.size) clearable.emplace_back(cost, id);
  }
  std::stable_sort(clearable.begin(), clearable.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::set<int64_t> stop;
  int have = 0;
  for (const auto& [cost, id] : clearable) {
    for (const auto& v : nodes[id].cands) stop.insert(v.second->run_id);
    have += node_size;
    if (have >= need) return {stop.begin(), stop.end()};
  }
  return {};
}

RankInput InputOf(const PendingRun& p, Millis now) {
  return {p.priority,
          p.seq,
          std::max(1, p.resources.gpus),
          std::max<Millis>(0, now - p.submitted_ms),
          p.attained_gpu_ms,
          p.predicted_ms};
}

RankInput InputOf(const RunningRun& r) {
  return {r.priority,        r.seq,         std::max<int>(1, static_cast<int>(r.gpus.size())), 0,
          r.attained_gpu_ms, r.predicted_ms};
}

}  // namespace

namespace {

struct Entry {
  Rank rank;
  const PendingRun* run;
};

// Heap order: the best-ranked run on top, submit order among equals.
bool Worse(const Entry& a, const Entry& b) {
  if (a.rank < b.rank) return false;
  if (b.rank < a.rank) return true;
  return a.run->seq > b.run->seq;
}

// One user's runs waiting in a group, best first (a heap), and the GPUs they hold.
struct UserQueue {
  int held = 0;  // GPUs its runs hold, those started by this pass included
  std::vector<Entry> heap;
  size_t left = 0;  // entries not yet taken: heap[0, left)
};

// The runs of one group waiting, and its share of the pool. Inside the group, users share it
// (two levels: docs/scheduling.md, "Fair share"): its next run is the best-ranked run of the
// user holding the fewest of its GPUs. One user (every personal daemon) is the policy's order.
struct GroupQueue {
  std::string name;
  double weight = 1;
  int quota = 0;  // 0: none
  int held = 0;   // GPUs its runs hold, those started by this pass included
  std::vector<UserQueue> users;
  std::unordered_map<int64_t, size_t> user_of;
  UserQueue& User(int64_t user) {
    // Runs come mostly in runs of one user (one user's daemon: always): no lookup then.
    if (last_ < users.size() && last_user_ == user) return users[last_];
    auto [it, added] = user_of.try_emplace(user, users.size());
    if (added) users.emplace_back();
    last_ = it->second;
    last_user_ = user;
    return users[last_];
  }
  size_t last_ = SIZE_MAX;
  int64_t last_user_ = -1;
  UserQueue* Next() {
    UserQueue* best = nullptr;
    for (UserQueue& u : users) {
      if (u.left == 0) continue;
      if (!best || u.held < best->held ||
          (u.held == best->held && Worse(best->heap.front(), u.heap.front()))) {
        best = &u;
      }
    }
    return best;
  }
  bool Empty() const {
    return std::all_of(users.begin(), users.end(), [](const UserQueue& u) { return u.left == 0; });
  }
  const Entry& Top() { return Next()->heap.front(); }
  Entry Pop() {
    UserQueue& u = *Next();
    std::pop_heap(u.heap.begin(), u.heap.begin() + u.left, Worse);
    return u.heap[--u.left];
  }
  double Share() const { return held / std::max(weight, 1e-9); }
  bool Within(int gpus) const { return quota <= 0 || held + gpus <= quota; }
};

int GpusOf(const PendingRun& p) { return std::max(0, p.resources.gpus); }

}  // namespace

namespace {
Decision DecidePass(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
                    const PolicyConfig& policy);
void Explain(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
             const PolicyConfig& policy, Decision& d);
}  // namespace

Decision Decide(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
                const PolicyConfig& policy) {
  Decision d = DecidePass(queue, cluster, now, policy);
  if (cluster.explain) Explain(queue, cluster, now, policy, d);
  return d;
}

namespace {

Decision DecidePass(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
                    const PolicyConfig& policy) {
  // Runs are taken best first from heaps rather than sorted lists: a pass usually ends long
  // before the queue does (the pool is full), and building a heap is linear where sorting 100,000
  // runs is not (bench/README.md, "Scheduling"). One heap per group; without groups, one heap.
  std::vector<GroupQueue> groups;
  std::unordered_map<std::string, size_t> group_of;
  std::map<std::string, Entry> slot_waiting;  // each group's best run waiting for a CPU slot only
  auto group = [&](const std::string& name) -> GroupQueue& {
    auto [it, added] =
        group_of.try_emplace(cluster.groups.empty() ? std::string() : name, groups.size());
    if (added) {
      GroupQueue g;
      g.name = it->first;
      if (auto share = cluster.groups.find(g.name); share != cluster.groups.end()) {
        g.weight = share->second.weight;
        g.quota = share->second.quota_gpus;
      }
      groups.push_back(std::move(g));
    }
    return groups[it->second];
  };
  // A run that cannot start in this pass whatever else starts in it stays out of the heaps: its
  // backoff has not ended, its experiment already runs max_parallel runs, or every CPU slot is
  // taken and it needs one. Starts only use up slots and raise the counts, so start() would skip
  // it each time it came up; left in, a long queue behind a full machine would be popped whole
  // on every pass (n log n per pass, for nothing). Its group still counts as waiting.
  auto startable_but_for_slots = [&](const PendingRun& p) {
    if (p.not_before_ms > now) return false;
    if (auto limit = cluster.max_parallel.find(p.experiment_id);
        limit != cluster.max_parallel.end() && limit->second > 0) {
      auto it = cluster.running.find(p.experiment_id);
      if (it != cluster.running.end() && it->second >= limit->second) return false;
    }
    return true;
  };
  auto may_start = [&](const PendingRun& p) {
    return startable_but_for_slots(p) &&
           (cluster.cpu_slots_total <= 0 ||
            cluster.cpu_slots_used + p.resources.cpus <= cluster.cpu_slots_total);
  };
  if (cluster.groups.empty()) {
    GroupQueue& all = group("");
    for (const auto& p : queue) {
      if (may_start(p)) all.User(p.user).heap.push_back({RankOf(policy, InputOf(p, now)), &p});
    }
    for (const RunningRun& r : cluster.active) {
      all.held += static_cast<int>(r.gpus.size());
      all.User(r.user).held += static_cast<int>(r.gpus.size());
    }
  } else {
    for (const auto& p : queue) {
      GroupQueue& g = group(p.group);
      if (may_start(p)) {
        g.User(p.user).heap.push_back({RankOf(policy, InputOf(p, now)), &p});
      } else if (startable_but_for_slots(p) && GpusOf(p) > 0) {
        // Waiting for a CPU slot alone: it starts nowhere this pass, but a group within its
        // quota still reclaims the GPUs borrowed from it (below).
        Entry e{RankOf(policy, InputOf(p, now)), &p};
        auto [it, fresh] = slot_waiting.try_emplace(p.group, e);
        if (!fresh && Worse(it->second, e)) it->second = e;
      }
    }
    for (const RunningRun& r : cluster.active) {
      GroupQueue& g = group(r.group);
      g.held += static_cast<int>(r.gpus.size());
      g.User(r.user).held += static_cast<int>(r.gpus.size());
    }
  }
  // The fewest CPU slots a run in the heaps needs: once fewer are free, the pass is over.
  int64_t min_cpus = std::numeric_limits<int>::max();
  for (GroupQueue& g : groups) {
    for (UserQueue& u : g.users) {
      std::make_heap(u.heap.begin(), u.heap.end(), Worse);
      u.left = u.heap.size();
      for (const Entry& e : u.heap) {
        min_cpus = std::min<int64_t>(min_cpus, std::max(0, e.run->resources.cpus));
      }
    }
  }

  // What this pass hands out is taken from a copy of the pool (not of the running runs, which it
  // only reads).
  struct Pool {
    std::vector<GpuState> gpus;
    int cpu_slots_total;
    int cpu_slots_used;
    const std::map<int64_t, int>& max_parallel;
    std::map<int64_t, int> running;
    const std::vector<RunningRun>& active;
  } c{cluster.gpus,         cluster.cpu_slots_total, cluster.cpu_slots_used,
      cluster.max_parallel, cluster.running,         cluster.active};
  std::unordered_map<int, size_t> position;  // GPU index -> position in c.gpus
  position.reserve(c.gpus.size());
  for (size_t i = 0; i < c.gpus.size(); ++i) position[c.gpus[i].index] = i;
  std::unordered_map<int64_t, size_t> run_group;  // running run -> its group (for reclaim)
  if (!cluster.groups.empty()) {
    for (const RunningRun& r : c.active) run_group[r.run_id] = group_of.at(r.group);
  }
  IdleIndex idle(c.gpus);
  Decision d;
  // Whether idle GPUs are worth keeping whole: a run that needs whole GPUs waits (or the caller
  // expects such runs). Otherwise runs that share GPUs by memory spread over idle GPUs first.
  bool keep_whole = cluster.whole_gpu_demand;
  for (size_t i = 0; i < queue.size() && !keep_whole; ++i) {
    const PendingRun& p = queue[i];
    keep_whole = p.resources.gpus > 0 && p.resources.gpu_memory == 0 && p.not_before_ms <= now;
  }
  // Whether a run that shares GPUs by memory could still fit on a GPU that is not idle (idle ones
  // are counted by `idle`).
  bool shared_room = false;
  for (const GpuState& g : c.gpus) {
    shared_room = shared_room || (g.runs > 0 && !g.exclusive && Free(g) > 0);
  }

  // Backfill: the first whole-GPU run that cannot start and has waited `reserve_after_ms` gets
  // the machine(s) closest to fitting it held back; later runs may use those GPUs only when they
  // are predicted to end before the held machine frees enough for it (so they do not delay it).
  struct Reservation {
    const PendingRun* run = nullptr;
    std::vector<size_t> idle;  // held idle GPUs (positions), taken out of `idle`
    Millis until = 0;          // when the held machines are predicted to fit it (kNever: unknown)
  } hold;
  constexpr Millis kNever = std::numeric_limits<Millis>::max();
  auto reserve = [&](const PendingRun& p) {
    int need = GpusOf(p);
    std::map<int, std::pair<int, int>> machines;  // node -> (size, idle)
    for (size_t i = 0; i < c.gpus.size(); ++i) {
      auto& m = machines[c.gpus[i].node];
      ++m.first;
      if (c.gpus[i].runs == 0 && !c.gpus[i].exclusive) ++m.second;
    }
    int size = 0;
    for (const auto& [n, m] : machines) size = std::max(size, m.first);
    if (size == 0) return;
    int count = need <= size ? 1 : (need + size - 1) / size;
    std::vector<int> order;
    for (const auto& [n, m] : machines) {
      if (m.first == size || need <= m.first) order.push_back(n);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return machines[a].second > machines[b].second; });
    if (static_cast<int>(order.size()) < count) return;
    std::set<int> chosen(order.begin(), order.begin() + count);
    // When the held machines free enough: runs on them end at start + prediction.
    std::vector<Millis> ends;
    int have = 0;
    for (const auto& [n, m] : machines) {
      if (chosen.count(n)) have += m.second;
    }
    for (const RunningRun& r : c.active) {
      int on = 0;
      for (int index : r.gpus) {
        auto it = position.find(index);
        if (it != position.end() && chosen.count(c.gpus[it->second].node)) ++on;
      }
      if (on == 0) continue;
      Millis end = r.predicted_ms && r.started_ms + *r.predicted_ms > now
                       ? r.started_ms + *r.predicted_ms
                       : kNever;
      for (int k = 0; k < on; ++k) ends.push_back(end);
    }
    std::sort(ends.begin(), ends.end());
    hold.run = &p;
    hold.until = kNever;
    for (size_t k = 0; have < need && k < ends.size(); ++k) {
      ++have;
      hold.until = ends[k];
    }
    for (size_t i = 0; i < c.gpus.size(); ++i) {
      if (!chosen.count(c.gpus[i].node) || c.gpus[i].runs != 0 || c.gpus[i].exclusive) continue;
      hold.idle.push_back(i);
      idle.Take(c.gpus, i);
      c.gpus[i].exclusive = true;  // so runs that share GPUs by memory keep off it too
    }
    d.reserved_for = p.run_id;
  };
  auto unreserve = [&] {
    for (size_t i : hold.idle) d.reserved_gpus.push_back(c.gpus[i].index);
    std::sort(d.reserved_gpus.begin(), d.reserved_gpus.end());
    for (size_t i : hold.idle) {
      c.gpus[i].exclusive = false;
      idle.Give(c.gpus, i);
    }
    hold.idle.clear();
  };

  enum class Tried { kStarted, kSkipped, kNoRoom };
  auto start = [&](const PendingRun& p, GroupQueue& g) -> Tried {
    if (p.not_before_ms > now) return Tried::kSkipped;
    if (auto limit = c.max_parallel.find(p.experiment_id);
        limit != c.max_parallel.end() && limit->second > 0) {
      auto it = c.running.find(p.experiment_id);
      if (it != c.running.end() && it->second >= limit->second) return Tried::kSkipped;
    }
    if (c.cpu_slots_total > 0 && c.cpu_slots_used + p.resources.cpus > c.cpu_slots_total) {
      return Tried::kSkipped;
    }
    StartAction a;
    a.run_id = p.run_id;
    if (p.resources.gpus > 0) {
      a.exclusive = p.resources.gpu_memory == 0;
      if (a.exclusive) {
        std::vector<size_t> chosen = idle.Choose(p.resources.gpus);
        if (chosen.empty() && hold.run && hold.run != &p && p.predicted_ms &&
            hold.until != kNever && now + *p.predicted_ms <= hold.until) {
          // Backfill into the held GPUs, on one machine: it ends before the run they are held
          // for could start.
          std::map<int, std::vector<size_t>> by_node;
          for (size_t pos : hold.idle) by_node[c.gpus[pos].node].push_back(pos);
          for (auto& [node, held] : by_node) {
            if (static_cast<int>(held.size()) < p.resources.gpus) continue;
            chosen.assign(held.begin(), held.begin() + p.resources.gpus);
            break;
          }
          for (size_t pos : chosen) {
            c.gpus[pos].exclusive = false;
            hold.idle.erase(std::find(hold.idle.begin(), hold.idle.end(), pos));
          }
        }
        if (chosen.empty()) return Tried::kNoRoom;
        for (size_t pos : chosen) {
          GpuState& gpu = c.gpus[pos];
          a.gpus.push_back(gpu.index);
          a.gpu_memory = Free(gpu);  // a whole GPU: all it has
          Take(gpu, a);
          idle.Take(c.gpus, pos);
        }
        std::sort(a.gpus.begin(), a.gpus.end());
      } else {
        a.gpus = Place(p.resources, c.gpus, keep_whole || hold.run != nullptr);
        if (a.gpus.empty()) return Tried::kNoRoom;
        a.gpu_memory = p.resources.gpu_memory;
        for (int index : a.gpus) {
          GpuState& gpu = c.gpus[position[index]];
          if (gpu.runs == 0) idle.Take(c.gpus, position[index]);
          Take(gpu, a);
          shared_room = shared_room || Free(gpu) > 0;
        }
      }
    }
    c.cpu_slots_used += p.resources.cpus;
    c.running[p.experiment_id] += 1;
    g.held += GpusOf(p);
    g.User(p.user).held += GpusOf(p);
    d.starts.push_back(std::move(a));
    return Tried::kStarted;
  };

  std::optional<Entry> blocked;                // the first run that could not be placed
  std::optional<Entry> quota_blocked;          // ... of a group within its quota
  std::vector<std::pair<Entry, size_t>> over;  // runs past their group's quota, for borrowing
  // Once only held GPUs are left, only runs predicted to end in time may start: look at this
  // many more at most (Slurm's bf_max_job_test, 500 by default), so a pass stays short on a long
  // queue.
  constexpr int kBackfillLook = 500;
  int backfill_looked = 0;
  auto exhausted = [&] {
    if (idle.idle() > 0 || shared_room) return false;
    return hold.idle.empty() || ++backfill_looked > kBackfillLook;
  };

  // The run the last preemptions were for goes first; if it does not fit yet (its victims are
  // still stopping), the machine closest to fitting it is held for it.
  const PendingRun* first = nullptr;
  if (cluster.first != 0) {
    for (const PendingRun& p : queue) {
      if (p.run_id == cluster.first) first = &p;
    }
  }
  if (first) {
    GroupQueue& g = groups[group_of.at(cluster.groups.empty() ? std::string() : first->group)];
    if (start(*first, g) == Tried::kNoRoom && first->resources.gpu_memory == 0) reserve(*first);
  }

  // Fair share: groups holding less than their share of the pool (their weight over the weights
  // of the groups with runs waiting or running) are offered GPUs first, the furthest below first
  // (GPUs held / weight), each its best-ranked run first; once every group that waits has its
  // share, the policy's order decides across groups. Without groups this is the policy's order.
  double weights = 0;
  for (const GroupQueue& q : groups) weights += std::max(q.weight, 0.0);
  const double pool = static_cast<double>(c.gpus.size());
  for (;;) {
    GroupQueue* g = nullptr;
    bool under = false;
    for (GroupQueue& q : groups) {
      if (q.Empty()) continue;
      bool q_under = weights <= 0 || q.held < pool * std::max(q.weight, 0.0) / weights;
      if (!g || (q_under && !under) ||
          (q_under == under && (under ? (q.Share() < g->Share() ||
                                         (q.Share() == g->Share() && Worse(g->Top(), q.Top())))
                                      : Worse(g->Top(), q.Top())))) {
        g = &q;
        under = q_under;
      }
    }
    if (!g) break;
    // Nothing left to hand out: the rest of the queue cannot start this pass.
    if (blocked && exhausted()) break;
    if (c.cpu_slots_total > 0 && c.cpu_slots_used + min_cpus > c.cpu_slots_total) break;
    Entry e = g->Pop();
    if (e.run == first) continue;
    if (!g->Within(GpusOf(*e.run))) {
      over.emplace_back(e, static_cast<size_t>(g - groups.data()));
      continue;
    }
    if (start(*e.run, *g) != Tried::kNoRoom) continue;
    if (!blocked) blocked = e;
    if (!quota_blocked && g->quota > 0) quota_blocked = e;
    if (!hold.run && e.run->resources.gpu_memory == 0 && GpusOf(*e.run) > 0 &&
        now - e.run->submitted_ms >= policy.reserve_after_ms) {
      reserve(*e.run);
    }
  }
  // Runs that need no GPU still start while CPU slots are free, even once the GPUs are gone.
  if (c.cpu_slots_total <= 0 || c.cpu_slots_used + min_cpus <= c.cpu_slots_total) {
    std::vector<std::pair<Entry, size_t>> cpu_only;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      for (const UserQueue& u : groups[gi].users) {
        for (size_t i = 0; i < u.left; ++i) {
          if (GpusOf(*u.heap[i].run) == 0) cpu_only.emplace_back(u.heap[i], gi);
        }
      }
    }
    std::stable_sort(cpu_only.begin(), cpu_only.end(),
                     [](const auto& a, const auto& b) { return Worse(b.first, a.first); });
    for (auto& [e, gi] : cpu_only) {
      if (e.run != first) start(*e.run, groups[gi]);
    }
  }
  // Borrowing: idle GPUs go to runs past their group's quota that may be preempted, unless a
  // group within its quota waits (then its quota is reclaimed below instead). A borrower never
  // preempts anything.
  if (!quota_blocked) {
    std::stable_sort(over.begin(), over.end(),
                     [](const auto& a, const auto& b) { return Worse(b.first, a.first); });
    for (auto& [e, gi] : over) {
      if (exhausted()) break;
      if (e.run->preemptible) start(*e.run, groups[gi]);
    }
  }
  unreserve();
  const int allocated = static_cast<int>(c.gpus.size()) - idle.idle();

  // A group within its quota whose best run waits only for a CPU slot reclaims too (the runs
  // stopped for it free their slots with their GPUs).
  if (!quota_blocked) {
    for (const auto& [name, e] : slot_waiting) {
      auto gi = group_of.find(name);
      if (gi == group_of.end()) continue;
      const GroupQueue& q = groups[gi->second];
      if (q.quota > 0 && q.Within(GpusOf(*e.run)) && e.run->resources.gpu_memory == 0) {
        quota_blocked = e;
        break;
      }
    }
  }

  // Reclaim: a group within its quota waits while others run past theirs: stop runs of the
  // groups past their quota, on one machine, those of the group furthest past first, the most
  // recently started first (regardless of policy: a quota is a promise).
  if (quota_blocked && quota_blocked->run->resources.gpu_memory == 0) {
    std::vector<std::pair<Rank, const RunningRun*>> borrowed;
    for (const RunningRun& r : c.active) {
      const GroupQueue& q = groups[run_group.at(r.run_id)];
      if (!r.preemptible || !r.exclusive || q.quota <= 0 || q.held <= q.quota) continue;
      // PackedVictims stops the larger ranks first: the furthest past its quota, then the most
      // recently started (Unix milliseconds stay below 1e13 until the year 2286).
      double rank =
          static_cast<double>(q.held - q.quota) * 1e13 + static_cast<double>(r.started_ms);
      borrowed.push_back({Rank{rank, 0}, &r});
    }
    std::vector<int64_t> stop = PackedVictims(GpusOf(*quota_blocked->run), borrowed, c.gpus);
    if (!stop.empty()) {
      d.preempt = std::move(stop);
      d.preempt_for = quota_blocked->run->run_id;
      d.preempt_why = fmt::format(
          "its group ran past its quota on borrowed GPUs, and run {} of group '{}' (within its "
          "quota of {} GPUs) waits for them",
          quota_blocked->run->run_id, quota_blocked->run->group,
          cluster.groups.at(quota_blocked->run->group).quota_gpus);
      return d;
    }
  }

  // Preemption: for the best-ranked run that did not fit, stop runs of a worse rank (a later LAS
  // queue, a longer class; submit order alone is no reason) on one machine, when that makes room
  // for it. One run per call: the next call (after the stopped runs let go of their GPUs) starts
  // it.
  if (!Preemptive(policy.kind) || !blocked || c.gpus.empty() ||
      blocked->run->resources.gpu_memory != 0 || blocked->run == first) {
    return d;
  }
  if (allocated < policy.preempt_above_allocated * static_cast<double>(c.gpus.size())) return d;
  std::vector<std::pair<Rank, const RunningRun*>> victims;
  for (const RunningRun& r : c.active) {
    if (!r.preemptible || !r.exclusive || now - r.started_ms < policy.min_runtime_ms) continue;
    Rank rank = RankOf(policy, InputOf(r));
    if (blocked->rank.primary < rank.primary) victims.emplace_back(rank, &r);
  }
  std::vector<int64_t> stop = PackedVictims(GpusOf(*blocked->run), victims, c.gpus);
  if (!stop.empty()) {
    d.preempt = std::move(stop);
    d.preempt_for = blocked->run->run_id;
    d.preempt_why = fmt::format("run {} ranks higher under the {} policy and waits for GPUs",
                                blocked->run->run_id, ToString(policy.kind));
  }
  return d;
}

// After the pass: the pool as the starts left it, and for each run that did not start the first
// thing that keeps it waiting, in the order the pass itself would find it.
void Explain(const std::vector<PendingRun>& queue, const ClusterView& cluster, Millis now,
             const PolicyConfig& policy, Decision& d) {
  std::vector<GpuState> gpus = cluster.gpus;
  std::unordered_map<int, size_t> position;
  for (size_t i = 0; i < gpus.size(); ++i) position[gpus[i].index] = i;
  std::unordered_set<int64_t> started;
  std::map<int64_t, int> running = cluster.running;
  int cpu_used = cluster.cpu_slots_used;
  std::map<std::string, int> group_held;
  for (const RunningRun& r : cluster.active) group_held[r.group] += static_cast<int>(r.gpus.size());
  const std::set<int> reserved(d.reserved_gpus.begin(), d.reserved_gpus.end());
  std::map<int64_t, const PendingRun*> by_id;
  for (const PendingRun& p : queue) by_id[p.run_id] = &p;
  for (const StartAction& a : d.starts) {
    started.insert(a.run_id);
    for (int index : a.gpus) Take(gpus[position[index]], a);
    if (auto it = by_id.find(a.run_id); it != by_id.end()) {
      running[it->second->experiment_id] += 1;
      cpu_used += it->second->resources.cpus;
      group_held[it->second->group] += static_cast<int>(a.gpus.size());
    }
  }
  // Idle GPUs per machine, and the freest GPU that may be shared, as the pass left them.
  std::map<int, int> idle_on, size_of;
  int64_t freest = 0;
  for (const GpuState& g : gpus) {
    ++size_of[g.node];
    const bool held = reserved.count(g.index) > 0;
    if (g.runs == 0 && !g.exclusive && !held) ++idle_on[g.node];
    if (!g.exclusive && !held) freest = std::max(freest, Free(g));
  }
  // Free memory of the GPUs a shared run could use, and of the held ones, sorted: one binary
  // search per run (a queue of 100,000 on 10,000 GPUs is asked every few seconds).
  std::vector<int64_t> free_open, free_held;
  for (const GpuState& g : gpus) {
    if (reserved.count(g.index)) {
      free_held.push_back(g.capacity - g.reserved);
    } else if (!g.exclusive) {
      free_open.push_back(g.capacity - g.reserved);
    }
  }
  std::sort(free_open.begin(), free_open.end());
  std::sort(free_held.begin(), free_held.end());
  auto at_least = [](const std::vector<int64_t>& v, int64_t need) {
    return static_cast<int>(v.end() - std::lower_bound(v.begin(), v.end(), need));
  };
  int machine = 0;
  for (const auto& [node, n] : size_of) machine = std::max(machine, n);
  int best_idle = 0;
  for (const auto& [node, n] : idle_on) best_idle = std::max(best_idle, n);
  int idle_total = 0;
  for (const auto& [node, n] : idle_on) idle_total += n;
  for (const PendingRun& p : queue) {
    if (started.count(p.run_id)) continue;
    WaitReason w;
    w.run_id = p.run_id;
    w.policy = std::string(ToString(policy.kind));
    const int need_gpus = GpusOf(p);
    auto limit = cluster.max_parallel.find(p.experiment_id);
    auto share = cluster.groups.find(p.group);
    if (p.not_before_ms > now) {
      w.kind = WaitKind::kBackoff;
      w.until_ms = p.not_before_ms;
    } else if ((d.preempt_for == p.run_id && !d.preempt.empty()) || cluster.first == p.run_id) {
      w.kind = WaitKind::kPreempting;
      w.count = static_cast<int>(d.preempt_for == p.run_id ? d.preempt.size() : 0);
    } else if (limit != cluster.max_parallel.end() && limit->second > 0 &&
               running[p.experiment_id] >= limit->second) {
      w.kind = WaitKind::kMaxParallel;
      w.limit = limit->second;
    } else if (cluster.cpu_slots_total > 0 &&
               cpu_used + p.resources.cpus > cluster.cpu_slots_total) {
      w.kind = WaitKind::kCpuSlots;
      w.need = p.resources.cpus;
      w.free = std::max(0, cluster.cpu_slots_total - cpu_used);
    } else if (share != cluster.groups.end() && share->second.quota_gpus > 0 &&
               group_held[p.group] + need_gpus > share->second.quota_gpus &&
               (!p.preemptible || idle_total < need_gpus)) {
      w.kind = WaitKind::kQuota;
      w.group = p.group;
      w.limit = share->second.quota_gpus;
      w.held = group_held[p.group];
    } else if (need_gpus > 0 && p.resources.gpu_memory > 0) {
      const int fit = at_least(free_open, p.resources.gpu_memory);
      const int fit_held = at_least(free_held, p.resources.gpu_memory);
      if (fit >= need_gpus) {
        w.kind = WaitKind::kQueued;
      } else if (fit + fit_held >= need_gpus) {
        w.kind = WaitKind::kHeldForRun;
        w.other_run = d.reserved_for;
      } else {
        w.kind = WaitKind::kGpuMemory;
        w.need = p.resources.gpu_memory;
        w.free = freest;
        w.count = need_gpus;
      }
    } else if (need_gpus > 0) {
      const int have = need_gpus <= machine ? best_idle : idle_total;
      const int have_with_held = have + static_cast<int>(reserved.size());
      if (have >= need_gpus) {
        w.kind = WaitKind::kQueued;
      } else if (have_with_held >= need_gpus && d.reserved_for != 0 && d.reserved_for != p.run_id) {
        w.kind = WaitKind::kHeldForRun;
        w.other_run = d.reserved_for;
      } else {
        w.kind = WaitKind::kWholeGpus;
        w.need = need_gpus;
        w.free = have;
      }
    }
    d.waiting.push_back(std::move(w));
  }
}

}  // namespace

std::string_view ToString(WaitKind k) {
  switch (k) {
    case WaitKind::kBackoff: return "backoff";
    case WaitKind::kMaxParallel: return "max_parallel";
    case WaitKind::kCpuSlots: return "cpu_slots";
    case WaitKind::kGpuMemory: return "gpu_memory";
    case WaitKind::kWholeGpus: return "whole_gpus";
    case WaitKind::kQuota: return "quota";
    case WaitKind::kHeldForRun: return "held_for_run";
    case WaitKind::kPreempting: return "preempting";
    case WaitKind::kQueued: return "queued";
  }
  return "queued";
}

std::string WaitText(const WaitReason& r, Millis now) {
  auto gib = [](int64_t bytes) { return fmt::format("{:.1f} GiB", bytes / double(1LL << 30)); };
  switch (r.kind) {
    case WaitKind::kBackoff:
      return fmt::format("retry backoff after a failure: it may start in {:.0f} s",
                         std::max<Millis>(0, r.until_ms - now) / 1000.0);
    case WaitKind::kMaxParallel:
      return fmt::format("max_parallel reached: its experiment already runs {} runs at once",
                         r.limit);
    case WaitKind::kCpuSlots:
      return fmt::format("no CPU slot: it needs {}, {} free", r.need, r.free);
    case WaitKind::kGpuMemory:
      return fmt::format("no GPU has {} free{} (the freest has {})", gib(r.need),
                         r.count > 1 ? fmt::format(" on {} GPUs", r.count) : std::string(),
                         gib(r.free));
    case WaitKind::kWholeGpus:
      return fmt::format("it needs {} whole GPU{}{}; {} {} idle", r.need, r.need > 1 ? "s" : "",
                         r.need > 1 ? " on one machine" : "", r.free, r.free == 1 ? "is" : "are");
    case WaitKind::kQuota:
      return fmt::format("group '{}' holds {} of its quota of {} GPUs", r.group, r.held, r.limit);
    case WaitKind::kHeldForRun:
      return fmt::format("the GPUs that would fit it are held for run {}, which waits for a "
                         "whole machine",
                         r.other_run);
    case WaitKind::kPreempting:
      return r.count > 0 ? fmt::format("{} run{} being stopped to make room for it", r.count,
                                       r.count > 1 ? "s are" : " is")
                         : std::string("runs are being stopped to make room for it");
    case WaitKind::kQueued:
      return fmt::format("it fits, but better-ranked runs go first under the {} policy",
                         r.policy);
  }
  return "";
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
