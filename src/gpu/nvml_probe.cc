// The real GPU probe: NVML loaded with dlopen, so drover builds and runs without CUDA or a driver.
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
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
using nvmlEventSet_t = struct nvmlEventSet_st*;
// nvmlEventData_t as nvmlEventSetWait_v2 writes it (the older nvmlEventSetWait writes the first
// three fields).
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError (999: unknown)
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr unsigned long long kEventTypeXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
constexpr int NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;              // nvmlMemoryErrorType_t
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;  // nvmlEccCounterType_t: since the driver loaded
constexpr int NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0;
constexpr int NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1;
constexpr int NVML_CLOCK_SM = 1;   // nvmlClockType_t
constexpr int NVML_CLOCK_MEM = 2;
constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;
// Clocks event (throttle) reasons: nvmlClocksEventReason*.
constexpr unsigned long long kReasonGpuIdle = 0x1;
constexpr unsigned long long kReasonApplicationsClocksSetting = 0x2;
constexpr unsigned long long kReasonSwPowerCap = 0x4;
constexpr unsigned long long kReasonHwSlowdown = 0x8;
constexpr unsigned long long kReasonSyncBoost = 0x10;
constexpr unsigned long long kReasonSwThermalSlowdown = 0x20;
constexpr unsigned long long kReasonHwThermalSlowdown = 0x40;
constexpr unsigned long long kReasonHwPowerBrakeSlowdown = 0x80;
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
  // Health (docs/metrics.md, "GPU health"), each optional too.
  nvmlReturn_t (*GetTotalEccErrors)(nvmlDevice_t, int error_type, int counter_type,
                                    unsigned long long* count);
  nvmlReturn_t (*GetRetiredPages)(nvmlDevice_t, int cause, unsigned* count,
                                  unsigned long long* addresses);
  nvmlReturn_t (*GetRetiredPagesPendingStatus)(nvmlDevice_t, int* is_pending);
  nvmlReturn_t (*GetRemappedRows)(nvmlDevice_t, unsigned* corrected, unsigned* uncorrected,
                                  unsigned* pending, unsigned* failed);
  // nvmlDeviceGetCurrentClocksEventReasons, or its older name ...ClocksThrottleReasons.
  nvmlReturn_t (*GetClocksEventReasons)(nvmlDevice_t, unsigned long long* reasons);
  nvmlReturn_t (*GetClockInfo)(nvmlDevice_t, int type, unsigned* mhz);
  nvmlReturn_t (*GetMaxClockInfo)(nvmlDevice_t, int type, unsigned* mhz);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long types, nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned timeout_ms);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
  // MIG: a GPU in MIG mode is given to runs as its instances.
  nvmlReturn_t (*GetMigMode)(nvmlDevice_t, unsigned* current, unsigned* pending);
  nvmlReturn_t (*GetMaxMigDeviceCount)(nvmlDevice_t, unsigned* count);
  nvmlReturn_t (*GetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned index, nvmlDevice_t* mig);
};

ThrottleReasons ThrottleFromMask(unsigned long long m) {
  ThrottleReasons t;
  t.known = true;
  t.idle = (m & kReasonGpuIdle) != 0;
  t.app_clocks = (m & kReasonApplicationsClocksSetting) != 0;
  t.power_cap = (m & kReasonSwPowerCap) != 0;
  t.hw_slowdown = (m & kReasonHwSlowdown) != 0;
  t.sync_boost = (m & kReasonSyncBoost) != 0;
  t.sw_thermal = (m & kReasonSwThermalSlowdown) != 0;
  t.hw_thermal = (m & kReasonHwThermalSlowdown) != 0;
  t.power_brake = (m & kReasonHwPowerBrakeSlowdown) != 0;
  return t;
}

// "NVIDIA A100-SXM4-80GB MIG 3g.40gb" -> "3g.40gb" (NVML names a MIG device by its profile).
std::string MigProfileOf(const std::string& name) {
  size_t at = name.rfind("MIG ");
  return at == std::string::npos ? std::string() : name.substr(at + 4);
}

// One device drover hands out: a whole GPU, or a MIG instance of one.
struct Unit {
  nvmlDevice_t handle = nullptr;
  nvmlDevice_t gpu = nullptr;  // the GPU's handle (the same as `handle` for a whole GPU)
  int index = 0;               // drover's index
  int physical = 0;            // the GPU's index
  bool mig = false;
};

class NvmlProbe : public GpuProbe {
 public:
  NvmlProbe(void* lib, NvmlApi api) : lib_(lib), api_(api) {
    if (api_.EventSetCreate != nullptr && api_.RegisterEvents != nullptr &&
        api_.EventSetWait != nullptr && api_.EventSetFree != nullptr &&
        api_.EventSetCreate(&events_) != NVML_SUCCESS) {
      events_ = nullptr;
    }
  }
  ~NvmlProbe() override {
    if (events_ != nullptr) api_.EventSetFree(events_);
    api_.Shutdown();
    dlclose(lib_);
  }
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  std::string Kind() const override { return "nvml"; }

  Result<std::vector<GpuDevice>> Devices() override {
    std::lock_guard<std::mutex> lock(mu_);  // a background thread may be sampling
    DROVER_ASSIGN_OR_RETURN(std::vector<Unit> units, Units());
    std::vector<GpuDevice> devices;
    for (const Unit& u : units) {
      GpuDevice d;
      d.index = u.index;
      char name[kNameBufferSize] = {};
      if (api_.GetName(u.handle, name, sizeof name) == NVML_SUCCESS) d.name = name;
      char uuid[kUuidBufferSize] = {};
      if (api_.GetUuid(u.handle, uuid, sizeof uuid) == NVML_SUCCESS) d.uuid = uuid;
      nvmlMemory_t mem{};
      nvmlReturn_t rc = api_.GetMemoryInfo(u.handle, &mem);
      if (rc != NVML_SUCCESS) {
        return Error(fmt::format("nvmlDeviceGetMemoryInfo({}{})", u.physical,
                                 u.mig ? ", a MIG instance" : ""),
                     rc);
      }
      d.memory_total = static_cast<int64_t>(mem.total);
      d.memory_used = static_cast<int64_t>(mem.used);
      if (u.mig) {
        d.parent_index = u.physical;
        char parent[kUuidBufferSize] = {};
        if (api_.GetUuid(u.gpu, parent, sizeof parent) == NVML_SUCCESS) d.parent_uuid = parent;
        d.mig_profile = MigProfileOf(d.name);
      }
      devices.push_back(std::move(d));
    }
    return devices;
  }

  // Every value but the device list is best effort: a query this GPU or driver does not support
  // leaves its value -1 (or no processes) instead of failing the whole sample. A MIG instance's
  // reading has its own memory, utilisation (where the driver gives it) and processes, and its
  // GPU's temperature, clocks and health; power and PCIe traffic are the GPU's, not the
  // instance's, so they stay unknown (-1) there.
  Result<std::vector<GpuSample>> Sample(Millis now) override {
    std::lock_guard<std::mutex> lock(mu_);
    DROVER_ASSIGN_OR_RETURN(std::vector<Unit> units, Units());
    std::map<int, std::vector<int>> xids = TakeXids(units, now);
    std::map<int, GpuSample> gpu_readings;  // by physical index: the GPU's own values
    std::vector<GpuSample> samples;
    samples.reserve(units.size());
    for (const Unit& u : units) {
      auto g = gpu_readings.find(u.physical);
      if (g == gpu_readings.end()) g = gpu_readings.emplace(u.physical, ReadGpu(u.gpu)).first;
      GpuSample s = g->second;
      s.index = u.index;
      s.t_ms = now;
      if (u.mig) {
        s.parent_index = u.physical;
        s.power_w = -1;
        s.pcie_tx_bytes_per_s = s.pcie_rx_bytes_per_s = -1;
        s.utilization = -1;
        nvmlUtilization_t util{};
        if (api_.GetUtilization != nullptr &&
            api_.GetUtilization(u.handle, &util) == NVML_SUCCESS) {
          s.utilization = util.gpu;
        }
      }
      nvmlMemory_t mem{};
      if (api_.GetMemoryInfo(u.handle, &mem) == NVML_SUCCESS) {
        s.memory_total = static_cast<int64_t>(mem.total);
        s.memory_used = static_cast<int64_t>(mem.used);
      }
      if (auto x = xids.find(u.physical); x != xids.end()) s.xids = x->second;
      if (auto l = last_xid_.find(u.physical); l != last_xid_.end()) {
        s.last_xid = l->second.first;
        s.last_xid_ms = l->second.second;
      }
      s.processes = ComputeProcesses(u.handle);
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
  // The devices drover hands out: each GPU, or each MIG instance of a GPU in MIG mode (numbered
  // after the GPUs). A GPU in MIG mode without instances gives nothing to run on.
  Result<std::vector<Unit>> Units() {
    unsigned count = 0;
    nvmlReturn_t rc = api_.GetCount(&count);
    if (rc != NVML_SUCCESS) return Error("nvmlDeviceGetCount", rc);
    std::vector<Unit> units;
    std::vector<Unit> instances;
    int next = static_cast<int>(count);
    gpu_handles_.assign(count, nullptr);
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t handle = nullptr;
      rc = api_.GetHandleByIndex(i, &handle);
      if (rc != NVML_SUCCESS) return Error(fmt::format("nvmlDeviceGetHandleByIndex({})", i), rc);
      gpu_handles_[i] = handle;
      RegisterXidEvents(handle);
      unsigned current = 0;
      unsigned pending = 0;
      const bool mig = api_.GetMigMode != nullptr && api_.GetMaxMigDeviceCount != nullptr &&
                       api_.GetMigDeviceHandleByIndex != nullptr &&
                       api_.GetMigMode(handle, &current, &pending) == NVML_SUCCESS &&
                       current == NVML_DEVICE_MIG_ENABLE;
      if (!mig) {
        units.push_back(Unit{handle, handle, static_cast<int>(i), static_cast<int>(i), false});
        continue;
      }
      unsigned max = 0;
      if (api_.GetMaxMigDeviceCount(handle, &max) != NVML_SUCCESS) continue;
      for (unsigned k = 0; k < max; ++k) {
        nvmlDevice_t instance = nullptr;
        // NOT_FOUND: no instance in this slot.
        if (api_.GetMigDeviceHandleByIndex(handle, k, &instance) != NVML_SUCCESS) continue;
        instances.push_back(Unit{instance, handle, next++, static_cast<int>(i), true});
      }
    }
    units.insert(units.end(), instances.begin(), instances.end());
    return units;
  }

  // The GPU's own values: utilisation, temperature, power, PCIe, health.
  GpuSample ReadGpu(nvmlDevice_t handle) const {
    GpuSample s;
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
    // Memory errors: NOT_SUPPORTED without ECC (most consumer GPUs), and then unknown.
    unsigned long long count = 0;
    if (api_.GetTotalEccErrors != nullptr) {
      if (api_.GetTotalEccErrors(handle, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
                                 &count) == NVML_SUCCESS) {
        s.ecc_corrected = static_cast<int64_t>(count);
      }
      if (api_.GetTotalEccErrors(handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                 &count) == NVML_SUCCESS) {
        s.ecc_uncorrected = static_cast<int64_t>(count);
      }
    }
    // Ampere on remaps rows; older GPUs retire pages. Where the first answers it is the one.
    unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (api_.GetRemappedRows != nullptr &&
        api_.GetRemappedRows(handle, &corrected, &uncorrected, &pending, &failed) ==
            NVML_SUCCESS) {
      s.retired_pages = int64_t{corrected} + uncorrected;
      s.pages_pending = pending != 0 ? 1 : 0;
      s.remap_failed = failed != 0 ? 1 : 0;
    } else {
      if (api_.GetRetiredPages != nullptr) {
        int64_t pages = 0;
        bool known = true;
        for (int cause : {NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                          NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}) {
          unsigned n = 0;  // 0: only the count is asked for
          nvmlReturn_t rc = api_.GetRetiredPages(handle, cause, &n, nullptr);
          if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) known = false;
          pages += n;
        }
        if (known) s.retired_pages = pages;
      }
      int is_pending = 0;
      if (api_.GetRetiredPagesPendingStatus != nullptr &&
          api_.GetRetiredPagesPendingStatus(handle, &is_pending) == NVML_SUCCESS) {
        s.pages_pending = is_pending != 0 ? 1 : 0;
      }
    }
    unsigned long long reasons = 0;
    if (api_.GetClocksEventReasons != nullptr &&
        api_.GetClocksEventReasons(handle, &reasons) == NVML_SUCCESS) {
      s.throttle = ThrottleFromMask(reasons);
    }
    if (api_.GetClockInfo != nullptr) {
      if (api_.GetClockInfo(handle, NVML_CLOCK_SM, &value) == NVML_SUCCESS) s.sm_clock_mhz = value;
      if (api_.GetClockInfo(handle, NVML_CLOCK_MEM, &value) == NVML_SUCCESS) {
        s.mem_clock_mhz = value;
      }
    }
    if (api_.GetMaxClockInfo != nullptr &&
        api_.GetMaxClockInfo(handle, NVML_CLOCK_SM, &value) == NVML_SUCCESS) {
      s.sm_clock_max_mhz = value;
    }
    return s;
  }

  // Critical XIDs are events: the GPU's handle is registered with an event set once, and each
  // reading takes what arrived since the last (without waiting).
  void RegisterXidEvents(nvmlDevice_t handle) {
    if (events_ == nullptr || registered_.count(handle)) return;
    registered_.insert(handle);  // tried once: a GPU that does not support it fails the same later
    (void)api_.RegisterEvents(handle, kEventTypeXidCriticalError, events_);
  }

  // The XIDs that arrived since the last call, by the GPU's index.
  std::map<int, std::vector<int>> TakeXids(const std::vector<Unit>& units, Millis now) {
    std::map<int, std::vector<int>> out;
    if (events_ == nullptr) return out;
    // A storm of events is read a bounded number at a time; the rest wait for the next reading.
    for (int i = 0; i < 256; ++i) {
      nvmlEventData_t data{};
      if (api_.EventSetWait(events_, &data, 0) != NVML_SUCCESS) break;
      if ((data.eventType & kEventTypeXidCriticalError) == 0) continue;
      int physical = -1;
      for (size_t g = 0; g < gpu_handles_.size(); ++g) {
        if (gpu_handles_[g] == data.device) physical = static_cast<int>(g);
      }
      for (const Unit& u : units) {  // an event on a MIG instance's handle is its GPU's
        if (u.handle == data.device) physical = u.physical;
      }
      if (physical < 0) continue;
      const int xid = static_cast<int>(std::min<unsigned long long>(data.eventData, 999));
      out[physical].push_back(xid);
      last_xid_[physical] = {xid, now};
    }
    return out;
  }

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
  std::mutex mu_;                          // guards what follows (Devices and Sample may race)
  nvmlEventSet_t events_ = nullptr;        // XID events; null when the driver cannot give them
  std::set<nvmlDevice_t> registered_;      // GPUs registered with events_
  std::vector<nvmlDevice_t> gpu_handles_;  // by the GPU's index, from the last enumeration
  std::map<int, std::pair<int, Millis>> last_xid_;  // by the GPU's index: the latest XID, when
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
  bind_optional({"nvmlDeviceGetTotalEccErrors"}, api.GetTotalEccErrors);
  bind_optional({"nvmlDeviceGetRetiredPages"}, api.GetRetiredPages);
  bind_optional({"nvmlDeviceGetRetiredPagesPendingStatus"}, api.GetRetiredPagesPendingStatus);
  bind_optional({"nvmlDeviceGetRemappedRows"}, api.GetRemappedRows);
  bind_optional({"nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons"},
                api.GetClocksEventReasons);
  bind_optional({"nvmlDeviceGetClockInfo"}, api.GetClockInfo);
  bind_optional({"nvmlDeviceGetMaxClockInfo"}, api.GetMaxClockInfo);
  bind_optional({"nvmlEventSetCreate"}, api.EventSetCreate);
  bind_optional({"nvmlDeviceRegisterEvents"}, api.RegisterEvents);
  bind_optional({"nvmlEventSetWait_v2", "nvmlEventSetWait"}, api.EventSetWait);
  bind_optional({"nvmlEventSetFree"}, api.EventSetFree);
  bind_optional({"nvmlDeviceGetMigMode"}, api.GetMigMode);
  bind_optional({"nvmlDeviceGetMaxMigDeviceCount"}, api.GetMaxMigDeviceCount);
  bind_optional({"nvmlDeviceGetMigDeviceHandleByIndex"}, api.GetMigDeviceHandleByIndex);
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
