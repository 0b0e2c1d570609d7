// The real GPU probe: NVML loaded with dlopen, so drover builds and runs without CUDA or a driver.
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "common/subprocess.h"
#include "gpu/gpu_probe.h"
#include "gpu/nvml_processes.h"

namespace drover {
namespace {

// The few NVML types drover needs, declared here so no CUDA header is needed to build.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned gpu;     // percent of the last sample period in which a kernel ran
  unsigned memory;  // percent of it in which device memory was read or written
};
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr int NVML_TEMPERATURE_GPU = 0;     // nvmlTemperatureSensors_t
constexpr int NVML_PCIE_UTIL_TX_BYTES = 0;  // nvmlPcieUtilCounter_t
constexpr int NVML_PCIE_UTIL_RX_BYTES = 1;
constexpr unsigned kNameBufferSize = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBufferSize = 80;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

constexpr char kNoNvml[] =
    "NVML not found (libnvidia-ml.so.1): no NVIDIA driver on this machine; use --fake-gpus "
    "2x16GiB to schedule onto declared GPUs";

struct NvmlApi {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  nvmlReturn_t (*GetCount)(unsigned*);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*GetDriverVersion)(char*, unsigned);
  const char* (*ErrorString)(nvmlReturn_t);
  // Telemetry. Optional: null when this driver lacks the symbol, and then the value is unknown.
  nvmlReturn_t (*GetUtilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*GetTemperature)(nvmlDevice_t, int sensor, unsigned* celsius);
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned* milliwatts);
  nvmlReturn_t (*GetPcieThroughput)(nvmlDevice_t, int counter, unsigned* kb_per_s);
  // nvmlDeviceGetComputeRunningProcesses[_v3|_v2]; the record size varies (nvml_processes.h).
  nvmlReturn_t (*GetComputeProcesses)(nvmlDevice_t, unsigned* count, void* records);
};

class NvmlProbe : public GpuProbe {
 public:
  NvmlProbe(void* lib, NvmlApi api) : lib_(lib), api_(api) {}
  ~NvmlProbe() override {
    api_.Shutdown();
    dlclose(lib_);
  }
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  std::string Kind() const override { return "nvml"; }

  Result<std::vector<GpuDevice>> Devices() override {
    unsigned count = 0;
    nvmlReturn_t rc = api_.GetCount(&count);
    if (rc != NVML_SUCCESS) return Error("nvmlDeviceGetCount", rc);
    std::vector<GpuDevice> devices;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t handle = nullptr;
      rc = api_.GetHandleByIndex(i, &handle);
      if (rc != NVML_SUCCESS) return Error(fmt::format("nvmlDeviceGetHandleByIndex({})", i), rc);
      GpuDevice d;
      d.index = static_cast<int>(i);
      char name[kNameBufferSize] = {};
      if (api_.GetName(handle, name, sizeof name) == NVML_SUCCESS) d.name = name;
      char uuid[kUuidBufferSize] = {};
      if (api_.GetUuid(handle, uuid, sizeof uuid) == NVML_SUCCESS) d.uuid = uuid;
      nvmlMemory_t mem{};
      rc = api_.GetMemoryInfo(handle, &mem);
      if (rc != NVML_SUCCESS) return Error(fmt::format("nvmlDeviceGetMemoryInfo({})", i), rc);
      d.memory_total = static_cast<int64_t>(mem.total);
      d.memory_used = static_cast<int64_t>(mem.used);
      devices.push_back(std::move(d));
    }
    return devices;
  }

  // Every value but the device list is best effort: a query this GPU or driver does not support
  // leaves its value -1 (or no processes) instead of failing the whole sample.
  Result<std::vector<GpuSample>> Sample(Millis now) override {
    unsigned count = 0;
    nvmlReturn_t rc = api_.GetCount(&count);
    if (rc != NVML_SUCCESS) return Error("nvmlDeviceGetCount", rc);
    std::vector<GpuSample> samples;
    samples.reserve(count);
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t handle = nullptr;
      rc = api_.GetHandleByIndex(i, &handle);
      if (rc != NVML_SUCCESS) return Error(fmt::format("nvmlDeviceGetHandleByIndex({})", i), rc);
      GpuSample s;
      s.index = static_cast<int>(i);
      s.t_ms = now;
      nvmlMemory_t mem{};
      if (api_.GetMemoryInfo(handle, &mem) == NVML_SUCCESS) {
        s.memory_total = static_cast<int64_t>(mem.total);
        s.memory_used = static_cast<int64_t>(mem.used);
      }
      nvmlUtilization_t util{};
      if (api_.GetUtilization != nullptr && api_.GetUtilization(handle, &util) == NVML_SUCCESS) {
        s.utilization = util.gpu;
      }
      unsigned value = 0;
      if (api_.GetTemperature != nullptr &&
          api_.GetTemperature(handle, NVML_TEMPERATURE_GPU, &value) == NVML_SUCCESS) {
        s.temperature_c = value;
      }
      if (api_.GetPowerUsage != nullptr && api_.GetPowerUsage(handle, &value) == NVML_SUCCESS) {
        s.power_w = value / 1000.0;
      }
      // NVML counts PCIe traffic in KB (1024 bytes, as nvidia-smi and nvtop read it). Each call
      // samples for about 20 ms, so these two are the slow part of a sample.
      if (api_.GetPcieThroughput != nullptr) {
        if (api_.GetPcieThroughput(handle, NVML_PCIE_UTIL_TX_BYTES, &value) == NVML_SUCCESS) {
          s.pcie_tx_bytes_per_s = value * 1024.0;
        }
        if (api_.GetPcieThroughput(handle, NVML_PCIE_UTIL_RX_BYTES, &value) == NVML_SUCCESS) {
          s.pcie_rx_bytes_per_s = value * 1024.0;
        }
      }
      s.processes = ComputeProcesses(handle);
      samples.push_back(std::move(s));
    }
    return samples;
  }

  std::string Describe() override {
    std::string out;
    char version[kVersionBufferSize] = {};
    if (api_.GetDriverVersion(version, sizeof version) == NVML_SUCCESS) {
      out += fmt::format("NVIDIA driver {}\n", version);
    }
    return out + DescribeDevicesAndSmi(Devices());
  }

 private:
  // The compute processes on one GPU; none when the query is missing or fails.
  std::vector<GpuProcess> ComputeProcesses(nvmlDevice_t handle) const {
    if (api_.GetComputeProcesses == nullptr) return {};
    unsigned capacity = 64;
    // Processes can start between a call that reports too small a buffer and the next one.
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::vector<unsigned char> buf(size_t{capacity} * nvml::kMaxRecordSize, nvml::kFill);
      unsigned n = capacity;
      nvmlReturn_t rc = api_.GetComputeProcesses(handle, &n, buf.data());
      if (rc == NVML_SUCCESS) return nvml::ReadProcessRecords(buf.data(), buf.size(), n);
      if (rc != NVML_ERROR_INSUFFICIENT_SIZE || n > (1u << 16)) return {};
      capacity = n + 16;
    }
    return {};
  }

  Status Error(const std::string& call, nvmlReturn_t rc) const {
    return Internal(fmt::format("NVML {} failed: {} (code {})", call, api_.ErrorString(rc), rc));
  }

  void* lib_;
  NvmlApi api_;
};

}  // namespace

namespace nvml {

std::vector<GpuProcess> ReadProcessRecords(const unsigned char* buf, size_t size, unsigned count) {
  // NVML never reports more than fit; a count that would not fit is not trusted past the buffer.
  count = static_cast<unsigned>(std::min<size_t>(count, size / kMaxRecordSize));
  if (count == 0) return {};
  // The last record's final field lies in [stride * (count - 1), stride * count); with kFill
  // everywhere NVML did not write, the largest stride whose tail region holds written bytes is the
  // one used. (For one record every stride reads the same.)
  auto written = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (buf[i] != kFill) return true;
    }
    return false;
  };
  size_t stride = 16;
  if (written(size_t{24} * count, size_t{32} * count)) {
    stride = 32;
  } else if (written(size_t{16} * count, size_t{24} * count)) {
    stride = 24;
  }
  constexpr unsigned long long kNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
  std::vector<GpuProcess> out;
  out.reserve(count);
  for (unsigned i = 0; i < count; ++i) {
    const unsigned char* rec = buf + i * stride;
    unsigned pid = 0;
    unsigned long long used = 0;
    std::memcpy(&pid, rec, sizeof pid);
    std::memcpy(&used, rec + 8, sizeof used);
    GpuProcess p;
    p.pid = static_cast<int>(pid);
    p.memory_used = used == kNotAvailable || used > static_cast<unsigned long long>(INT64_MAX)
                        ? -1
                        : static_cast<int64_t>(used);
    out.push_back(p);
  }
  return out;
}

}  // namespace nvml

Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return Unavailable(kNoNvml);

  NvmlApi api{};
  const char* missing = nullptr;  // the first symbol the library lacks
  auto bind = [&](const char* symbol, auto& fn) {
    if (missing != nullptr) return;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (fn == nullptr) missing = symbol;
  };
  bind("nvmlInit_v2", api.Init);
  bind("nvmlShutdown", api.Shutdown);
  bind("nvmlDeviceGetCount_v2", api.GetCount);
  bind("nvmlDeviceGetHandleByIndex_v2", api.GetHandleByIndex);
  bind("nvmlDeviceGetName", api.GetName);
  bind("nvmlDeviceGetUUID", api.GetUuid);
  bind("nvmlDeviceGetMemoryInfo", api.GetMemoryInfo);
  bind("nvmlSystemGetDriverVersion", api.GetDriverVersion);
  bind("nvmlErrorString", api.ErrorString);
  // Telemetry is optional: an old driver without a query still schedules, with that value -1.
  auto bind_optional = [&](std::initializer_list<const char*> symbols, auto& fn) {
    for (const char* symbol : symbols) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (fn != nullptr) return;
    }
  };
  bind_optional({"nvmlDeviceGetUtilizationRates"}, api.GetUtilization);
  bind_optional({"nvmlDeviceGetTemperature"}, api.GetTemperature);
  bind_optional({"nvmlDeviceGetPowerUsage"}, api.GetPowerUsage);
  bind_optional({"nvmlDeviceGetPcieThroughput"}, api.GetPcieThroughput);
  bind_optional({"nvmlDeviceGetComputeRunningProcesses_v3",
                 "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"},
                api.GetComputeProcesses);
  if (missing != nullptr) {
    dlclose(lib);
    return Unavailable(fmt::format(
        "NVML library lacks {}: the NVIDIA driver is too old; update it, or use --fake-gpus "
        "2x16GiB to schedule onto declared GPUs",
        missing));
  }

  nvmlReturn_t rc = api.Init();
  if (rc != NVML_SUCCESS) {
    std::string why = api.ErrorString(rc);
    dlclose(lib);
    return Unavailable(fmt::format(
        "NVML could not start: {} (code {}); check the NVIDIA driver with nvidia-smi, or use "
        "--fake-gpus 2x16GiB to schedule onto declared GPUs",
        why, rc));
  }
  unsigned count = 0;
  rc = api.GetCount(&count);
  if (rc != NVML_SUCCESS || count == 0) {
    std::string why = rc != NVML_SUCCESS ? api.ErrorString(rc) : "no devices";
    api.Shutdown();
    dlclose(lib);
    return Unavailable(fmt::format(
        "NVML reports no usable GPU ({}); use --fake-gpus 2x16GiB to schedule onto declared GPUs",
        why));
  }
  return std::unique_ptr<GpuProbe>(std::make_unique<NvmlProbe>(lib, api));
}

}  // namespace drover
