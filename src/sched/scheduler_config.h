#pragma once
// The daemon config file's `scheduler:` section (docs/scheduling.md, "In the daemon"): what it
// holds and how it is read, beside the scheduler it configures. The file as a whole is read by
// config/daemon_config.h.
//
//   scheduler:
//     policy: fifo          # fifo | priority | las | srtf | gittins | default
//     min_runtime: 10m      # a run this young is never preempted
//     preempt_above: 0.8    # preempt only while this share of the GPUs is allocated (default:
//                           # 0.5 for policy default)
//     grace: 30s            # a preempted run gets SIGTERM, then SIGKILL this much later
//     gpu_reserve: 1GiB     # memory per GPU kept for the driver and monitoring
//     las_threshold: 16h    # las: GPU time attained before a run moves to the second queue
//     groups:
//       vision: {weight: 2, quota: 4}   # quota in GPUs; 0 = none
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sched/policy.h"
#include "sched/scheduler.h"
#include "spec/yaml_fields.h"

namespace drover::sched {

// How the engine schedules.
struct SchedulerConfig {
  // The daemon's default is `default`: it preempts only runs that can resume (checkpoint: true,
  // or preemptible: true), so a run without checkpoints never loses its work to another.
  PolicyKind policy = PolicyKind::kDefault;
  // Set when the file gives them; otherwise the policy's own defaults (ForPolicy), so `--policy`
  // or `policy:` alone picks a policy with the knobs it was tuned with.
  std::optional<Millis> min_runtime_ms;
  std::optional<double> preempt_above;
  std::optional<Millis> las_threshold_gpu_ms;
  Millis grace_ms = 30'000;                // preempted: SIGTERM, then SIGKILL this much later
  int64_t gpu_reserve = int64_t{1} << 30;  // bytes per GPU never handed out to runs
  std::map<std::string, GroupShare> groups;  // spec `group` -> weight and quota

  // The policy's defaults with this config's values over them.
  PolicyConfig Policy() const;
};

// The section's keys (a config that has one at the top level is told to move it here).
const std::vector<std::string>& SchedulerKeys();
// Reads the `scheduler:` field `f` into `out`, with errors at file:line:column.
Status ParseSchedulerSection(const yaml::Reader& r, const yaml::Field& f, SchedulerConfig* out);

}  // namespace drover::sched
