// /api/v1/runs/{id}/metrics: a run's metric series, filtered and downsampled on the server so a
// chart of a long run stays small.
#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdint>
#include <map>

#include "protocol/json_codec.h"
#include "report/series.h"
#include "server/routes.h"

namespace drover::server {

namespace {

Status Metrics(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(auto since_step, QueryInt(req, "since_step", INT64_MIN, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto points, QueryInt(req, "points", 0, 1'000'000));
  DROVER_ASSIGN_OR_RETURN(auto attempt, QueryInt(req, "attempt", 1, 1'000'000));
  if (points && *points == 1) {
    return InvalidArgument("query parameter 'points' must be 0 (all) or at least 2, got '1'");
  }
  std::string name = req.has_param("name") ? req.get_param_value("name") : "";
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  // A run cached from another (docs/pipelines.md) shows that run's curves.
  const int64_t source = run.cached_from != 0 ? run.cached_from : run.id;
  int64_t attempt_id = 0;
  if (attempt) {
    DROVER_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(source));
    for (const auto& a : attempts) {
      if (a.number == *attempt) attempt_id = a.id;
    }
    if (attempt_id == 0) {
      return NotFound("run " + std::to_string(run.id) + " has no attempt " +
                      std::to_string(*attempt) + " (it has " + std::to_string(attempts.size()) +
                      ")");
    }
  }
  std::vector<std::string> names;
  if (name.empty()) {
    DROVER_ASSIGN_OR_RETURN(names, store->MetricNames(source));
  } else {
    names.push_back(name);
  }
  // One series at a time, streamed through the downsampler: a 1,000,000-point curve never sits
  // in memory whole.
  Json series = Json::array();
  for (const std::string& metric : names) {
    Store::SeriesQuery q{source, metric, attempt_id, since_step};
    DROVER_ASSIGN_OR_RETURN(int64_t total, store->CountMetrics(q));
    if (total == 0) continue;
    size_t max_points = points && *points > 0 ? static_cast<size_t>(*points) : 0;
    report::MinMaxDownsampler d(static_cast<size_t>(total), max_points);
    DROVER_RETURN_IF_ERROR(store->ScanMetrics(q, [&](const MetricPoint& p) { d.Add(p); }));
    Json list = Json::array();
    for (MetricPoint& p : d.Finish()) {
      p.name = metric;
      list.push_back(protocol::ToJson(p));
    }
    series.push_back({{"name", metric}, {"count", total}, {"points", std::move(list)}});
  }
  SendJson(res, 200, {{"run_id", run.id}, {"series", std::move(series)}});
  return Status::Ok();
}

}  // namespace

void RegisterMetricsRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/runs/([^/]+)/metrics", Route(ctx, Metrics));
}

}  // namespace drover::server
