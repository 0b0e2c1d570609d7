// drover compare EXP: the results table of an experiment; --plot writes the curves as SVG.
#include <fmt/format.h>

#include <filesystem>

#include "cli/catalog.h"
#include "cli/common.h"
#include "cli/comparison.h"
#include "cli/report_cmd.h"
#include "common/terminal.h"

namespace drover::cli {
namespace {

struct CompareFlags {
  std::vector<std::string> experiments;
  std::string metric;
  std::string mode;
  std::string summary;
  std::string plot;
  bool json = false;
};

// The curves of every run for the comparison's metric, as a standalone SVG file.
Status WritePlot(Catalog& catalog, const Experiment& exp, const Comparison& c,
                 const std::string& path) {
  if (c.metric.empty()) {
    return InvalidArgument("no run of experiment " + exp.name +
                           " reported a metric yet; there are no curves to plot");
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("--plot " + path + " is a folder; give the file to write, e.g. --plot " +
                           path + "/curves.svg");
  }
  std::map<int64_t, report::RunDetails> details;
  DROVER_RETURN_IF_ERROR(LoadCurves(catalog, c.runs, {c.metric}, &details));
  return WriteTextFile(path, report::CurvesSvg(exp, c, details, c.metric, /*standalone=*/true),
                       /*make_dirs=*/false);
}

int CompareCmd(Globals& g, const CompareFlags& f) {
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  // One experiment, or several ranked together by one rule (their runs side by side).
  std::vector<Experiment> exps;
  std::vector<Run> all;
  for (const std::string& name : f.experiments) {
    auto exp = (*catalog)->FindExperiment(name);
    if (!exp.ok()) return ReportError(exp.status());
    if (std::any_of(exps.begin(), exps.end(), [&](const Experiment& e) { return e.id == exp->id; })) {
      continue;  // named twice
    }
    RunFilter filter;
    filter.experiment_id = exp->id;
    auto runs = (*catalog)->ListRuns(filter);
    if (!runs.ok()) return ReportError(runs.status());
    all.insert(all.end(), runs->begin(), runs->end());
    exps.push_back(*exp);
  }
  const Experiment& first = exps.front();
  auto ranked = CompareAcross(**catalog, exps, all, {f.metric, f.mode, f.summary});
  if (!ranked.ok()) return ReportError(ranked.status());
  const Comparison& c = *ranked;
  const std::vector<Run>* runs = &all;
  const Experiment* exp = &first;
  if (!f.metric.empty() &&
      std::find(c.metrics.begin() + 1, c.metrics.end(), f.metric) == c.metrics.end()) {
    bool any = false;
    for (const auto& r : *runs) any = any || r.final_metrics.contains(f.metric);
    if (!any) {
      std::string known;
      for (size_t i = 0; i < c.metrics.size(); ++i) {
        if (c.metrics[i] != f.metric) known += (known.empty() ? "" : ", ") + c.metrics[i];
      }
      return ReportError(
          InvalidArgument("no run of experiment " + exp->name + " reported '" + f.metric +
                          "'; metrics reported: " + (known.empty() ? "none" : known)));
    }
  }
  if (!f.plot.empty()) {
    // Written before the table is printed, so a bad path fails the command with nothing shown.
    Status st = WritePlot(**catalog, *exp, c, f.plot);
    if (!st.ok()) return ReportError(st);
  }
  if (f.json) {
    Json j = ComparisonJson(*exp, c);
    if (exps.size() > 1) {
      j["experiments"] = Json::array();
      for (const Experiment& e : exps) {
        j["experiments"].push_back({{"id", e.id}, {"name", e.name}, {"status", e.status}});
      }
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    // Metric names, parameters and reasons are the runs' own text: shown, never obeyed.
    for (const Experiment& e : exps) {
      PrintText(fmt::format("experiment {} ({}), {}\n", e.id, TerminalLine(e.name), ToString(e.status)));
    }
    PrintText(RenderComparison(c, FailureLines(**catalog, c.runs)));
    if (!f.plot.empty()) PrintText(fmt::format("curves of {}: {}\n", c.metric, f.plot));
  }
  return kExitOk;
}

}  // namespace

Command RegisterCompare(CLI::App& root, Globals& g) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* app = root.add_subcommand(
      "compare", "Compare the runs of an experiment, sorted by its objective; the best is marked");
  app->add_option("experiments", f->experiments,
                  "Experiment id or name (the newest of that name); several are ranked together")
      ->required();
  app->add_option("-m,--metric", f->metric, "Sort by this metric instead of the objective");
  app->add_option("--mode", f->mode, "min or max (default: the objective's, else by name)")
      ->check(CLI::IsMember({"min", "max"}));
  app->add_option("--summary", f->summary,
                  "How a run's curve becomes its score: last, best or mean_last:K (default: the "
                  "objective's summary, else last)");
  app->add_option("--plot", f->plot,
                  "Also write the curves of every run for the metric as SVG to this file");
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return CompareCmd(g, *f); }};
}

}  // namespace drover::cli
