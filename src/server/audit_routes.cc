// GET /api/v1/audit: the audit log's newest entries (admins only; docs/lab-server.md, "Audit").
#include "server/routes.h"

namespace drover::server {
namespace {

Status Audit(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!CurrentCaller().admin) {
    return PermissionDenied(DisplayName(CurrentCaller().user) +
                            " may not read the audit log: only the daemon's admins may "
                            "(lab.admin_group; docs/lab-server.md)");
  }
  AuditQuery q;
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, 100'000));
  DROVER_ASSIGN_OR_RETURN(auto since, QueryInt(req, "since_ms", 0, INT64_MAX));
  q.limit = static_cast<size_t>(limit.value_or(200));
  q.since_ms = since.value_or(0);
  if (req.has_param("user")) q.user = req.get_param_value("user");
  DROVER_ASSIGN_OR_RETURN(std::vector<Json> entries, ctx.audit.Read(q));
  SendJson(res, 200, {{"entries", entries}, {"path", ctx.audit.path()}});
  return Status::Ok();
}

}  // namespace

void RegisterAuditRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/audit", Route(ctx, Audit));
}

}  // namespace drover::server
