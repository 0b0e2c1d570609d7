// drover report EXP: one self-contained HTML file about an experiment (docs/web.md, "Reports").
#include "cli/report_cmd.h"
#include "common/files.h"

#include "cli/comparison.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <filesystem>

#include "common/clock.h"
#include "drover_version.h"

namespace drover::cli {
namespace {

// Points fetched per curve: more than a chart is wide (it downsamples again to its pixels), few
// enough that a report of a hundred 1,000,000-step runs stays small and quick.
constexpr int kCurvePoints = 2000;

namespace fs = std::filesystem;

struct ReportFlags {
  std::string experiment;
  std::string output;
  std::string metric;
  std::string mode;
  std::string summary;
};

int ReportCmd(Globals& g, const ReportFlags& f) {
  if (!f.output.empty()) {
    std::error_code ec;
    if (fs::is_directory(f.output, ec)) {
      return ReportError(InvalidArgument(
          fmt::format("-o {} is a folder; give the file to write, e.g. -o {}/report.html", f.output,
                      f.output)));
    }
    fs::path parent = fs::path(f.output).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec)) {
      return ReportError(InvalidArgument(
          fmt::format("-o {}: there is no folder {}; create it first or write elsewhere", f.output,
                      parent.string())));
    }
  }
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto exp = (*catalog)->FindExperiment(f.experiment);
  if (!exp.ok()) return ReportError(exp.status());
  auto data = LoadReportData(**catalog, *exp, {f.metric, f.mode, f.summary});
  if (!data.ok()) return ReportError(data.status());
  if (!f.metric.empty()) {
    bool any = std::any_of(data->runs.begin(), data->runs.end(),
                           [&](const Run& r) { return r.final_metrics.contains(f.metric); });
    if (!any) {
      std::string known;
      for (const auto& m : report::ReportedMetrics(data->runs)) {
        known += (known.empty() ? "" : ", ") + m;
      }
      return ReportError(
          InvalidArgument(fmt::format("no run of experiment {} reported '{}'; metrics reported: {}",
                                      exp->name, f.metric, known.empty() ? "none" : known)));
    }
  }
  std::string path = f.output.empty() ? DefaultReportPath(g, *exp) : f.output;
  Status st = WriteTextFile(path, report::RenderReportHtml(*data), f.output.empty());
  if (!st.ok()) return ReportError(st);
  std::printf("%s\n", path.c_str());
  return kExitOk;
}

}  // namespace

Status LoadCurves(Catalog& catalog, const std::vector<Run>& runs,
                  const std::vector<std::string>& metrics,
                  std::map<int64_t, report::RunDetails>* details) {
  auto has_curve = [&](const Run& run) {
    return std::any_of(metrics.begin(), metrics.end(),
                       [&](const std::string& m) { return run.final_metrics.contains(m); });
  };
  // The attempts shown: those of a run with a failed attempt (it has more than one, or did not
  // succeed) or a curve. A run that succeeded at its first try has neither: after a clean
  // 1,000-run sweep without metrics, nothing is asked for.
  std::vector<Run> shown;
  for (const Run& run : runs) {
    if (run.attempts > 0 &&
        (run.attempts > 1 || run.state != RunState::kSucceeded || has_curve(run))) {
      shown.push_back(run);
    }
  }
  // Their attempts at once (one query on a store, one request to a daemon, not one per run).
  std::map<int64_t, std::vector<Attempt>> attempts;
  if (!shown.empty()) {
    DROVER_ASSIGN_OR_RETURN(attempts, catalog.ListAttemptsOfRuns(shown));
  }
  for (const Run& run : runs) {
    report::RunDetails& d = (*details)[run.id];
    if (d.attempts.empty() && run.attempts > 0) {
      if (auto it = attempts.find(run.id); it != attempts.end()) d.attempts = std::move(it->second);
      std::sort(d.attempts.begin(), d.attempts.end(),
                [](const Attempt& a, const Attempt& b) { return a.number < b.number; });
    }
    // final_metrics holds the last values of the latest attempt that reported any: nothing
    // there, nothing was ever reported.
    if (!has_curve(run)) continue;
    // One attempt per curve: steps start again at every attempt, so two would draw back and
    // forth. Each metric from the latest attempt that reported it (an attempt that diverged
    // before its first evaluation has a loss but no val_acc: the earlier val_acc curve shows).
    // A run cached from another (docs/pipelines.md) shows that run's curves, by its attempts.
    const std::vector<Attempt>* curve_attempts = &d.attempts;
    std::vector<Attempt> source_attempts;
    if (run.cached_from != 0) {
      DROVER_ASSIGN_OR_RETURN(source_attempts, catalog.ListAttempts(run.cached_from));
      std::sort(source_attempts.begin(), source_attempts.end(),
                [](const Attempt& a, const Attempt& b) { return a.number < b.number; });
      curve_attempts = &source_attempts;
    }
    for (const auto& m : metrics) {
      for (auto a = curve_attempts->rbegin(); a != curve_attempts->rend(); ++a) {
        SeriesQuery q;
        q.name = m;
        q.attempt = a->number;
        q.points = kCurvePoints;
        DROVER_ASSIGN_OR_RETURN(auto series, catalog.GetMetricSeries(run.id, q));
        bool found = false;
        for (auto& s : series) {
          if (s.points.empty()) continue;
          d.curve_attempt = std::max(d.curve_attempt, a->number);
          d.curves[s.name] = std::move(s);
          found = true;
        }
        if (found) break;
      }
    }
  }
  return Status::Ok();
}

Result<report::ReportData> LoadReportData(Catalog& catalog, const Experiment& exp,
                                          const report::RankOptions& options,
                                          const std::vector<Run>* runs) {
  report::ReportData d;
  d.experiment = exp;
  d.drover_version = DROVER_VERSION;
  RealClock clock;
  d.generated_ms = clock.Now();
  if (runs != nullptr) {
    d.runs = *runs;
  } else {
    RunFilter filter;
    filter.experiment_id = exp.id;
    DROVER_ASSIGN_OR_RETURN(d.runs, catalog.ListRuns(filter));
  }
  DROVER_ASSIGN_OR_RETURN(d.ranking, CompareRuns(catalog, exp, d.runs, options));
  DROVER_RETURN_IF_ERROR(
      LoadCurves(catalog, d.runs, report::CurveMetrics(d.ranking), &d.details));
  AlertFilter af;
  af.experiment_id = exp.id;
  DROVER_ASSIGN_OR_RETURN(d.alerts, catalog.ListAlerts(af));
  return d;
}

std::string DefaultReportPath(const Globals& g, const Experiment& exp) {
  std::string name;
  for (char ch : exp.name) {
    bool safe = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ||
                (ch == '.' && !name.empty());
    name += safe ? ch : '-';
  }
  if (name.empty()) name = "experiment";
  const std::string file = fmt::format("{}-{}.html", name, exp.id);
  // A store this user may not write (a lab's shared daemon's): their own cache folder instead.
  if (::access(StoreDir(g).c_str(), W_OK) != 0 && errno == EACCES) {
    const char* cache = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    const fs::path base = cache != nullptr && *cache != '\0' ? fs::path(cache)
                          : home != nullptr && *home != '\0'
                              ? fs::path(home) / ".cache"
                              : fs::temp_directory_path();
    return (base / "drover" / "reports" / file).string();
  }
  return (fs::path(StoreDir(g)) / "reports" / file).string();
}

Status WriteTextFile(const std::string& path, const std::string& text, bool make_dirs) {
  fs::path parent = fs::path(path).parent_path();
  if (make_dirs && !parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) return ErrnoStatus("creating " + parent.string(), ec.value());
  }
  return WriteFileAtomically(path, text);
}

Result<std::string> WriteExperimentReport(const Globals& g, Catalog& catalog, const Experiment& exp,
                                          const std::string& path, const std::vector<Run>* runs) {
  DROVER_ASSIGN_OR_RETURN(report::ReportData data, LoadReportData(catalog, exp, {}, runs));
  std::string out = path.empty() ? DefaultReportPath(g, exp) : path;
  DROVER_RETURN_IF_ERROR(WriteTextFile(out, report::RenderReportHtml(data), path.empty()));
  return out;
}

Command RegisterReport(CLI::App& root, Globals& g) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* app = root.add_subcommand(
      "report",
      "Write one self-contained HTML file about an experiment: results, curves, params against "
      "the objective, failures");
  app->add_option("experiment", f->experiment, "Experiment id or name (the newest of that name)")
      ->required();
  app->add_option("-o,--output", f->output,
                  "The file to write (default <store>/reports/<name>-<id>.html; "
                  "~/.cache/drover/reports/ when the store is not yours to write)");
  app->add_option("-m,--metric", f->metric,
                  "Rank and plot by this metric instead of the objective");
  app->add_option("--summary", f->summary,
                  "How a run's curve becomes its score: last, best or mean_last:K (default: the "
                  "objective's summary, else last)");
  app->add_option("--mode", f->mode, "min or max (default: the objective's, else by name)")
      ->check(CLI::IsMember({"min", "max"}));
  return {app, [&g, f] { return ReportCmd(g, *f); }};
}

}  // namespace drover::cli
