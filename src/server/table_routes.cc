// /api/v1/experiments/{id_or_name}/table: the web UI's runs table, sorted, filtered and paged
// on the server (run_table.h; docs/web.md).
#include "common/clock.h"
#include "server/routes.h"
#include "server/run_table.h"

namespace drover::server {
namespace {

Status Table(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  TableQuery q;
  DROVER_ASSIGN_OR_RETURN(auto offset, QueryInt(req, "offset", 0, INT32_MAX));
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, 1000));
  DROVER_ASSIGN_OR_RETURN(q.scatter, QueryBool(req, "scatter"));
  q.offset = offset.value_or(0);
  q.limit = limit.value_or(50);
  if (req.has_param("sort")) q.sort = req.get_param_value("sort");
  if (req.has_param("order")) {
    std::string order = req.get_param_value("order");
    if (order != "asc" && order != "desc") {
      return InvalidArgument("query parameter 'order' must be asc or desc, got '" + order + "'");
    }
    q.desc = order == "desc";
  }
  if (req.has_param("q")) q.q = req.get_param_value("q");
  if (req.has_param("state") && !req.get_param_value("state").empty()) {
    std::string state = req.get_param_value("state");
    q.state = ParseRunState(state);
    if (!q.state) {
      return InvalidArgument("query parameter 'state' must be queued, running, retrying, "
                             "succeeded, failed or cancelled, got '" + state + "'");
    }
  }
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  RunFilter filter;
  filter.experiment_id = e.id;
  DROVER_ASSIGN_OR_RETURN(std::vector<Run> runs, store->ListRuns(filter));
  std::optional<TableObjective> objective = ObjectiveOf(e, runs);
  std::map<int64_t, std::pair<double, double>> ranges;
  if (objective) {
    DROVER_ASSIGN_OR_RETURN(ranges, store->MetricRanges(e.id, objective->metric));
  }
  DROVER_ASSIGN_OR_RETURN(Json table, RunTable(e, runs, objective, ranges, q, RealClock().Now()));
  SendJson(res, 200, table);
  return Status::Ok();
}

}  // namespace

void RegisterTableRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/experiments/([^/]+)/table", Route(ctx, Table));
}

}  // namespace drover::server
