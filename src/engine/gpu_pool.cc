// The GPU pool (gpu_pool.h).
#include "engine/gpu_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "container/runtime.h"
#include "engine/pool.h"

namespace drover {

std::vector<sched::GpuState> PoolOf(const std::vector<GpuDevice>& devices, int64_t gpu_reserve) {
  std::vector<sched::GpuState> gpus;
  for (const auto& d : devices) {
    sched::GpuState g;
    g.index = d.index;
    // Memory already in use before drover starts anything belongs to someone else, and the
    // reserve stays free for the driver and monitoring (scheduler.gpu_reserve).
    g.capacity = std::max<int64_t>(0, d.memory_total - d.memory_used - gpu_reserve);
    gpus.push_back(g);
  }
  return gpus;
}

Status GpuPool::Init(GpuProbe& probe, const std::vector<std::string>& cdi_dirs) {
  if (ready_) return Status::Ok();
  if (placed_) {
    // The GPUs are the cluster's: this machine's (if any) are not drover's to hand out.
    book_ = sched::GpuBook(std::vector<sched::GpuState>{});
    ready_ = true;
    return Status::Ok();
  }
  auto devices = probe.Devices();
  if (!devices.ok()) return devices.status().WithContext("listing GPUs");
  devices_ = *devices;
  book_ = sched::GpuBook(PoolOf(devices_, gpu_reserve_));
  ready_ = true;
  // Containers get GPUs by their CDI names: said once at start where podman is here and the
  // CDI specs miss a GPU (a submit that needs them checks again and is refused).
  if (!devices_.empty() && container::Installed(ContainerRuntime::kPodman)) {
    if (Status cdi = container::CheckCdi(devices_, cdi_dirs); !cdi.ok()) {
      // Fake GPUs (--fake-gpus) have no CDI specs by nature: not a warning at every start (a
      // container submit that asks for one is still refused, with the reason).
      if (probe.Kind() == "fake") {
        spdlog::info("containers: {} (these GPUs are fake)", cdi.message());
      } else {
        spdlog::warn("containers: {}", cdi.message());
      }
    }
  }
  return Status::Ok();
}

bool GpuPool::TakeForeignLeases(std::vector<sched::PendingRun>& queue, sched::ClusterView& view,
                                Millis now_mono,
                                const std::function<std::vector<GpuHold>()>& mine) {
  if (!leased() || view.gpus.empty()) return false;
  auto needs_gpus = [](const sched::PendingRun& p) { return p.resources.gpus > 0; };
  if (std::none_of(queue.begin(), queue.end(), needs_gpus)) return false;
  auto hold_back = [&](const Status& why) {
    // Nothing that needs a GPU starts blind: it waits for the next pass (a few hundred ms).
    std::erase_if(queue, needs_gpus);
    if (warned_mono_ < 0 || now_mono - warned_mono_ > 60'000) {
      warned_mono_ = now_mono;
      spdlog::warn("GPU runs wait: the machine's GPU leases in {} cannot be read: {}",
                   ledger_->Where(), why.message());
    }
  };
  if (Status locked = ledger_->Lock(500); !locked.ok()) {
    hold_back(locked);
    return false;
  }
  // What this engine holds must be known to the others before it takes more.
  if (unpublished_ && !Publish(mine())) {
    ledger_->Unlock();
    hold_back(Unavailable("this engine's own leases cannot be written"));
    return false;
  }
  auto others = ledger_->Others();
  if (!others.ok()) {
    ledger_->Unlock();
    hold_back(others.status());
    return false;
  }
  for (const GpuLease& lease : *others) {
    for (const GpuDevice& d : devices_) {
      if (d.uuid != lease.uuid) continue;
      for (sched::GpuState& g : view.gpus) {
        if (g.index != d.index) continue;
        g.runs += 1;
        if (lease.whole || lease.bytes >= g.capacity - g.reserved) {
          // Saturated: never past the capacity, whatever a lease file says.
          g.exclusive = g.exclusive || lease.whole;
          g.reserved = std::max(g.reserved, g.capacity);
        } else {
          g.reserved += lease.bytes;
        }
      }
    }
  }
  return true;
}

bool GpuPool::Publish(const std::vector<GpuHold>& holds) {
  if (!leased()) return true;
  std::vector<GpuLease> mine;
  for (const GpuHold& h : holds) {
    for (int index : h.gpus) {
      for (const GpuDevice& d : devices_) {
        if (d.index != index) continue;
        GpuLease l;
        l.uuid = d.uuid;
        l.bytes = h.gpu_memory;
        l.whole = h.exclusive;
        l.pid = h.pid;
        mine.push_back(std::move(l));
      }
    }
  }
  if (Status st = ledger_->Publish(mine); !st.ok()) {
    if (!unpublished_) {
      spdlog::warn("publishing this engine's GPU leases in {}: {} (GPU runs wait until it works)",
                   ledger_->Where(), st.message());
    }
    unpublished_ = true;
    return false;
  }
  unpublished_ = false;
  return true;
}

void GpuPool::Unlock() {
  if (ledger_ != nullptr) ledger_->Unlock();
}

}  // namespace drover
