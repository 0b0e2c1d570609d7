// /api/v1/experiments: list, one (with its runs), submit, cancel, retry, delete.
#include <algorithm>
#include <map>
#include "protocol/json_codec.h"
#include "server/routes.h"

namespace drover::server {
namespace {

Status ListExperiments(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, 1000));
  DROVER_ASSIGN_OR_RETURN(auto offset, QueryInt(req, "offset", 0, 1'000'000'000));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto list, store->ListExperiments(static_cast<int>(limit.value_or(50)),
                                                            offset.value_or(0)));
  // Each row with its runs counted by state: one query for the page, whatever the runs number.
  std::vector<int64_t> ids;
  for (const auto& e : list) ids.push_back(e.id);
  DROVER_ASSIGN_OR_RETURN(auto counts, store->CountRunsOf(ids));
  Json out = Json::array();
  for (auto& e : list) {
    const int64_t id = e.id;
    protocol::ExperimentListing row{RedactedFor(CurrentCaller(), std::move(e)), counts[id]};
    out.push_back(protocol::ToJson(row));
  }
  SendJson(res, 200, {{"experiments", out}});
  return Status::Ok();
}

Status Get(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment found, LoadExperiment(ctx, req.matches[1].str()));
  const Experiment e = RedactedFor(CurrentCaller(), std::move(found));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  // Counts, not the runs themselves: a sweep can hold thousands; /runs?experiment= pages them.
  DROVER_ASSIGN_OR_RETURN(RunCounts counts, store->CountRuns(e.id));
  Json j = protocol::ToJson(protocol::ExperimentListing{e, counts});
  j["spec_yaml"] = e.spec_yaml;
  j["git_diff"] = e.git_diff;
  j["runs_url"] = std::string(protocol::kApiPrefix) + "/runs?experiment=" + std::to_string(e.id);
  SendJson(res, 200, j);
  return Status::Ok();
}

Status Submit(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitRequest request, protocol::SubmitRequestFromJson(body));
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitResponse reply, ctx.engine.Submit(request, CurrentCaller()));
  res.set_header("Location", std::string(protocol::kApiPrefix) + "/experiments/" +
                                 std::to_string(reply.experiment_id));
  SendJson(res, 201, protocol::ToJson(reply));
  return Status::Ok();
}

// Every attempt of a page of the experiment's runs (`offset`, `limit` runs, at most 1000, in
// run order; `next_offset` null on the last page): what `drover report` (and the report `drover
// run` writes at its end) needs, which through a daemon was one request per run (1,000 requests
// after a 1,000-run sweep). Ordered by run, then attempt number; another user's attempts
// redacted as GET /runs/{id}/attempts redacts them.
constexpr int kMaxAttemptRunsPerPage = 1000;

Status Attempts(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, kMaxAttemptRunsPerPage));
  DROVER_ASSIGN_OR_RETURN(auto offset, QueryInt(req, "offset", 0, 1'000'000'000));
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  const int lim = static_cast<int>(limit.value_or(kMaxAttemptRunsPerPage));
  RunFilter filter;
  filter.experiment_id = e.id;
  filter.offset = static_cast<int>(offset.value_or(0));
  filter.limit = lim + 1;  // one more than asked says whether there is a next page
  DROVER_ASSIGN_OR_RETURN(auto runs, store->ListRuns(filter));
  const bool more = static_cast<int>(runs.size()) > lim;
  if (more) runs.pop_back();
  std::map<int64_t, std::vector<Attempt>> by_run;
  if (!runs.empty()) {
    int64_t lo = runs.front().id, hi = runs.front().id;
    for (const Run& r : runs) {
      lo = std::min(lo, r.id);
      hi = std::max(hi, r.id);
    }
    DROVER_ASSIGN_OR_RETURN(by_run, store->ListExperimentAttempts(e.id, lo, hi));
  }
  const Caller& caller = CurrentCaller();
  Json out = Json::array();
  for (const Run& run : runs) {
    auto it = by_run.find(run.id);
    if (it == by_run.end()) continue;
    const bool owns = MayActOn(caller, run, "read").ok();
    for (Attempt& a : it->second) {
      if (!owns) RedactAttempt(a);
      out.push_back(protocol::ToJson(a));
    }
  }
  SendJson(res, 200,
           {{"experiment_id", e.id},
            {"attempts", out},
            {"offset", filter.offset},
            {"limit", lim},
            {"next_offset", more ? Json(filter.offset + lim) : Json(nullptr)}});
  return Status::Ok();
}

// drover run --dry-run with a daemon: the spec checked as a submit checks it; nothing recorded.
Status Check(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitRequest request, protocol::SubmitRequestFromJson(body));
  DROVER_RETURN_IF_ERROR(ctx.engine.CheckSubmit(request, CurrentCaller()));
  SendJson(res, 200, {{"fits", true}});
  return Status::Ok();
}

Status Cancel(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), e, "cancel"));
  DROVER_RETURN_IF_ERROR(ctx.engine.CancelExperiment(e.id));
  SendJson(res, 200, {{"experiment_id", e.id}, {"cancelled", true}});
  return Status::Ok();
}

// Finished runs back to the queue as new attempts of the same runs (drover retry).
Status Retry(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), e, "retry"));
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::RetryRequest which, protocol::RetryRequestFromJson(body));
  protocol::RetryResponse reply;
  reply.experiment_id = e.id;
  DROVER_ASSIGN_OR_RETURN(reply.run_ids, ctx.engine.Retry(e.id, which));
  reply.snapshot = e.snapshot_hash;
  if (which.code == protocol::RetryCode::kCurrent && !reply.run_ids.empty()) {
    // The snapshot this retry took, as the runs record it.
    DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
    DROVER_ASSIGN_OR_RETURN(std::optional<Run> first, store->GetRun(reply.run_ids.front()));
    if (first && !first->snapshot_hash.empty()) reply.snapshot = first->snapshot_hash;
  }
  reply.code = protocol::RetryCodeNote(
      e, which.code == protocol::RetryCode::kCurrent ? reply.snapshot : std::string());
  SendJson(res, 200, protocol::ToJson(reply));
  return Status::Ok();
}

// drover rm: the experiment and everything recorded about it (?dry_run=true: what would go).
Status Remove(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Experiment e, LoadExperiment(ctx, req.matches[1].str()));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), e, "remove"));
  DROVER_ASSIGN_OR_RETURN(bool dry_run, QueryBool(req, "dry_run"));
  DROVER_ASSIGN_OR_RETURN(Cleanup done, ctx.engine.RemoveExperiments({e.id}, dry_run));
  SendJson(res, 200, protocol::ToJson(done));
  return Status::Ok();
}

}  // namespace

void RegisterExperimentsRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::string base = std::string(protocol::kApiPrefix) + "/experiments";
  http.Get(base, Route(ctx, ListExperiments));
  http.Post(base, Route(ctx, Submit));
  http.Post(base + "/check", Route(ctx, Check));
  http.Get(base + "/([^/]+)", Route(ctx, Get));
  http.Get(base + "/([^/]+)/attempts", Route(ctx, Attempts));
  http.Post(base + "/([^/]+)/cancel", Route(ctx, Cancel));
  http.Post(base + "/([^/]+)/retry", Route(ctx, Retry));
  http.Delete(base + "/([^/]+)", Route(ctx, Remove));
}

}  // namespace drover::server
