// /api/v1/store: the store as a whole. POST /store/gc collects its garbage (drover gc).
#include "protocol/json_codec.h"
#include "server/routes.h"

namespace drover::server {
namespace {

Status Gc(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!CurrentCaller().admin) {
    return PermissionDenied(DisplayName(CurrentCaller().user) +
                            " may not collect the store's garbage: only the daemon's admins may "
                            "(docs/lab-server.md)");
  }
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::GcRequest request, protocol::GcRequestFromJson(body));
  DROVER_ASSIGN_OR_RETURN(Cleanup done, ctx.engine.CollectGarbage(request));
  SendJson(res, 200, protocol::ToJson(done));
  return Status::Ok();
}

}  // namespace

void RegisterStoreRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Post(std::string(protocol::kApiPrefix) + "/store/gc", Route(ctx, Gc));
}

}  // namespace drover::server
