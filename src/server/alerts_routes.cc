// /api/v1/alerts: what the watchers raised, newest first, with filters.
#include <map>
#include <utility>
#include <optional>

#include "protocol/json_codec.h"
#include "server/routes.h"

namespace drover::server {
namespace {

Status ListAlerts(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  AlertFilter filter;
  DROVER_ASSIGN_OR_RETURN(auto run, QueryInt(req, "run", 1, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto experiment, QueryInt(req, "experiment", 1, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto after, QueryInt(req, "after", 0, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, 10000));
  filter.run_id = run.value_or(0);
  filter.experiment_id = experiment.value_or(0);
  filter.after_id = after.value_or(0);
  filter.limit = static_cast<int>(limit.value_or(100));
  filter.kind = req.get_param_value("kind");
  // ?after= is for catching up: oldest first, so the last one is where to resume.
  filter.newest_first = !after.has_value();
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto alerts, store->ListAlerts(filter));
  // Another user's run's alerts are shown as the event stream shows them (RedactedEvent): a run
  // can raise an alert with words of its own (its stderr, its paths).
  const Caller& caller = CurrentCaller();
  std::map<std::pair<int64_t, int64_t>, bool> whole;  // (run, experiment) -> may read it whole
  Json out = Json::array();
  for (const auto& a : alerts) {
    Json j = protocol::ToJson(a);
    if (!caller.admin && (a.run_id > 0 || a.experiment_id > 0)) {
      const auto key = std::make_pair(a.run_id, a.experiment_id);
      auto known = whole.find(key);
      if (known == whole.end()) {
        bool may = false;
        if (a.run_id > 0) {
          Result<std::optional<Run>> r = store->GetRun(a.run_id);
          may = r.ok() && *r && MayActOn(caller, **r, "read").ok();
        } else {
          Result<std::optional<Experiment>> e = store->GetExperiment(a.experiment_id);
          may = e.ok() && *e && MayActOn(caller, **e, "read").ok();
        }
        known = whole.emplace(key, may).first;
      }
      if (!known->second) j = RedactedEvent("alert", j);
    }
    out.push_back(std::move(j));
  }
  SendJson(res, 200, {{"alerts", out}});
  return Status::Ok();
}

}  // namespace

void RegisterAlertsRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/alerts", Route(ctx, ListAlerts));
}

}  // namespace drover::server
