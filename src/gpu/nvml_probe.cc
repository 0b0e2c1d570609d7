// The real GPU probe: NVML loaded with dlopen, so drover builds and runs without CUDA or a driver.
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "common/subprocess.h"
#include "gpu/gpu_probe.h"

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
constexpr nvmlReturn_t NVML_SUCCESS = 0;
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
};

// Runs `program args...` without a shell and returns its stdout; empty when it cannot run.
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

  std::string Describe() override {
    std::string out;
    char version[kVersionBufferSize] = {};
    if (api_.GetDriverVersion(version, sizeof version) == NVML_SUCCESS) {
      out += fmt::format("NVIDIA driver {}\n", version);
    }
    auto devices = Devices();
    if (devices.ok()) {
      for (const GpuDevice& d : *devices) {
        out += fmt::format("GPU {}: {}, {} MiB total, {} MiB used, {}\n", d.index, d.name,
                           d.memory_total >> 20, d.memory_used >> 20, d.uuid);
      }
    } else {
      out += devices.status().message() + "\n";
    }
    auto smi = RunAndCapture({"nvidia-smi", "-q"});
    if (smi.ok() && smi->exit_code == 0 && !smi->out.empty()) {
      out += "\nnvidia-smi -q:\n" + smi->out;
    }
    return out;
  }

 private:
  Status Error(const std::string& call, nvmlReturn_t rc) const {
    return Internal(fmt::format("NVML {} failed: {} (code {})", call, api_.ErrorString(rc), rc));
  }

  void* lib_;
  NvmlApi api_;
};

}  // namespace

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
