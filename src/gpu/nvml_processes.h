#pragma once
// Reading NVML's running-process records without trusting the record size. Internal to src/gpu;
// separate from nvml_probe.cc so it is tested without a driver.
#include <cstddef>
#include <vector>

#include "gpu/gpu_probe.h"

namespace drover::nvml {

// nvmlProcessInfo_t has had three sizes behind the same entry points: 16 bytes (v1: pid,
// usedGpuMemory), 24 (v2: + gpuInstanceId, computeInstanceId) and, in some R535 drivers, 32 bytes
// behind nvmlDeviceGetComputeRunningProcesses_v3 (+ usedGpuCcProtectedMemory). pid (offset 0)
// and usedGpuMemory (offset 8) sit at the same place in all three. So the caller hands NVML a
// buffer of kMaxRecordSize bytes per record, filled with kFill, and this reads back the stride the
// driver actually used from how far it wrote: a buffer sized for the 24-byte struct would be
// overrun by a 32-byte driver.
inline constexpr size_t kMaxRecordSize = 32;
inline constexpr unsigned char kFill = 0xA5;

// The `count` records at the start of `buf` (`size` bytes, at least count * kMaxRecordSize, filled
// with kFill before the call). usedGpuMemory NVML_VALUE_NOT_AVAILABLE reads as -1.
std::vector<GpuProcess> ReadProcessRecords(const unsigned char* buf, size_t size, unsigned count);

}  // namespace drover::nvml
