#pragma once
// drover's own run history as a trace (`drover sim --format drover`): every run that ran on GPUs
// and ended, submitted at its creation, lasting the time its attempts ran.
#include <optional>

#include "sim/trace.h"
#include "store/store.h"

namespace drover::sim {

// Runs created in [from_s, to_s) (Unix seconds; either may be absent) that ended and held at
// least one GPU. duration = the sum of their attempts' run times (what they cost the cluster,
// retries included); gpus = their declared GPUs; group = their experiment's name. CPU-only runs
// are left out (they take no GPU).
Result<Trace> ReadDroverHistory(Store& store, std::optional<int64_t> from_s = {},
                                std::optional<int64_t> to_s = {});

}  // namespace drover::sim
