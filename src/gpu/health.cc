// GPU health findings: XIDs, uncorrectable memory errors and pages waiting for a reset drain a
// GPU; clocks held down for long are a warning.
#include "gpu/health.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "common/strings.h"
#include "gpu/health_json.h"

namespace drover {

const std::vector<XidInfo>& KnownXids() {
  // From NVIDIA's XID catalog: those after which the GPU needs a reset (or is failing) drain it;
  // a high rate of corrected errors is a warning. A program's own faults (13, 31, 43, ...) and the
  // cleanup after them (45) say nothing about the GPU.
  static const std::vector<XidInfo> kXids = {
      {48, XidAction::kDrain, "an uncorrectable memory error (double-bit ECC, XID 48)"},
      {63, XidAction::kDrain,
       "a faulty memory row or page that a GPU reset retires or remaps (XID 63)"},
      {64, XidAction::kDrain,
       "a failure to retire or remap faulty memory (XID 64): its memory is unreliable"},
      {74, XidAction::kDrain, "an NVLink error (XID 74)"},
      {79, XidAction::kDrain, "that it fell off the bus (XID 79): the driver lost contact with it"},
      {92, XidAction::kWarn,
       "a high rate of corrected memory errors (XID 92): its memory may be starting to fail"},
      {94, XidAction::kDrain,
       "a contained uncorrectable memory error (XID 94): the program using that memory was "
       "stopped"},
      {95, XidAction::kDrain,
       "an uncontained uncorrectable memory error (XID 95): every program on it may be affected"},
      {119, XidAction::kDrain, "a GSP firmware timeout (XID 119)"},
      {120, XidAction::kDrain, "a GSP firmware error (XID 120)"},
      {140, XidAction::kDrain, "an unrecovered memory error (XID 140)"},
  };
  return kXids;
}

const XidInfo* LookupXid(int code) {
  for (const XidInfo& x : KnownXids()) {
    if (x.code == code) return &x;
  }
  return nullptr;
}

HealthCounters CountersOf(const GpuSample& s) {
  return HealthCounters{s.ecc_uncorrected, s.pages_pending, s.remap_failed};
}

std::string ClockWords(const GpuSample& s) {
  std::vector<std::string> parts;
  if (s.sm_clock_mhz >= 0) {
    parts.push_back(s.sm_clock_max_mhz > 0
                        ? fmt::format("SM {:.0f} of {:.0f} MHz", s.sm_clock_mhz, s.sm_clock_max_mhz)
                        : fmt::format("SM {:.0f} MHz", s.sm_clock_mhz));
  }
  if (s.mem_clock_mhz >= 0) parts.push_back(fmt::format("memory {:.0f} MHz", s.mem_clock_mhz));
  if (s.temperature_c >= 0) parts.push_back(fmt::format("{:.0f} °C", s.temperature_c));
  if (s.power_w >= 0) parts.push_back(fmt::format("{:.0f} W", s.power_w));
  return Join(parts, ", ");
}

namespace {

HealthFinding Drain(std::string key, std::string what, nlohmann::json data) {
  HealthFinding f;
  f.kind = "gpu_drained";
  f.severity = "error";
  f.drain = true;
  f.key = std::move(key);
  f.what = std::move(what);
  f.data = std::move(data);
  return f;
}

// One kind of slowed clocks: since when, and whether it was said.
void Track(bool active, Millis t, Millis window, Millis& since, bool& said,
           const std::function<HealthFinding(Millis)>& finding,
           std::vector<HealthFinding>& out) {
  if (!active) {
    since = -1;
    said = false;
    return;
  }
  if (since < 0) since = t;
  if (!said && t - since >= window) {
    said = true;
    out.push_back(finding(t - since));
  }
}

}  // namespace

std::vector<HealthFinding> EvaluateHealth(const GpuSample& s, HealthMemory& memory,
                                          const HealthConfig& config) {
  std::vector<HealthFinding> out;
  const HealthCounters seen = memory.seen.value_or(HealthCounters{});

  // XIDs: events, each reported once by the probe.
  std::set<int> xids(s.xids.begin(), s.xids.end());
  for (int code : xids) {
    const XidInfo* x = LookupXid(code);
    if (x == nullptr) continue;
    nlohmann::json data = {{"xid", code}};
    if (x->action == XidAction::kDrain) {
      out.push_back(Drain(fmt::format("xid:{}", code), std::string("reported ") + x->words, data));
    } else {
      HealthFinding f;
      f.kind = "gpu_xid";
      f.severity = "warning";
      f.key = fmt::format("xid:{}", code);
      f.what = std::string("reported ") + x->words +
               "; if it keeps coming, have an admin drain it (drover gpu drain) and check it";
      f.data = data;
      out.push_back(std::move(f));
    }
  }

  // Uncorrectable memory errors since the driver loaded: news when the count rises above what
  // was seen (a count never seen before is all news).
  if (s.ecc_uncorrected >= 0) {
    const int64_t before = std::max<int64_t>(0, seen.ecc_uncorrected);
    if (s.ecc_uncorrected > before) {
      const int64_t n = s.ecc_uncorrected - before;
      out.push_back(Drain(
          "ecc",
          fmt::format("reported {} ({} since the driver loaded)",
                      n == 1 ? std::string("an uncorrectable memory error")
                             : fmt::format("{} uncorrectable memory errors", n),
                      s.ecc_uncorrected),
          {{"ecc_uncorrected", s.ecc_uncorrected}, {"new", n}}));
    }
  }
  if (s.pages_pending == 1 && seen.pages_pending != 1) {
    out.push_back(Drain("pages_pending",
                        "has faulty memory waiting for a GPU reset to be retired or remapped",
                        {{"retired_pages_pending", true}}));
  }
  if (s.remap_failed == 1 && seen.remap_failed != 1) {
    out.push_back(Drain("remap_failed",
                        "failed to remap a faulty memory row: its memory is unreliable",
                        {{"remap_failed", true}}));
  }
  HealthCounters now = seen;
  if (s.ecc_uncorrected >= 0) now.ecc_uncorrected = s.ecc_uncorrected;
  if (s.pages_pending >= 0) now.pages_pending = s.pages_pending;
  if (s.remap_failed >= 0) now.remap_failed = s.remap_failed;
  memory.seen = now;

  // Clocks held down: heat, hardware slowdown (a power brake, or hardware trouble that is not
  // heat), the power cap.
  const ThrottleReasons& t = s.throttle;
  const bool heat = t.known && (t.sw_thermal || t.hw_thermal);
  const bool hardware = t.known && (t.power_brake || (t.hw_slowdown && !heat));
  const bool power = t.known && t.power_cap;
  const std::string clocks = ClockWords(s);
  const std::string in_brackets = clocks.empty() ? "" : " (" + clocks + ")";
  auto throttle = [&](const char* key, std::string what) {
    HealthFinding f;
    f.kind = "gpu_throttle";
    f.severity = "warning";
    f.key = std::string("throttle:") + key;
    f.what = std::move(what);
    f.data = {{"reasons", ThrottleReasonNames(t)}};
    if (s.sm_clock_mhz >= 0) f.data["sm_clock_mhz"] = s.sm_clock_mhz;
    if (s.sm_clock_max_mhz >= 0) f.data["sm_clock_max_mhz"] = s.sm_clock_max_mhz;
    if (s.mem_clock_mhz >= 0) f.data["mem_clock_mhz"] = s.mem_clock_mhz;
    if (s.temperature_c >= 0) f.data["temperature_c"] = s.temperature_c;
    if (s.power_w >= 0) f.data["power_w"] = s.power_w;
    return f;
  };
  Track(heat, s.t_ms, config.throttle_ms, memory.heat_since, memory.heat_said,
        [&](Millis d) {
          return throttle("heat",
                          fmt::format("has slowed its clocks for heat for {}{}: runs on it go "
                                      "slower; check its cooling (fans, airflow) with nvidia-smi "
                                      "-q -d TEMPERATURE,PERFORMANCE",
                                      FormatDuration(d), in_brackets));
        },
        out);
  Track(hardware, s.t_ms, config.throttle_ms, memory.hardware_since, memory.hardware_said,
        [&](Millis d) {
          return throttle("hardware",
                          fmt::format("has been slowed by hardware (a power brake or power supply "
                                      "trouble) for {}{}: runs on it go slower; check its power "
                                      "supply with nvidia-smi -q -d PERFORMANCE",
                                      FormatDuration(d), in_brackets));
        },
        out);
  Track(power, s.t_ms, config.power_cap_ms, memory.power_since, memory.power_said,
        [&](Millis d) {
          return throttle("power",
                          fmt::format("has been held at its power limit for {}{}: common at full "
                                      "load, but while the SM clock stays far below its maximum "
                                      "runs go slower; check the limit with nvidia-smi -q -d POWER",
                                      FormatDuration(d), in_brackets));
        },
        out);
  return out;
}

std::string GpuLabel(int physical_index, const std::vector<int>& mig_instances) {
  if (mig_instances.empty()) return fmt::format("GPU {}", physical_index);
  std::vector<std::string> ids;
  for (int i : mig_instances) ids.push_back(std::to_string(i));
  return fmt::format("GPU {} (MIG instance{} {})", physical_index,
                     mig_instances.size() == 1 ? "" : "s", Join(ids, ", "));
}

std::string DrainMessage(const std::string& label, const std::string& what,
                         const std::vector<int64_t>& runs, int physical_index) {
  std::string left;
  if (runs.empty()) {
    left = "nothing runs on it now";
  } else {
    std::vector<std::string> ids;
    for (int64_t r : runs) ids.push_back(std::to_string(r));
    left = fmt::format("its running run{} {} {} left alone", runs.size() == 1 ? "" : "s",
                       Join(ids, ", "), runs.size() == 1 ? "is" : "are");
  }
  return fmt::format(
      "{} {}: drained, no new runs start on it; {}. An admin clears it with `drover gpu clear {}` "
      "after a GPU reset (nvidia-smi -r -i {}, or a reboot).",
      label, what, left, physical_index, physical_index);
}

std::string HealthSummary(const GpuSample& s) {
  std::vector<std::string> parts;
  if (s.remap_failed == 1) parts.push_back("row remap failed");
  if (s.pages_pending == 1) parts.push_back("reset pending (retired pages)");
  if (s.ecc_uncorrected > 0) {
    parts.push_back(fmt::format("{} uncorrectable ECC error{}", s.ecc_uncorrected,
                                s.ecc_uncorrected == 1 ? "" : "s"));
  }
  if (s.throttle.known && s.throttle.Slowing()) {
    ThrottleReasons slowing = s.throttle;
    slowing.idle = slowing.app_clocks = slowing.sync_boost = false;
    std::string clock = s.sm_clock_mhz < 0 ? ""
                        : s.sm_clock_max_mhz > 0
                            ? fmt::format(" (SM {:.0f} of {:.0f} MHz)", s.sm_clock_mhz,
                                          s.sm_clock_max_mhz)
                            : fmt::format(" (SM {:.0f} MHz)", s.sm_clock_mhz);
    parts.push_back("slowed: " + Join(ThrottleReasonNames(slowing), ", ") + clock);
  }
  if (s.last_xid >= 0) parts.push_back(fmt::format("last XID {}", s.last_xid));
  if (!parts.empty()) return Join(parts, "; ");
  const bool known = s.ecc_uncorrected >= 0 || s.pages_pending >= 0 || s.remap_failed >= 0 ||
                     s.throttle.known || s.sm_clock_mhz >= 0;
  return known ? "ok" : "unknown";
}

}  // namespace drover
