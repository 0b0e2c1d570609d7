#pragma once
// What drover rm and drover gc share: asking the store's one writer (the daemon, or this process
// holding the engine lock) to plan or carry out a cleanup, printing it, and asking before
// deleting.
#include <functional>
#include <string>

#include "cli/common.h"
#include "model/cleanup.h"
#include "store/store.h"

namespace drover::cli {

// Plans (dry run) or carries out a cleanup on the store without a daemon: takes the engine lock
// (no engine may run meanwhile), calls `plan`, and unless `dry_run` applies it and empties the
// trash.
using PlanStep = std::function<Result<Cleanup>(Store& store, const std::string& store_dir)>;
Result<Cleanup> CleanUpHere(const Globals& g, const PlanStep& plan, bool dry_run);

// The plan or what was done: `headline`, then each file (at most 20 unless `all`), the total.
void PrintCleanup(const Cleanup& c, const std::string& headline, bool json);

// Whether to go ahead: yes when `yes`; else the question on a terminal ([y/N]); else an error
// that says to add --yes.
Result<bool> Confirm(const std::string& question, bool yes);

}  // namespace drover::cli
