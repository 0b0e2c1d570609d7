// /api/v1/runs: list with filters and paging, one run in full, its attempts, cancel, priority.
#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <memory>

#include "protocol/json_codec.h"
#include "spec/reproduce.h"
#include "server/routes.h"

namespace drover::server {
namespace {

constexpr int kDefaultRunLimit = 100;
constexpr int kMaxRunLimit = 1000;

Status List(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, kMaxRunLimit));
  DROVER_ASSIGN_OR_RETURN(auto offset, QueryInt(req, "offset", 0, 1'000'000'000));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  RunFilter filter;
  if (req.has_param("experiment")) {
    std::string which = req.get_param_value("experiment");
    auto e = store->FindExperiment(which);
    if (!e.ok()) return e.status();
    if (!e->has_value()) return NotFound("no experiment '" + which + "' (by id or name)");
    filter.experiment_id = (*e)->id;
  }
  if (req.has_param("state")) {
    std::string s = req.get_param_value("state");
    auto state = ParseRunState(s);
    if (!state) {
      return InvalidArgument(
          "query parameter 'state' must be one of queued, running, retrying, "
          "succeeded, failed, cancelled; got '" +
          s + "'");
    }
    filter.state = state;
  }
  if (req.has_param("user")) {
    filter.user = req.get_param_value("user");
    if (filter.user.empty() || filter.user.size() > 256) {
      return InvalidArgument("query parameter 'user' must be a user name (1-256 bytes)");
    }
  }
  if (req.has_param("order")) {
    std::string o = req.get_param_value("order");
    if (o != "asc" && o != "desc") {
      return InvalidArgument("query parameter 'order' must be asc or desc, got '" + o + "'");
    }
    filter.newest_first = o == "desc";
  }
  int lim = static_cast<int>(limit.value_or(kDefaultRunLimit));
  filter.offset = static_cast<int>(offset.value_or(0));
  filter.limit = lim + 1;  // one more than asked says whether there is a next page
  DROVER_ASSIGN_OR_RETURN(auto runs, store->ListRuns(filter));
  bool more = static_cast<int>(runs.size()) > lim;
  if (more) runs.pop_back();
  Json out = Json::array();
  const auto waiting = ctx.engine.WaitingReasons();
  for (const auto& r : runs) {
    out.push_back(protocol::ToJson(r));
    if (auto w = waiting.find(r.id); w != waiting.end() && !IsFinal(r.state)) {
      out.back()["waiting"] = {{"code", w->second.code}, {"reason", w->second.reason}};
    }
  }
  SendJson(res, 200,
           {{"runs", out},
            {"offset", filter.offset},
            {"limit", lim},
            {"next_offset", more ? Json(filter.offset + lim) : Json(nullptr)}});
  return Status::Ok();
}

// The same JSON as `drover show RUN --json` (src/cli/show_cmd.cc).
Status Get(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(run.id));
  DROVER_ASSIGN_OR_RETURN(auto exp, store->GetExperiment(run.experiment_id));
  if (!exp.has_value()) return Internal("run " + std::to_string(run.id) + " has no experiment");
  const Experiment& e = *exp;
  DROVER_ASSIGN_OR_RETURN(auto snap, store->GetSnapshot(e.snapshot_hash));
  DROVER_ASSIGN_OR_RETURN(auto envs, store->ListEnvironments(e.id));
  DROVER_ASSIGN_OR_RETURN(auto rungs, store->ListRungs(e.id, run.id));

  protocol::RunDetail d;
  d.run = run;
  d.attempts = std::move(attempts);
  d.experiment = e;
  d.snapshot = snap;
  // Another user's run on a shared daemon: its record, not what its output and code hold (the
  // last lines of a failure's stderr, the uncommitted diff).
  if (!MayActOn(CurrentCaller(), run.user, "read").ok()) {
    for (Attempt& a : d.attempts) RedactAttempt(a);
    d.experiment = RedactedFor(CurrentCaller(), std::move(d.experiment));
    if (d.snapshot) d.snapshot->git_diff = d.experiment.git_diff;
  }
  d.environments = std::move(envs);
  d.rungs = std::move(rungs);
  if (!IsFinal(run.state)) d.waiting = ctx.engine.WaitingReason(run.id);
  Json j = protocol::ToJson(d);
  SendJson(res, 200, j);
  return Status::Ok();
}

Status Attempts(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(run.id));
  const bool owns = MayActOn(CurrentCaller(), run.user, "read").ok();
  Json out = Json::array();
  for (auto& a : attempts) {
    if (!owns) RedactAttempt(a);
    out.push_back(protocol::ToJson(a));
  }
  SendJson(res, 200, {{"run_id", run.id}, {"attempts", out}});
  return Status::Ok();
}

Status Cancel(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run.user, "cancel"));
  DROVER_RETURN_IF_ERROR(ctx.engine.CancelRun(run.id));
  SendJson(res, 200, {{"run_id", run.id}, {"cancelled", true}});
  return Status::Ok();
}

// POST /runs/{id}/reproduce: the run again from what was recorded (spec/reproduce.h), as a new
// experiment; answers with it and its run of the same stage (drover reproduce follows and
// compares).
Status Reproduce(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run.user, "reproduce"));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> exp, store->GetExperiment(run.experiment_id));
  if (!exp) return NotFound(fmt::format("run {}'s experiment is gone", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Snapshot> snap, store->GetSnapshot(exp->snapshot_hash));
  if (!snap) {
    return NotFound(fmt::format("snapshot {} of run {} is not in the store (drover gc removes "
                                "unused ones)",
                                exp->snapshot_hash.substr(0, 16), id));
  }
  DROVER_ASSIGN_OR_RETURN(Spec spec, ReproduceSpec(run, *exp, *snap));
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitResponse sub, ctx.engine.SubmitSpec(spec, CurrentCaller()));
  protocol::ReproduceResponse r;
  r.experiment_id = sub.experiment_id;
  r.run_ids = sub.run_ids;
  if (spec.stages.empty() && !sub.run_ids.empty()) r.run_id = sub.run_ids.front();
  for (int64_t rid : spec.stages.empty() ? std::vector<int64_t>{} : sub.run_ids) {
    DROVER_ASSIGN_OR_RETURN(std::optional<Run> made, store->GetRun(rid));
    if (made && made->stage == run.stage) {
      r.run_id = rid;
      break;
    }
  }
  SendJson(res, 200, protocol::ToJson(r));
  return Status::Ok();
}

Status Priority(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::PriorityRequest p, protocol::PriorityRequestFromJson(body));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run.user, "reprioritise"));
  DROVER_RETURN_IF_ERROR(ctx.engine.SetPriority(run.id, p.priority));
  SendJson(res, 200, {{"run_id", run.id}, {"priority", p.priority}});
  return Status::Ok();
}

}  // namespace

// The store's folder (drover.db's).
std::string StoreDir(const ServerContext& ctx) {
  const std::string& db = ctx.options.store_path;
  const size_t slash = db.rfind('/');
  return slash == std::string::npos ? "." : db.substr(0, slash);
}

// GET /runs/{id}/artifacts: its stored outputs (a cached run: its source's).
Status Artifacts(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run.user, "read the outputs of"));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(RunArtifacts a, store->RunOutputs(id, StoreDir(ctx)));
  SendJson(res, 200, protocol::ToJson(a));
  return Status::Ok();
}

// Content-Disposition for a file a run named: any name (quotes, newlines, bytes that are not
// ASCII) becomes a safe header, the plain name with such bytes as '_' and the exact one in
// RFC 5987's filename*.
std::string AttachmentHeader(const std::string& name) {
  std::string plain, encoded;
  for (unsigned char c : name) {
    plain += c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? static_cast<char>(c) : '_';
    if (std::isalnum(c) || (c != 0 && std::strchr("!#$&+-.^_`|~", c) != nullptr)) {
      encoded += static_cast<char>(c);
    } else {
      encoded += fmt::format("%{:02X}", c);
    }
  }
  return "attachment; filename=\"" + plain + "\"; filename*=UTF-8''" + encoded;
}

// GET /runs/{id}/artifacts/file?path=P: one stored output's bytes (only a path the run stored).
Status ArtifactFile(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  if (!req.has_param("path")) {
    return InvalidArgument("give the file as ?path=..., one of GET /runs/{id}/artifacts' paths");
  }
  const std::string path = req.get_param_value("path");
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run.user, "read the outputs of"));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(RunArtifacts a, store->RunOutputs(id, StoreDir(ctx)));
  for (const Artifact& f : a.files) {
    if (f.path != path || f.mode == 0120777) continue;
    const std::string file = a.dir + "/" + f.path;
    auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
    if (!*in) return NotFound("artifact '" + path + "' is no longer at " + file);
    const size_t slash = path.rfind('/');
    res.set_header("Content-Disposition",
                   AttachmentHeader(slash == std::string::npos ? path : path.substr(slash + 1)));
    res.set_content_provider(
        static_cast<size_t>(f.bytes), "application/octet-stream",
        [in](size_t offset, size_t length, httplib::DataSink& sink) {
          char buf[1 << 16];
          in->seekg(static_cast<std::streamoff>(offset));
          const size_t n = std::min(length, sizeof buf);
          in->read(buf, static_cast<std::streamsize>(n));
          const std::streamsize got = in->gcount();
          if (got <= 0) return false;
          sink.write(buf, static_cast<size_t>(got));
          return true;
        });
    return Status::Ok();
  }
  return NotFound(fmt::format("run {} stored no file '{}'; GET /api/v1/runs/{}/artifacts lists "
                              "them",
                              id, path, id));
}

// GET /runs/waiting: why each waiting run waits, as the scheduler last said (drover why, ls).
Status Waiting(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  Json out = Json::array();
  for (const auto& [id, w] : ctx.engine.WaitingReasons()) {
    out.push_back({{"run_id", id}, {"code", w.code}, {"reason", w.reason}});
  }
  SendJson(res, 200, {{"waiting", out}});
  return Status::Ok();
}

void RegisterRunsRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::string base = std::string(protocol::kApiPrefix) + "/runs";
  http.Get(base, Route(ctx, List));
  http.Get(base + "/waiting", Route(ctx, Waiting));
  http.Get(base + "/([^/]+)", Route(ctx, Get));
  http.Get(base + "/([^/]+)/attempts", Route(ctx, Attempts));
  http.Get(base + "/([^/]+)/artifacts", Route(ctx, Artifacts));
  http.Get(base + "/([^/]+)/artifacts/file", Route(ctx, ArtifactFile));
  http.Post(base + "/([^/]+)/cancel", Route(ctx, Cancel));
  http.Post(base + "/([^/]+)/priority", Route(ctx, Priority));
  http.Post(base + "/([^/]+)/reproduce", Route(ctx, Reproduce));
}

}  // namespace drover::server
