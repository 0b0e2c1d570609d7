// Fake GPUs (--fake-gpus) and their scripted telemetry, the "no GPU" probe, and the choice
// between them, NVML and nvidia-smi.
#include "gpu/gpu_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "common/strings.h"
#include "common/subprocess.h"

namespace drover {
namespace {

constexpr int kMaxFakeGpus = 64;

Status FakeGpuError(const std::string& text, std::string_view why) {
  return InvalidArgument(fmt::format(
      "--fake-gpus '{}': {}; write COUNTxSIZE[,COUNTxSIZE...], e.g. 2x16GiB", text, why));
}

// A machine without a usable GPU: CPU-only runs (gpus: 0) still schedule; GPU runs wait.
class NoGpuProbe : public GpuProbe {
 public:
  explicit NoGpuProbe(std::string reason) : reason_(std::move(reason)) {}
  Result<std::vector<GpuDevice>> Devices() override { return std::vector<GpuDevice>{}; }
  std::string Kind() const override { return "none"; }
  std::string Describe() override { return "no GPU: " + reason_ + "\n"; }

 private:
  std::string reason_;
};

// What a fake GPU reads without a script, and before a script's first step for it.
GpuSample UnscriptedSample(const GpuDevice& d, Millis now) {
  GpuSample s;
  s.index = d.index;
  s.t_ms = now;
  s.utilization = 0;
  s.memory_used = d.memory_used;
  s.memory_total = d.memory_total;
  return s;
}

void ApplyStep(const TelemetryStep& step, GpuSample& s) {
  if (step.utilization) s.utilization = *step.utilization;
  if (step.memory_used) s.memory_used = *step.memory_used;
  if (step.temperature_c) s.temperature_c = *step.temperature_c;
  if (step.power_w) s.power_w = *step.power_w;
  if (step.pcie_tx_bytes_per_s) s.pcie_tx_bytes_per_s = *step.pcie_tx_bytes_per_s;
  if (step.pcie_rx_bytes_per_s) s.pcie_rx_bytes_per_s = *step.pcie_rx_bytes_per_s;
}

}  // namespace

Result<std::vector<GpuSample>> GpuProbe::Sample(Millis now) {
  DROVER_ASSIGN_OR_RETURN(std::vector<GpuDevice> devices, Devices());
  std::vector<GpuSample> samples;
  samples.reserve(devices.size());
  for (const GpuDevice& d : devices) {
    GpuSample s;
    s.index = d.index;
    s.t_ms = now;
    s.memory_used = d.memory_used;
    s.memory_total = d.memory_total;
    samples.push_back(std::move(s));
  }
  return samples;
}

Result<std::vector<GpuSample>> FakeGpuProbe::Sample(Millis now) {
  std::vector<GpuSample> samples;
  samples.reserve(devices_.size());
  for (const GpuDevice& d : devices_) samples.push_back(UnscriptedSample(d, now));
  if (!script_) return samples;

  if (script_start_ms_ < 0) script_start_ms_ = now;
  // A clock that steps back reads as the start rather than as a time before it.
  Millis elapsed = std::max<Millis>(0, now - script_start_ms_);
  // Each cycle replays from the unscripted values, so a repeating script reads the same at the
  // same offset in every cycle.
  if (script_->repeat_ms > 0) elapsed %= script_->repeat_ms;
  for (const TelemetryStep& step : script_->steps) {
    // No early exit: a script built in code need not be sorted; steps apply in their order.
    if (step.at_ms > elapsed) continue;
    for (GpuSample& s : samples) {
      if (s.index == step.gpu) ApplyStep(step, s);
    }
  }
  return samples;
}

std::string DescribeDevicesAndSmi(const Result<std::vector<GpuDevice>>& devices) {
  std::string out;
  if (devices.ok()) {
    for (const GpuDevice& d : *devices) {
      out += fmt::format("GPU {}: {}, {} MiB total, {} MiB used, {}\n", d.index, d.name,
                         d.memory_total >> 20, d.memory_used >> 20, d.uuid);
    }
  } else {
    out += devices.status().message() + "\n";
  }
  auto smi = RunAndCapture({"nvidia-smi", "-q"}, CaptureOptions{.timeout_ms = 10'000});
  if (smi.ok() && smi->exit_code == 0 && !smi->out.empty()) {
    out += "\nnvidia-smi -q:\n" + smi->out;
  }
  return out;
}

Result<std::vector<GpuDevice>> ParseFakeGpus(const std::string& text) {
  std::vector<GpuDevice> devices;
  if (Trim(text).empty()) return FakeGpuError(text, "no GPUs declared");
  for (const std::string& raw : Split(text, ',')) {
    std::string_view item = Trim(raw);
    if (item.empty()) return FakeGpuError(text, "empty entry between commas");
    int64_t count = 1;
    std::string_view size_text = item;
    // Sizes never contain an 'x', so the first one separates COUNT from SIZE.
    size_t x = item.find_first_of("xX");
    if (x != std::string_view::npos) {
      std::string count_text(Trim(item.substr(0, x)));
      size_text = Trim(item.substr(x + 1));
      if (count_text.empty()) {
        return FakeGpuError(text, fmt::format("'{}' has no count before 'x'", item));
      }
      char* end = nullptr;
      long long n = std::strtoll(count_text.c_str(), &end, 10);
      if (end != count_text.c_str() + count_text.size()) {
        return FakeGpuError(text, fmt::format("'{}' is not a count of GPUs", count_text));
      }
      if (n < 1 || n > kMaxFakeGpus) {
        return FakeGpuError(text, fmt::format("count {} is outside 1..{}", n, kMaxFakeGpus));
      }
      count = n;
      if (size_text.empty()) {
        return FakeGpuError(text, fmt::format("'{}' has no size after 'x'", item));
      }
    }
    // A size without a unit would be bytes: `2x16` meant 16 GiB, not two GPUs of 16 bytes.
    if (!size_text.empty() && std::isdigit(static_cast<unsigned char>(size_text.back()))) {
      return FakeGpuError(text, fmt::format("size '{}' has no unit (write {}GiB, {}GB or {}MiB)",
                                            size_text, size_text, size_text, size_text));
    }
    auto bytes = ParseBytes(size_text);
    if (!bytes.ok()) {
      return FakeGpuError(text, fmt::format("'{}' is not a memory size", size_text));
    }
    if (*bytes <= 0) return FakeGpuError(text, fmt::format("size '{}' is zero", size_text));
    if (*bytes < (int64_t{1} << 20)) {
      return FakeGpuError(text, fmt::format("size '{}' is under 1 MiB", size_text));
    }
    if (devices.size() + count > static_cast<size_t>(kMaxFakeGpus)) {
      return FakeGpuError(text, fmt::format("more than {} GPUs in total", kMaxFakeGpus));
    }
    for (int64_t i = 0; i < count; ++i) {
      GpuDevice d;
      d.index = static_cast<int>(devices.size());
      d.uuid = fmt::format("GPU-fake-{}", d.index);
      d.name = "Fake GPU";
      d.memory_total = *bytes;
      devices.push_back(std::move(d));
    }
  }
  return devices;
}

std::string FakeGpuProbe::Describe() {
  std::string out = fmt::format("fake GPUs ({} declared with --fake-gpus)\n", devices_.size());
  for (const GpuDevice& d : devices_) {
    out +=
        fmt::format("GPU {}: {}, {}, {}\n", d.index, d.name, FormatBytes(d.memory_total), d.uuid);
  }
  return out;
}

Result<std::unique_ptr<GpuProbe>> MakeGpuProbe(const std::string& fake_spec) {
  if (!fake_spec.empty()) {
    DROVER_ASSIGN_OR_RETURN(std::vector<GpuDevice> devices, ParseFakeGpus(fake_spec));
    return std::unique_ptr<GpuProbe>(std::make_unique<FakeGpuProbe>(std::move(devices)));
  }
  auto nvml = OpenNvmlProbe();
  if (nvml.ok()) return std::move(nvml).value();
  // NVML can be missing where nvidia-smi still works (some containers mount only the tool), and
  // nvidia-smi reads the same driver, so it is the next best source.
  auto smi = OpenNvidiaSmiProbe();
  if (smi.ok()) return std::move(smi).value();
  // Not an error: a machine without GPUs still runs CPU jobs.
  return std::unique_ptr<GpuProbe>(std::make_unique<NoGpuProbe>(
      fmt::format("{}; nvidia-smi fallback: {}", nvml.status().message(), smi.status().message())));
}

}  // namespace drover
