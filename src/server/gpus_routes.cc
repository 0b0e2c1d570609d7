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

}  // namespace

void RegisterGpusRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/gpus", Route(ctx, Gpus));
}

}  // namespace drover::server
