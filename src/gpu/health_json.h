#pragma once
// The health fields of a GPU reading as JSON (GET /api/v1/gpus, "health"; docs/metrics.md, "GPU
// health"), and the names of throttle reasons. Header-only: the server, which does not link the
// GPU probes, writes them and the CLI reads them back.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/gpu.h"

namespace drover {

// The names a throttle reason goes by in telemetry scripts, JSON and messages.
inline const std::vector<std::pair<const char*, bool ThrottleReasons::*>>& ThrottleReasonTable() {
  static const std::vector<std::pair<const char*, bool ThrottleReasons::*>> kNames = {
      {"thermal", &ThrottleReasons::sw_thermal},
      {"hw_thermal", &ThrottleReasons::hw_thermal},
      {"hw_slowdown", &ThrottleReasons::hw_slowdown},
      {"power_brake", &ThrottleReasons::power_brake},
      {"power", &ThrottleReasons::power_cap},
      {"sync_boost", &ThrottleReasons::sync_boost},
      {"app_clocks", &ThrottleReasons::app_clocks},
      {"idle", &ThrottleReasons::idle}};
  return kNames;
}

// The reasons set, in the table's order ("thermal", "power").
inline std::vector<std::string> ThrottleReasonNames(const ThrottleReasons& t) {
  std::vector<std::string> out;
  for (const auto& [name, member] : ThrottleReasonTable()) {
    if (t.*member) out.emplace_back(name);
  }
  return out;
}

inline nlohmann::json HealthToJson(const GpuSample& s) {
  using nlohmann::json;
  json j = json::object();
  auto count = [&](const char* key, int64_t v) { j[key] = v >= 0 ? json(v) : json(nullptr); };
  auto flag = [&](const char* key, int v) { j[key] = v >= 0 ? json(v != 0) : json(nullptr); };
  auto mhz = [&](const char* key, double v) { j[key] = v >= 0 ? json(v) : json(nullptr); };
  if (s.parent_index >= 0) j["mig_parent"] = s.parent_index;
  count("ecc_corrected", s.ecc_corrected);
  count("ecc_uncorrected", s.ecc_uncorrected);
  count("retired_pages", s.retired_pages);
  flag("retired_pages_pending", s.pages_pending);
  flag("remap_failed", s.remap_failed);
  j["throttle"] = s.throttle.known ? json(ThrottleReasonNames(s.throttle)) : json(nullptr);
  mhz("sm_clock_mhz", s.sm_clock_mhz);
  mhz("sm_clock_max_mhz", s.sm_clock_max_mhz);
  mhz("mem_clock_mhz", s.mem_clock_mhz);
  j["xids"] = s.xids;
  if (s.last_xid >= 0) {
    j["last_xid"] = s.last_xid;
    j["last_xid_ms"] = s.last_xid_ms;
  } else {
    j["last_xid"] = nullptr;
  }
  return j;
}

// Fills the health fields of `s` from HealthToJson's object; what is missing or of another type
// stays unknown.
inline void HealthFromJson(const nlohmann::json& j, GpuSample& s) {
  if (!j.is_object()) return;
  auto integer = [&](const char* key, int64_t fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
  };
  auto number = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : -1.0;
  };
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? (it->get<bool>() ? 1 : 0) : -1;
  };
  s.parent_index = static_cast<int>(integer("mig_parent", -1));
  s.ecc_corrected = integer("ecc_corrected", -1);
  s.ecc_uncorrected = integer("ecc_uncorrected", -1);
  s.retired_pages = integer("retired_pages", -1);
  s.pages_pending = flag("retired_pages_pending");
  s.remap_failed = flag("remap_failed");
  s.throttle = ThrottleReasons{};
  if (auto it = j.find("throttle"); it != j.end() && it->is_array()) {
    s.throttle.known = true;
    for (const auto& name : *it) {
      if (!name.is_string()) continue;
      for (const auto& [n, member] : ThrottleReasonTable()) {
        if (name.get<std::string>() == n) s.throttle.*member = true;
      }
    }
  }
  s.sm_clock_mhz = number("sm_clock_mhz");
  s.sm_clock_max_mhz = number("sm_clock_max_mhz");
  s.mem_clock_mhz = number("mem_clock_mhz");
  s.xids.clear();
  if (auto it = j.find("xids"); it != j.end() && it->is_array()) {
    for (const auto& x : *it) {
      if (x.is_number_integer()) s.xids.push_back(x.get<int>());
    }
  }
  s.last_xid = static_cast<int>(integer("last_xid", -1));
  s.last_xid_ms = integer("last_xid_ms", 0);
}

}  // namespace drover
