#pragma once
// The options of `drover run`, which `drover ask` takes too: it plans a spec, then runs it as
// `drover run` would, with the same overrides, GPUs, CPU slots and engine options.
#include <functional>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "model/run.h"

namespace drover {
class Engine;
class Store;
}  // namespace drover

namespace drover::cli {

struct RunFlags {
  std::string spec_path;  // a file, or "-" for standard input
  std::vector<std::string> sets;
  std::vector<std::string> force;  // --force STAGE: pipeline stages run again (force: in the spec)
  bool rerun = false;              // --rerun: runs that succeeded before run again (rerun: true)
  std::string fake_gpus;
  bool dry_run = false;
  bool json = false;
  bool quiet = false;
  // Ctrl-C cancels what this command queued and follows, whether the daemon was started for it,
  // joined, or the engine runs in this process (docs/lab-server.md, "Ctrl-C"); --cancel-on-exit
  // is still accepted and says the same.
  bool cancel_on_exit = true;
  bool resume = false;  // drover run --resume (not drover ask)
  // The spec's executor: (set once it is parsed): with kind slurm, the foreground engine submits
  // its attempts to Slurm (docs/slurm.md).
  ExecutorSpec executor;
  int cpus = 0;
  EngineFlags engine;
  // --foreground (or $DROVER_FOREGROUND=1): the engine runs in this process, as in a container or
  // CI job; otherwise a store no daemon serves gets one started on demand (docs/lab-server.md),
  // which exits after `idle_exit` with nothing to do.
  bool foreground = false;
  std::string idle_exit = "5m";
  // Set when this `drover run` started the daemon it follows: its flags are the daemon's.
  bool started_daemon = false;
};

// Whether `drover run` keeps its engine in its own process (--foreground, $DROVER_FOREGROUND).
bool InForeground(const RunFlags& f);

// Every option of `drover run` but its spec argument; --json only with `json` (drover ask has
// its own).
void AddRunOptions(CLI::App* app, RunFlags* flags, bool json = true);
// Those of the options that concern the engine and the output, not the spec (drover retry).
void AddEngineRunOptions(CLI::App* app, RunFlags* flags, bool json = true);
// --resume (drover run alone).
void AddResumeOption(CLI::App* app, RunFlags* flags);
// --force STAGE and --rerun (drover run and drover submit), and the spec overrides they make:
// they travel with the spec, so a daemon and a restarted engine see them.
void AddCacheOptions(CLI::App* app, std::vector<std::string>* force, bool* rerun);
void ApplyCacheOptions(const std::vector<std::string>& force, bool rerun,
                       std::vector<std::string>& sets);

// Runs the spec at f.spec_path as `drover run` does (through the daemon when one serves the
// store).
int RunSpec(Globals& g, const RunFlags& f);

// What a foreground engine is to run, once it has taken over the store's unfinished runs: an
// experiment's runs it has just queued (a submit, a resume, a retry), and how to present them.
struct QueuedRuns {
  int64_t experiment_id = 0;
  std::string name;      // the experiment's
  std::string metric;    // its objective's metric, for the progress view ("": none)
  std::string headline;  // the first line printed ("experiment 3 (digits): 4 runs, ...")
  std::vector<Run> runs;
};
using QueueStep = std::function<Result<QueuedRuns>(Engine& engine, Store& store)>;
// `drover run` without a daemon: an engine in this process takes over the store, `queue` queues
// the runs, and it runs until every run is finished (Ctrl-C cancels them), then prints the
// experiment's results and writes its report.
int RunInForeground(Globals& g, const RunFlags& f, const QueueStep& queue);
// With a daemon: follows the experiment until its runs are finished (Ctrl-C cancels it, as in the
// foreground), then writes its report. `what` says what was queued ("2 runs, queued").
int FollowInDaemon(Globals& g, const DaemonInfo& daemon, int64_t experiment_id,
                   const std::string& name, const std::string& what, const RunFlags& f);

}  // namespace drover::cli
