#pragma once
// An executor: where attempts run. Each is a ProcessLauncher (exec/process_launcher.h) made by a
// factory from the daemon config's `executor:` section; the engine sees only the launcher. This
// machine's launcher is the `local` one every executor is given (for interrupts and wakes, and to
// run what it needs here); Slurm (slurm/executor.h) submits each attempt as a job. Containers
// wrap whichever launcher was made (container/launcher.h). The factories are listed in one place,
// cli/executors.cc; docs/architecture.md, "Adding an executor", says what a new one implements.
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "exec/process_launcher.h"
#include "model/spec.h"

namespace drover {

// What a factory is given.
struct ExecutorContext {
  const ExecutorConfig& config;  // the daemon config's executor: section
  // The spec's executor:, for `drover run --foreground` (given: it overrides the config's
  // target; else unset).
  const ExecutorSpec& spec;
  ProcessLauncher& local;  // this machine's launcher
  Clock& clock;
  std::string store_dir;
};

// What a factory makes.
struct Executor {
  // Owns whatever it needs (a Slurm cluster's command runner, say) for as long as it lives.
  std::unique_ptr<ProcessLauncher> launcher;
  // Attempts it takes at once (EngineOptions::executor_max_jobs); 0: the engine's CPU slots and
  // GPUs decide, as on this machine.
  int max_jobs = 0;
  // One line for the daemon's start-up banner ("slurm (at most 256 jobs at once; ...)").
  std::string banner;
};

using ExecutorFactory = Result<Executor> (*)(const ExecutorContext&);
// `drover run --dry-run` of a spec this executor places: whether it would take the spec's
// attempts (each stage's, for a pipeline) as they ask, without starting anything (Slurm:
// sbatch --test-only). `config` is the daemon config's executor: section.
using ExecutorCheck = Status (*)(const Spec& spec, const ExecutorConfig& config);

// An executor as registered (cli/executors.cc).
struct ExecutorEntry {
  ExecutorFactory make = nullptr;        // nullptr: this machine's launcher, as it is
  ExecutorCheck would_accept = nullptr;  // nullptr: the engine's own fit check decides
};

}  // namespace drover
