#pragma once
// Runs a short helper program (git, python -c, nvidia-smi) without a shell and captures its
// stdout. Waits for that pid only, so it never reaps a run's process.
#include <string>
#include <vector>

#include "common/status.h"

namespace drover {

struct Captured {
  int exit_code = -1;
  std::string out;
};

Result<Captured> RunAndCapture(const std::vector<std::string>& argv, const std::string& cwd = "");

}  // namespace drover
