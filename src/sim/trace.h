#pragma once
// Job traces for the scheduler's trace-driven simulator (issue 7; docs/scheduling.md when the
// simulator lands): the Philly table (Microsoft, 2017) and the Alibaba "openb" pods and nodes
// (2023), as shipped in ../shared/data/traces/. Reading only: no policy here.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover::sim {

struct TraceJob {
  int64_t id = 0;          // row number in the file, from 1
  double submit_s = 0;     // seconds since the trace's epoch (Trace::epoch_s)
  double duration_s = 0;   // run time at the requested size
  int gpus = 0;            // GPUs asked for (openb: per pod, whole or a share of one)
  int gpu_milli = 1000;    // share of each GPU, 1000 = a whole GPU (openb's fractional pods)
  std::string group;       // Philly: the virtual cluster (a team); openb: the QoS class
  int64_t cpu_milli = 0;   // openb only
  int64_t memory_mib = 0;  // openb only
};

struct Trace {
  std::vector<TraceJob> jobs;  // by submit time
  int64_t epoch_s = 0;         // Unix time of submit_s == 0 (Philly: the window's start)
  std::string source;          // the file, for messages
};

// "2017-10-02" or "2017-10-02 10:30:41" (UTC) -> Unix seconds. InvalidArgument otherwise.
Result<int64_t> ParseUtcTime(const std::string& text);

// Philly's `timestamp,duration,num_gpus,gpu_time,cluster`, jobs submitted in [from_s, to_s)
// (Unix seconds; either may be absent). submit_s counts from `from_s`, else from the first job.
// A malformed row is an error naming the file, line and column.
Result<Trace> ReadPhillyTrace(const std::string& path, std::optional<int64_t> from_s = {},
                              std::optional<int64_t> to_s = {});

// openb pods (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,...,creation_time,deletion_time,...`):
// submit = creation_time, duration = deletion_time - creation_time; pods without GPUs are left out.
Result<Trace> ReadOpenbPods(const std::string& path);

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};
Result<std::vector<TraceNode>> ReadOpenbNodes(const std::string& path);

}  // namespace drover::sim
