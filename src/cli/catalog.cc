#include "cli/catalog.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <map>
#include <set>

#include "cli/client.h"
#include "cli/follow.h"

namespace drover::cli {

Result<std::map<int64_t, std::vector<Attempt>>> Catalog::ListAttemptsOfRuns(
    const std::vector<Run>& runs) {
  std::map<int64_t, std::vector<Attempt>> out;
  for (const Run& run : runs) {
    if (run.attempts <= 0) continue;
    DROVER_ASSIGN_OR_RETURN(out[run.id], ListAttempts(run.id));
  }
  return out;
}

namespace {

class StoreCatalog : public Catalog {
 public:
  explicit StoreCatalog(std::unique_ptr<Store> store)
      : owned_(std::move(store)), store_(owned_.get()) {}
  explicit StoreCatalog(Store& store) : store_(&store) {}
  Result<std::map<int64_t, CurveSummary>> MetricSummaries(int64_t experiment_id,
                                                          const std::string& metric,
                                                          int last_k) override {
    return store_->MetricSummaries(experiment_id, metric, last_k);
  }
  Result<std::vector<protocol::ExperimentListing>> ListExperiments(int limit) override {
    DROVER_ASSIGN_OR_RETURN(auto list, store_->ListExperiments(limit));
    std::vector<int64_t> ids;
    for (const auto& e : list) ids.push_back(e.id);
    DROVER_ASSIGN_OR_RETURN(auto counts, store_->CountRunsOf(ids));
    std::vector<protocol::ExperimentListing> out;
    for (auto& e : list) {
      const int64_t id = e.id;
      out.push_back({std::move(e), counts[id]});
    }
    return out;
  }
  Result<Experiment> FindExperiment(const std::string& id_or_name) override {
    return LoadExperiment(*store_, id_or_name);
  }
  Result<std::vector<Run>> ListRuns(const RunFilter& filter) override {
    return store_->ListRuns(filter);
  }
  Result<protocol::RunDetail> GetRunDetail(int64_t run_id) override {
    protocol::RunDetail d;
    DROVER_ASSIGN_OR_RETURN(d.run, LoadRun(*store_, std::to_string(run_id)));
    DROVER_ASSIGN_OR_RETURN(d.attempts, store_->ListAttempts(run_id));
    DROVER_ASSIGN_OR_RETURN(auto exp, store_->GetExperiment(d.run.experiment_id));
    if (!exp) return Internal(fmt::format("run {} has no experiment", run_id));
    d.experiment = *exp;
    DROVER_ASSIGN_OR_RETURN(d.snapshot, store_->GetSnapshot(exp->snapshot_hash));
    DROVER_ASSIGN_OR_RETURN(d.environments, store_->ListEnvironments(exp->id));
    DROVER_ASSIGN_OR_RETURN(d.rungs, store_->ListRungs(exp->id, run_id));
    return d;
  }
  Result<std::vector<Alert>> ListAlerts(const AlertFilter& filter) override {
    return store_->ListAlerts(filter);
  }
  Result<RunArtifacts> RunOutputs(int64_t run_id) override {
    return store_->RunOutputs(run_id, store_->Dir());
  }
  Result<std::vector<Attempt>> ListAttempts(int64_t run_id) override {
    // The run is looked up only when it has no attempts (a report lists them for every run of an
    // experiment, each known to exist).
    DROVER_ASSIGN_OR_RETURN(auto attempts, store_->ListAttempts(run_id));
    if (attempts.empty()) DROVER_RETURN_IF_ERROR(LoadRun(*store_, std::to_string(run_id)).status());
    return attempts;
  }
  Result<std::map<int64_t, std::vector<Attempt>>> ListAttemptsOfRuns(
      const std::vector<Run>& runs) override {
    const bool one_experiment =
        !runs.empty() && std::all_of(runs.begin(), runs.end(), [&](const Run& r) {
          return r.experiment_id == runs.front().experiment_id;
        });
    if (!one_experiment) return Catalog::ListAttemptsOfRuns(runs);
    return store_->ListExperimentAttempts(runs.front().experiment_id);
  }
  Result<std::vector<report::MetricSeries>> GetMetricSeries(int64_t run_id,
                                                            const SeriesQuery& q) override {
    DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(*store_, std::to_string(run_id)));
    // A run cached from another (docs/pipelines.md) shows that run's curves.
    const int64_t source = run.cached_from != 0 ? run.cached_from : run.id;
    int64_t attempt_id = 0;
    if (q.attempt > 0) {
      DROVER_ASSIGN_OR_RETURN(auto attempts, store_->ListAttempts(source));
      for (const auto& a : attempts) {
        if (a.number == q.attempt) attempt_id = a.id;
      }
      if (attempt_id == 0) {
        return NotFound(fmt::format("run {} has no attempt {} (it has {})", run.id, q.attempt,
                                    attempts.size()));
      }
    }
    DROVER_ASSIGN_OR_RETURN(auto all, store_->GetMetrics(source, q.name));
    // Ordered by attempt, then step: grouping keeps that order within each series.
    std::map<std::string, std::vector<MetricPoint>> by_name;
    for (auto& p : all) {
      if (attempt_id != 0 && p.attempt_id != attempt_id) continue;
      by_name[p.name].push_back(std::move(p));
    }
    std::vector<report::MetricSeries> out;
    for (auto& [name, points] : by_name) {
      report::MetricSeries s;
      s.name = name;
      s.count = static_cast<int64_t>(points.size());
      s.points = q.points > 0 ? report::DownsampleMinMax(points, q.points) : std::move(points);
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  std::unique_ptr<Store> owned_;
  Store* store_;
};

class ApiCatalog : public Catalog {
 public:
  explicit ApiCatalog(DaemonInfo info) : api_(std::move(info)) {}
  Result<std::map<int64_t, CurveSummary>> MetricSummaries(int64_t experiment_id,
                                                          const std::string& metric,
                                                          int last_k) override {
    return FetchCurveSummaries(api_, experiment_id, metric, last_k);
  }
  Result<std::vector<protocol::ExperimentListing>> ListExperiments(int limit) override {
    // The API answers at most kPage at a time; limit 0 (all) pages through them.
    constexpr int kPage = 1000;
    std::vector<protocol::ExperimentListing> out;
    for (;;) {
      const int want = limit > 0 ? std::min(kPage, limit - static_cast<int>(out.size())) : kPage;
      DROVER_ASSIGN_OR_RETURN(
          Json j, api_.Get(fmt::format("/experiments?limit={}&offset={}", want, out.size())));
      const Json& page = j.at("experiments");
      for (const auto& e : page) {
        DROVER_ASSIGN_OR_RETURN(auto row, protocol::ExperimentListingFromJson(e));
        out.push_back(std::move(row));
      }
      if (static_cast<int>(page.size()) < want) break;
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }
  Result<Experiment> FindExperiment(const std::string& id_or_name) override {
    auto e = FetchExperiment(api_, id_or_name);
    if (!e.ok() && e.status().code() == Code::kNotFound) {
      return NotFound(fmt::format(
          "no experiment '{}' in this store; `drover ls --experiments` lists them", id_or_name));
    }
    return e;
  }
  Result<std::vector<Run>> ListRuns(const RunFilter& f) override { return FetchRuns(api_, f); }
  Result<protocol::RunDetail> GetRunDetail(int64_t run_id) override {
    auto j = api_.Get(fmt::format("/runs/{}", run_id));
    if (!j.ok()) {
      if (j.status().code() == Code::kNotFound) {
        return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", run_id));
      }
      return j.status();
    }
    return protocol::RunDetailFromJson(*j);
  }
  Result<std::vector<Alert>> ListAlerts(const AlertFilter& f) override {
    std::string path = fmt::format("/alerts?limit={}", f.limit > 0 ? f.limit : 10000);
    if (f.run_id) path += fmt::format("&run={}", f.run_id);
    if (f.experiment_id) path += fmt::format("&experiment={}", f.experiment_id);
    if (!f.kind.empty()) path += "&kind=" + httplib::detail::encode_query_param(f.kind);
    DROVER_ASSIGN_OR_RETURN(Json j, api_.Get(path));
    std::vector<Alert> out;
    for (const auto& a : j.at("alerts")) {
      DROVER_ASSIGN_OR_RETURN(Alert alert, protocol::AlertFromJson(a));
      out.push_back(std::move(alert));
    }
    return out;
  }
  Result<RunArtifacts> RunOutputs(int64_t run_id) override {
    auto j = api_.Get(fmt::format("/runs/{}/artifacts", run_id));
    if (!j.ok()) return NotFoundSaysHow(j.status(), run_id);
    return protocol::RunArtifactsFromJson(*j);
  }
  Result<std::vector<Attempt>> ListAttempts(int64_t run_id) override {
    auto j = api_.Get(fmt::format("/runs/{}/attempts", run_id));
    if (!j.ok()) return NotFoundSaysHow(j.status(), run_id);
    std::vector<Attempt> out;
    for (const auto& a : j->at("attempts")) {
      DROVER_ASSIGN_OR_RETURN(Attempt attempt, protocol::AttemptFromJson(a));
      out.push_back(std::move(attempt));
    }
    return out;
  }
  Result<std::map<int64_t, std::vector<Attempt>>> ListAttemptsOfRuns(
      const std::vector<Run>& runs) override {
    const bool one_experiment =
        !runs.empty() && std::all_of(runs.begin(), runs.end(), [&](const Run& r) {
          return r.experiment_id == runs.front().experiment_id;
        });
    // A few runs (the failed ones of a sweep): a request each, not every attempt of the sweep.
    constexpr size_t kFewRuns = 16;
    if (!one_experiment || runs.size() <= kFewRuns) return Catalog::ListAttemptsOfRuns(runs);
    // One request for the experiment's attempts, not one per run. A daemon older than the route
    // answers 404: then run by run, as before.
    std::set<int64_t> wanted;
    for (const Run& r : runs) {
      if (r.attempts > 0) wanted.insert(r.id);
    }
    std::map<int64_t, std::vector<Attempt>> out;
    // A page of runs at a time (the daemon says where the next starts; one that does not page
    // answers everything at once and says nothing).
    for (int64_t offset = 0;;) {
      auto j = api_.Get(fmt::format("/experiments/{}/attempts?offset={}",
                                    runs.front().experiment_id, offset));
      if (!j.ok() && j.status().code() == Code::kNotFound && offset == 0) {
        return Catalog::ListAttemptsOfRuns(runs);
      }
      if (!j.ok()) return j.status();
      for (const auto& a : j->at("attempts")) {
        DROVER_ASSIGN_OR_RETURN(Attempt attempt, protocol::AttemptFromJson(a));
        if (wanted.count(attempt.run_id)) out[attempt.run_id].push_back(std::move(attempt));
      }
      const Json next = j->value("next_offset", Json(nullptr));
      if (!next.is_number_integer() || next.get<int64_t>() <= offset) break;
      offset = next.get<int64_t>();
    }
    return out;
  }
  Result<std::vector<report::MetricSeries>> GetMetricSeries(int64_t run_id,
                                                            const SeriesQuery& q) override {
    std::string path = fmt::format("/runs/{}/metrics?points={}", run_id, q.points);
    if (!q.name.empty()) path += "&name=" + httplib::detail::encode_query_param(q.name);
    if (q.attempt > 0) path += fmt::format("&attempt={}", q.attempt);
    auto j = api_.Get(path);
    if (!j.ok()) return NotFoundSaysHow(j.status(), run_id);
    std::vector<report::MetricSeries> out;
    for (const auto& s : j->at("series")) {
      report::MetricSeries series;
      series.name = s.value("name", "");
      series.count = s.value("count", int64_t{0});
      for (const auto& p : s.at("points")) {
        DROVER_ASSIGN_OR_RETURN(MetricPoint point, protocol::MetricPointFromJson(p));
        point.run_id = run_id;
        series.points.push_back(std::move(point));
      }
      out.push_back(std::move(series));
    }
    return out;
  }

 private:
  // The daemon says "no run 7"; the CLI says how to find runs. Other errors pass unchanged
  // (an unknown attempt says which attempts there are).
  static Status NotFoundSaysHow(const Status& st, int64_t run_id) {
    if (st.code() == Code::kNotFound && st.message().find("attempt") == std::string::npos) {
      return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", run_id));
    }
    return st;
  }

  ApiClient api_;
};

}  // namespace

std::unique_ptr<Catalog> CatalogOf(Store& store) {
  return std::unique_ptr<Catalog>(new StoreCatalog(store));
}

std::unique_ptr<Catalog> CatalogOf(const DaemonInfo& daemon) {
  return std::unique_ptr<Catalog>(new ApiCatalog(daemon));
}

Result<std::unique_ptr<Catalog>> OpenCatalog(const Globals& g) {
  if (auto daemon = FindDaemon(g)) return std::unique_ptr<Catalog>(new ApiCatalog(*daemon));
  DROVER_ASSIGN_OR_RETURN(auto store, OpenStore(g, false));
  return std::unique_ptr<Catalog>(new StoreCatalog(std::move(store)));
}

}  // namespace drover::cli
