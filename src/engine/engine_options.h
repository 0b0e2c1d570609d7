#pragma once
// What an engine is made with (engine.h): its store folder, limits, the daemon config's
// sections, and what it shares with other engines on the machine; what Recover() found.
#include <string>
#include <vector>
#include "common/clock.h"
#include "engine/environment_capture.h"
#include "gpu/leases.h"
#include "sched/scheduler_config.h"
#include "watch/config.h"
#include "watch/sinks.h"

namespace drover {

// What `drover run` and the daemon use for EngineOptions::commit_interval_ms: at most this much
// of a burst of short runs is committed at once, and the API sees a change this much later.
inline constexpr Millis kCommitIntervalMs = 10;

struct EngineOptions {
  std::string store_dir;              // holds drover.db, snapshots/ and runs/
  int cpu_slots = 0;                  // CPU slots shared by all runs; <= 0: the number of CPUs
  Millis kill_grace_ms = 5000;        // SIGTERM, then SIGKILL this much later
  Millis tail_interval_ms = 250;      // how often running attempts' stdout is read for metrics
  std::vector<std::string> base_env;  // environment every run inherits ("K=V"); default: ours
  bool capture_environment = true;    // package list of the interpreter, GPU info
  // Start each run so that its end is recorded beside it (by the launcher's supervisor, or a
  // shim), so runs outlive the engine and a restarted engine adopts them: the daemon and
  // `drover run --foreground` both. Off (tests of the engine alone): launched directly; a
  // restarted engine stops such orphans and requeues them.
  bool use_shim = true;
  // Working copies of more than a few small files are overlays of the snapshot mounted in the
  // run's own mount namespace, where this machine allows it (exec/working_copy.h); off: copies.
  bool overlay_working_copies = true;
  // A root daemon serving a lab (`drover serve --shared` as root, docs/lab-server.md): each run
  // executes as its submitter (uid, gid, groups; their HOME and a clean environment), its
  // working copy, logs and checkpoints are theirs, and submits are read with their rights.
  bool runs_as_submitter = false;
  bool stop_runs_on_drain = false;  // serve: on SIGTERM stop runs (else leave them for adoption)
  // serve: the longest the loop waits without looking at posted commands (a fallback: Post()
  // wakes it at once through ProcessLauncher::Wake).
  Millis serve_poll_ms = 50;
  // While runs end and start faster than this, their changes are committed together once per
  // interval rather than once per loop iteration (0: every iteration). Commands are committed
  // before they are answered whatever this is.
  Millis commit_interval_ms = 0;
  // Tests: check the index of running and waiting runs against the runs at every pass of the
  // loop and fail the loop when they disagree (CheckIndex; linear in the runs, so off by default).
  bool check_index = false;
  // The daemon config file's sections (config/daemon_config.h): telemetry period, alert silence
  // window and detector thresholds (docs/metrics.md); the scheduler (docs/scheduling.md); the
  // environment record (docs/execution.md).
  watch::WatchConfig watch;           // telemetry, alert silence, detectors
  sched::SchedulerConfig scheduler;  // the policy and its knobs, grace, GPU reserve, groups
  EnvironmentConfig environment;     // how long the package listing may take
  // Where alerts go once raised and not silenced (not owned; nullptr: stored only).
  watch::AlertSink* alert_sink = nullptr;
  // A search's next trials are proposed on a thread of their own and made when the proposals
  // come back (engine/proposals.h). Off: proposed at once on the loop (the engine tests, for
  // determinism with the fake clock).
  bool proposals_off_loop = true;
  // Under an executor that places attempts itself (the launcher's kind() is not local, e.g.
  // Slurm): at most this many of its attempts submitted and not ended at once (executor.max_jobs).
  int executor_max_jobs = 256;
  // Where the Container Device Interface specs are (container/runtime.h, CheckCdi): a container
  // run that needs GPUs is refused at submit when they name no device for a GPU.
  std::vector<std::string> cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
  // The machine's GPU leases (gpu/leases.h; not owned; nullptr: this engine owns every GPU it
  // sees): what other engines on the machine hold is taken out of the pool before each decision,
  // and what this one holds is published after it, under the machine-wide lock.
  GpuLedger* gpu_ledger = nullptr;
};

// What Recover() found in the store.
struct RecoverySummary {
  int experiments = 0;  // active experiments taken over
  int queued = 0;       // runs waiting to start
  int adopted = 0;      // runs whose shim still lives: watched again
  int finished = 0;     // runs that ended while no engine watched: their end read from the shim
  int requeued = 0;     // runs whose end is unknown: marked interrupted and queued again
  int unrecorded = 0;   // starts the last engine did not get to record: stopped, queued again
  int unrecorded_adopted = 0;  // ... taken over as running (or ended) attempts instead
};

}  // namespace drover
