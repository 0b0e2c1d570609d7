// /api/v1/experiments/{id_or_name}/table: the web UI's runs table, sorted, filtered and paged
// on the server (run_table.h; docs/web.md); /summaries: each run's curve of one metric summed up,
// from which a client ranks the runs as the table does (report/comparison.h).
#include "common/clock.h"
#include "protocol/api.h"
#include "report/comparison.h"
#include "server/routes.h"
#include "server/run_table.h"

namespace drover::server {
namespace {

// The runs ranked as every view ranks them: the rule, then its metric's curves from the store.
Result<report::Comparison> RankRuns(Store& store, const Experiment& e, const std::vector<Run>& runs,
                                    const report::RankOptions& options) {
  DROVER_ASSIGN_OR_RETURN(report::RankRule rule,
                          report::RuleFor(e, report::ReportedMetrics(runs), options));
  report::CurveSummaries curves;
  if (!rule.metric.empty()) {
    DROVER_ASSIGN_OR_RETURN(curves, store.MetricSummaries(e.id, rule.metric, rule.last_k));
  }
  return report::Rank(runs, rule, curves);
}

Status Summaries(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string metric = req.has_param("metric") ? req.get_param_value("metric") : "";
  if (metric.empty() || metric.size() > 1024) {
    return InvalidArgument("query parameter 'metric' must name a metric (1 to 1024 characters)");
  }
  DROVER_ASSIGN_OR_RETURN(auto last, QueryInt(req, "last", 1, kMaxLastK));
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto curves, store->MetricSummaries(e.id, metric, last.value_or(1)));
  SendJson(res, 200, protocol::CurveSummariesJson(curves));
  return Status::Ok();
}

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
  if (req.has_param("stage")) q.stage = req.get_param_value("stage");
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
  report::RankOptions rank;
  if (req.has_param("metric")) rank.metric = req.get_param_value("metric");
  if (req.has_param("mode")) rank.mode = req.get_param_value("mode");
  if (req.has_param("summary")) rank.summary = req.get_param_value("summary");
  DROVER_ASSIGN_OR_RETURN(report::Comparison ranking, RankRuns(*store, e, runs, rank));
  DROVER_ASSIGN_OR_RETURN(Json table, RunTable(e, runs, ranking, q, ctx.clock.Now()));
  SendJson(res, 200, table);
  return Status::Ok();
}

}  // namespace

void RegisterTableRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/experiments/([^/]+)/table", Route(ctx, Table));
  http.Get(std::string(protocol::kApiPrefix) + "/experiments/([^/]+)/summaries",
           Route(ctx, Summaries));
}

}  // namespace drover::server
