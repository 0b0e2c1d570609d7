#pragma once
// Every executor drover has, by kind: the one place a new executor registers (exec/executor.h;
// docs/architecture.md, "Adding an executor").
#include "exec/executor.h"

namespace drover::cli {

ExecutorEntry ExecutorOf(ExecutorKind kind);

}  // namespace drover::cli
