#pragma once
// The GPU pool as the engine hands it out, and whether a spec's runs could ever start on it.
#include <cstdint>
#include <vector>
#include "common/status.h"
#include "model/gpu.h"
#include "model/spec.h"
#include "sched/scheduler.h"

namespace drover {

// What the engine may hand out of each GPU: its memory less what was in use before drover
// started anything (someone else's) and less the reserve kept for the driver and monitoring.
std::vector<sched::GpuState> PoolOf(const std::vector<GpuDevice>& devices, int64_t gpu_reserve);
// Whether runs with these resources could ever start on `pool` (PoolOf) with `cpu_slots`; the
// error says what to change, and names the reserve when it alone is in the way. What a submit
// checks, and `drover run --dry-run` before anything is submitted.
Status CheckFitsPool(const Resources& resources, const std::vector<sched::GpuState>& pool,
                     int64_t gpu_reserve, int cpu_slots);
// CheckFitsPool for every run of a spec: its resources, or each pipeline stage's (the error
// names the stage).
Status CheckSpecFits(const Spec& spec, const std::vector<sched::GpuState>& pool,
                     int64_t gpu_reserve, int cpu_slots);

// One GPU as the engine sees it: what it may hand out and which runs hold it.
struct GpuView {
  sched::GpuState state;
  std::vector<int64_t> runs;
};

}  // namespace drover
