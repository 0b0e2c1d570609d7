// drover ls: list runs (or experiments) in the store.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "cli/catalog.h"
#include "cli/common.h"
#include "cli/comparison.h"
#include "common/strings.h"
#include "common/users.h"
#include "protocol/json_codec.h"

namespace drover::cli {
namespace {

constexpr int kDefaultLimit = 50;

struct LsFlags {
  std::string experiment;
  std::string state;
  int limit = -1;  // -1: 50 in a table, all with --json
  bool experiments = false;
  bool json = false;
  std::string user;  // --user NAME (--mine: the caller)
  bool mine = false;
};

int ListExperiments(Catalog& store, const LsFlags& f) {
  // One more than asked, to know whether the listing was cut.
  auto exps = store.ListExperiments(f.limit > 0 ? f.limit + 1 : 0);
  if (!exps.ok()) return ReportError(exps.status());
  bool cut = f.limit > 0 && static_cast<int>(exps->size()) > f.limit;
  if (cut) exps->resize(f.limit);
  if (f.json) {
    Json out = Json::array();
    for (const auto& row : *exps) {
      Json j = protocol::ToJson(row);
      j.erase("spec");
      out.push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [e, runs] : *exps) {
    std::string counts = fmt::format("{}/{} ok", runs.Of(RunState::kSucceeded), runs.Total());
    for (RunState s : {RunState::kFailed, RunState::kPruned, RunState::kCancelled}) {
      if (runs.Of(s) > 0) counts += fmt::format(", {} {}", runs.Of(s), ToString(s));
    }
    rows.push_back({std::to_string(e.id), e.name, std::string(ToString(e.status)), counts, FormatTime(e.created_ms)});
  }
  std::fputs(RenderTable({"id", "name", "status", "runs", "created"}, rows).c_str(), stdout);
  if (cut) std::fprintf(stderr, "(the newest %d; -n 0 lists all)\n", f.limit);
  return kExitOk;
}

int List(Globals& g, LsFlags f) {
  bool default_limit = f.limit < 0;
  if (default_limit) f.limit = f.json ? 0 : kDefaultLimit;
  auto store = OpenCatalog(g);
  if (!store.ok()) return ReportError(store.status());
  if (f.experiments) return ListExperiments(**store, f);
  RunFilter filter;
  filter.limit = f.limit > 0 ? f.limit + 1 : 0;
  filter.newest_first = true;
  std::map<int64_t, std::string> names;
  if (!f.experiment.empty()) {
    auto exp = (*store)->FindExperiment(f.experiment);
    if (!exp.ok()) return ReportError(exp.status());
    filter.experiment_id = exp->id;
  }
  filter.user = f.mine ? DisplayName(LookupUser(::geteuid(), ::getegid())) : f.user;
  if (!f.state.empty()) {
    filter.state = ParseRunState(f.state);
    if (!filter.state) {
      return ReportError(InvalidArgument(fmt::format(
          "unknown state '{}'; use queued, running, retrying, succeeded, failed or cancelled",
          f.state)));
    }
  }
  auto runs = (*store)->ListRuns(filter);
  if (!runs.ok()) return ReportError(runs.status());
  bool cut = f.limit > 0 && static_cast<int>(runs->size()) > f.limit;
  if (cut) runs->resize(f.limit);
  if (f.json) {
    Json out = Json::array();
    for (const auto& r : *runs) out.push_back(protocol::ToJson(r));
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  // The parameters that vary within each experiment: a mixed listing shows what tells runs apart.
  std::map<int64_t, std::vector<Run>> by_exp;
  for (const auto& r : *runs) by_exp[r.experiment_id].push_back(r);
  std::map<int64_t, std::vector<std::string>> varying;
  for (const auto& [id, group] : by_exp) varying[id] = VaryingParams(group);
  // A failed run's state says why, in its own words: the last line of its last attempt's error.
  // A running run placed by Slurm says where it is (its job, node, or why it is pending).
  std::vector<Run> failed;
  for (const auto& r : *runs) {
    if (r.state == RunState::kFailed || r.state == RunState::kRunning) failed.push_back(r);
  }
  std::map<int64_t, std::string> why;
  std::map<int64_t, std::string> where;
  if (!failed.empty()) {
    auto attempts = (*store)->ListAttemptsOfRuns(failed);
    if (attempts.ok()) {
      for (const auto& [id, list] : *attempts) {
        if (!list.empty() && !list.back().ended) where[id] = DescribePlacement(list.back().executor);
        if (list.empty()) continue;
        if (std::string last = FailureLine(list.back()); !last.empty()) why[id] = last;
      }
    }
  }
  // Why queued runs wait, as the daemon's scheduler says (drover why), when a daemon serves.
  if (std::any_of(runs->begin(), runs->end(), [](const Run& r) { return !IsFinal(r.state); })) {
    if (auto daemon = FindDaemon(g)) {
      ApiClient api(*daemon);
      if (auto w = api.Get("/runs/waiting", 5); w.ok() && w->contains("waiting")) {
        for (const auto& e : (*w)["waiting"]) {
          if (!e.is_object() || !e.contains("run_id") || !e["run_id"].is_number_integer()) continue;
          std::string reason = e.value("reason", std::string());
          if (reason.size() > 70) reason = reason.substr(0, 67) + "...";
          why[e["run_id"].get<int64_t>()] = reason;
        }
      }
    }
  }
  // Whose runs: a column once the listing holds more than one submitter's.
  std::set<std::string> users;
  for (const auto& r : *runs) users.insert(r.user);
  const bool user_column = users.size() > 1;
  std::vector<std::vector<std::string>> rows;
  std::map<int64_t, std::string> objective;  // by experiment: its objective's metric, shown first
  for (const auto& r : *runs) {
    if (!names.count(r.experiment_id)) {
      auto e = (*store)->FindExperiment(std::to_string(r.experiment_id));
      names[r.experiment_id] = e.ok() ? e->name : "?";
      if (e.ok() && e->spec.contains("objective") && e->spec["objective"].is_object()) {
        objective[r.experiment_id] = e->spec["objective"].value("metric", "");
      }
    }
    // The objective first (always shown), then the others while they fit.
    std::string metrics;
    const std::string& first = objective[r.experiment_id];
    if (!first.empty() && r.final_metrics.contains(first)) {
      metrics = first + "=" + FormatValue(r.final_metrics[first]);
    }
    for (auto it = r.final_metrics.begin(); it != r.final_metrics.end(); ++it) {
      if (metrics.size() > 40) break;
      if (it.key() == first) continue;
      metrics += (metrics.empty() ? "" : " ") + it.key() + "=" + FormatValue(it.value());
    }
    std::string state = why.count(r.id) ? fmt::format("{}: {}", ToString(r.state), why[r.id])
                                         : std::string(ToString(r.state));
    if (r.cached_from != 0) state += fmt::format(" (cached from run {})", r.cached_from);
    if (!where[r.id].empty()) state += " (" + where[r.id] + ")";
    if (r.reason == "upstream_failed") state += " (upstream_failed)";
    // A pipeline's run names its stage with its experiment.
    const std::string stage = r.stage.empty() ? "" : "/" + r.stage;
    rows.push_back({std::to_string(r.id),
                    fmt::format("{} ({}){}", names[r.experiment_id], r.experiment_id, stage),
                    state,
                    std::to_string(r.attempts),
                    ParamsSummary(r.current_params, varying[r.experiment_id]), metrics,
                    FormatTime(r.created_ms)});
    if (user_column) rows.back().insert(rows.back().begin() + 2, r.user.empty() ? "-" : r.user);
  }
  if (rows.empty()) {
    std::printf("no runs\n");
    return kExitOk;
  }
  std::vector<std::string> header = {"run",    "experiment", "state",    "attempts",
                                     "params", "metrics",    "submitted"};
  if (user_column) header.insert(header.begin() + 2, "user");
  std::fputs(RenderTable(header, rows).c_str(), stdout);
  if (cut) std::fprintf(stderr, "(the newest %d runs; -n 0 lists all)\n", f.limit);
  return kExitOk;
}

}  // namespace

Command RegisterLs(CLI::App& root, Globals& g) {
  auto f = std::make_shared<LsFlags>();
  CLI::App* app = root.add_subcommand("ls", "List runs, newest first (or experiments)");
  app->add_option("-e,--experiment", f->experiment, "Only runs of this experiment (id or name)");
  app->add_option("-s,--state", f->state, "Only runs in this state");
  app->add_option("-u,--user", f->user, "Only runs this user submitted");
  app->add_flag("--mine", f->mine, "Only runs you submitted");
  app->add_option("-n,--limit", f->limit,
                  "At most this many, newest first (0 = all; default 50, all with --json)")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--experiments", f->experiments, "List experiments instead of runs");
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return List(g, *f); }};
}

}  // namespace drover::cli
