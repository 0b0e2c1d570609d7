#pragma once
// The GPU pool, a component of the engine (docs/architecture.md, docs/lab-server.md): this
// machine's GPUs as the probe listed them, the book of what runs hold of them and of the CPU
// slots (sched::GpuBook, the same books the simulator keeps), and the machine-wide GPU leases
// through which engines of different stores never double-book a GPU (gpu/leases.h). Under an
// executor that places attempts itself (Slurm) the pool has no GPUs: they are the cluster's.
//
// The engine tells the pool what starts and ends (Apply, Release) and, for the leases, what its
// running runs hold (Hold); the pool never sees a run's other state.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "gpu/gpu_probe.h"
#include "gpu/leases.h"
#include "model/gpu.h"
#include "sched/gpu_book.h"
#include "sched/scheduler.h"

namespace drover {

// What one running run holds, as the machine's leases publish it.
struct GpuHold {
  std::vector<int> gpus;   // indexes in the pool
  int64_t gpu_memory = 0;  // on each (0: whole GPUs)
  bool exclusive = false;
  int64_t pid = 0;  // its process, when known (0: starting)
};

class GpuPool {
 public:
  // `ledger`: the machine's leases (null: this engine is alone with its GPUs); `placed`:
  // attempts are placed by an executor (the pool is then empty, and holds no leases).
  GpuPool(GpuLedger* ledger, int64_t gpu_reserve, bool placed)
      : ledger_(ledger), gpu_reserve_(gpu_reserve), placed_(placed) {}

  // Lists the GPUs, once (later calls do nothing). `cdi_dirs`: where containers' CDI specs are,
  // checked once here.
  Status Init(GpuProbe& probe, const std::vector<std::string>& cdi_dirs);
  bool ready() const { return ready_; }
  const std::vector<GpuDevice>& devices() const { return devices_; }
  const std::vector<sched::GpuState>& gpus() const { return book_.gpus(); }
  int cpu_slots_used() const { return book_.cpu_slots_used(); }
  // A start (with the CPU slots its run takes) and, later, its end.
  void Apply(const sched::StartAction& a, int slots) { book_.Apply(a, slots); }
  void Release(const sched::StartAction& a, int slots) { book_.Release(a, slots); }

  // The machine's leases around a scheduling pass: takes the machine-wide lock and takes what
  // other engines hold out of `view` (true: locked; the caller publishes and Unlocks after its
  // starts). When the lock or the leases cannot be had, the runs that need GPUs leave `queue`
  // for this pass (said at most once a minute). `mine`: what this engine's runs hold now.
  bool TakeForeignLeases(std::vector<sched::PendingRun>& queue, sched::ClusterView& view,
                         Millis now_mono, const std::function<std::vector<GpuHold>()>& mine);
  // Publishes what this engine's running runs hold (false: it could not, and GPU runs wait
  // until it can).
  bool Publish(const std::vector<GpuHold>& mine);
  void Unlock();
  // Whether there are leases to keep: a ledger, and GPUs of this machine.
  bool leased() const { return ledger_ != nullptr && !placed_; }

 private:
  GpuLedger* ledger_;
  int64_t gpu_reserve_;
  bool placed_;
  bool ready_ = false;
  std::vector<GpuDevice> devices_;
  sched::GpuBook book_;
  bool unpublished_ = false;  // the last Publish failed
  Millis warned_mono_ = -1;   // when unreadable leases were last said
};

}  // namespace drover
