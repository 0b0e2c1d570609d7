#pragma once
// GPU health (docs/metrics.md, "GPU health"): what a GPU's telemetry says about the GPU itself,
// as findings the engine turns into alerts: a fault after which the GPU should run nothing new
// until it is reset (an uncorrectable memory error, a critical XID, memory pages waiting for a
// reset) drains it; clocks held down for heat, by hardware or at the power cap for long are a
// warning with the clocks in its words. Pure: readings in, findings out.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/drain_book.h"
#include "model/gpu.h"

namespace drover {

// How drover acts on an XID (NVIDIA's XID catalog, docs.nvidia.com/deploy/xid-errors).
enum class XidAction { kDrain, kWarn };
struct XidInfo {
  int code = 0;
  XidAction action = XidAction::kWarn;
  const char* words = "";  // after "reported ": "an uncorrectable memory error (double-bit ECC)"
};
// The XIDs drover acts on. Others (13, 31, 43, 45, ...: a program's own faults, or the cleanup
// after one) stay telemetry: LookupXid gives nullptr.
const std::vector<XidInfo>& KnownXids();
const XidInfo* LookupXid(int code);

struct HealthConfig {
  Millis throttle_ms = 60'000;    // slowed for heat or by hardware this long: a warning
  Millis power_cap_ms = 600'000;  // held at the power cap this long: a warning (at full load a
                                  // GPU often sits at its cap for a while; that alone is normal)
};

// What EvaluateHealth remembers of one GPU between its readings.
struct HealthMemory {
  // The counters as last read (the drain book's "seen"); nothing: never read, so any uncorrected
  // error already counted is news.
  std::optional<HealthCounters> seen;
  Millis heat_since = -1, hardware_since = -1, power_since = -1;  // slowed since (-1: not now)
  bool heat_said = false, hardware_said = false, power_said = false;
};

struct HealthFinding {
  std::string kind;      // the alert's kind: gpu_drained, gpu_xid, gpu_throttle
  std::string severity;  // error (drains) | warning
  bool drain = false;
  std::string key;   // what it is about, for the alert's key: "xid:48", "ecc", "throttle:heat"
  std::string what;  // the words after "GPU 1 ": "reported an uncorrectable memory error (...)"
  nlohmann::json data = nlohmann::json::object();
};

// The findings of one reading of one GPU (for a MIG instance: of its GPU), given what was
// remembered of it; updates `memory` (memory.seen is then this reading's counters).
std::vector<HealthFinding> EvaluateHealth(const GpuSample& s, HealthMemory& memory,
                                          const HealthConfig& config);

// The counters of a reading, as the book keeps them.
HealthCounters CountersOf(const GpuSample& s);

// "GPU 1", or for a GPU in MIG mode "GPU 0 (MIG instances 7, 8)".
std::string GpuLabel(int physical_index, const std::vector<int>& mig_instances);

// The drain alert's words: what happened, that no new run starts, which runs are left alone,
// and how an admin clears it, e.g. "GPU 1 reported an uncorrectable memory error (double-bit
// ECC, XID 48): drained, no new runs start on it; its running run 12 is left alone. An admin
// clears it with `drover gpu clear 1` after a GPU reset (nvidia-smi -r -i 1, or a reboot)."
std::string DrainMessage(const std::string& label, const std::string& what,
                         const std::vector<int64_t>& runs, int physical_index);

// The clocks and what goes with them, as known: "SM 1095 of 1980 MHz, memory 1593 MHz, 84 °C,
// 300 W".
std::string ClockWords(const GpuSample& s);

// One short phrase of a reading's health for `drover gpu ls`: "ok", "2 uncorrectable ECC
// errors", "reset pending (retired pages)", "slowed: thermal (SM 1095 of 1980 MHz)", "last XID
// 13"; "unknown" when the reading has no health values at all.
std::string HealthSummary(const GpuSample& s);

}  // namespace drover
