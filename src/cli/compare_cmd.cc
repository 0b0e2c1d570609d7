// drover compare EXP: the results table of an experiment.
#include "cli/catalog.h"
#include "cli/common.h"
#include "cli/comparison.h"

namespace drover::cli {
namespace {

struct CompareFlags {
  std::string experiment;
  std::string metric;
  std::string mode;
  bool json = false;
};

int CompareCmd(Globals& g, const CompareFlags& f) {
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto exp = (*catalog)->FindExperiment(f.experiment);
  if (!exp.ok()) return ReportError(exp.status());
  RunFilter filter;
  filter.experiment_id = exp->id;
  auto runs = (*catalog)->ListRuns(filter);
  if (!runs.ok()) return ReportError(runs.status());
  Comparison c = Compare(*exp, *runs, f.metric, f.mode);
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
  if (f.json) {
    std::printf("%s\n", ComparisonJson(*exp, c).dump(2).c_str());
  } else {
    std::printf("experiment %lld (%s), %s\n", static_cast<long long>(exp->id), exp->name.c_str(),
                exp->status.c_str());
    std::fputs(RenderComparison(c).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace

Command RegisterCompare(CLI::App& root, Globals& g) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* app = root.add_subcommand(
      "compare", "Compare the runs of an experiment, sorted by its objective; the best is marked");
  app->add_option("experiment", f->experiment, "Experiment id or name (the newest of that name)")
      ->required();
  app->add_option("-m,--metric", f->metric, "Sort by this metric instead of the objective");
  app->add_option("--mode", f->mode, "min or max (default: the objective's, else by name)")
      ->check(CLI::IsMember({"min", "max"}));
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return CompareCmd(g, *f); }};
}

}  // namespace drover::cli
