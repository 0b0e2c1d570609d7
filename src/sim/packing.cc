#include "sim/packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "sched/scheduler.h"

namespace drover::sim {
namespace {

constexpr int kWholeGpu = 1000;  // milli-GPUs

int Share(const TraceJob& pod) { return std::clamp(pod.gpu_milli, 1, kWholeGpu); }

}  // namespace

std::string_view ToString(Packer p) {
  switch (p) {
    case Packer::kFirstFit:
      return "first-fit";
    case Packer::kBestFit:
      return "best-fit";
    case Packer::kDrover:
      return "drover";
  }
  return "?";
}

Result<Packer> ParsePacker(std::string_view name) {
  for (Packer p : AllPackers()) {
    if (ToString(p) == name) return p;
  }
  return InvalidArgument(
      fmt::format("packer '{}': choose first-fit, best-fit, drover or all", name));
}

std::vector<Packer> AllPackers() { return {Packer::kFirstFit, Packer::kBestFit, Packer::kDrover}; }

PackState::PackState(const std::vector<TraceNode>& nodes) {
  nodes_.reserve(nodes.size());
  for (const TraceNode& t : nodes) {
    Node n;
    n.cpu_free = t.cpu_milli;
    n.mem_free = t.memory_mib;
    n.gpu_free.assign(std::max(0, t.gpus), kWholeGpu);
    n.gpu_pods.assign(std::max(0, t.gpus), 0);
    n.gpu_offset = static_cast<int>(node_of_gpu_.size());
    for (int g = 0; g < t.gpus; ++g) node_of_gpu_.push_back(static_cast<int>(nodes_.size()));
    capacity_milli_ += static_cast<int64_t>(kWholeGpu) * std::max(0, t.gpus);
    nodes_.push_back(std::move(n));
  }
  free_milli_ = capacity_milli_;
}

std::vector<int> PackState::Candidates(const TraceJob& pod, int n) const {
  std::vector<int> out;
  const Node& node = nodes_[n];
  int share = Share(pod);
  for (size_t g = 0; g < node.gpu_free.size(); ++g) {
    if (node.gpu_free[g] >= share) out.push_back(static_cast<int>(g));
  }
  return out;
}

bool PackState::Fits(const TraceJob& pod, int n) const {
  const Node& node = nodes_[n];
  if (node.cpu_free < pod.cpu_milli || node.mem_free < pod.memory_mib) return false;
  if (pod.gpus <= 0) return true;
  if (static_cast<int>(node.gpu_free.size()) < pod.gpus) return false;
  int share = Share(pod), fit = 0;
  for (int f : node.gpu_free) fit += f >= share ? 1 : 0;
  return fit >= pod.gpus;
}

Result<std::optional<Placement>> PackState::Choose(const TraceJob& pod, Packer packer) const {
  if (packer == Packer::kDrover) return ChooseDrover(pod);
  std::optional<Placement> best;
  int64_t best_left = 0;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!Fits(pod, static_cast<int>(n))) continue;
    std::vector<int> gpus = Candidates(pod, static_cast<int>(n));
    const Node& node = nodes_[n];
    if (packer == Packer::kFirstFit) {
      gpus.resize(std::max(0, pod.gpus));
      return std::optional<Placement>(Placement{static_cast<int>(n), std::move(gpus)});
    }
    // Best fit: the node with the least GPU capacity left, first such node on a tie.
    int64_t left = 0;
    for (int f : node.gpu_free) left += f;
    if (best && left >= best_left) continue;
    // On it, the GPUs with the least share left (ties by position).
    std::stable_sort(gpus.begin(), gpus.end(),
                     [&](int a, int b) { return node.gpu_free[a] < node.gpu_free[b]; });
    gpus.resize(std::max(0, pod.gpus));
    std::sort(gpus.begin(), gpus.end());
    best = Placement{static_cast<int>(n), std::move(gpus)};
    best_left = left;
  }
  return best;
}

Result<std::optional<Placement>> PackState::ChooseDrover(const TraceJob& pod) const {
  int share = Share(pod);
  if (pod.gpus > 1 && share < kWholeGpu) {
    return InvalidArgument(fmt::format(
        "pod {} asks for {} GPUs at {} milli-GPUs each; drover's scheduler shares GPUs only for "
        "runs of one GPU",
        pod.id, pod.gpus, share));
  }
  // The pool Decide sees: every GPU of each node the pod fits on. A run sharing GPUs declares its
  // share as gpu_memory on GPUs of capacity 1000; a whole-GPU run declares none (exclusive), which
  // makes Decide keep a gang on one machine.
  sched::ClusterView view;
  // Pods arrive one at a time, so Decide() never sees the whole-GPU pods still to come in its
  // queue; the trace's workload has them all along, as a lab's queue would show the engine.
  view.whole_gpu_demand = true;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!Fits(pod, static_cast<int>(n))) continue;
    const Node& node = nodes_[n];
    for (size_t g = 0; g < node.gpu_free.size(); ++g) {
      sched::GpuState s;
      s.index = node.gpu_offset + static_cast<int>(g);
      s.capacity = kWholeGpu;
      s.reserved = kWholeGpu - node.gpu_free[g];
      s.runs = node.gpu_pods[g];
      s.exclusive = node.gpu_pods[g] == 1 && node.gpu_free[g] == 0;  // a whole-GPU pod's
      s.node = static_cast<int>(n);
      view.gpus.push_back(s);
    }
  }
  if (view.gpus.empty() && pod.gpus > 0) return std::optional<Placement>();
  sched::PendingRun run;
  run.run_id = pod.id;
  run.experiment_id = 1;
  run.seq = pod.id;
  run.resources.gpus = std::max(0, pod.gpus);
  run.resources.gpu_memory = share < kWholeGpu ? share : 0;
  run.resources.cpus = 1;
  std::vector<sched::StartAction> starts = sched::Decide({run}, view, 0);
  if (starts.empty()) return std::optional<Placement>();
  const sched::StartAction& a = starts.front();
  if (a.gpus.empty()) {
    // A pod without GPUs: Decide does not choose a machine; the first that fits.
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (Fits(pod, static_cast<int>(n)))
        return std::optional<Placement>(Placement{static_cast<int>(n), {}});
    }
    return std::optional<Placement>();
  }
  Placement p;
  p.node = node_of_gpu_.at(a.gpus.front());
  for (int index : a.gpus) {
    if (node_of_gpu_.at(index) != p.node) {
      return Internal(fmt::format("Decide() spread pod {} over several machines", pod.id));
    }
    p.gpus.push_back(index - nodes_[p.node].gpu_offset);
  }
  std::sort(p.gpus.begin(), p.gpus.end());
  return std::optional<Placement>(std::move(p));
}

void PackState::Place(const TraceJob& pod, const Placement& where) {
  Node& node = nodes_[where.node];
  node.cpu_free -= pod.cpu_milli;
  node.mem_free -= pod.memory_mib;
  int share = Share(pod);
  for (int g : where.gpus) {
    node.gpu_free[g] -= share;
    node.gpu_pods[g] += 1;
    free_milli_ -= share;
  }
}

double PackState::Fragmentation(const std::vector<TraceJob>& workload) const {
  // Pod shapes and how often each occurs.
  std::map<std::tuple<int64_t, int64_t, int, int>, int64_t> shapes;
  int64_t total = 0;
  for (const TraceJob& p : workload) {
    if (p.gpus <= 0) continue;
    ++shapes[{p.cpu_milli, p.memory_mib, p.gpus, Share(p)}];
    ++total;
  }
  if (total == 0) return 0;
  double frag = 0;
  TraceJob probe;
  for (const auto& [shape, count] : shapes) {
    std::tie(probe.cpu_milli, probe.memory_mib, probe.gpus, probe.gpu_milli) = shape;
    int64_t unusable = 0;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const Node& node = nodes_[n];
      bool fits = Fits(probe, static_cast<int>(n));
      for (int f : node.gpu_free) {
        if (!fits || f < probe.gpu_milli) unusable += f;
      }
    }
    frag += static_cast<double>(count) / total * unusable;
  }
  return frag;
}

Result<PackResult> Pack(const std::vector<TraceJob>& pods, const std::vector<TraceNode>& nodes,
                        Packer packer, const PackOptions& options) {
  if (nodes.empty()) return InvalidArgument("the node list is empty");
  auto start = std::chrono::steady_clock::now();
  PackState state(nodes);
  PackResult r;
  r.packer = packer;
  r.gpu_capacity_milli = state.gpu_capacity_milli();
  bool placed_any = true;
  // Every placement takes at least one milli-GPU (pods without GPUs excepted), so this ends.
  while (!r.failed && placed_any) {
    placed_any = false;
    for (const TraceJob& pod : pods) {
      DROVER_ASSIGN_OR_RETURN(std::optional<Placement> where, state.Choose(pod, packer));
      if (!where) {
        r.failed = pod;
        break;
      }
      state.Place(pod, *where);
      ++r.pods_placed;
      placed_any = placed_any || pod.gpus > 0;
    }
    if (!options.repeat) break;
  }
  r.gpu_allocated_milli = r.gpu_capacity_milli - state.gpu_free_milli();
  if (r.gpu_capacity_milli > 0) {
    r.unallocated_share = static_cast<double>(state.gpu_free_milli()) / r.gpu_capacity_milli;
    r.fragmented_share = state.Fragmentation(pods) / r.gpu_capacity_milli;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::vector<TraceJob> Shuffled(std::vector<TraceJob> pods, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = pods.size(); i > 1; --i) {
    // rng() % i: a bias of at most i / 2^64, and the same sequence everywhere (unlike
    // std::uniform_int_distribution and std::shuffle, whose algorithms are unspecified).
    size_t j = static_cast<size_t>(rng() % i);
    std::swap(pods[i - 1], pods[j]);
  }
  return pods;
}

Spread SpreadOf(const std::vector<double>& values) {
  Spread s;
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  for (double v : values) s.mean += v;
  s.mean /= static_cast<double>(values.size());
  if (values.size() > 1) {
    double ss = 0;
    for (double v : values) ss += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(ss / static_cast<double>(values.size() - 1));
  }
  return s;
}

}  // namespace drover::sim
