#pragma once
// The Slurm executor's factory (exec/executor.h; registered in cli/executors.cc): each attempt is
// a job. Before the first job it links the store's run folders into executor.shared_dir (where
// set), warns when the store's database is on a network file system, and runs a probe job that
// checks that the nodes see the store's folders (docs/slurm.md).
#include "exec/executor.h"

namespace drover::slurm {

Result<Executor> MakeExecutor(const ExecutorContext& context);
// sbatch --test-only for the spec's resources (each stage's for a pipeline).
Status WouldAccept(const Spec& spec, const ExecutorConfig& config);

}  // namespace drover::slurm
