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
  s.parent_index = d.parent_index;
  return s;
}

void ApplyStep(const TelemetryStep& step, GpuSample& s) {
  if (step.utilization) s.utilization = *step.utilization;
  if (step.memory_used) s.memory_used = *step.memory_used;
  if (step.temperature_c) s.temperature_c = *step.temperature_c;
  if (step.power_w) s.power_w = *step.power_w;
  if (step.pcie_tx_bytes_per_s) s.pcie_tx_bytes_per_s = *step.pcie_tx_bytes_per_s;
  if (step.pcie_rx_bytes_per_s) s.pcie_rx_bytes_per_s = *step.pcie_rx_bytes_per_s;
  if (step.ecc_corrected) s.ecc_corrected = *step.ecc_corrected;
  if (step.ecc_uncorrected) s.ecc_uncorrected = *step.ecc_uncorrected;
  if (step.retired_pages) s.retired_pages = *step.retired_pages;
  if (step.pages_pending) s.pages_pending = *step.pages_pending ? 1 : 0;
  if (step.remap_failed) s.remap_failed = *step.remap_failed ? 1 : 0;
  if (step.throttle) s.throttle = *step.throttle;
  if (step.sm_clock_mhz) s.sm_clock_mhz = *step.sm_clock_mhz;
  if (step.sm_clock_max_mhz) s.sm_clock_max_mhz = *step.sm_clock_max_mhz;
  if (step.mem_clock_mhz) s.mem_clock_mhz = *step.mem_clock_mhz;
}

// A step for GPU `gpu` is about the device of that index, or about each instance of the GPU in
// MIG mode with that index.
bool StepIsFor(const TelemetryStep& step, const GpuSample& s) {
  return s.index == step.gpu || (s.parent_index >= 0 && s.parent_index == step.gpu);
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
  int64_t cycle = 0;
  if (script_->repeat_ms > 0) {
    cycle = elapsed / script_->repeat_ms;
    elapsed %= script_->repeat_ms;
  }
  if (xid_cycle_.size() != script_->steps.size()) xid_cycle_.assign(script_->steps.size(), -1);
  for (size_t i = 0; i < script_->steps.size(); ++i) {
    const TelemetryStep& step = script_->steps[i];
    // No early exit: a script built in code need not be sorted; steps apply in their order.
    if (step.at_ms > elapsed) continue;
    // An XID is an event: reported by the first reading at or after its step, once per cycle.
    const bool fire = !step.xids.empty() && xid_cycle_[i] != cycle;
    if (fire) xid_cycle_[i] = cycle;
    for (GpuSample& s : samples) {
      if (!StepIsFor(step, s)) continue;
      ApplyStep(step, s);
      if (fire) {
        s.xids.insert(s.xids.end(), step.xids.begin(), step.xids.end());
        last_xid_[s.index] = {step.xids.back(), now};
      }
    }
  }
  for (GpuSample& s : samples) {
    if (auto it = last_xid_.find(s.index); it != last_xid_.end()) {
      s.last_xid = it->second.first;
      s.last_xid_ms = it->second.second;
    }
  }
  return samples;
}

std::string DescribeDevicesAndSmi(const Result<std::vector<GpuDevice>>& devices) {
  std::string out;
  if (devices.ok()) {
    for (const GpuDevice& d : *devices) {
      out += fmt::format("GPU {}: {}, {} MiB total, {} MiB used, {}{}\n", d.index, d.name,
                         d.memory_total >> 20, d.memory_used >> 20, d.uuid,
                         IsMig(d) ? fmt::format(" (MIG instance of GPU {})", d.parent_index) : "");
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

namespace {

// "3g.40gb": 3 compute slices (of a GPU's 7) and 40 GiB.
struct MigProfile {
  int slices = 0;
  int64_t memory = 0;
  std::string name;
};

Result<MigProfile> ParseMigProfile(const std::string& text, std::string_view item) {
  auto bad = [&](std::string_view why) {
    return FakeGpuError(text, fmt::format("MIG profile '{}' in '{}' {}; write profiles such as "
                                          "3g.40gb (3 compute slices, 40 GiB) joined by '+', "
                                          "e.g. 1x80GiB:mig=3g.40gb+3g.40gb",
                                          item, text, why));
  };
  std::string p;
  for (char c : item) p += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t g = p.find("g.");
  if (g == std::string::npos || g == 0 || p.size() < g + 5 || p.substr(p.size() - 2) != "gb") {
    return bad("is not <slices>g.<GiB>gb");
  }
  std::string slices_text = p.substr(0, g);
  std::string mem_text = p.substr(g + 2, p.size() - g - 4);
  auto all_digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 4 &&
           std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  if (!all_digits(slices_text) || !all_digits(mem_text)) return bad("is not <slices>g.<GiB>gb");
  MigProfile out;
  out.slices = std::stoi(slices_text);
  int gib = std::stoi(mem_text);
  if (out.slices < 1 || out.slices > 7) return bad("has slices outside 1..7");
  if (gib < 1) return bad("has no memory");
  out.memory = int64_t{gib} << 30;
  out.name = p;
  return out;
}

}  // namespace

Result<std::vector<GpuDevice>> ParseFakeGpus(const std::string& text) {
  std::vector<GpuDevice> devices;
  // GPUs in MIG mode: their index, and their instances' profiles.
  std::vector<std::pair<GpuDevice, std::vector<MigProfile>>> mig_gpus;
  int physical = 0;  // GPUs declared so far, whole or in MIG mode
  if (Trim(text).empty()) return FakeGpuError(text, "no GPUs declared");
  for (const std::string& raw : Split(text, ',')) {
    std::string_view item = Trim(raw);
    if (item.empty()) return FakeGpuError(text, "empty entry between commas");
    std::vector<MigProfile> profiles;
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      std::string_view mig = Trim(item.substr(colon + 1));
      item = Trim(item.substr(0, colon));
      if (mig.size() < 4 || !(std::tolower(static_cast<unsigned char>(mig[0])) == 'm' &&
                              std::tolower(static_cast<unsigned char>(mig[1])) == 'i' &&
                              std::tolower(static_cast<unsigned char>(mig[2])) == 'g' &&
                              mig[3] == '=')) {
        return FakeGpuError(text, fmt::format("'{}' after ':' is not mig=PROFILE+PROFILE..., e.g. "
                                              "1x80GiB:mig=3g.40gb+3g.40gb",
                                              mig));
      }
      std::string list(Trim(mig.substr(4)));
      if (list.empty()) return FakeGpuError(text, "mig= lists no instance (e.g. mig=3g.40gb)");
      for (const std::string& one : Split(list, '+')) {
        std::string_view p = Trim(one);
        if (p.empty()) return FakeGpuError(text, "an empty MIG profile between '+'");
        DROVER_ASSIGN_OR_RETURN(MigProfile profile, ParseMigProfile(text, p));
        profiles.push_back(std::move(profile));
      }
    }
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
    if (!profiles.empty()) {
      int slices = 0;
      int64_t memory = 0;
      for (const MigProfile& p : profiles) {
        slices += p.slices;
        memory += p.memory;
      }
      if (slices > 7) {
        return FakeGpuError(text, fmt::format("the MIG instances of '{}' take {} compute slices; "
                                              "a GPU has 7",
                                              item, slices));
      }
      if (memory > *bytes) {
        return FakeGpuError(text, fmt::format("the MIG instances of '{}' take {} of memory; the "
                                              "GPU has {}",
                                              item, FormatBytes(memory), FormatBytes(*bytes)));
      }
    }
    if (devices.size() + mig_gpus.size() + count > static_cast<size_t>(kMaxFakeGpus)) {
      return FakeGpuError(text, fmt::format("more than {} GPUs in total", kMaxFakeGpus));
    }
    for (int64_t i = 0; i < count; ++i) {
      GpuDevice d;
      d.index = physical++;
      d.uuid = fmt::format("GPU-fake-{}", d.index);
      d.name = "Fake GPU";
      d.memory_total = *bytes;
      if (profiles.empty()) {
        devices.push_back(std::move(d));
      } else {
        mig_gpus.emplace_back(std::move(d), profiles);
      }
    }
  }
  // MIG instances after every GPU, so a whole GPU's index is the same with or without them.
  int next = physical;
  for (const auto& [gpu, profiles] : mig_gpus) {
    for (size_t k = 0; k < profiles.size(); ++k) {
      if (next >= 4 * kMaxFakeGpus) return FakeGpuError(text, "too many MIG instances");
      GpuDevice d;
      d.index = next++;
      d.uuid = fmt::format("MIG-fake-{}-{}", gpu.index, k);
      d.name = "Fake GPU MIG " + profiles[k].name;
      d.memory_total = profiles[k].memory;
      d.parent_index = gpu.index;
      d.parent_uuid = gpu.uuid;
      d.mig_profile = profiles[k].name;
      devices.push_back(std::move(d));
    }
  }
  return devices;
}

std::string CudaVisibleDevices(const std::vector<GpuDevice>& devices,
                               const std::vector<int>& indices) {
  std::string out;
  for (int index : indices) {
    if (!out.empty()) out += ',';
    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](const GpuDevice& d) { return d.index == index; });
    out += it == devices.end() ? std::to_string(index) : CudaDeviceId(*it);
  }
  return out;
}

std::string FakeGpuProbe::Describe() {
  std::string out = fmt::format("fake GPUs ({} declared with --fake-gpus)\n", devices_.size());
  for (const GpuDevice& d : devices_) {
    out +=
        fmt::format("GPU {}: {}, {}, {}{}\n", d.index, d.name, FormatBytes(d.memory_total), d.uuid,
                    IsMig(d) ? fmt::format(" (MIG instance of GPU {})", d.parent_index) : "");
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
