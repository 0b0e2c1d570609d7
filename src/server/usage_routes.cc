// GET /api/v1/usage: GPU time by user and team over a window (docs/lab-server.md, "Usage").
#include "server/routes.h"

#include "common/clock.h"

namespace drover::server {
namespace {

Status Usage(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Millis now = ctx.clock.Now();
  DROVER_ASSIGN_OR_RETURN(auto since, QueryInt(req, "since_ms", 0, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto until, QueryInt(req, "until_ms", 0, INT64_MAX));
  const Millis from = since.value_or(now - 7LL * 24 * 3600 * 1000);
  const Millis to = until.value_or(now);
  if (to < from) return InvalidArgument("until_ms must not be before since_ms");
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store->Usage(from, to));
  Json out = Json::array();
  for (const UsageRow& r : rows) {
    out.push_back({{"user", r.user},
                   {"group", r.group},
                   {"gpu_hours", r.gpu_ms / 3'600'000.0},
                   {"runs", r.runs}});
  }
  SendJson(res, 200, {{"since_ms", from}, {"until_ms", to}, {"usage", out}});
  return Status::Ok();
}

}  // namespace

void RegisterUsageRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/usage", Route(ctx, Usage));
}

}  // namespace drover::server
