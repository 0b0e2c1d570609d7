#include "cli/executors.h"

#include "slurm/executor.h"

namespace drover::cli {

ExecutorEntry ExecutorOf(ExecutorKind kind) {
  switch (kind) {
    case ExecutorKind::kLocal: return {};
    case ExecutorKind::kSlurm: return {&slurm::MakeExecutor, &slurm::WouldAccept};
  }
  return {};
}

}  // namespace drover::cli
