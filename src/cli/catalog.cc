#include "cli/catalog.h"

#include <fmt/format.h>
#include <httplib.h>

#include "cli/client.h"
#include "cli/follow.h"

namespace drover::cli {
namespace {

class StoreCatalog : public Catalog {
 public:
  explicit StoreCatalog(std::unique_ptr<Store> store) : store_(std::move(store)) {}
  Result<std::vector<Experiment>> ListExperiments(int limit) override {
    return store_->ListExperiments(limit);
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
    return d;
  }
  Result<std::vector<Alert>> ListAlerts(const AlertFilter& filter) override {
    return store_->ListAlerts(filter);
  }

 private:
  std::unique_ptr<Store> store_;
};

class ApiCatalog : public Catalog {
 public:
  explicit ApiCatalog(DaemonInfo info) : api_(std::move(info)) {}
  Result<std::vector<Experiment>> ListExperiments(int limit) override {
    DROVER_ASSIGN_OR_RETURN(Json j, api_.Get(fmt::format("/experiments?limit={}", limit)));
    std::vector<Experiment> out;
    for (const auto& e : j.at("experiments")) {
      DROVER_ASSIGN_OR_RETURN(Experiment exp, protocol::ExperimentFromJson(e));
      out.push_back(std::move(exp));
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

 private:
  ApiClient api_;
};

}  // namespace

Result<std::unique_ptr<Catalog>> OpenCatalog(const Globals& g) {
  if (auto daemon = FindDaemon(g)) return std::unique_ptr<Catalog>(new ApiCatalog(*daemon));
  DROVER_ASSIGN_OR_RETURN(auto store, OpenStore(g, false));
  return std::unique_ptr<Catalog>(new StoreCatalog(std::move(store)));
}

}  // namespace drover::cli
