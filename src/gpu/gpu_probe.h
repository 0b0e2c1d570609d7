#pragma once
// What GPUs this machine has. Real: NVML loaded with dlopen (no build dependency on CUDA). Fake:
// declared with --fake-gpus 2x16GiB, for machines without a GPU and for tests.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/gpu.h"

namespace drover {

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  virtual Result<std::vector<GpuDevice>> Devices() = 0;
  // One reading per GPU, stamped `now`. The default gives memory from Devices() only.
  virtual Result<std::vector<GpuSample>> Sample(Millis now);
  virtual std::string Kind() const = 0;  // "nvml", "nvidia-smi", "fake", "none"
  // A text description for the run record: driver version, devices (nvidia-smi -q where present).
  virtual std::string Describe() = 0;
};

// For Describe(): one line per device (or the error listing them), then `nvidia-smi -q` when it
// runs.
std::string DescribeDevicesAndSmi(const Result<std::vector<GpuDevice>>& devices);

// "2x16GiB", "16GiB,24GiB", "1x80GB,2x16GiB". Errors say the accepted forms. A GPU in MIG mode
// is declared with its instances after ":mig=", joined by '+': "1x80GiB:mig=3g.40gb+3g.40gb" is
// one GPU of 80 GiB split in two instances of 3 compute slices and 40 GiB each (a profile
// "<slices>g.<GiB>gb", as nvidia-smi names them; at most 7 slices and the GPU's memory in all).
// Whole GPUs keep their index; MIG instances are numbered after the last GPU, in order, and named
// "MIG-fake-<gpu>-<n>" (docs/metrics.md, "GPU health").
Result<std::vector<GpuDevice>> ParseFakeGpus(const std::string& text);

// CUDA_VISIBLE_DEVICES for these device indices: whole GPUs by index, MIG instances by UUID
// (CudaDeviceId); an index `devices` lacks is written as the index.
std::string CudaVisibleDevices(const std::vector<GpuDevice>& devices,
                               const std::vector<int>& indices);

// Scripted telemetry for fake GPUs (tests, demos): each step sets some values of one GPU from
// `at_ms` after the script starts (the first Sample call) until a later step for that GPU
// changes them. Values a step leaves out keep their previous value. Text form (docs/metrics.md):
// one JSON object per line, blank lines and lines starting with '#' ignored, e.g.
//   {"at": "0s", "gpu": 0, "utilization": 95, "memory_used": "10GiB", "temperature": 61,
//    "power": 250}
//   {"at": "30s", "gpu": 0, "utilization": 3}
// Health fields (docs/metrics.md, "GPU health"): "ecc_corrected", "ecc_uncorrected" and
// "retired_pages" (counts), "retired_pages_pending" and "remap_failed" (true/false), "throttle"
// (a list of "power", "thermal", "hw_thermal", "hw_slowdown", "power_brake", "sync_boost",
// "app_clocks", "idle"; [] for none), "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", and
// "xid" (a code or a list of codes): an XID is an event, reported once, by the first reading at
// or after its step (once per cycle of a repeating script). A step for a GPU in MIG mode ("gpu":
// its index, which no device has) applies to each of its instances.
// Durations and sizes take the spec's units ("500ms", "5m"; "512MiB"); plain numbers are
// milliseconds and bytes. "repeat": "60s" on a line of its own makes the script start over after
// that long (every step must then come before it). Errors name the line and the field. Steps for
// GPUs the probe does not have are ignored when it samples (a script is parsed without knowing
// the GPUs, and SetScript cannot fail).
struct TelemetryStep {
  Millis at_ms = 0;
  int gpu = 0;
  std::optional<double> utilization, temperature_c, power_w, pcie_tx_bytes_per_s,
      pcie_rx_bytes_per_s;
  std::optional<int64_t> memory_used;
  // Health.
  std::optional<int64_t> ecc_corrected, ecc_uncorrected, retired_pages;
  std::optional<bool> pages_pending, remap_failed;
  std::optional<ThrottleReasons> throttle;
  std::optional<double> sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz;
  std::vector<int> xids;  // events: reported once (not a value that holds)
};
struct TelemetryScript {
  std::vector<TelemetryStep> steps;  // sorted by at_ms (stable)
  Millis repeat_ms = 0;              // 0: the last values hold forever
};
Result<TelemetryScript> ParseTelemetryScript(const std::string& text);
Result<TelemetryScript> LoadTelemetryScript(const std::string& path);  // errors name the file

class FakeGpuProbe : public GpuProbe {
 public:
  explicit FakeGpuProbe(std::vector<GpuDevice> devices) : devices_(std::move(devices)) {}
  Result<std::vector<GpuDevice>> Devices() override { return devices_; }
  // Without a script: utilisation 0, memory as declared, other values unknown, no processes.
  // With one: its values at `now`, counted from the first Sample call after SetScript; values no
  // step has set yet are those without a script.
  Result<std::vector<GpuSample>> Sample(Millis now) override;
  std::string Kind() const override { return "fake"; }
  std::string Describe() override;
  // Replaces any script; the new one starts at the next Sample call.
  void SetScript(TelemetryScript script) {
    script_ = std::move(script);
    script_start_ms_ = -1;
    xid_cycle_.assign(script_->steps.size(), -1);
  }

 private:
  std::vector<GpuDevice> devices_;
  std::optional<TelemetryScript> script_;
  Millis script_start_ms_ = -1;  // `now` of the first Sample with the script; -1 before it
  std::vector<int64_t> xid_cycle_;  // per step: the cycle its XIDs were last reported in
  std::map<int, std::pair<int, Millis>> last_xid_;  // per device index: the latest XID, when
};

// nvidia-smi's CSV, the fallback when NVML cannot be loaded but nvidia-smi runs. `gpu_csv` is the
// output of
//   nvidia-smi --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,
//              temperature.gpu,power.draw --format=csv,noheader,nounits
// and `apps_csv` that of
//   nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits
// ("[N/A]" and "[Not Supported]" read as unknown; MiB converted to bytes). PCIe throughput is
// not available this way (-1). Processes are matched to GPUs by uuid; those of a GPU missing from
// `gpu_csv` are dropped. A line that does not have the queried fields is an error naming it.
// ParseNvidiaSmiDevices reads the same `gpu_csv`; a GPU without a memory.total is an error (the
// scheduler cannot place work on it), an unknown memory.used reads as 0.
Result<std::vector<GpuSample>> ParseNvidiaSmiCsv(const std::string& gpu_csv,
                                                 const std::string& apps_csv, Millis now);
Result<std::vector<GpuDevice>> ParseNvidiaSmiDevices(const std::string& gpu_csv);
// A probe that runs nvidia-smi (Unavailable when it is not on PATH, fails or lists no GPU). Each
// Devices/Sample call runs it again; when only the compute-apps query fails, Sample gives the
// GPUs without processes.
Result<std::unique_ptr<GpuProbe>> OpenNvidiaSmiProbe();

// NVML via dlopen("libnvidia-ml.so.1"); Unavailable when the library or a GPU is missing.
Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe();

// The probe drover uses: fake GPUs when `fake_spec` is set, else NVML, else nvidia-smi, else a
// probe with no GPUs.
Result<std::unique_ptr<GpuProbe>> MakeGpuProbe(const std::string& fake_spec);

}  // namespace drover
