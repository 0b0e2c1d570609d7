// /api/v1/runs: list with filters and paging, one run in full, its attempts, cancel, priority.
#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <memory>

#include "common/hash.h"
#include "protocol/json_codec.h"
#include "server/connection_gate.h"
#include "spec/reproduce.h"
#include "server/routes.h"

namespace drover::server {

// Below: a Content-Disposition header for a file name a run chose.
std::string AttachmentHeader(const std::string& name);

namespace {

// The store's folder (drover.db's).
std::string StoreDir(const ServerContext& ctx) {
  const std::string& db = ctx.options.store_path;
  const size_t slash = db.rfind('/');
  return slash == std::string::npos ? "." : db.substr(0, slash);
}

constexpr int kDefaultRunLimit = 100;
constexpr int kMaxRunLimit = 1000;

Status ListRuns(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
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
  if (!MayActOn(CurrentCaller(), run, "read").ok()) {
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
  const bool owns = MayActOn(CurrentCaller(), run, "read").ok();
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
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "cancel"));
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
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "reproduce"));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> exp, store->GetExperiment(run.experiment_id));
  if (!exp) return NotFound(fmt::format("run {}'s experiment is gone", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Snapshot> snap, store->GetSnapshot(exp->snapshot_hash));
  if (!snap) {
    return NotFound(fmt::format("snapshot {} of run {} is not in the store (drover gc removes "
                                "unused ones)",
                                exp->snapshot_hash.substr(0, 16), id));
  }
  // As the run's submitter, whoever asks (an admin checking a user's result included).
  DROVER_ASSIGN_OR_RETURN(Caller as, OnBehalfOf(CurrentCaller(), run.user, run.user_uid));
  // The recorded code, as recorded: its owner could have edited the snapshot since the run.
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> changed, ctx.engine.VerifyCode(*snap, as.user));
  if (!changed.empty()) {
    std::string which;
    for (size_t i = 0; i < changed.size() && i < 3; ++i) which += (i ? "; " : "") + changed[i];
    if (changed.size() > 3) which += fmt::format("; and {} more", changed.size() - 3);
    return FailedPrecondition(fmt::format(
        "run {}'s code snapshot changed since it was recorded ({}), so it would not run what ran "
        "then; it is not reproduced (`drover verify {}` lists every change)",
        id, which, id));
  }
  DROVER_ASSIGN_OR_RETURN(Spec spec, ReproduceSpec(run, *exp, *snap));
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitResponse sub, ctx.engine.SubmitSpec(spec, as));
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

// GET /runs/{id}/verify: what the run rests on, re-read (drover verify): its code snapshot, with
// its owner's rights, and the outputs it stored, each file named where it changed.
Status Verify(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "verify"));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> exp, store->GetExperiment(run.experiment_id));
  if (!exp) return NotFound(fmt::format("run {}'s experiment is gone", id));
  ConnectionGate::Unbounded();  // it re-reads every file
  Json out = {{"run", id}, {"snapshot", exp->snapshot_hash}};
  DROVER_ASSIGN_OR_RETURN(std::optional<Snapshot> snap, store->GetSnapshot(exp->snapshot_hash));
  std::vector<std::string> code;
  if (!snap) {
    code.push_back("snapshot " + exp->snapshot_hash + " is not recorded");
  } else {
    out["snapshot_files"] = snap->files;
    Result<Caller> owner = OnBehalfOf(CurrentCaller(), run.user, run.user_uid);
    Result<std::vector<std::string>> checked =
        owner.ok() ? ctx.engine.VerifyCode(*snap, owner->user)
                   : Result<std::vector<std::string>>(owner.status());
    if (!checked.ok()) code.push_back(checked.status().message());
    else code = *checked;
  }
  out["code"] = code;
  DROVER_ASSIGN_OR_RETURN(RunArtifacts a, store->RunOutputs(id, StoreDir(ctx)));
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> outputs, ctx.engine.VerifyOutputs(a));
  out["artifacts"] = {{"files", a.files.size()}, {"changed", outputs},
                      {"source_run", a.source_run}};
  out["intact"] = code.empty() && outputs.empty();
  SendJson(res, 200, out);
  return Status::Ok();
}

// GET /runs/{id}/export[?code=0]: the run's archive (drover export through the daemon: a shared
// daemon's store is its own). The daemon writes it (the code read with the submitter's rights),
// this route serves it through a descriptor checked to be the archive's own file, then removes it.
Status Export(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "export"));
  DROVER_ASSIGN_OR_RETURN(Caller owner, OnBehalfOf(CurrentCaller(), run.user, run.user_uid));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  ConnectionGate::Unbounded();  // an archive of a big model takes a while
  const bool code = req.get_param_value("code") != "0";
  DROVER_ASSIGN_OR_RETURN(std::string path, ctx.engine.ExportRun(*store, id, code, owner.user));
  struct Archive {
    int fd = -1;
    std::string dir;
    ~Archive() {
      if (fd >= 0) close(fd);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  auto archive = std::make_shared<Archive>();
  archive->dir = path.substr(0, path.rfind('/'));
  archive->fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st {};
  if (archive->fd < 0 || fstat(archive->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (owner.user.uid > 0 && static_cast<int64_t>(st.st_uid) != owner.user.uid &&
       st.st_uid != ::geteuid())) {
    return Status(Code::kInternal, fmt::format("the archive of run {} could not be read back", id));
  }
  res.set_header("Content-Disposition", AttachmentHeader(fmt::format("run-{}.tar.gz", id)));
  res.set_content_provider(
      static_cast<size_t>(st.st_size), "application/gzip",
      [archive](size_t offset, size_t length, httplib::DataSink& sink) {
        char buf[1 << 16];
        ssize_t got;
        do {
          got = pread(archive->fd, buf, std::min(length, sizeof buf), static_cast<off_t>(offset));
        } while (got < 0 && errno == EINTR);
        if (got <= 0) return false;
        sink.write(buf, static_cast<size_t>(got));
        return true;
      });
  return Status::Ok();
}

Status Priority(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  DROVER_ASSIGN_OR_RETURN(protocol::PriorityRequest p, protocol::PriorityRequestFromJson(body));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "reprioritise"));
  DROVER_RETURN_IF_ERROR(ctx.engine.SetPriority(run.id, p.priority));
  SendJson(res, 200, {{"run_id", run.id}, {"priority", p.priority}});
  return Status::Ok();
}

}  // namespace


// GET /runs/{id}/artifacts: its stored outputs (a cached run: its source's).
Status Artifacts(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "read the outputs of"));
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

// An open artifact object, closed when the last response chunk is sent.
struct OpenFile {
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) close(fd);
  }
};

// Opens `a`'s object through no link, checks on the descriptor that it is a regular file of the
// recorded size whose content hashes to the recorded sha256, and returns it to be served.
Result<std::shared_ptr<OpenFile>> OpenVerifiedArtifact(const std::string& store_dir,
                                                       const Artifact& a) {
  const std::string object = ArtifactObjectPath(store_dir, a.hash);
  auto file = std::make_shared<OpenFile>();
  file->fd = open(object.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (file->fd < 0) {
    return NotFound(fmt::format("artifact '{}' is no longer stored (a gc, or a hand); rerun the "
                                "run that made it",
                                a.path));
  }
  struct stat st {};
  if (fstat(file->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != a.bytes) {
    return Status(Code::kInternal,
                  fmt::format("artifact '{}' in the store is not what was stored ({} bytes "
                              "recorded); `drover verify RUN` says what changed",
                              a.path, a.bytes));
  }
  ConnectionGate::Unbounded();  // a large object takes a while to hash
  Sha256 sha;
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = pread(file->fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("reading artifact '" + a.path + "'");
    if (n == 0) break;
    sha.Update(std::string_view(buf, static_cast<size_t>(n)));
    at += n;
  }
  if (sha.HexDigest() != a.hash) {
    return Status(Code::kInternal,
                  fmt::format("artifact '{}' in the store no longer matches its recorded sha256 "
                              "{}; it is not served (`drover verify RUN` says what changed)",
                              a.path, a.hash.substr(0, 12)));
  }
  return file;
}

// GET /runs/{id}/artifacts/file?path=P: one stored output's bytes (only a path the run stored).
Status ArtifactFile(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  if (!req.has_param("path")) {
    return InvalidArgument("give the file as ?path=..., one of GET /runs/{id}/artifacts' paths");
  }
  const std::string path = req.get_param_value("path");
  DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
  DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), run, "read the outputs of"));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(RunArtifacts a, store->RunOutputs(id, StoreDir(ctx)));
  for (const Artifact& f : a.files) {
    if (f.path != path || f.mode == 0120777) continue;
    // The stored object, by its hash (the daemon's own read-only file), not the path under
    // outputs/: opened once through no link and checked on that descriptor against the hash
    // that was recorded, so what is served is exactly what the run stored.
    DROVER_ASSIGN_OR_RETURN(auto in, OpenVerifiedArtifact(StoreDir(ctx), f));
    const size_t slash = path.rfind('/');
    res.set_header("Content-Disposition",
                   AttachmentHeader(slash == std::string::npos ? path : path.substr(slash + 1)));
    res.set_content_provider(
        static_cast<size_t>(f.bytes), "application/octet-stream",
        [in](size_t offset, size_t length, httplib::DataSink& sink) {
          char buf[1 << 16];
          const size_t n = std::min(length, sizeof buf);
          ssize_t got;
          do {
            got = pread(in->fd, buf, n, static_cast<off_t>(offset));
          } while (got < 0 && errno == EINTR);
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
  http.Get(base, Route(ctx, ListRuns));
  http.Get(base + "/waiting", Route(ctx, Waiting));
  http.Get(base + "/([^/]+)", Route(ctx, Get));
  http.Get(base + "/([^/]+)/attempts", Route(ctx, Attempts));
  http.Get(base + "/([^/]+)/artifacts", Route(ctx, Artifacts));
  http.Get(base + "/([^/]+)/artifacts/file", Route(ctx, ArtifactFile));
  http.Post(base + "/([^/]+)/cancel", Route(ctx, Cancel));
  http.Post(base + "/([^/]+)/priority", Route(ctx, Priority));
  http.Post(base + "/([^/]+)/reproduce", Route(ctx, Reproduce));
  http.Get(base + "/([^/]+)/verify", Route(ctx, Verify));
  http.Get(base + "/([^/]+)/export", Route(ctx, Export));
}

}  // namespace drover::server
