#pragma once
// Reads a slow probe on its own thread. NVML's PCIe counters block ~20 ms per call and nvidia-smi
// takes ~100 ms, so with 8 GPUs a reading can take a third of a second: too long to stall the
// engine's loop, which also reaps exits and answers the API. The thread reads every `period`;
// Sample() returns the latest reading at once, stamped when it was read (a reading older than
// three periods is an error, so a hung driver shows instead of stale numbers).
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "gpu/gpu_probe.h"

namespace drover {

class BackgroundGpuProbe : public GpuProbe {
 public:
  BackgroundGpuProbe(std::unique_ptr<GpuProbe> inner, const Clock& clock, Millis period_ms);
  ~BackgroundGpuProbe() override;

  Result<std::vector<GpuDevice>> Devices() override { return inner_->Devices(); }
  Result<std::vector<GpuSample>> Sample(Millis now) override;
  std::string Kind() const override { return inner_->Kind(); }
  std::string Describe() override { return inner_->Describe(); }

 private:
  void Loop();

  std::unique_ptr<GpuProbe> inner_;
  const Clock& clock_;
  Millis period_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool have_ = false;
  Result<std::vector<GpuSample>> latest_ = std::vector<GpuSample>{};
  Millis latest_ms_ = 0;
  std::thread thread_;
};

}  // namespace drover
