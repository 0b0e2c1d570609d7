#pragma once
// Experiments, runs, attempts, metric points and events: the records the store keeps.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/spec.h"

namespace drover {

// queued -> running -> succeeded | failed | cancelled | pruned, and running -> retrying ->
// running. pruned: stopped early by the experiment's prune rule (its curve was behind), not a
// failure.
enum class RunState { kQueued, kRunning, kRetrying, kSucceeded, kFailed, kCancelled, kPruned };
std::string_view ToString(RunState s);
std::optional<RunState> ParseRunState(std::string_view s);
bool IsFinal(RunState s);
// Every state, in the order above (for tables and counts).
inline constexpr RunState kAllRunStates[] = {RunState::kQueued,    RunState::kRunning,
                                             RunState::kRetrying,  RunState::kSucceeded,
                                             RunState::kFailed,    RunState::kCancelled,
                                             RunState::kPruned};

// How a search's trial got its parameters (docs/search.md, "How a search spent its budget"):
// none (a grid's or a pipeline's run), the random start before the model has enough finished
// trials, the random sampler, TPE, the GP, or an agent's own trial (add_trial).
enum class TrialOrigin { kNone, kRandomStart, kRandom, kTpe, kGp, kAgent };
std::string_view ToString(TrialOrigin o);  // "", "random start", "random", "tpe", "gp", "agent"
std::optional<TrialOrigin> ParseTrialOrigin(std::string_view s);
inline constexpr TrialOrigin kAllTrialOrigins[] = {TrialOrigin::kNone, TrialOrigin::kRandomStart,
                                                   TrialOrigin::kRandom, TrialOrigin::kTpe,
                                                   TrialOrigin::kGp, TrialOrigin::kAgent};
// Whether a model chose it (TPE or the GP).
inline bool ModelBased(TrialOrigin o) { return o == TrialOrigin::kTpe || o == TrialOrigin::kGp; }

// How many of an experiment's runs are in each state: what listings show instead of the runs
// (a sweep may hold 100,000).
struct RunCounts {
  std::map<RunState, int64_t> by_state;  // states with none are absent
  int64_t Of(RunState s) const {
    auto it = by_state.find(s);
    return it == by_state.end() ? 0 : it->second;
  }
  int64_t Total() const {
    int64_t n = 0;
    for (const auto& [s, k] : by_state) n += k;
    return n;
  }
  int64_t Unfinished() const {
    return Of(RunState::kQueued) + Of(RunState::kRunning) + Of(RunState::kRetrying);
  }
};

// What ended an attempt. Stored as the attempt's reason.
enum class AttemptOutcome {
  kSucceeded,    // exit 0
  kExitCode,     // non-zero exit
  kSignal,       // killed by a signal we did not send
  kTimeout,      // ran past the spec's timeout
  kCudaOom,      // CUDA out of memory, recognised from stderr
  kCancelled,    // the user cancelled (Ctrl-C, drover cancel)
  kLaunchError,  // could not be started (no such program, bad workdir)
  kInterrupted,  // the engine went away while it ran
  kDiverged,     // a watched metric became NaN or infinite (monitor.on_nan: stop)
  kStalled,      // no new output for monitor.stall
  kPreempted,    // stopped so a better-ranked waiting run gets its GPUs (requeued, no retry spent)
  kPruned,       // stopped by the prune rule: its curve was behind the others' (not a failure)
};
std::string_view ToString(AttemptOutcome o);
std::optional<AttemptOutcome> ParseAttemptOutcome(std::string_view s);

// Why the engine is stopping a running attempt (SIGTERM, then SIGKILL after the grace). An
// attempt is stopped for one reason: the first wins, later ones only shorten the grace. It is
// recorded with the attempt while it is being stopped, so a restarted engine goes on stopping
// it for the same reason.
enum class StopReason {
  kCancel,    // the user cancelled
  kTimeout,   // ran past the spec's timeout
  kStall,     // no output for monitor.stall
  kDiverged,  // a watched metric became NaN or infinite
  kPreempt,   // its GPUs go to a better-ranked run: requeued, no retry spent
  kDrain,     // the daemon is shutting down with --stop-runs: requeued
  kPrune,     // the prune rule stopped it (its curve was behind): ends pruned
};
std::string_view ToString(StopReason r);
std::optional<StopReason> ParseStopReason(std::string_view s);
// How an attempt stopped for `r` ended, given how its process exited (a run stopped for the
// daemon's shutdown that still exits 0 has succeeded).
AttemptOutcome OutcomeOf(StopReason r, bool exited_zero);

// Whether an experiment may still make runs: active while any run is unfinished or a search may
// propose more trials; done once the engine has nothing more to do for it (a retry makes it
// active again). Followers wait for done, not only for every run being final: a search's next
// trial is proposed after the one before it ends.
enum class ExperimentStatus { kActive, kDone };
std::string_view ToString(ExperimentStatus s);
std::optional<ExperimentStatus> ParseExperimentStatus(std::string_view s);

struct Experiment {
  int64_t id = 0;
  std::string name;
  std::string spec_yaml;          // the YAML as submitted (after --set)
  Json spec = Json::object();     // SpecToJson of the parsed spec
  std::string snapshot_hash;      // content hash of the code snapshot
  std::string git_commit;         // HEAD of the workdir's repository at submit ("" outside git)
  std::string git_diff;           // `git diff HEAD` at submit ("" when clean)
  ExperimentStatus status = ExperimentStatus::kActive;
  Millis created_ms = 0;
  // Who submitted it (docs/lab-server.md): the Unix user the daemon learnt from the socket, a
  // token or the web session ("" in stores from before), and that user's ids when submitted.
  std::string user;
  int64_t uid = -1;
  int64_t gid = -1;
};

struct Run {
  int64_t id = 0;
  int64_t experiment_id = 0;
  std::string user;                      // its experiment's submitter (read with it; not stored twice)
  int64_t user_uid = -1;                 // and that submitter's uid then (-1: not recorded)
  int index = 0;                         // position in the expanded grid
  Json params = Json::object();          // the resolved parameters as expanded
  Json current_params = Json::object();  // what the next attempt uses (after OOM halving)
  std::string fingerprint;
  RunState state = RunState::kQueued;
  int priority = 0;
  Resources resources;
  int attempts = 0;          // attempts started
  int retries_used = 0;      // non-OOM retries used
  Millis not_before_ms = 0;  // backoff: do not start before this time
  Millis created_ms = 0;
  Millis started_ms = 0;  // first attempt start
  Millis ended_ms = 0;
  std::string reason;                   // outcome of the last attempt
  Json final_metrics = Json::object();  // metric name -> last value reported
  // Pipelines (docs/pipelines.md): the stage it runs ("" for a plain run), the runs that must
  // succeed before it starts, and the run whose outputs it reuses when a run with its
  // fingerprint had succeeded before (0: it ran, or will).
  std::string stage;
  std::vector<int64_t> needs;
  int64_t cached_from = 0;
  // The code it runs when not its experiment's snapshot: a `drover retry --code current` took
  // the workdir as it was then (its hash; "" = the experiment's), from attempt `snapshot_from`.
  std::string snapshot_hash;
  int snapshot_from = 0;
  TrialOrigin origin = TrialOrigin::kNone;  // a search's trial: how its parameters were chosen
};

// One file a run stored as an output (artifacts/ in the store, by content).
struct Artifact {
  int64_t run_id = 0;
  std::string path;  // inside the run's working copy: data/train.npz
  std::string hash;  // sha256 of its content
  int64_t bytes = 0;
  int mode = 0644;   // permission bits (the exec bit kept)
};

// Where an artifact's bytes are kept, by content: <store>/artifacts/<h[0:2]>/<h>, the daemon's
// own file (read-only), whatever a run later does to the tree it came from.
inline std::string ArtifactObjectPath(const std::string& store_dir, const std::string& hash) {
  return store_dir + "/artifacts/" + hash.substr(0, 2) + "/" + hash;
}

// What `drover artifacts RUN` and GET /runs/{id}/artifacts show: the run's outputs, or those of
// the run it was cached from (source_run), in `dir` (<store>/outputs/<source_run>).
struct RunArtifacts {
  int64_t run_id = 0;
  int64_t source_run = 0;
  std::string dir;
  std::vector<Artifact> files;
};

// How far drover has read one TensorBoard event file of an attempt (docs/metrics.md).
struct EventFileProgress {
  int64_t offset = 0;   // bytes read: after the last whole record
  int64_t corrupt = 0;  // records skipped because their checksum or encoding was wrong
  bool operator==(const EventFileProgress&) const = default;
};

// A run's metrics: a name longer than this is not taken (from a JSON line or an event file's tag),
// nor a new name once the run has this many (each is a curve in the store and in every view).
inline constexpr size_t kMaxMetricNameBytes = 256;
inline constexpr size_t kMaxMetricNames = 1000;

// Event files read per attempt at most (more are left unread, and said so).
inline constexpr size_t kMaxEventFiles = 64;

// A checkpoint the run said it saved ({"drover_checkpoint": {"step": N}}, drover.Checkpointer).
struct CheckpointMark {
  int64_t step = 0;
  Millis t_ms = 0;  // when drover read the line
  bool operator==(const CheckpointMark&) const = default;
};

struct Attempt {
  int64_t id = 0;
  int64_t run_id = 0;
  int number = 0;  // 1, 2, ...
  bool ended = false;
  std::string reason;  // AttemptOutcome as a string once ended
  int exit_code = -1;
  int signal = 0;
  int64_t pid = 0;        // process group id of the run
  std::vector<int> gpus;  // GPU indices given to the attempt
  std::string cuda_visible_devices;
  Json params = Json::object();  // the parameters this attempt ran with
  std::vector<std::string> argv;
  Millis started_ms = 0;
  Millis ended_ms = 0;
  std::string stdout_path;
  std::string stderr_path;
  int64_t stdout_offset = 0;  // how far the metric reader has consumed stdout
  std::string hostname;
  std::string drover_version;
  std::string workdir;    // where it ran (a working copy of the snapshot)
  int64_t pid_start = 0;  // start time of pid (/proc ticks): pid + this names the run's shim
  std::string exit_path;  // where the shim records how the run ended
  // Why it failed in its own words: the last lines of its stderr when it exited with an error or
  // was killed by a signal (the exception, at most kAttemptErrorBytes); "" otherwise.
  std::string error;
  // While it is being stopped (not ended): why. Stored in the reason column until it ends.
  std::optional<StopReason> stopping;
  // Where an executor other than this machine placed it (docs/slurm.md): {"kind": "slurm",
  // "job_id", "partition", "node", "state", "reason"}; empty for a local attempt.
  Json executor = Json::object();
  // What the run reported about itself beside metric lines (stored as one JSON column):
  // how far each TensorBoard event file it writes has been read (by path relative to its working
  // folder), the hyper-parameters it logged (drover.log_hparams, autolog), and its last checkpoint.
  std::map<std::string, EventFileProgress> event_files;
  Json hparams = Json::object();
  std::optional<CheckpointMark> checkpoint;
};

// One run's curve of one metric in its latest attempt (the attempt whose values the run shows),
// as the store sums it up (Store::MetricSummaries): what every way of ranking runs needs.
inline constexpr size_t kAttemptErrorBytes = 2048;
inline constexpr int kAttemptErrorLines = 8;

struct CurveSummary {
  int64_t points = 0;
  double last = std::numeric_limits<double>::quiet_NaN();  // as reported: NaN and infinities too
  // Over the finite values (NaN when there is none).
  double lowest = std::numeric_limits<double>::quiet_NaN();
  double highest = std::numeric_limits<double>::quiet_NaN();
  // The mean of the last K values (K as asked of the store): NaN when any of them is NaN.
  double mean_last = std::numeric_limits<double>::quiet_NaN();
};
// A run's value of the prune metric at a rung of its experiment's prune rule, and the decision
// taken there (search/pruner.h). Stored, so a restarted engine takes the same decisions.
struct RungRecord {
  int64_t run_id = 0;
  int bracket = 0;
  int rung = 0;
  int64_t step = 0;     // the rung's place in `unit` (the run reported it or a later one)
  double value = 0;     // the run's value of the metric then
  bool pruned = false;  // the run was stopped here
  std::string unit = "step";  // what rungs count: "step", or the resource metric ("epoch")
  int64_t report_step = 0;    // the step of the report judged here (0: not recorded)
};

// A result told to a search for a config run outside it (ask/tell, docs/search.md): the
// objective's value, or none when the config failed.
struct Observation {
  int64_t id = 0;
  int64_t experiment_id = 0;
  Json params = Json::object();
  std::optional<double> value;
  Millis created_ms = 0;
};

// One number for a curve under a summary rule (objective.summary): its last value, its best (the
// highest when maximising; its last when it has no finite value) or the mean of its last K.
// nullopt for a curve with no point.
std::optional<double> Summarize(const CurveSummary& curve, ScoreSummary summary, bool maximize);


struct MetricPoint {
  int64_t run_id = 0;
  int64_t attempt_id = 0;
  int64_t step = 0;
  std::string name;
  double value = 0;
  Millis t_ms = 0;
};

// What an event is about: stored with it (Event::kind) and named in the daemon's event stream
// (/api/v1/events) by ToString.
enum class EventKind {
  kExperimentSubmitted,  // stored and streamed
  kRunState,             // stored and streamed: a run changed state
  kMetrics,              // streamed: new metric points
  kAlert,                // streamed: an alert was raised
  kGpu,                  // streamed: a telemetry reading
};
std::string_view ToString(EventKind k);

struct Event {
  int64_t id = 0;
  Millis t_ms = 0;
  std::string kind;  // run_state, attempt_started, attempt_ended, experiment_submitted, ...
  int64_t experiment_id = 0;
  int64_t run_id = 0;
  Json data = Json::object();
};

struct Snapshot {
  std::string hash;  // sha256 over the file list and contents
  std::string path;  // folder under the store holding the files
  bool git = false;
  std::string git_commit;  // HEAD, when the workdir is in a git repo
  std::string git_diff;    // `git diff HEAD` at submit time
  int64_t bytes = 0;
  int64_t files = 0;
  Millis created_ms = 0;
};

// Something a person should know about: a diverging run, an idle GPU, a config that keeps
// failing. Alerts with the same key raised again within the silence window are counted on the
// first one (count, last_ms) instead of notifying again.
struct Alert {
  int64_t id = 0;
  std::string kind;                  // diverged, loss_spike, plateau, stalled, memory_leak,
                                     // idle_gpu, fragmentation, repeated_failure, run (from a run)
  std::string severity = "warning";  // info | warning | error
  std::string key;                   // dedup key, e.g. "run:12:loss_spike:loss", "gpu:0:idle"
  std::string message;               // one line a person reads in a chat message
  int64_t experiment_id = 0;         // 0 when not about an experiment
  int64_t run_id = 0;                // 0 when not about a run
  int gpu = -1;                      // GPU index, -1 when not about a GPU
  Json data = Json::object();        // the numbers behind it (window median, growth, ...)
  Millis first_ms = 0;               // raised (and notified)
  Millis last_ms = 0;                // raised again, silenced, most recently
  int64_t count = 1;                 // times raised in this silence window
};

// The interpreter a command's environment is recorded under: its program when that is a Python
// interpreter (python, python3, /usr/bin/python3.11, ...), else "" (the interpreter of a shell
// command, or of any other program, is not known). The submit records one environment per
// experiment and interpreter; `drover show RUN` shows the run's.
std::string InterpreterOf(const std::vector<std::string>& argv, bool shell);

// Per experiment and interpreter: the package list, captured once.
struct Environment {
  int64_t experiment_id = 0;
  std::string interpreter;  // e.g. /usr/bin/python3
  std::string packages;     // "name==version" lines, sorted
  std::string hostname;
  std::string gpu_info;  // nvidia-smi -q / NVML summary, or "" without a GPU
};

// Where an executor placed an attempt, in words (Attempt::executor): "Slurm job 12 on node3
// (partition gpu)", "Slurm job 12, pending (Priority)"; "" for a local attempt.
std::string DescribePlacement(const Json& executor);
// One text field of Attempt::executor ("kind", "state", "node", ...): "" when it is missing or not
// text, so a record edited by hand is shown as unknown rather than thrown on.
std::string PlacementText(const Json& executor, const char* key);

}  // namespace drover
