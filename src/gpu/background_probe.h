#pragma once
// Reads a slow probe on its own thread. NVML's PCIe counters block ~20 ms per call and nvidia-smi
// takes ~100 ms, so with 8 GPUs a reading can take a third of a second: too long to stall the
// engine's loop, which also reaps exits and answers the API. The thread reads every `period`;
// Sample() returns the latest reading at once, stamped when it was read (a reading older than
// three periods is an error, so a hung driver shows instead of stale numbers). A thread stuck in
// the driver does not hold up shutdown: after a few seconds it is left behind (detached).
#include <memory>

#include "gpu/gpu_probe.h"

namespace drover {

class BackgroundGpuProbe : public GpuProbe {
 public:
  BackgroundGpuProbe(std::unique_ptr<GpuProbe> inner, const Clock& clock, Millis period_ms);
  ~BackgroundGpuProbe() override;

  Result<std::vector<GpuDevice>> Devices() override;
  Result<std::vector<GpuSample>> Sample(Millis now) override;
  std::string Kind() const override { return kind_; }
  std::string Describe() override;

 private:
  struct State;  // shared with the thread, so a detached thread never outlives what it uses
  std::shared_ptr<State> state_;
  std::string kind_;
};

}  // namespace drover
