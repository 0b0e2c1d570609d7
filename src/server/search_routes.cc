// Ask/tell on a search (docs/search.md, "Ask/tell"): POST /api/v1/experiments/{id}/suggest
// (the next configs), /tell (a result for a config run outside drover) and /trials (a config of
// the caller's choosing, run as the search's next trial). Each is carried out by the engine's
// loop, which holds the search.
#include "server/routes.h"

namespace drover::server {
namespace {

Status Suggest(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), e, "drive the search of"));
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::SuggestRequest ask, protocol::SuggestRequestFromJson(body));
  DROVER_ASSIGN_OR_RETURN(std::vector<Json> configs, ctx.engine.Suggest(e.id, ask.count));
  SendJson(res, 200, {{"experiment_id", e.id}, {"configs", configs}});
  return Status::Ok();
}

Status Tell(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), e, "drive the search of"));
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::TellRequest tell, protocol::TellRequestFromJson(body));
  DROVER_RETURN_IF_ERROR(ctx.engine.Tell(e.id, tell));
  SendJson(res, 200, {{"experiment_id", e.id}, {"told", true}});
  return Status::Ok();
}

Status AddTrial(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), e, "drive the search of"));
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::AddTrialRequest add, protocol::AddTrialRequestFromJson(body));
  DROVER_ASSIGN_OR_RETURN(int64_t run_id, ctx.engine.AddTrial(e.id, add.params));
  SendJson(res, 200, {{"experiment_id", e.id}, {"run_id", run_id}});
  return Status::Ok();
}

}  // namespace

void RegisterSearchRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::string base = std::string(protocol::kApiPrefix) + "/experiments";
  http.Post(base + "/([^/]+)/suggest", Route(ctx, Suggest));
  http.Post(base + "/([^/]+)/tell", Route(ctx, Tell));
  http.Post(base + "/([^/]+)/trials", Route(ctx, AddTrial));
}

}  // namespace drover::server
