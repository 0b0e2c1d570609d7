// drover sim --trace FILE: replays a job trace on a declared cluster with one of the scheduler's
// policies (the same sched::Decide() the engine calls) and reports how the jobs fared
// (src/sim/; issue 7).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/common.h"
#include "cli/report_cmd.h"
#include "report/svg.h"
#include "sim/history.h"
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
  std::string csv;
  std::string plot;
};

Result<std::pair<int, int>> ParseCluster(const std::string& text) {
  int nodes = 0, per = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &nodes, &x, &per, &extra) != 3 || x != 'x' ||
      nodes <= 0 || per <= 0) {
    return InvalidArgument(fmt::format(
        "--cluster '{}': write MACHINESxGPUS, e.g. 16x4 (16 machines of 4 GPUs)", text));
  }
  return std::make_pair(nodes, per);
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
  return InvalidArgument(fmt::format("--format {}: choose philly or drover", f.format));
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

int SimCmd(Globals& g, const SimFlags& f) {
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
  o.nodes = cluster->first;
  o.gpus_per_node = cluster->second;
  o.policy.kind = *kind;
  o.oracle = f.oracle;
  auto r = sim::Simulate(*trace, o);
  if (!r.ok()) return ReportError(r.status());
  const sim::Summary& s = r->summary;
  std::string name = std::string(sched::ToString(*kind)) + (f.oracle ? " (oracle durations)" : "");
  if (!f.csv.empty()) {
    if (Status st = WriteCsv(f.csv, *r); !st.ok()) return ReportError(st);
  }
  if (!f.plot.empty()) {
    std::string title = fmt::format("{}: {} jobs on {}, {}", trace->source, s.jobs, f.cluster, name);
    if (Status st = WritePlot(f.plot, *r, title, o.nodes * o.gpus_per_node); !st.ok()) {
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
                {"lower_bound_avg_jct_s", r->bound.best_avg_jct_s},
                {"lower_bound_per_job_avg_jct_s", r->bound.per_job_avg_jct_s},
                {"lower_bound_srpt_avg_jct_s", r->bound.srpt_avg_jct_s},
                {"prediction_median_abs_log_error", r->prediction_median_abs_log_error},
                {"decide_calls", r->decide_calls},
                {"decide_seconds", r->decide_seconds}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%zu jobs of %s on %s (%d GPUs), policy %s\n", s.jobs, trace->source.c_str(),
              f.cluster.c_str(), o.nodes * o.gpus_per_node, name.c_str());
  std::printf("  avg JCT             %s (lower bound %s)\n", FormatDuration(s.avg_jct_s * 1000).c_str(),
              FormatDuration(r->bound.best_avg_jct_s * 1000).c_str());
  std::printf("  p99 JCT             %s\n", FormatDuration(s.p99_jct_s * 1000).c_str());
  std::printf("  avg queueing delay  %s\n", FormatDuration(s.avg_queue_s * 1000).c_str());
  std::printf("  bounded slowdown    %.2f (mean)\n", s.mean_bounded_slowdown);
  std::printf("  makespan            %s\n", FormatDuration(s.makespan_s * 1000).c_str());
  std::printf("  GPU utilisation     %.1f%%\n", 100 * s.utilization);
  std::printf("  preemptions         %lld\n", static_cast<long long>(s.preemptions));
  return kExitOk;
}

}  // namespace

Command RegisterSim(CLI::App& root, Globals& g) {
  auto f = std::make_shared<SimFlags>();
  CLI::App* app = root.add_subcommand(
      "sim", "Replay a job trace on a declared cluster with a scheduling policy");
  app->add_option("--trace", f->trace, "The trace file (Philly CSV)");
  app->add_option("--format", f->format, "philly, or drover (the store's own run history)")
      ->check(CLI::IsMember({"philly", "drover"}));
  app->add_option("--cluster", f->cluster, "MACHINESxGPUS, e.g. 56x8 (default 16x4)");
  app->add_option("--policy", f->policy, "fifo, priority, las, srtf or default");
  app->add_option("--from", f->from, "Only jobs submitted at or after this UTC time (YYYY-MM-DD)");
  app->add_option("--to", f->to, "Only jobs submitted before this UTC time");
  app->add_flag("--oracle", f->oracle, "Predictions are the true durations (what perfect "
                                       "prediction would reach)");
  app->add_flag("--json", f->json, "One JSON object");
  app->add_option("--csv", f->csv, "Write every job's outcome to this CSV file");
  app->add_option("--plot", f->plot, "Write queue length and utilisation over time as SVG");
  return {app, [&g, f] { return SimCmd(g, *f); }};
}

}  // namespace drover::cli
