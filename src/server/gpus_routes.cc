// /api/v1/gpus: the engine's live view of its GPUs.
#include "server/routes.h"

namespace drover::server {
namespace {

Status Gpus(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  Json out = Json::array();
  for (const auto& g : ctx.engine.Gpus()) out.push_back(protocol::ToJson(g));
  SendJson(res, 200, {{"gpus", out}});
  return Status::Ok();
}

// Stored telemetry: one averaged row per GPU per period (watch config telemetry.store_every).
Status GpuSamples(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(auto gpu, QueryInt(req, "gpu", 0, 1024));
  DROVER_ASSIGN_OR_RETURN(auto since, QueryInt(req, "since_ms", 0, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, 100000));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto rows, store->ListGpuSamples(gpu ? static_cast<int>(*gpu) : -1,
                                                           since.value_or(0),
                                                           static_cast<int>(limit.value_or(10000))));
  Json out = Json::array();
  for (const auto& s : rows) out.push_back(protocol::ToJson(s));
  SendJson(res, 200, {{"samples", out}});
  return Status::Ok();
}

}  // namespace

void RegisterGpusRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/gpus", Route(ctx, Gpus));
  http.Get(std::string(protocol::kApiPrefix) + "/gpus/samples", Route(ctx, GpuSamples));
}

}  // namespace drover::server
