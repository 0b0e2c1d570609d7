// drover sim --trace FILE: replays a job trace on a declared cluster with one of the scheduler's
// policies (the same sched::Decide() the engine calls) and reports how the jobs fared
// (src/sim/; issue 7). With --format openb: the packing experiment on the Alibaba openb pods and
// nodes (sim/packing.h): how much GPU capacity each packer leaves unallocated when the first pod
// cannot be placed.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/common.h"
#include "cli/report_cmd.h"
#include "common/strings.h"
#include "report/svg.h"
#include "sim/history.h"
#include "sim/packing.h"
#include "sim/simulator.h"
#include "store/store.h"

namespace drover::cli {
namespace {

struct SimFlags {
  std::string trace;
  std::string format = "philly";
  std::string cluster = "16x4";
  std::string policy = "default";
  std::string from, to;
  bool oracle = false;
  bool json = false;
  bool fair_share = false;
  std::string csv;
  std::string plot;
  // --format openb (the packing experiment)
  std::string nodes;
  std::string packer = "all";
  int seeds = 10;
  CLI::App* app = nullptr;  // to tell which flags were given
};

// "56x8" (56 machines of 8 GPUs), or a node list: "8,8,4" or "2x8,4x4" -> GPUs per machine.
Result<std::vector<int>> ParseCluster(const std::string& text) {
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "--cluster '{}': write MACHINESxGPUS, e.g. 16x4 (16 machines of 4 GPUs), or a node list "
        "such as 8,8,4 or 2x8,4x4",
        text));
  };
  std::vector<int> sizes;
  for (const std::string& item : Split(text, ',')) {
    int nodes = 1, per = 0;
    char x = 0, extra = 0;
    int n = std::sscanf(item.c_str(), "%d%c%d%c", &nodes, &x, &per, &extra);
    if (n == 1) {
      per = nodes;
      nodes = 1;
    } else if (n != 3 || x != 'x') {
      return bad();
    }
    if (nodes <= 0 || per <= 0 || nodes > 1'000'000) return bad();
    sizes.insert(sizes.end(), static_cast<size_t>(nodes), per);
  }
  if (sizes.empty()) return bad();
  return sizes;
}

Result<sim::Trace> LoadTrace(Globals& g, const SimFlags& f) {
  std::optional<int64_t> from, to;
  if (!f.from.empty()) {
    DROVER_ASSIGN_OR_RETURN(int64_t v, sim::ParseUtcTime(f.from));
    from = v;
  }
  if (!f.to.empty()) {
    DROVER_ASSIGN_OR_RETURN(int64_t v, sim::ParseUtcTime(f.to));
    to = v;
  }
  if (from && to && *to <= *from) {
    return InvalidArgument(fmt::format("--to {} is not after --from {}", f.to, f.from));
  }
  if (f.format == "philly") {
    if (f.trace.empty()) return InvalidArgument("--format philly needs --trace FILE");
    return sim::ReadPhillyTrace(f.trace, from, to);
  }
  if (f.format == "drover") {
    if (!f.trace.empty()) {
      return InvalidArgument("--format drover replays the store's own run history (--store); "
                             "leave out --trace");
    }
    std::error_code ec;
    if (!std::filesystem::exists(StorePath(g), ec)) {
      return NotFound(fmt::format("no store at {}; point --store at the folder that holds "
                                  "drover.db",
                                  StoreDir(g)));
    }
    DROVER_ASSIGN_OR_RETURN(auto store, Store::Open(StorePath(g)));
    return sim::ReadDroverHistory(*store, from, to);
  }
  return InvalidArgument(fmt::format("--format {}: choose philly, openb or drover", f.format));
}

Status WriteCsv(const std::string& path, const sim::SimResult& r) {
  std::string out = "job,submit_s,end_s,duration_s,gpus,jct_s,queue_s,preemptions\n";
  for (size_t i = 0; i < r.outcomes.size(); ++i) {
    const auto& j = r.outcomes[i];
    double jct = j.end_s - j.submit_s;
    out += fmt::format("{},{:.3f},{:.3f},{:.3f},{},{:.3f},{:.3f},{}\n", i + 1, j.submit_s, j.end_s,
                       j.duration_s, j.gpus, jct, std::max(0.0, jct - j.duration_s),
                       j.preemptions);
  }
  return WriteTextFile(path, out, /*make_dirs=*/false);
}

Status WritePlot(const std::string& path, const sim::SimResult& r, const std::string& title,
                 int total_gpus) {
  report::LineSeries queued{"jobs waiting", {}, false};
  report::LineSeries util{"GPUs in use (% of the cluster)", {}, true};
  for (const auto& p : r.timeline) {
    queued.points.push_back({p.t_s / 3600.0, static_cast<double>(p.queued)});
    util.points.push_back({p.t_s / 3600.0, 100.0 * p.gpus_used / std::max(1, total_gpus)});
  }
  report::ChartOptions o;
  o.title = title;
  o.x_label = "hours since the window's start";
  o.y_label = "jobs waiting / % of GPUs in use";
  return WriteTextFile(path, report::LineChartSvg({util, queued}, o), /*make_dirs=*/false);
}

// --- --format openb: the packing experiment -------------------------------------------------

Json PodJson(const sim::TraceJob& p) {
  return {{"id", p.id},
          {"gpus", p.gpus},
          {"gpu_milli", p.gpu_milli},
          {"cpu_milli", p.cpu_milli},
          {"memory_mib", p.memory_mib}};
}

Json SpreadJson(const sim::Spread& s) {
  return {{"mean", s.mean}, {"sd", s.sd}, {"min", s.min}, {"max", s.max}};
}

std::string Percent(const sim::Spread& s) {
  return fmt::format("{:.2f}% ± {:.2f} ({:.2f}-{:.2f})", 100 * s.mean, 100 * s.sd, 100 * s.min,
                     100 * s.max);
}

struct PackerRuns {
  sim::Packer packer;
  sim::PackResult trace_order;
  std::vector<sim::PackResult> shuffled;  // seeds 1..N
};

int PackCmd(const SimFlags& f) {
  for (const char* flag : {"--cluster", "--policy", "--from", "--to", "--oracle", "--csv",
                           "--plot"}) {
    if (f.app && f.app->count(flag) > 0) {
      return ReportError(InvalidArgument(fmt::format(
          "{} does not apply to --format openb, a packing experiment on the node list (--nodes); "
          "leave it out",
          flag)));
    }
  }
  if (f.trace.empty()) {
    return ReportError(InvalidArgument(
        "--format openb needs --trace PODS.csv (the openb pod list, e.g. "
        "openb_pod_list_default.csv)"));
  }
  if (f.seeds < 0) return ReportError(InvalidArgument("--seeds must be 0 or more"));
  std::vector<sim::Packer> packers;
  if (f.packer == "all") {
    packers = sim::AllPackers();
  } else {
    auto p = sim::ParsePacker(f.packer);
    if (!p.ok()) return ReportError(p.status());
    packers = {*p};
  }
  std::string nodes_path = f.nodes;
  if (nodes_path.empty()) {
    auto sibling = std::filesystem::path(f.trace).parent_path() / "openb_node_list_gpu_node.csv";
    std::error_code ec;
    if (!std::filesystem::exists(sibling, ec)) {
      return ReportError(InvalidArgument(fmt::format(
          "--format openb needs --nodes NODES.csv (the openb node list); none given and no {} "
          "next to the pods",
          sibling.string())));
    }
    nodes_path = sibling.string();
  }
  auto pods = sim::ReadOpenbPods(f.trace);
  if (!pods.ok()) return ReportError(pods.status());
  auto nodes = sim::ReadOpenbNodes(nodes_path);
  if (!nodes.ok()) return ReportError(nodes.status());
  if (pods->jobs.empty()) {
    return ReportError(InvalidArgument(fmt::format("no pod of {} asks for a GPU", f.trace)));
  }
  if (nodes->empty()) {
    return ReportError(InvalidArgument(fmt::format("the node list {} is empty", nodes_path)));
  }
  int gpus = 0;
  for (const auto& n : *nodes) gpus += n.gpus;
  int64_t requested = 0;
  for (const auto& p : pods->jobs) requested += static_cast<int64_t>(p.gpus) * p.gpu_milli;

  std::vector<PackerRuns> runs;
  for (sim::Packer p : packers) {
    PackerRuns pr{p, {}, {}};
    auto r = sim::Pack(pods->jobs, *nodes, p);
    if (!r.ok()) return ReportError(r.status());
    pr.trace_order = *r;
    for (int seed = 1; seed <= f.seeds; ++seed) {
      auto s = sim::Pack(sim::Shuffled(pods->jobs, static_cast<uint64_t>(seed)), *nodes, p);
      if (!s.ok()) return ReportError(s.status());
      pr.shuffled.push_back(*s);
    }
    runs.push_back(std::move(pr));
  }
  auto spread = [](const std::vector<sim::PackResult>& v, auto field) {
    std::vector<double> xs;
    for (const auto& r : v) xs.push_back(static_cast<double>(field(r)));
    return sim::SpreadOf(xs);
  };
  auto placed = [](const sim::PackResult& r) { return r.pods_placed; };
  auto unalloc = [](const sim::PackResult& r) { return r.unallocated_share; };
  auto frag = [](const sim::PackResult& r) { return r.fragmented_share; };

  if (f.json) {
    Json out = {{"format", "openb"},
                {"trace", f.trace},
                {"nodes_file", nodes_path},
                {"nodes", nodes->size()},
                {"gpus", gpus},
                {"pods", pods->jobs.size()},
                {"gpu_capacity_milli", static_cast<int64_t>(gpus) * 1000},
                {"gpu_requested_milli", requested},
                {"seeds", f.seeds},
                {"packers", Json::array()}};
    for (const auto& pr : runs) {
      auto one = [](const sim::PackResult& r) {
        return Json{{"pods_placed", r.pods_placed},
                    {"unallocated_share", r.unallocated_share},
                    {"fragmented_share", r.fragmented_share},
                    {"gpu_allocated_milli", r.gpu_allocated_milli},
                    {"failed_pod", r.failed ? PodJson(*r.failed) : Json(nullptr)},
                    {"seconds", r.seconds}};
      };
      Json shuffled = {{"runs", Json::array()}};
      for (size_t i = 0; i < pr.shuffled.size(); ++i) {
        Json r = one(pr.shuffled[i]);
        r["seed"] = i + 1;
        shuffled["runs"].push_back(std::move(r));
      }
      if (!pr.shuffled.empty()) {
        shuffled["pods_placed"] = SpreadJson(spread(pr.shuffled, placed));
        shuffled["unallocated_share"] = SpreadJson(spread(pr.shuffled, unalloc));
        shuffled["fragmented_share"] = SpreadJson(spread(pr.shuffled, frag));
      }
      out["packers"].push_back({{"packer", sim::ToString(pr.packer)},
                                {"trace_order", one(pr.trace_order)},
                                {"shuffled", std::move(shuffled)}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%zu GPU pods of %s on %zu nodes of %s (%d GPUs; the pods ask for %.1f%% of them)\n",
              pods->jobs.size(), f.trace.c_str(), nodes->size(), nodes_path.c_str(), gpus,
              100.0 * requested / std::max(1, gpus * 1000));
  std::printf("placed in order, none leaving, until the first pod that cannot be placed "
              "(the list repeats if all fit)\n\n");
  // fmt pads by display width ("±" is one column, two bytes).
  auto row = [](const std::string& a, const std::string& b, const std::string& c,
                const std::string& d, const std::string& e, const std::string& last) {
    std::printf("%s\n", fmt::format("{:<10}  {:<12}  {:<11}  {:<25}  {:<25}  {}", a, b, c, d, e,
                                    last).c_str());
  };
  row("packer", "order", "pods placed", "GPU unallocated", "GPU fragmented (FGD)",
      "first pod not placed");
  for (const auto& pr : runs) {
    const auto& t = pr.trace_order;
    std::string failed = "none";
    if (t.failed) {
      failed = fmt::format("#{}: {} GPU x {} milli, {:.3g} CPU, {:.3g} GiB", t.failed->id,
                           t.failed->gpus, t.failed->gpu_milli, t.failed->cpu_milli / 1000.0,
                           t.failed->memory_mib / 1024.0);
    }
    row(std::string(sim::ToString(pr.packer)), "trace", fmt::format("{}", t.pods_placed),
        fmt::format("{:.2f}%", 100 * t.unallocated_share),
        fmt::format("{:.2f}%", 100 * t.fragmented_share), failed);
    if (!pr.shuffled.empty()) {
      sim::Spread n = spread(pr.shuffled, placed);
      int whole = 0;
      for (const auto& r : pr.shuffled) whole += r.failed && r.failed->gpu_milli >= 1000 ? 1 : 0;
      row("", fmt::format("shuffled x{}", pr.shuffled.size()),
          fmt::format("{:.0f} ± {:.0f}", n.mean, n.sd), Percent(spread(pr.shuffled, unalloc)),
          Percent(spread(pr.shuffled, frag)),
          fmt::format("a whole-GPU pod in {} of {}", whole, pr.shuffled.size()));
    }
  }
  if (f.seeds > 0) {
    std::printf("\nshuffled: seeds 1-%d, mean ± sample sd (min-max)\n", f.seeds);
  }
  return kExitOk;
}

int SimCmd(Globals& g, const SimFlags& f) {
  if (f.format == "openb") return PackCmd(f);
  for (const char* flag : {"--nodes", "--packer", "--seeds"}) {
    if (f.app && f.app->count(flag) > 0) {
      return ReportError(InvalidArgument(
          fmt::format("{} applies to --format openb (the packing experiment) only", flag)));
    }
  }
  auto cluster = ParseCluster(f.cluster);
  if (!cluster.ok()) return ReportError(cluster.status());
  auto kind = sched::ParsePolicy(f.policy);
  if (!kind.ok()) return ReportError(kind.status());
  auto trace = LoadTrace(g, f);
  if (!trace.ok()) return ReportError(trace.status());
  if (trace->jobs.empty()) {
    return ReportError(InvalidArgument(fmt::format(
        "no job of {} was submitted in the window; widen --from/--to", trace->source)));
  }
  sim::SimOptions o;
  o.node_gpus = *cluster;
  int total_gpus = 0;
  for (int k : *cluster) total_gpus += k;
  o.policy = sched::ForPolicy(*kind);
  o.oracle = f.oracle;
  o.fair_share = f.fair_share;
  auto r = sim::Simulate(*trace, o);
  if (!r.ok()) return ReportError(r.status());
  const sim::Summary& s = r->summary;
  std::string name = std::string(sched::ToString(*kind)) + (f.oracle ? " (oracle durations)" : "");
  if (!f.csv.empty()) {
    if (Status st = WriteCsv(f.csv, *r); !st.ok()) return ReportError(st);
  }
  if (!f.plot.empty()) {
    std::string title = fmt::format("{}: {} jobs on {}, {}", trace->source, s.jobs, f.cluster, name);
    if (Status st = WritePlot(f.plot, *r, title, total_gpus); !st.ok()) {
      return ReportError(st);
    }
  }
  if (f.json) {
    Json out = {{"policy", sched::ToString(*kind)},
                {"oracle", f.oracle},
                {"trace", trace->source},
                {"cluster", f.cluster},
                {"jobs", s.jobs},
                {"avg_jct_s", s.avg_jct_s},
                {"p99_jct_s", s.p99_jct_s},
                {"avg_queue_s", s.avg_queue_s},
                {"mean_bounded_slowdown", s.mean_bounded_slowdown},
                {"makespan_s", s.makespan_s},
                {"utilization", s.utilization},
                {"preemptions", s.preemptions},
                {"fair_share", f.fair_share},
                {"fairness_max_over_min", s.fairness_max_over_min},
                {"fairness_jain", s.fairness_jain},
                {"lower_bound_avg_jct_s", r->bound.best_avg_jct_s},
                {"lower_bound_per_job_avg_jct_s", r->bound.per_job_avg_jct_s},
                {"lower_bound_srpt_avg_jct_s", r->bound.srpt_avg_jct_s},
                {"prediction_median_abs_log_error", r->prediction_median_abs_log_error},
                {"decide_calls", r->decide_calls},
                {"decide_seconds", r->decide_seconds}};
    Json groups = Json::array();
    for (const sim::GroupSummary& gs : s.groups) {
      groups.push_back({{"group", gs.group},
                        {"jobs", gs.jobs},
                        {"avg_jct_s", gs.avg_jct_s},
                        {"avg_queue_s", gs.avg_queue_s},
                        {"finish_time_fairness", gs.finish_time_fairness}});
    }
    out["groups"] = std::move(groups);
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%zu jobs of %s on %s (%d GPUs), policy %s\n", s.jobs, trace->source.c_str(),
              f.cluster.c_str(), total_gpus, name.c_str());
  std::printf("  avg JCT             %s (lower bound %s)\n", FormatDuration(s.avg_jct_s * 1000).c_str(),
              FormatDuration(r->bound.best_avg_jct_s * 1000).c_str());
  std::printf("  p99 JCT             %s\n", FormatDuration(s.p99_jct_s * 1000).c_str());
  std::printf("  avg queueing delay  %s\n", FormatDuration(s.avg_queue_s * 1000).c_str());
  std::printf("  bounded slowdown    %.2f (mean)\n", s.mean_bounded_slowdown);
  std::printf("  makespan            %s\n", FormatDuration(s.makespan_s * 1000).c_str());
  std::printf("  GPU utilisation     %.1f%%\n", 100 * s.utilization);
  std::printf("  preemptions         %lld\n", static_cast<long long>(s.preemptions));
  std::printf("  group fairness      worst/best finish-time fairness %.2f, Jain's index %.3f\n",
              s.fairness_max_over_min, s.fairness_jain);
  return kExitOk;
}

}  // namespace

Command RegisterSim(CLI::App& root, Globals& g) {
  auto f = std::make_shared<SimFlags>();
  CLI::App* app = root.add_subcommand(
      "sim", "Replay a job trace on a declared cluster with a scheduling policy");
  f->app = app;
  app->add_option("--trace", f->trace, "The trace file (Philly CSV, or openb's pod list)");
  app->add_option("--format", f->format,
                  "philly; openb (the packing experiment: pods onto --nodes until the first "
                  "cannot be placed); or drover (the store's own run history)")
      ->check(CLI::IsMember({"philly", "openb", "drover"}));
  app->add_option("--cluster", f->cluster,
                  "MACHINESxGPUS, e.g. 56x8 (default 16x4), or a node list: 8,8,4 or 2x8,4x4");
  app->add_option("--policy", f->policy, "fifo, priority, las, srtf, gittins or default");
  app->add_option("--from", f->from, "Only jobs submitted at or after this UTC time (YYYY-MM-DD)");
  app->add_option("--to", f->to, "Only jobs submitted before this UTC time");
  app->add_flag("--oracle", f->oracle, "Predictions are the true durations (what perfect "
                                       "prediction would reach)");
  app->add_flag("--fair-share", f->fair_share,
                "Offer GPUs to the trace's groups (Philly: virtual clusters) by GPUs held, "
                "each weighing 1");
  app->add_flag("--json", f->json, "One JSON object");
  app->add_option("--csv", f->csv, "Write every job's outcome to this CSV file");
  app->add_option("--plot", f->plot, "Write queue length and utilisation over time as SVG");
  app->add_option("--nodes", f->nodes, "openb: the node list (default: "
                                       "openb_node_list_gpu_node.csv next to --trace)");
  app->add_option("--packer", f->packer, "openb: first-fit, best-fit, drover or all (default)");
  app->add_option("--seeds", f->seeds, "openb: shuffled pod orders to run besides the trace's "
                                       "(seeds 1..N; default 10)");
  return {app, [&g, f] { return SimCmd(g, *f); }};
}

}  // namespace drover::cli
