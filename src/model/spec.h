#pragma once
// An experiment spec, as parsed and validated from YAML (src/spec/). Plain data; docs/spec.md
// documents every field.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

struct Resources {
  int gpus = 0;            // GPUs per run; 0 = CPU only
  int64_t gpu_memory = 0;  // bytes per GPU; 0 = the whole GPU (exclusive)
  int cpus = 1;            // CPU slots per run
  // Host memory per run in bytes (0: the executor's default). The Slurm executor asks for it
  // (--mem); the local executor does not enforce it.
  int64_t memory = 0;
};

// Where an experiment's attempts run (docs/slurm.md): on this machine, or each as a Slurm job.
// A new executor adds its kind here (and its name in ToString); what else it implements and
// where it registers: docs/architecture.md, "Adding an executor".
enum class ExecutorKind { kLocal, kSlurm };
inline constexpr ExecutorKind kAllExecutorKinds[] = {ExecutorKind::kLocal, ExecutorKind::kSlurm};
std::string_view ToString(ExecutorKind k);
std::optional<ExecutorKind> ParseExecutorKind(std::string_view name);
std::vector<std::string> ExecutorKindNames();  // in kAllExecutorKinds' order
// `executor:` of a spec or of the daemon config. A spec's fields (where set) override the
// daemon's; its sbatch flags come after the daemon's.
struct ExecutorSpec {
  ExecutorKind kind = ExecutorKind::kLocal;
  bool given = false;      // written in the spec (else the daemon's or `drover run`'s default)
  std::string partition;   // sbatch --partition ("": the cluster's default)
  std::string account;     // --account
  std::string qos;         // --qos
  std::vector<std::string> sbatch;  // extra sbatch flags, as written ("--constraint=a100")
};
Json ExecutorJson(const ExecutorSpec& e);
ExecutorSpec ExecutorFrom(const Json& j);

// The daemon config's `executor:` section (spec/executor_section.h reads it): the spec part, and
// what only the daemon sets. The Slurm executor's own settings are the last three; another
// executor's would go beside them.
struct ExecutorConfig {
  ExecutorSpec spec;
  int max_jobs = 256;                // attempts submitted to Slurm and not yet ended, at most
  std::string accounting = "auto";   // auto | database | jobcomp (slurm/cluster.h)
  // A folder every node sees at this path: the store's runs/, logs/ and checkpoints/ become links
  // into it, while drover.db stays in the store on the daemon's local disk ("": the store's
  // folder itself must be shared).
  std::string shared_dir;
};

// Which program runs a container (docs/containers.md): podman (rootful or rootless), docker, or
// pyxis (the Slurm plugin: srun --container-image in the job; Slurm executor only).
enum class ContainerRuntime { kPodman, kDocker, kPyxis };
std::string_view ToString(ContainerRuntime r);
// `container:` of a spec: each attempt runs in its own container of this image. The image is
// pinned at submit: image_id (and the registry digest, where the image has one) are resolved
// then and stored with the spec, so every attempt, a retry and `drover reproduce` run that exact
// image whatever the tag names later.
struct ContainerSpec {
  std::string image;  // as written: localhost/digits:latest, docker.io/library/python:3.11
  ContainerRuntime runtime = ContainerRuntime::kPodman;
  // The spec wrote `runtime` (else podman, or docker where only docker is installed: decided
  // when the image is pinned and stored as decided).
  bool runtime_given = false;
  std::vector<std::string> mounts;  // "HOST:CONTAINER" or "HOST:CONTAINER:ro"
  bool network = false;             // false: no network inside (only loopback of its own)
  // Pinned at submit (empty until then).
  std::string image_id;  // "sha256:<64 hex>": what runs
  std::string digest;    // "sha256:..." the registry's manifest digest, where there is one
};
Json ContainerJson(const ContainerSpec& c);
ContainerSpec ContainerFrom(const Json& j);
// "localhost/digits:latest (podman), image sha256:0123456789ab, digest sha256:..." for ls/show/diff
// from a stored spec's `container` (""  when it has none).
std::string DescribeContainer(const Json& spec);

// How a run's curve of the objective becomes the one number it is ranked by (objective.summary,
// docs/spec.md): its last value, its best (the highest for max, the lowest for min), or the mean
// of its last K values.
enum class ScoreSummary { kLast, kBest, kMeanLast };

struct Objective {
  std::string metric;
  bool maximize = true;  // objective.mode: max (default) or min
  ScoreSummary summary = ScoreSummary::kLast;
  int last_k = 0;  // kMeanLast: the mean of this many last values (1 to kMaxLastK)
};
inline constexpr int kMaxLastK = 1000;

// "last", "best" or "mean_last:K"; InvalidArgument naming what is valid.
struct SummaryRule {
  ScoreSummary summary = ScoreSummary::kLast;
  int last_k = 0;
};
Result<SummaryRule> ParseScoreSummary(std::string_view text);
// The text ParseScoreSummary reads: "last", "best", "mean_last:5".
std::string ScoreSummaryText(ScoreSummary summary, int last_k);

struct OomPolicy {
  std::string param;       // the parameter halved after a CUDA OOM; empty = no OOM recovery
  int64_t min = 1;         // never go below this
  std::string accumulate;  // optional parameter doubled so param * accumulate stays the same
  bool enabled() const { return !param.empty(); }
};

// Watching a run's output (docs/spec.md, "monitor").
struct MonitorPolicy {
  // Metrics whose NaN/Inf means the run diverged; empty = the objective's metric and every
  // metric whose name holds "loss".
  std::vector<std::string> watch;
  bool stop_on_nan = true;  // on_nan: stop (end the run as diverged) or ignore
  int64_t stall_ms = 0;     // no new output for this long: stop the attempt as stalled; 0 = off
};

// How a search proposes its trials (search.sampler, docs/search.md).
enum class SamplerKind { kAuto, kTpe, kGp, kRandom, kGrid };
std::string_view ToString(SamplerKind k);
std::optional<SamplerKind> ParseSamplerKind(std::string_view text);

// search: a spec whose params hold distributions ({log_uniform: [1e-5, 0.1]}) runs `trials` trials
// proposed one by one by the sampler, at most `parallel` at a time (docs/search.md).
struct SearchSpec {
  SamplerKind sampler = SamplerKind::kAuto;
  int64_t trials = 0;
  int parallel = 4;
  uint64_t seed = 0;
  bool seeded = false;       // seed was written, or drawn at submit (and stored with the spec)
  bool multivariate = true;  // tpe: one joint density over the unconditional parameters
};
inline constexpr int64_t kMaxTrials = 100'000;

// Early stopping of runs whose curve is behind (prune:, docs/search.md): checked at rungs, the
// points min_steps * reduction^k of the resource (epochs when runs report `epoch`, else steps).
enum class PruneRule { kMedian, kAsha, kHyperband };
std::string_view ToString(PruneRule r);
std::optional<PruneRule> ParsePruneRule(std::string_view text);

struct PruneSpec {
  PruneRule rule = PruneRule::kAsha;
  std::string metric;     // default: the objective's
  bool maximize = true;   // default: the objective's mode
  // What rungs count: "" = `epoch` when the run reports it beside the metric, else its steps;
  // "step" = always steps; any other name = that metric's value (reported beside the metric).
  std::string resource;
  int64_t min_steps = 1;  // the first rung, in the resource's units; no run is stopped before it
  int reduction = 3;      // asha, hyperband: the best 1/reduction at a rung go on
  int64_t max_steps = 0;  // the resource a full run takes: no rung there; hyperband's top rung
  int startup_trials = 5; // median: runs that must reach a rung before it stops anyone there
};

// One stage of a pipeline (stages:, docs/pipelines.md): its own command and settings; the rest
// of the spec (params, workdir, objective, ...) is the pipeline's. A stage runs once for each
// distinct value of the swept parameters its command names and its needs fan out over, or once
// over all its needs' runs when it gathers.
struct StageSpec {
  std::string name;
  std::vector<std::string> command;  // as Spec::command
  bool shell = false;
  std::vector<std::string> needs;    // stages that must succeed first
  // Files or folders the stage reads that are not outputs of its needs, as written: relative to
  // the spec's folder or absolute. Their content is part of the stage's fingerprint.
  std::vector<std::string> inputs;
  // Files or folders the stage writes, relative to its working copy ("data", "ckpt/model.pt"):
  // stored as artifacts when it succeeds and shown read-only, at the same place, to the stages
  // that need it.
  std::vector<std::string> outputs;
  bool gather = false;  // once over all its needs' runs, which it reads through $DROVER_INPUTS
  Resources resources;
  int retries = 0;
  bool retries_given = false;
  int64_t timeout_ms = 0;
  MonitorPolicy monitor;
  std::map<std::string, std::string> env;  // the spec's env with the stage's on top
  // Filled at submit: input (as written) -> content hash of what it held (exec/input_hash.h).
  std::map<std::string, std::string> input_hashes;
};
inline constexpr size_t kMaxStages = 64;
inline constexpr size_t kMaxStagePaths = 64;  // inputs or outputs per stage

// A derived metric (the spec's metrics: section): `expression` over logged metrics and derived
// ones written above it ("1 - val_acc", "samples / time_s"), evaluated by muparser.
struct DerivedMetricSpec {
  std::string name;
  std::string expression;
  std::vector<std::string> inputs;  // the metric names it reads, in first-use order
};
inline constexpr size_t kMaxDerivedMetrics = 64;
inline constexpr size_t kMaxExpressionBytes = 1024;

struct Spec {
  std::string name;
  // The command template. shell == false: argv words, each may hold {param} placeholders and is
  // passed to execve as one word after substitution. shell == true: command[0] is a script for
  // /bin/sh -c, and substituted values are shell-quoted.
  std::vector<std::string> command;
  bool shell = false;
  std::string workdir;  // absolute path (relative paths resolve against the spec file's folder)
  // name -> scalar, array (a grid axis) or mapping (a distribution searched: search/space.h)
  OrderedJson params = OrderedJson::object();
  Resources resources;
  ExecutorSpec executor;  // executor: (docs/slurm.md)
  std::optional<ContainerSpec> container;  // container: (docs/containers.md)
  int priority = 0;      // higher runs first
  // The fair-share / quota group of the experiment's runs (the daemon's scheduler.groups);
  // "" = none (the runs weigh 1 and have no quota).
  std::string group;
  // The runs save checkpoints and resume from the latest (drover.Checkpointer, docs/python.md):
  // stopping one loses only the time since its last save, so a preemptive policy may stop it.
  bool checkpoint = false;
  // A preemptive policy may stop a run to make room (it is requeued). As written, else
  // `checkpoint`: a run that cannot resume is never preempted unless its spec says it may be.
  bool preemptible = false;
  // Where the runs' TensorBoard event files are read from (docs/metrics.md): "" = any folder the
  // run writes in its working copy; else a folder inside it ("lightning_logs"); off = none.
  std::string tensorboard;
  bool tensorboard_off = false;
  // Metrics computed from logged ones per step (metrics: name: expression), in the order written.
  std::vector<DerivedMetricSpec> metrics;
  int max_parallel = 0;  // 0 = no limit beyond resources
  // The spec (or a --set) wrote resources.gpus, 0 included: a CPU run was meant. Known where the
  // spec is parsed (the submit says when runs will see no GPU); not stored with the spec.
  bool gpus_given = false;
  // Stop the experiment when its first this-many runs to end all failed the same way (the same
  // exception): a search proposes no more trials, waiting runs are cancelled (engine/fail_fast.h;
  // docs/spec.md). 0 = never.
  int fail_fast = 3;
  // The most runs the grid may expand to (max_runs:), checked by counting before anything is
  // expanded: a typo such as ten axes of ten values must not make 10^10 runs.
  int64_t max_runs = 100'000;
  int retries = 0;       // extra attempts after a failure (CUDA OOM retries are counted apart)
  // The spec wrote `retries`: honoured as written, never cut short by the repeated-failure rule
  // (docs/spec.md). Stored with the spec as "retries_given".
  bool retries_given = false;
  int64_t retry_backoff_ms = 1000;  // first backoff; doubles each retry, capped at 5 minutes
  int64_t timeout_ms = 0;           // 0 = none; per attempt
  std::map<std::string, std::string> env;
  // Data the run reads but the snapshot leaves out (a data set kept out by .gitignore, a shared
  // folder): name -> absolute path. Each is shown read-only at <working copy>/<name> and named by
  // $DROVER_DATA_<NAME> (docs/spec.md, "Data").
  std::map<std::string, std::string> data;
  std::optional<Objective> objective;
  std::optional<SearchSpec> search;
  std::optional<PruneSpec> prune;
  OomPolicy oom;
  MonitorPolicy monitor;
  // A pipeline (stages:): `command` is empty and each run is one stage's (docs/pipelines.md).
  std::vector<StageSpec> stages;
  // Stages run again even where a run with the same fingerprint succeeded (--force STAGE;
  // "all" for every stage).
  std::vector<std::string> force;
  // A plain run runs even where a run with the same fingerprint succeeded (--rerun; else it is
  // recorded as cached from that run, docs/pipelines.md).
  bool rerun = false;

  // The folder the spec came from (its relative paths start there): $DROVER_PROJECT_DIR in every
  // run, so a run finds what the snapshot left out (data kept out by .gitignore) where it is.
  std::string project_dir;
  std::string source_path;  // the file it came from ("" for a string)
  std::string source_text;  // the YAML as given, after --set overrides (stored with the experiment)
};

// The settings a stage may have of its own, copied between a Spec and a StageSpec (same names).
template <typename From, typename To>
void CopyStageSettings(const From& from, To& to) {
  to.command = from.command;
  to.shell = from.shell;
  to.resources = from.resources;
  to.retries = from.retries;
  to.retries_given = from.retries_given;
  to.timeout_ms = from.timeout_ms;
  to.monitor = from.monitor;
  to.env = from.env;
}

// The spec a run of `stage` runs under: the pipeline's, with the stage's command, resources,
// retries, timeout, monitor and env.
Spec StageView(const Spec& spec, const StageSpec& stage);
// The stage named `name`, or nullptr.
const StageSpec* FindStage(const Spec& spec, const std::string& name);

// Canonical JSON of a spec (stored with the experiment, shown by `drover show`).
Json SpecToJson(const Spec& spec);
// The inverse, for an engine that resumes experiments from the store (the YAML may name a
// workdir that no longer exists; the runs do not need it: they run from the snapshot).
Result<Spec> SpecFromJson(const Json& j);

}  // namespace drover
