// drover run SPEC: submit an experiment to the embedded engine and follow it to the end.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "cli/cache_plan.h"
#include "cli/catalog.h"
#include "cli/client.h"
#include "cli/daemon_start.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "cli/executors.h"
#include "container/runtime.h"
#include "cli/comparison.h"
#include "cli/follow.h"
#include "cli/progress.h"
#include "cli/prune_preview.h"
#include "cli/report_cmd.h"
#include "cli/run_flags.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "exec/posix_launcher.h"
#include "gpu/gpu_probe.h"
#include "protocol/json_codec.h"
#include "search/sampler.h"
#include "spec/expand.h"
#include "spec/pipeline.h"
#include "spec/spec_parser.h"
#include "store/engine_lock.h"

namespace drover::cli {
namespace {

// "4 runs", or for a search "a search of 16 trials, 2 at a time (2 made so far)": a search makes
// its trials as they are proposed, so its first runs are not all it will run.
std::string RunsSaid(const Spec& spec, size_t runs) {
  if (!spec.search || spec.search->sampler == SamplerKind::kGrid) {
    return Count(static_cast<int64_t>(runs), "run");
  }
  return fmt::format("a search of {}, {} at a time ({} made so far)",
                     Count(spec.search->trials, "trial"), spec.search->parallel, runs);
}

// "2 fake GPUs (15GiB, 15GiB for runs; 1GiB of each kept free, scheduler.gpu_reserve)": what
// runs may have of each GPU, and why a 16 GiB one shows 15.
std::string PoolSummary(const std::vector<sched::GpuState>& gpus, const std::string& kind,
                        int64_t reserve) {
  if (gpus.empty()) return "no GPUs";
  std::vector<std::string> sizes;
  for (const auto& g : gpus) sizes.push_back(FormatBytes(g.capacity));
  return fmt::format("{} {}GPU{} ({}{})", gpus.size(), kind == "fake" ? "fake " : "",
                     gpus.size() == 1 ? "" : "s", Join(sizes, ", "),
                     reserve > 0 ? fmt::format(" for runs; {} of each kept free, "
                                               "scheduler.gpu_reserve",
                                               FormatBytes(reserve))
                                 : "");
}

// The HTML report of a finished experiment, read back through the catalog (the store, or the
// daemon that ran it); `runs`, when given, are its runs as they ended (not asked for again). A
// report that cannot be written is a warning: the runs are what count.
void WriteReportAtEnd(Globals& g, int64_t experiment_id, const RunFlags& f,
                      const std::vector<Run>* runs = nullptr) {
  auto written = [&]() -> Result<std::string> {
    DROVER_ASSIGN_OR_RETURN(auto catalog, OpenCatalog(g));
    DROVER_ASSIGN_OR_RETURN(Experiment exp, catalog->FindExperiment(std::to_string(experiment_id)));
    return WriteExperimentReport(g, *catalog, exp, "", runs);
  }();
  if (!written.ok()) {
    std::fprintf(stderr, "drover: warning: the HTML report was not written: %s\n",
                 written.status().message().c_str());
  } else if (!f.json && !f.quiet) {
    std::printf("report: %s\n", written->c_str());
  }
}

// A search's dry run: the space, the sampler auto picks, the budget and the grid cells.
void AddPruneJson(Json& out, const Spec& spec, const std::optional<PrunePreview>& prune) {
  if (!spec.prune) return;
  out["prune"] = SpecToJson(spec)["prune"];
  if (prune) {
    out["prune"]["rungs"] = prune->rungs;
    out["prune"]["warnings"] = prune->warnings;
  }
}

int DryRunSearch(const Spec& spec, const RunFlags& f, const std::optional<PrunePreview>& prune) {
  Result<search::Space> space = search::SpaceOf(spec);
  if (!space.ok()) return ReportError(space.status());
  const std::vector<Json> cells = ExpandGrid(spec);
  const search::SamplerOptions options = search::SamplerOptionsOf(spec, cells.size() > 1);
  const SamplerKind picked = search::Choose(options, *space, 0);
  Json dims = Json::array();
  std::vector<std::vector<std::string>> rows;
  for (const search::Dimension& d : space->dims) {
    const Json ends = d.integer() ? Json::array({static_cast<int64_t>(d.low),
                                                 static_cast<int64_t>(d.high)})
                                  : Json::array({d.low, d.high});
    std::string range = d.numeric() ? fmt::format("[{}, {}]", FormatValue(ends[0]),
                                                  FormatValue(ends[1]))
                                    : Json(d.choices).dump();
    Json when = Json::object();
    std::vector<std::string> conds;
    for (const search::Condition& c : d.when) {
      when[c.param] = c.values;
      conds.push_back(c.param + " in " + Json(c.values).dump());
    }
    dims.push_back({{"name", d.name}, {"distribution", search::ToString(d.dist)},
                    {"range", d.numeric() ? ends : Json(d.choices)},
                    {"when", when}});
    rows.push_back({d.name, std::string(search::ToString(d.dist)), range, Join(conds, ", ")});
  }
  std::string sampler(ToString(spec.search->sampler));
  if (spec.search->sampler == SamplerKind::kAuto) sampler += fmt::format(" ({})", ToString(picked));
  if (f.json) {
    Json out = {{"name", spec.name},
                {"search",
                 {{"trials", spec.search->trials}, {"parallel", spec.search->parallel},
                  {"sampler", ToString(spec.search->sampler)}, {"uses", ToString(picked)},
                  {"seed", spec.search->seeded ? Json(spec.search->seed) : Json()},
                  {"space", dims}, {"grid", cells}}}};
    AddPruneJson(out, spec, prune);
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s: a search of %s, %d at a time, sampler %s, seed %s (dry run: nothing was "
              "submitted)\n",
              spec.name.c_str(), Count(spec.search->trials, "trial").c_str(),
              spec.search->parallel, sampler.c_str(),
              spec.search->seeded ? std::to_string(spec.search->seed).c_str()
                                  : "drawn at submit");
  std::fputs(RenderTable({"param", "distribution", "range", "when"}, rows).c_str(), stdout);
  if (cells.size() > 1) {
    std::printf("each trial also takes one of %s of the grid, in turn: %s\n",
                Count(static_cast<int64_t>(cells.size()), "cell").c_str(),
                Json(cells).dump().c_str());
  } else if (!cells[0].empty()) {
    std::printf("fixed: %s\n", cells[0].dump().c_str());
  }
  if (spec.prune && prune) std::fputs(PrunePreviewText(*spec.prune, *prune).c_str(), stdout);
  return kExitOk;
}

// What a dry run knows of the cache: the plan, or why it could not be made (a store it cannot
// read, a workdir it cannot hash); the runs are listed either way.
using MaybePlan = std::optional<Result<CachePlan>>;

// Which runs would be cached and why the others would run (cli/cache_plan.h), from the store read
// without writing, as `drover show` reads it: the daemon's too, when it is this user's to read.
// A shared daemon that runs each run as its submitter keeps their snapshots apart (the owner is
// part of the snapshot's hash): then this user's snapshot is hashed as theirs.
MaybePlan PlanOfDryRun(Globals& g, const Spec& spec, bool daemon_serves, int daemon_pid) {
  if (spec.search && spec.search->sampler != SamplerKind::kGrid) return std::nullopt;
  std::optional<UnixUser> me;
  struct stat st {};
  if (daemon_serves && daemon_pid > 0 &&
      ::stat(fmt::format("/proc/{}", daemon_pid).c_str(), &st) == 0 && st.st_uid != ::geteuid()) {
    me = LookupUser(::geteuid(), ::getegid());
  }
  Result<CachePlan> plan = PlanCacheNow(spec, StoreDir(g), me ? &*me : nullptr);
  if (!plan.ok()) {
    return Result<CachePlan>(plan.status().WithContext(
        "which runs would be cached is not known (the runs are listed; `drover run` will say "
        "more)"));
  }
  return plan;
}

// The "will" column: "cached from run 12", "run: param lr; code changed: train.py".
std::string WillText(const PlannedRun& r) {
  if (r.cached_from != 0) return fmt::format("cached from run {}", r.cached_from);
  std::vector<std::string> why;
  for (const Reason& reason : r.reasons) why.push_back(reason.Label());
  return "run: " + Join(why, "; ");
}

Json RunCacheJson(const PlannedRun& r) {
  Json reasons = Json::array();
  for (const Reason& reason : r.reasons) {
    reasons.push_back({{"kind", ToString(reason.kind)},
                       {"detail", reason.detail},
                       {"text", reason.Label()}});
  }
  return {{"will", r.cached_from != 0 ? "cached" : "run"},
          {"cached_from", r.cached_from != 0 ? Json(r.cached_from) : Json(nullptr)},
          {"fingerprint", r.fingerprint.empty() ? Json(nullptr) : Json(r.fingerprint)},
          {"reasons", reasons}};
}

// The per-stage summary of --json ("cache"), or the reason it is not known ("cache_error").
void AddCacheJson(Json& out, const MaybePlan& plan) {
  if (!plan) return;
  if (!plan->ok()) {
    out["cache_error"] = plan->status().message();
    return;
  }
  Json stages = Json::array();
  for (const StagePlan& s : (*plan)->stages) {
    Json reasons = Json::object();
    for (const auto& [label, n] : s.reasons) reasons[label] = n;
    stages.push_back(
        {{"stage", s.stage}, {"cached", s.cached}, {"to_run", s.to_run}, {"reasons", reasons}});
  }
  out["cache"] = stages;
}

// The lines under the first: each stage's (or the sweep's) cached and to run, with why.
void PrintCacheLines(const MaybePlan& plan) {
  if (!plan) return;
  if (!plan->ok()) {
    std::printf("  %s\n", plan->status().message().c_str());
    return;
  }
  for (const StagePlan& s : (*plan)->stages) {
    std::printf("  %s\n", s.Line(s.stage.empty() ? "runs" : s.stage).c_str());
  }
}

const PlannedRun* PlannedAt(const MaybePlan& plan, size_t i) {
  if (!plan || !plan->ok() || i >= (*plan)->runs.size()) return nullptr;
  return &(*plan)->runs[i];
}

// Run `i` of a dry run, as JSON and as a table row: what would happen to it (cached or run, and
// why) where there is a plan, then its command.
void AddDryRunRow(const MaybePlan& plan, size_t i, Json run, std::vector<std::string> row,
                  const std::vector<std::string>& quoted, Json* out,
                  std::vector<std::vector<std::string>>* rows) {
  if (const PlannedRun* p = PlannedAt(plan, i)) {
    run.update(RunCacheJson(*p));
    row.push_back(WillText(*p));
  }
  row.push_back(Join(quoted, " "));
  out->push_back(std::move(run));
  rows->push_back(std::move(row));
}

// A pipeline's runs, stage by stage, with the runs each needs (docs/pipelines.md), and which
// would be cached.
int DryRunPipeline(const Spec& spec, const RunFlags& f, const MaybePlan& plan) {
  const std::vector<StageRun> runs = ExpandPipeline(spec);
  Json out = Json::array();
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const StageSpec& st = spec.stages[runs[i].stage];
    auto argv = RenderCommand(StageView(spec, st), runs[i].params);
    if (!argv.ok()) return ReportError(argv.status());
    std::vector<std::string> quoted, needs;
    std::vector<int> need_index;
    for (const auto& w : *argv) quoted.push_back(ShellQuote(w));
    for (int n : runs[i].needs) {
      needs.push_back(std::to_string(n + 1));
      need_index.push_back(n + 1);
    }
    Json run = {{"index", i + 1}, {"stage", st.name}, {"params", runs[i].params},
                {"needs", need_index}, {"argv", *argv}};
    std::vector<std::string> row = {std::to_string(i + 1), st.name, runs[i].params.dump(),
                                    needs.empty() ? "-" : Join(needs, ",")};
    AddDryRunRow(plan, i, std::move(run), std::move(row), quoted, &out, &rows);
  }
  if (f.json) {
    Json all = {{"name", spec.name}, {"runs", out}};
    AddCacheJson(all, plan);
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    std::printf("%s: %s in %s (dry run: nothing was submitted; runs whose fingerprint succeeded "
                "before will be cached)\n",
                spec.name.c_str(), Count(static_cast<int64_t>(runs.size()), "run").c_str(),
                Count(static_cast<int64_t>(spec.stages.size()), "stage").c_str());
    PrintCacheLines(plan);
    std::vector<std::string> header = {"#", "stage", "params", "needs"};
    if (PlannedAt(plan, 0)) header.push_back("will");
    header.push_back("command");
    std::fputs(RenderTable(header, rows).c_str(), stdout);
  }
  return kExitOk;
}

int DryRunRuns(const Spec& spec, const RunFlags& f, const MaybePlan& plan,
               const std::optional<PrunePreview>& prune);

// The prune rule's rungs, placed on the latest run of the same name in the store when there is
// one (cli/prune_preview.h).
std::optional<PrunePreview> PreviewOfDryRun(Globals& g, const Spec& spec) {
  if (!spec.prune) return std::nullopt;
  auto catalog = OpenCatalog(g);
  return PreviewPruneOf(*spec.prune, spec.name, catalog.ok() ? catalog->get() : nullptr);
}

int DryRun(Globals& g, const Spec& spec, const RunFlags& f, const std::string& fake) {
  // The spec as the submit would record it, for the fingerprints: its image pinned.
  Spec pinned_spec = spec;
  if (spec.container && spec.container->runtime != ContainerRuntime::kPyxis) {
    // The image as the submit would pin it (without pulling).
    ContainerSpec c = *spec.container;
    Status pinned = container::PinImage(&c, {}, /*pull=*/false);
    if (!pinned.ok() && (c.image.rfind("localhost/", 0) == 0 ||
                         pinned.code() != Code::kNotFound)) {
      return ReportError(pinned);
    }
    if (pinned.ok()) pinned_spec.container = c;
    std::printf("%s: container %s\n", spec.name.c_str(),
                pinned.ok() ? fmt::format("{} is image {}", c.image, c.image_id).c_str()
                            : pinned.message().c_str());
  }
  const std::optional<DaemonInfo> daemon = FindDaemon(g);
  if (daemon) {
    // The daemon's pool decides: it checks the spec as its submit would, and records nothing.
    ApiClient api(*daemon);
    if (Status fits = CheckWithDaemon(api, f.spec_path, f.sets); !fits.ok()) {
      return ReportError(fits);
    }
  } else {
    // Whether the runs could ever start here, as the submit would check it: a run that needs
    // more than the machine has is refused now, not after the dry run said it was fine.
    auto setup = PrepareEngine(g, fake, f.engine);
    if (!setup.ok()) return ReportError(setup.status());
    const ExecutorSpec& daemon_ex = setup->config.executor.spec;
    const ExecutorKind kind = spec.executor.given ? spec.executor.kind : daemon_ex.kind;
    if (ExecutorCheck would_accept = ExecutorOf(kind).would_accept) {
      // The executor places the runs: it says whether it would take them (Slurm: sbatch
      // --test-only).
      if (Status ok = would_accept(spec, setup->config.executor); !ok.ok()) return ReportError(ok);
      return DryRunRuns(spec, f, PlanOfDryRun(g, pinned_spec, false, 0), PreviewOfDryRun(g, spec));
    }
    auto devices = setup->probe->Devices();
    if (!devices.ok()) return ReportError(devices.status().WithContext("listing GPUs"));
    const int64_t reserve = setup->config.scheduler.gpu_reserve;
    const int cpus = f.cpus > 0 ? f.cpus
                                : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (Status fits = CheckSpecFits(spec, PoolOf(*devices, reserve), reserve, cpus); !fits.ok()) {
      return ReportError(fits);
    }
    if (spec.container && spec.container->runtime == ContainerRuntime::kPodman &&
        spec.resources.gpus > 0) {
      if (Status cdi = container::CheckCdi(*devices); !cdi.ok()) return ReportError(cdi);
    }
  }
  return DryRunRuns(spec, f,
                    PlanOfDryRun(g, pinned_spec, daemon.has_value(), daemon ? daemon->pid : 0),
                    PreviewOfDryRun(g, spec));
}

int DryRunRuns(const Spec& spec, const RunFlags& f, const MaybePlan& plan,
               const std::optional<PrunePreview>& prune) {
  if (spec.search && spec.search->sampler != SamplerKind::kGrid) {
    return DryRunSearch(spec, f, prune);
  }
  if (!spec.stages.empty()) return DryRunPipeline(spec, f, plan);
  auto grid = ExpandGrid(spec);
  Json out = Json::array();
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < grid.size(); ++i) {
    auto argv = RenderCommand(spec, grid[i]);
    if (!argv.ok()) return ReportError(argv.status());
    std::vector<std::string> quoted;
    for (const auto& w : *argv) quoted.push_back(ShellQuote(w));
    Json run = {{"index", i + 1}, {"params", grid[i]}, {"argv", *argv}};
    std::vector<std::string> row = {std::to_string(i + 1), grid[i].dump()};
    AddDryRunRow(plan, i, std::move(run), std::move(row), quoted, &out, &rows);
  }
  if (f.json) {
    Json all = {{"name", spec.name}, {"runs", out}};
    AddCacheJson(all, plan);
    AddPruneJson(all, spec, prune);
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    std::printf("%s: %s (dry run: nothing was submitted)\n", spec.name.c_str(),
                Count(static_cast<int64_t>(grid.size()), "run").c_str());
    PrintCacheLines(plan);
    std::vector<std::string> header = {"#", "params"};
    if (PlannedAt(plan, 0)) header.push_back("will");
    header.push_back("command");
    std::fputs(RenderTable(header, rows).c_str(), stdout);
    if (spec.prune && prune) std::fputs(PrunePreviewText(*spec.prune, *prune).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace

namespace {

// The experiment a `drover run --resume` continues: the newest of the spec's name, which must
// have been submitted with the same spec (after --set). nullopt when there is none.
Result<std::optional<Experiment>> ExperimentToResume(Globals& g, const Spec& spec) {
  DROVER_ASSIGN_OR_RETURN(auto catalog, OpenCatalog(g));
  auto found = catalog->FindExperiment(spec.name);
  if (!found.ok()) {
    if (found.status().code() == Code::kNotFound) return std::optional<Experiment>();
    return found.status();
  }
  Json written = SpecToJson(spec);
  // A search whose spec draws its seed at submit: the seed drawn then is the experiment's.
  if (spec.search && !spec.search->seeded && found->spec.contains("search") &&
      found->spec["search"].contains("seed")) {
    written["search"]["seed"] = found->spec["search"]["seed"];
  }
  // Experiments stored before the order of params was kept compare without it.
  if (!found->spec.contains("param_order")) written.erase("param_order");
  // The image as pinned at submit (its id, digest and the runtime decided then) is the
  // experiment's, as the search seed is: the spec as written has none of it.
  Json stored = found->spec;
  if (stored.contains("container") && stored["container"].is_object() &&
      written.contains("container")) {
    for (const char* pinned : {"image_id", "digest"}) stored["container"].erase(pinned);
    if (!spec.container->runtime_given) {
      stored["container"].erase("runtime");
      written["container"].erase("runtime");
    }
  }
  if (stored != written) {
    return FailedPrecondition(fmt::format(
        "the spec has changed since experiment {} ({}) was submitted, so it cannot be resumed "
        "as it was: run it without --resume for a new experiment, or rerun that experiment's "
        "unfinished runs as submitted with drover retry {}",
        found->id, found->name, found->id));
  }
  return std::optional<Experiment>(*found);
}

int InterruptedNote(int64_t experiment_id, const RunFlags& f) {
  std::fprintf(stderr,
               "drover: interrupted; every run was stopped and recorded as cancelled. Continue "
               "with: drover run --resume %s (or drover retry %lld)\n",
               f.spec_path == "-" ? "SPEC" : ShellQuote(f.spec_path).c_str(),
               static_cast<long long>(experiment_id));
  return kExitInterrupted;
}

}  // namespace

int FollowInDaemon(Globals& g, const DaemonInfo& daemon, int64_t experiment_id,
                   const std::string& name, const std::string& what, const RunFlags& f) {
  if (!f.started_daemon && (f.cpus > 0 || !f.engine.policy.empty())) {
    std::fprintf(stderr, "drover: note: the daemon's own --cpus/--policy apply, not these\n");
  }
  if (!f.json && !f.quiet) {
    std::printf("experiment %lld (%s): %s in %s (pid %d%s); Ctrl-C cancels it (drover submit "
                "queues without following)\n",
                static_cast<long long>(experiment_id), name.c_str(), what.c_str(),
                f.started_daemon ? "a daemon started for the store" : "the daemon serving the store",
                daemon.pid,
                f.started_daemon ? ("; it exits after " + f.idle_exit + " idle").c_str() : "");
    std::fflush(stdout);
  }
  ApiClient api(daemon);
  std::vector<Run> ended;
  FollowOptions follow{f.cancel_on_exit, f.json, f.quiet, &ended};
  if (f.spec_path != "-") follow.again = "drover run --resume " + ShellQuote(f.spec_path);
  int code = FollowExperiment(api, experiment_id, follow);
  // Detached or cancelled at Ctrl-C, or the daemon stopped answering: the experiment is not
  // over, so there is nothing to report yet.
  if (code == kExitOk || code == kExitRunsFailed) WriteReportAtEnd(g, experiment_id, f, &ended);
  return code;
}

int RunInForeground(Globals& g, const RunFlags& f, const QueueStep& queue) {
  std::string fake = f.fake_gpus;
  if (fake.empty()) {
    if (const char* env = std::getenv("DROVER_FAKE_GPUS")) fake = env;
  }
  // Blocks SIGINT/SIGTERM/SIGCHLD: the engine takes them in its loop. Supervised, as the
  // daemon's: the runs write into pipes the supervisor empties into their logs, so a full disk
  // makes a run wait rather than fail its writes and lose its points (issue 39).
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  if (Status st = CheckStoreDir(g); !st.ok()) return ReportError(st);
  auto setup = PrepareEngine(g, fake, f.engine);
  if (!setup.ok()) return ReportError(setup.status());
  auto lock = EngineLock::Acquire(StoreDir(g));
  if (!lock.ok()) return ReportError(lock.status());
  if (Status st = OpenGpuLedger(g, *setup); !st.ok()) return ReportError(st);
  auto store = OpenStore(g, /*create=*/true);
  if (!store.ok()) return ReportError(store.status());

  RealClock clock;
  auto executor = PrepareExecutor(setup->config, f.executor, launcher, clock, StoreDir(g));
  if (!executor.ok()) return ReportError(executor.status());
  EngineOptions opts;
  opts.store_dir = StoreDir(g);
  opts.cpu_slots = f.cpus;
  opts.executor_max_jobs = executor->max_jobs;
  opts.commit_interval_ms = kCommitIntervalMs;  // engine.h
  opts.watch = setup->config.watch;
  opts.scheduler = setup->config.scheduler;
  opts.environment = setup->config.environment;
  opts.alert_sink = setup->sinks.get();
  opts.gpu_ledger = setup->ledger.get();
  Engine engine(**store, *executor->launcher, *setup->probe, clock, opts);
  // Unfinished runs left by an engine that was killed are taken over first (and run again where
  // their end is unknown), so nothing submitted to this store is lost.
  auto recovered = engine.Recover();
  if (!recovered.ok()) return ReportError(recovered.status());
  auto queued = queue(engine, **store);
  if (!queued.ok()) return ReportError(queued.status());
  if (recovered->experiments > 0 && !f.quiet && !f.json) {
    std::printf(
        "resuming %d earlier experiment(s) left unfinished: %d queued, %d requeued, %d "
        "ended while no engine ran\n",
        recovered->experiments, recovered->queued + recovered->adopted, recovered->requeued,
        recovered->finished);
  }

  bool human = !f.json && !f.quiet;
  if (human) {
    std::printf("%s\n", queued->headline.c_str());
    if (executor->kind != ExecutorKind::kLocal) {
      std::printf("on %s, at most %d jobs at once\n",
                  executor->kind == ExecutorKind::kSlurm ? "Slurm"
                                                         : std::string(ToString(executor->kind)).c_str(),
                  engine.cpu_slots());
    } else {
      std::printf("on %s, %d CPU slots\n",
                  PoolSummary(engine.gpus(), setup->probe->Kind(), opts.scheduler.gpu_reserve)
                      .c_str(),
                  engine.cpu_slots());
    }
    std::fflush(stdout);
  }
  std::vector<std::string> varying = VaryingParams(queued->runs);
  bool live = human && ::isatty(STDOUT_FILENO) && std::getenv("TERM") != nullptr &&
              std::string(std::getenv("TERM")) != "dumb";
  ProgressView view(stdout, live, clock, queued->name, queued->runs, varying, queued->metric);
  Status st = engine.RunUntilDone(human ? &view : nullptr);
  if (human) view.Finish();
  // Webhooks still being sent (the last run's alert, say) get their chance before exit.
  if (!setup->sinks->Flush(15'000)) {
    std::fprintf(stderr, "drover: some alerts could not be delivered to their webhooks\n");
  }
  if (!st.ok()) return ReportError(st);

  const int64_t experiment_id = queued->experiment_id;
  auto exp = (*store)->GetExperiment(experiment_id);
  RunFilter filter;
  filter.experiment_id = experiment_id;
  auto runs = (*store)->ListRuns(filter);
  if (!exp.ok() || !runs.ok() || !exp->has_value()) {
    return ReportError(!exp.ok() ? exp.status() : runs.status());
  }
  int code = PrintResults(*CatalogOf(**store), **exp, *runs, f.json, f.quiet);
  if (human) {
    AlertFilter af;
    af.experiment_id = experiment_id;
    auto alerts = (*store)->ListAlerts(af);
    if (alerts.ok() && !alerts->empty()) {
      std::printf("%zu alert%s raised: drover alerts -e %lld\n", alerts->size(),
                  alerts->size() == 1 ? "" : "s", static_cast<long long>(experiment_id));
    }
  }
  if (engine.interrupted()) return InterruptedNote(experiment_id, f);
  WriteReportAtEnd(g, experiment_id, f, &*runs);
  return code;
}

int RunSpec(Globals& g, const RunFlags& given) {
  RunFlags f = given;
  ApplyCacheOptions(f.force, f.rerun, f.sets);
  auto spec = ParseSpecFile(f.spec_path, f.sets);
  if (!spec.ok()) return ReportError(spec.status());
  std::string fake = f.fake_gpus;
  if (fake.empty()) {
    if (const char* env = std::getenv("DROVER_FAKE_GPUS")) fake = env;
  }
  if (!fake.empty()) {
    // Checked before a dry run too: a typo in the flag should not wait for the real run.
    auto parsed = ParseFakeGpus(fake);
    if (!parsed.ok()) return ReportError(parsed.status());
  }
  if (f.dry_run) return DryRun(g, *spec, f, fake);

  std::optional<Experiment> resume;
  if (f.resume) {
    auto found = ExperimentToResume(g, *spec);
    if (!found.ok()) return ReportError(found.status());
    resume = *found;
    if (!resume) {
      std::fprintf(stderr, "drover: nothing to resume: no experiment named %s in %s; starting it\n",
                   spec->name.c_str(), StoreDir(g).c_str());
    }
  }
  // Its cancelled runs (Ctrl-C) go back to the queue; its failed ones stay failed (drover retry
  // --failed reruns them), which the user is told.
  cmd::Retry cancelled;
  if (resume) {
    cancelled.experiment_id = resume->id;
    cancelled.cancelled = true;
  }
  auto note_failed = [&](const std::vector<Run>& all) {
    int failed = 0;
    for (const Run& r : all) failed += r.state == RunState::kFailed;
    if (failed > 0 && !f.quiet) {
      std::fprintf(stderr, "drover: note: %s not rerun: drover retry %lld --failed reruns %s\n",
                   Count(failed, "failed run").c_str(), static_cast<long long>(resume->id),
                   failed == 1 ? "it" : "them");
    }
  };

  std::optional<DaemonInfo> daemon = FindDaemon(g);
  RunFlags through = f;
  if (!daemon && !InForeground(f)) {
    // No daemon serves the store: start one for it (it outlives this terminal and exits once
    // idle), and follow it as in the foreground.
    OnDemandDaemon o;
    o.fake_gpus = f.fake_gpus;
    o.cpus = f.cpus;
    o.idle_exit = f.idle_exit;
    o.engine = f.engine;
    // Where the spec says its attempts run (executor: {kind: slurm}), the daemon started for it
    // runs them there; a spec that says nothing gets the config's executor.
    if (spec->executor.given) o.engine.executor = std::string(ToString(spec->executor.kind));
    auto started = StartDaemonOnDemand(g, o);
    if (!started.ok()) {
      return ReportError(started.status().WithContext(
          "starting a daemon for the store (drover run --foreground runs in this process)"));
    }
    daemon = *started;
    through.started_daemon = true;
  }
  if (daemon && !through.started_daemon) {
    // Joined: it must have the GPUs this command asks for, or say so (never a flag that goes
    // nowhere: a GPU-less daemon left by an earlier command refused every run that needs one).
    OnDemandDaemon asked;
    asked.fake_gpus = f.fake_gpus;
    if (Status st = CheckJoinedDaemon(*daemon, asked); !st.ok()) return ReportError(st);
  }
  if (daemon) {
    // A daemon owns this store: it runs the experiment; this process only follows it.
    const RunFlags& f = through;
    ApiClient api(*daemon);
    CatchInterruptsForFollow();
    int64_t experiment_id = 0;
    std::string what;
    if (resume) {
      protocol::RetryRequest req;
      req.cancelled = true;
      auto r = api.Post(fmt::format("/experiments/{}/retry", resume->id), protocol::ToJson(req));
      if (!r.ok()) return ReportError(r.status());
      auto reply = protocol::RetryResponseFromJson(*r);
      if (!reply.ok()) return ReportError(reply.status());
      auto runs = FetchRuns(api, resume->id);
      if (runs.ok()) note_failed(*runs);
      experiment_id = resume->id;
      what = fmt::format("resumed, {} queued again",
                         Count(static_cast<int64_t>(reply->run_ids.size()), "run"));
    } else {
      auto sub = SubmitToDaemon(api, f.spec_path, f.sets);
      if (!sub.ok()) return ReportError(sub.status());
      if (!f.quiet) {
        for (const std::string& note : sub->notes) {
          std::fprintf(stderr, "drover: note: %s\n", note.c_str());
        }
      }
      experiment_id = sub->experiment_id;
      what = fmt::format("{}, queued", RunsSaid(*spec, sub->run_ids.size()));
    }
    return FollowInDaemon(g, *daemon, experiment_id, spec->name, what, f);
  }

  const std::string metric = spec->objective ? spec->objective->metric : "";
  f.executor = spec->executor;
  return RunInForeground(g, f, [&](Engine& engine, Store& store) -> Result<QueuedRuns> {
    QueuedRuns q;
    q.name = spec->name;
    q.metric = metric;
    if (resume) {
      DROVER_ASSIGN_OR_RETURN(q.runs, engine.Retry(cancelled));
      RunFilter filter;
      filter.experiment_id = resume->id;
      DROVER_ASSIGN_OR_RETURN(auto all, store.ListRuns(filter));
      note_failed(all);
      q.experiment_id = resume->id;
      q.headline = fmt::format("experiment {} ({}): resumed, {} queued again", resume->id,
                               spec->name, Count(static_cast<int64_t>(q.runs.size()), "run"));
      return q;
    }
    DROVER_ASSIGN_OR_RETURN(SubmitResult submitted, engine.Submit(*spec));
    if (!f.quiet) {
      for (const std::string& note : submitted.notes) {
        std::fprintf(stderr, "drover: note: %s\n", note.c_str());
      }
    }
    const Snapshot& s = submitted.snapshot;
    std::string code = s.git ? fmt::format("git {}{}, ", s.git_commit.substr(0, 12),
                                           s.git_diff.empty() ? "" : " + uncommitted changes")
                             : "";
    q.experiment_id = submitted.experiment_id;
    q.runs = submitted.runs;
    q.headline = fmt::format("experiment {} ({}): {}, code snapshot {} ({}{} files)",
                             submitted.experiment_id, spec->name,
                             RunsSaid(*spec, submitted.runs.size()),
                             s.hash.substr(0, 12), code, s.files);
    return q;
  });
}

void AddRunOptions(CLI::App* app, RunFlags* flags, bool json) {
  app->add_option("--set", flags->sets,
                  "Override a spec value: key=value (retries=2, resources.gpus=0, lr=0.1, "
                  "batch_size=[32,64]); repeatable");
  app->add_flag("--dry-run", flags->dry_run,
                "List the expanded runs and their commands, and check that they fit this "
                "machine's GPUs and CPU slots; run nothing");
  AddEngineRunOptions(app, flags, json);
}

bool InForeground(const RunFlags& f) {
  if (f.foreground) return true;
  const char* env = std::getenv("DROVER_FOREGROUND");
  return env != nullptr && *env != '\0' && std::string_view(env) != "0";
}

void AddEngineRunOptions(CLI::App* app, RunFlags* flags, bool json) {
  app->add_option("--fake-gpus", flags->fake_gpus,
                  "Schedule onto declared GPUs instead of real ones, e.g. 2x16GiB "
                  "(or $DROVER_FAKE_GPUS)");
  app->add_option("--cpus", flags->cpus, "CPU slots shared by all runs (default: the CPU count)")
      ->check(CLI::PositiveNumber);
  if (json) app->add_flag("--json", flags->json, "Print the final results as JSON");
  app->add_flag("-q,--quiet", flags->quiet, "Print nothing but errors");
  // Ctrl-C cancels in every case now; the flag stays accepted for scripts that pass it.
  app->add_flag("--cancel-on-exit", flags->cancel_on_exit,
                "Ctrl-C cancels the experiment (the default; kept for scripts)")
      ->group("");
  AddEngineFlags(app, flags->engine);
}

void AddResumeOption(CLI::App* app, RunFlags* flags) {
  app->add_flag("--resume", flags->resume,
                "Continue the newest experiment of this spec's name instead of starting a new "
                "one: its cancelled runs (Ctrl-C) run again as new attempts of the same runs, "
                "with their checkpoint folders; finished runs are not rerun");
}

void AddCacheOptions(CLI::App* app, std::vector<std::string>* force, bool* rerun) {
  app->add_option("--force", *force,
                  "A pipeline: run STAGE again even where a run with the same fingerprint "
                  "succeeded before (all: every stage); repeatable")
      ->delimiter(',');
  app->add_flag("--rerun", *rerun,
                "Run every run even where one with the same command, params, env and code "
                "succeeded before (without it such a run is recorded as cached from that run)");
}

void ApplyCacheOptions(const std::vector<std::string>& force, bool rerun,
                       std::vector<std::string>& sets) {
  if (!force.empty()) sets.push_back("force=[" + Join(force, ", ") + "]");
  if (rerun) sets.push_back("rerun=true");
}

Command RegisterRun(CLI::App& root, Globals& g) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* app = root.add_subcommand(
      "run", "Run an experiment spec to the end: expand, schedule, run, record, compare");
  app->add_option("spec", flags->spec_path,
                  "The experiment spec (YAML; - reads it from standard input); see docs/spec.md")
      ->required();
  AddRunOptions(app, flags.get());
  AddResumeOption(app, flags.get());
  AddCacheOptions(app, &flags->force, &flags->rerun);
  app->add_flag("--foreground", flags->foreground,
                "Run the engine in this process (containers, CI) instead of in a daemon started "
                "for the store when none serves it (or $DROVER_FOREGROUND=1)");
  app->add_option("--idle-exit", flags->idle_exit,
                  "The daemon started for the store exits after this long with nothing queued "
                  "or running and no request (default 5m; 0: never)");
  return {app, [&g, flags] { return RunSpec(g, *flags); }};
}

}  // namespace drover::cli
