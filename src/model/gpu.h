#pragma once
// What is known of a GPU and what was read off it: plain records that the GPU probes produce
// (src/gpu/), the store keeps (gpu_samples) and the protocol sends (/api/v1/gpus), so neither the
// store nor the protocol depends on the probes.
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"

namespace drover {

struct GpuDevice {
  int index = 0;
  std::string uuid;
  std::string name;
  int64_t memory_total = 0;  // bytes
  int64_t memory_used = 0;   // bytes, as the driver reports (0 for fake GPUs)
  // A MIG instance (Multi-Instance GPU, docs/metrics.md "GPU health"): a slice of a GPU with its
  // own memory and compute, handed to runs as a GPU of its own. Its `uuid` is "MIG-...", which is
  // what CUDA_VISIBLE_DEVICES names it by; its index follows those of the machine's GPUs. A GPU in
  // MIG mode is not a device itself: its instances are. -1 / "" for a whole GPU.
  int parent_index = -1;    // the GPU it is a slice of (the driver's index of that GPU)
  std::string parent_uuid;  // that GPU's UUID
  std::string mig_profile;  // "3g.40gb": compute slices and memory
};

inline bool IsMig(const GpuDevice& d) { return d.parent_index >= 0; }
// What CUDA_VISIBLE_DEVICES names the device by: a MIG instance by its UUID (CUDA takes no index
// for one), a whole GPU by its index.
inline std::string CudaDeviceId(const GpuDevice& d) {
  return IsMig(d) ? d.uuid : std::to_string(d.index);
}
// The GPU whose health a device shares: a MIG instance's GPU, else the device itself.
inline int PhysicalIndex(const GpuDevice& d) { return IsMig(d) ? d.parent_index : d.index; }

// A process using a GPU, as the driver sees it.
struct GpuProcess {
  int pid = 0;
  int64_t memory_used = -1;  // bytes; -1 when the driver does not say (e.g. some vGPU setups)
};

// Why the driver holds a GPU's clocks below their maximum now (NVML's clocks event reasons, once
// called throttle reasons). `known` is false when the driver cannot say.
struct ThrottleReasons {
  bool known = false;
  bool idle = false;         // nothing runs: clocks down to save power (harmless)
  bool app_clocks = false;   // an admin set application clocks
  bool power_cap = false;    // software power cap: held at the board's power limit
  bool hw_slowdown = false;  // hardware slowdown: over temperature or power supply trouble
  bool sync_boost = false;   // held to the clocks of GPUs it syncs with
  bool sw_thermal = false;   // the driver slows it to keep its temperature under target
  bool hw_thermal = false;   // hardware: over temperature
  bool power_brake = false;  // an external power brake (the system's power supply)
  bool operator==(const ThrottleReasons&) const = default;
  // Any reason that slows work for the GPU's sake (heat, power, hardware); idle, application
  // clocks and sync boost are not.
  bool Slowing() const { return power_cap || hw_slowdown || sw_thermal || hw_thermal || power_brake; }
};

// One telemetry reading of one GPU. A value the source cannot give is negative (-1).
struct GpuSample {
  int index = 0;
  Millis t_ms = 0;
  double utilization = -1;    // SM utilisation over the driver's last sample period, percent 0-100
  int64_t memory_used = -1;   // bytes
  int64_t memory_total = -1;  // bytes
  double temperature_c = -1;  // degrees Celsius
  double power_w = -1;        // watts
  double pcie_tx_bytes_per_s = -1;
  double pcie_rx_bytes_per_s = -1;
  std::vector<GpuProcess> processes;  // compute processes on this GPU
  // Health (docs/metrics.md, "GPU health"). For a MIG instance these are its GPU's (one GPU's
  // memory errors and clocks are every one of its instances').
  int parent_index = -1;        // a MIG instance's GPU (GpuDevice::parent_index)
  int64_t ecc_corrected = -1;   // memory errors ECC corrected, since the driver loaded
  int64_t ecc_uncorrected = -1;  // ... that ECC could not correct
  int64_t retired_pages = -1;   // pages retired (before Ampere) or rows remapped (Ampere on)
  int pages_pending = -1;       // 1: a page retirement or row remap waits for a GPU reset; 0: no
  int remap_failed = -1;        // 1: remapping a faulty row failed (the memory is unreliable)
  ThrottleReasons throttle;
  double sm_clock_mhz = -1;
  double sm_clock_max_mhz = -1;
  double mem_clock_mhz = -1;
  std::vector<int> xids;  // XID errors the driver reported since the previous reading
  int last_xid = -1;      // the latest XID error seen since the probe started (-1: none)
  Millis last_xid_ms = 0;  // ... when it was seen
};

}  // namespace drover
