#pragma once
// The packing experiment on the Alibaba openb trace (issue 7; docs/scheduling.md, "Packing"):
// pods are placed one after another, in the order given, onto a node list, and never leave; the
// experiment stops at the first pod that cannot be placed (the "fill until the first failure"
// experiment of the FGD paper, Weng et al., ATC'23). What it reports is how much GPU capacity is
// still unallocated at that moment: what a packer leaves stranded.
//
// The model: every node has CPU (milli-cores), memory (MiB) and whole GPUs of 1000 milli-GPUs
// each; a pod needs its CPU and memory on one node and, on that same node, `gpus` distinct GPUs
// with at least `gpu_milli` left each (a whole-GPU pod: idle GPUs; a fractional pod: one GPU's
// remaining share). The GPU model is ignored (openb's pods name none). Pods without GPUs are not
// part of the trace (ReadOpenbPods leaves them out).
//
// Packers:
//   first-fit  the first node (list order) that fits, on it the first GPUs (index order) that fit;
//   best-fit   the node with the least remaining GPU capacity (sum of free milli-GPUs) that fits,
//              on it the GPUs with the least remaining share that fit;
//   drover     drover's own scheduler: sched::Decide() (fifo, a queue of this one pod) on a
//              ClusterView of the GPUs of the nodes the pod fits on by CPU, memory and GPU count
//              (Decide knows no per-node CPU or memory, so that filter is done here; it removes
//              only nodes Decide could not have chosen anyway).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/trace.h"

namespace drover::sim {

enum class Packer { kFirstFit, kBestFit, kDrover };

std::string_view ToString(Packer p);
// "first-fit", "best-fit" or "drover"; InvalidArgument names the choices.
Result<Packer> ParsePacker(std::string_view name);
std::vector<Packer> AllPackers();

// Where a pod goes: a node (position in the node list) and GPU positions on it, ascending.
struct Placement {
  int node = 0;
  std::vector<int> gpus;
  bool operator==(const Placement&) const = default;
};

// The cluster as the experiment fills it.
class PackState {
 public:
  explicit PackState(const std::vector<TraceNode>& nodes);

  // Where `pod` goes under `packer`, or nothing when it fits nowhere. InvalidArgument for a pod
  // drover's scheduler cannot express (a share of several GPUs).
  Result<std::optional<Placement>> Choose(const TraceJob& pod, Packer packer) const;
  // Takes the pod's CPU, memory and GPU share at `where` (which must fit).
  void Place(const TraceJob& pod, const Placement& where);

  // Whether the pod fits on node `n` now (CPU, memory and enough GPUs with its share left).
  bool Fits(const TraceJob& pod, int n) const;

  int64_t gpu_capacity_milli() const { return capacity_milli_; }
  int64_t gpu_free_milli() const { return free_milli_; }
  int gpu_free(int node, int gpu) const { return nodes_[node].gpu_free[gpu]; }
  int64_t cpu_free(int node) const { return nodes_[node].cpu_free; }
  int64_t memory_free(int node) const { return nodes_[node].mem_free; }
  size_t nodes() const { return nodes_.size(); }

  // FGD's fragmentation: for each pod shape of `workload` (weighted by how often it occurs), the
  // free GPU capacity it cannot use: all of a node's free milli-GPUs where it does not fit, else
  // those on GPUs with less than its share left. In milli-GPUs.
  double Fragmentation(const std::vector<TraceJob>& workload) const;

 private:
  struct Node {
    int64_t cpu_free = 0;
    int64_t mem_free = 0;
    std::vector<int> gpu_free;  // milli-GPUs left per GPU
    std::vector<int> gpu_pods;  // pods on each GPU
    int gpu_offset = 0;         // global index of its first GPU (for Decide)
  };
  std::vector<int> Candidates(const TraceJob& pod, int n) const;  // GPUs with its share left
  Result<std::optional<Placement>> ChooseDrover(const TraceJob& pod) const;

  std::vector<Node> nodes_;
  std::vector<int> node_of_gpu_;  // global GPU index -> node
  int64_t capacity_milli_ = 0;
  int64_t free_milli_ = 0;
};

struct PackOptions {
  // When every pod is placed, submit the list again from its start (FGD keeps submitting until
  // the cluster is full); false: stop at the end of the list.
  bool repeat = true;
};

struct PackResult {
  Packer packer = Packer::kFirstFit;
  int64_t pods_placed = 0;
  std::optional<TraceJob> failed;  // the first pod that could not be placed (none: all placed)
  int64_t gpu_capacity_milli = 0;
  int64_t gpu_allocated_milli = 0;
  double unallocated_share = 0;  // unallocated / capacity, when the first pod fails
  double fragmented_share = 0;   // FGD's fragmentation / capacity, then
  double seconds = 0;            // wall time of the run
};

// Places `pods` in the given order (see above). InvalidArgument for an empty node list or a pod
// the packer cannot express.
Result<PackResult> Pack(const std::vector<TraceJob>& pods, const std::vector<TraceNode>& nodes,
                        Packer packer, const PackOptions& options = {});

// The pods in a random order, the same for the same seed on every platform (Fisher-Yates over a
// 64-bit Mersenne twister).
std::vector<TraceJob> Shuffled(std::vector<TraceJob> pods, uint64_t seed);

struct Spread {
  double mean = 0, sd = 0, min = 0, max = 0;  // sd: sample standard deviation (0 for one value)
};
Spread SpreadOf(const std::vector<double>& values);

}  // namespace drover::sim
