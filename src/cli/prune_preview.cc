#include "cli/prune_preview.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "cli/catalog.h"
#include "common/strings.h"
#include "search/pruner.h"

namespace drover::cli {
namespace {

constexpr int kRungsShown = 5;

// What rungs count, in words, and the resource metric read from runs ("" when steps only).
std::string Resource(const PruneSpec& p) {
  if (p.resource == "step") return "";
  return p.resource.empty() ? "epoch" : p.resource;
}

// The rungs of bracket 0 below the end of a full run (at most kRungsShown + 1: one more says
// there are more).
std::vector<int64_t> Rungs(const search::Pruner& pruner) {
  std::vector<int64_t> out;
  for (int k = 0; k <= kRungsShown; ++k) {
    const int64_t at = pruner.RungStep(0, k);
    if (!pruner.Judges(at)) break;
    out.push_back(at);
    if (at == std::numeric_limits<int64_t>::max()) break;
  }
  return out;
}

}  // namespace

PrunePreview PreviewPrune(const PruneSpec& p, const std::vector<MetricPoint>& history,
                          int64_t history_run) {
  const search::Pruner pruner(p);
  PrunePreview out;
  std::vector<int64_t> rungs = Rungs(pruner);
  std::vector<std::string> at;
  for (size_t i = 0; i < rungs.size() && i < kRungsShown; ++i) at.push_back(std::to_string(rungs[i]));
  if (rungs.size() > kRungsShown) at.push_back("...");
  const std::string resource = Resource(p);
  if (p.resource.empty()) {
    out.rungs = fmt::format("rungs at {} (epochs when runs report epoch beside {}, else the step "
                            "of each report)",
                            Join(at, ", "), p.metric);
  } else {
    out.rungs = fmt::format("rungs at {} {}", resource.empty() ? "step" : resource, Join(at, ", "));
  }
  if (history.empty() || rungs.empty()) return out;

  // Where the earlier run's reports would have put the rungs: placed as the engine places them
  // (search::ReportPlacer), judged by a pruner that stops nothing.
  bool reported_epoch = false, any_report = false;
  for (const MetricPoint& m : history) {
    reported_epoch = reported_epoch || m.name == "epoch";
    any_report = any_report || m.name == p.metric;
  }
  const bool named = !p.resource.empty() && p.resource != "step";
  search::Pruner judge(p);
  search::ReportPlacer placer(p);
  int last_rung = -1;
  int64_t first_report = -1;
  placer.Place(0, history, 0, [&](const MetricPoint& m, const search::Pruner::Place& place) {
    if (first_report < 0) first_report = m.step;
    std::optional<RungRecord> r = judge.Report(0, 0, place, m.value, /*ended=*/true);
    if (!r) return true;
    const int passed = last_rung + 1;
    last_rung = r->rung;
    if (r->rung == passed) return true;  // one rung on this report
    std::vector<std::string> which;
    for (int k = passed; k <= r->rung; ++k) which.push_back(std::to_string(judge.RungStep(0, k)));
    std::string fix;
    if (p.resource == "step" && reported_epoch) {
      fix = "drop resource: step, so rungs count the epochs it reports";
    } else if (place.unit == "step") {
      fix = fmt::format("report epoch beside {} (drover.log(step=..., epoch=..., {}=...)), or "
                        "set min_steps: {} so rungs fall on different reports",
                        p.metric, p.metric, first_report);
    } else {
      fix = fmt::format("raise min_steps, or a reduction that spaces the rungs wider than one "
                        "report of {}", place.unit);
    }
    out.warnings.push_back(fmt::format(
        "rungs at {} {} all fall on one report of {} (step {}) in run {}, the latest of this "
        "name: only the last judges it, the others are passed over; {}",
        place.unit, Join(which, ", "), p.metric, m.step, history_run, fix));
    return false;
  });
  if (named && any_report && first_report < 0) {
    out.warnings.push_back(fmt::format(
        "run {}, the latest of this name, reported {} but never {} beside it: no rung could be "
        "placed and nothing would be pruned; report {} in the same line, or leave resource out",
        history_run, p.metric, p.resource, p.resource));
  }
  return out;
}

PrunePreview PreviewPruneOf(const PruneSpec& p, const std::string& name, Catalog* catalog) {
  if (!catalog) return PreviewPrune(p, {}, 0);
  auto exp = catalog->FindExperiment(name);
  if (!exp.ok()) return PreviewPrune(p, {}, 0);
  RunFilter filter;
  filter.experiment_id = exp->id;
  filter.limit = 20;
  auto runs = catalog->ListRuns(filter);
  if (!runs.ok()) return PreviewPrune(p, {}, 0);
  const std::string resource = Resource(p);
  for (const Run& r : *runs) {
    SeriesQuery q;
    q.name = p.metric;
    auto metric = catalog->GetMetricSeries(r.id, q);
    if (!metric.ok() || metric->empty() || metric->front().points.empty()) continue;
    std::vector<MetricPoint> history = metric->front().points;
    for (const std::string& also : {resource, std::string("epoch")}) {
      if (also.empty()) continue;
      q.name = also;
      auto more = catalog->GetMetricSeries(r.id, q);
      if (!more.ok() || more->empty()) continue;
      history.insert(history.end(), more->front().points.begin(), more->front().points.end());
      break;
    }
    // One attempt's points: the latest, as the prune rule saw them last.
    int64_t last_attempt = 0;
    for (const MetricPoint& m : history) last_attempt = std::max(last_attempt, m.attempt_id);
    std::erase_if(history, [&](const MetricPoint& m) { return m.attempt_id != last_attempt; });
    return PreviewPrune(p, history, r.id);
  }
  return PreviewPrune(p, {}, 0);
}

std::string PrunePreviewText(const PruneSpec& p, const PrunePreview& preview) {
  std::string out = fmt::format("prune: {} on {} ({}), reduction {}: {}{}\n", ToString(p.rule),
                                p.metric, p.maximize ? "max" : "min", p.reduction, preview.rungs,
                                p.max_steps > 0 ? fmt::format("; runs end at {}", p.max_steps)
                                                : std::string());
  for (const std::string& w : preview.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace drover::cli
