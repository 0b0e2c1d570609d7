#pragma once
// `executor:` in a spec or in the daemon's config (docs/slurm.md): where attempts run, on this
// machine (kind: local, the default) or each as a Slurm job (kind: slurm, with the partition,
// account, QOS and extra sbatch flags). The daemon's section also says how many attempts may be in
// Slurm at once and where ended jobs are read (the accounting database or the jobcomp file).
#include <string>
#include <vector>

#include "common/status.h"
#include "model/spec.h"
#include "spec/yaml_fields.h"

namespace drover {

// ExecutorConfig: model/spec.h.
const std::vector<std::string>& ExecutorKeys(bool daemon);
// The mapping at `f` into `out` (its kind, target and, for the daemon, max_jobs and accounting).
Status ParseExecutorSection(const yaml::Reader& r, const yaml::Field& f, bool daemon,
                            ExecutorConfig* out);
// Whether one extra sbatch flag may be passed: drover sets the job's name, output files,
// environment, folder and requeue itself (a flag that changes them would hide the job from drover
// or lose its logs). InvalidArgument saying which and why.
Status CheckSbatchFlag(const std::string& flag);

// The most extra sbatch flags, and the longest one.
inline constexpr size_t kMaxSbatchFlags = 64;
inline constexpr size_t kMaxSbatchFlagBytes = 4096;

}  // namespace drover
