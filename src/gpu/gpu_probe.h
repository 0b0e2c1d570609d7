#pragma once
// What GPUs this machine has. Real: NVML loaded with dlopen (no build dependency on CUDA). Fake:
// declared with --fake-gpus 2x16GiB, for machines without a GPU and for tests.
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover {

struct GpuDevice {
  int index = 0;
  std::string uuid;
  std::string name;
  int64_t memory_total = 0;  // bytes
  int64_t memory_used = 0;   // bytes, as the driver reports (0 for fake GPUs)
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  virtual Result<std::vector<GpuDevice>> Devices() = 0;
  virtual std::string Kind() const = 0;  // "nvml", "fake", "none"
  // A text description for the run record: driver version, devices (nvidia-smi -q where present).
  virtual std::string Describe() = 0;
};

// "2x16GiB", "16GiB,24GiB", "1x80GB,2x16GiB". Errors say the accepted forms.
Result<std::vector<GpuDevice>> ParseFakeGpus(const std::string& text);

class FakeGpuProbe : public GpuProbe {
 public:
  explicit FakeGpuProbe(std::vector<GpuDevice> devices) : devices_(std::move(devices)) {}
  Result<std::vector<GpuDevice>> Devices() override { return devices_; }
  std::string Kind() const override { return "fake"; }
  std::string Describe() override;

 private:
  std::vector<GpuDevice> devices_;
};

// NVML via dlopen("libnvidia-ml.so.1"); Unavailable when the library or a GPU is missing.
Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe();

// The probe drover uses: fake GPUs when `fake_spec` is set, else NVML, else a probe with no GPUs.
Result<std::unique_ptr<GpuProbe>> MakeGpuProbe(const std::string& fake_spec);

}  // namespace drover
