// /api/v1/runs/{id}/metrics: a run's metric series, filtered and downsampled on the server so a
// chart of a long run stays small.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "protocol/json_codec.h"
#include "server/routes.h"

namespace drover::server {

std::vector<MetricPoint> Downsample(const std::vector<MetricPoint>& series, size_t max_points) {
  if (max_points < 2 || series.size() <= max_points) return series;
  std::vector<MetricPoint> out;
  out.reserve(max_points);
  out.push_back(series.front());
  // Interior points [1, n-1) cut into equal buckets; each gives its min and max, in order.
  // NaN is neither min nor max of a bucket that has numbers (a NaN-only bucket keeps one NaN).
  size_t interior = series.size() - 2;
  size_t buckets = (max_points - 2) / 2;
  for (size_t b = 0; b < buckets; ++b) {
    size_t lo = 1 + b * interior / buckets;
    size_t hi = 1 + (b + 1) * interior / buckets;  // exclusive
    if (lo >= hi) continue;
    size_t imin = lo, imax = lo;
    for (size_t i = lo; i < hi; ++i) {
      double v = series[i].value;
      if (std::isnan(v)) continue;
      if (std::isnan(series[imin].value) || v < series[imin].value) imin = i;
      if (std::isnan(series[imax].value) || v > series[imax].value) imax = i;
    }
    size_t first = std::min(imin, imax), second = std::max(imin, imax);
    out.push_back(series[first]);
    if (second != first) out.push_back(series[second]);
  }
  out.push_back(series.back());
  return out;
}

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
  int64_t attempt_id = 0;
  if (attempt) {
    DROVER_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(run.id));
    for (const auto& a : attempts) {
      if (a.number == *attempt) attempt_id = a.id;
    }
    if (attempt_id == 0) {
      return NotFound("run " + std::to_string(run.id) + " has no attempt " +
                      std::to_string(*attempt) + " (it has " + std::to_string(attempts.size()) +
                      ")");
    }
  }
  DROVER_ASSIGN_OR_RETURN(auto all, store->GetMetrics(run.id, name));
  // Ordered by attempt, then step: grouping keeps that order within each series.
  std::map<std::string, std::vector<MetricPoint>> by_name;
  for (auto& p : all) {
    if (attempt_id != 0 && p.attempt_id != attempt_id) continue;
    if (since_step && p.step <= *since_step) continue;
    by_name[p.name].push_back(std::move(p));
  }
  Json series = Json::array();
  for (auto& [metric, pts] : by_name) {
    size_t total = pts.size();
    std::vector<MetricPoint> shown = points && *points > 0 ? Downsample(pts, *points) : pts;
    Json list = Json::array();
    for (const auto& p : shown) list.push_back(protocol::ToJson(p));
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
