#pragma once
// The options of `drover run`, which `drover ask` takes too: it plans a spec, then runs it as
// `drover run` would, with the same overrides, GPUs, CPU slots and engine options.
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/engine_setup.h"

namespace drover::cli {

struct RunFlags {
  std::string spec_path;  // a file, or "-" for standard input
  std::vector<std::string> sets;
  std::string fake_gpus;
  bool dry_run = false;
  bool json = false;
  bool quiet = false;
  bool cancel_on_exit = false;
  int cpus = 0;
  EngineFlags engine;
};

// Every option of `drover run` but its spec argument; --json only with `json` (drover ask has
// its own).
void AddRunOptions(CLI::App* app, RunFlags* flags, bool json = true);

// Runs the spec at f.spec_path as `drover run` does (through the daemon when one serves the
// store).
int RunSpec(Globals& g, const RunFlags& f);

}  // namespace drover::cli
