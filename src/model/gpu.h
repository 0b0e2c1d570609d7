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
};

// A process using a GPU, as the driver sees it.
struct GpuProcess {
  int pid = 0;
  int64_t memory_used = -1;  // bytes; -1 when the driver does not say (e.g. some vGPU setups)
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
};

}  // namespace drover
