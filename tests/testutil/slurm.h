#pragma once
// For the tests that need a real Slurm (scripts/slurm-local.sh start): whether one answers here
// with a node that can take jobs. Where none does (CI today), those tests skip and say so.
#include <string>

#include "common/subprocess.h"

namespace drover::testing {

inline bool SlurmAnswers() {
  auto r = RunAndCapture({"sinfo", "-h", "-o", "%T"}, {.timeout_ms = 5000});
  if (!r.ok() || r->exit_code != 0) return false;
  for (const char* state : {"idle", "mixed", "allocated", "completing"}) {
    if (r->out.find(state) != std::string::npos) return true;
  }
  return false;
}

inline constexpr const char* kNoSlurm = "no Slurm answers here (scripts/slurm-local.sh start)";

}  // namespace drover::testing
