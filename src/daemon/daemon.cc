#include "daemon/daemon.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>

#include <spdlog/spdlog.h>

#include "common/files.h"
#include "engine/cleanup.h"
#include "engine/run_export.h"
#include "exec/artifacts.h"
#include "exec/snapshot.h"
#include "protocol/json_codec.h"
#include "report/series.h"
#include "server/routes.h"
#include "spec/spec_parser.h"

namespace drover {

namespace {
constexpr size_t kMaxBufferedEvents = 10000;
// Commands are quick on the loop (a submit's snapshot is taken before, off it); a loop that does
// not answer in this long is stuck or stopping.
constexpr auto kCommandTimeout = std::chrono::minutes(2);

// The spec parsed with its submitter's rights when a root daemon serves them: every path it names
// (workdir, data:, inputs:) is looked for as they would look, so a submit or a check cannot tell a
// file in another user's private folder from a missing one (docs/security.md).
Result<Spec> ParseAsSubmitter(const protocol::SubmitRequest& request, const Engine& engine,
                              const server::Caller& submitter) {
  const bool as_them = engine.runs_as_submitter() && submitter.user.uid > 0 &&
                       submitter.user.uid != static_cast<int64_t>(::geteuid());
  ActingAs as(as_them ? &submitter.user : nullptr);
  if (!as.status().ok()) return as.status();
  Result<Spec> spec = ParseSpecString(request.spec_yaml, request.spec_name, request.base_dir,
                                      request.overrides);
  // The file the text came from, where it is the named file in the spec's folder with that very
  // text (read as the submitter), or else the one YAML file at the top of that folder with that
  // text (an agent's MCP submit and the web form send the text of a file they name otherwise):
  // kept out of the code snapshot, so editing one value of a spec that lives in the project
  // folder changes only the runs that use it (issue 40).
  if (spec.ok() && !request.base_dir.empty() && request.spec_name != "<stdin>") {
    namespace fs = std::filesystem;
    auto same_text = [&](const fs::path& path) {
      auto text = ReadBoundedFile(path.string(), request.spec_yaml.size() + 1, "spec file", "");
      return text.ok() && *text == request.spec_yaml;
    };
    const fs::path named = fs::path(request.base_dir) / fs::path(request.spec_name).filename();
    if (same_text(named)) {
      spec->source_path = named.string();
    } else {
      std::error_code ec;
      int looked = 0;
      for (fs::directory_iterator it(request.base_dir, ec), end; !ec && it != end && looked < 256;
           it.increment(ec), ++looked) {
        const fs::path& p = it->path();
        if (p.extension() != ".yaml" && p.extension() != ".yml") continue;
        std::error_code size_ec;
        if (!it->is_regular_file(size_ec) ||
            it->file_size(size_ec) != request.spec_yaml.size() || size_ec) {
          continue;
        }
        if (same_text(p)) {
          spec->source_path = p.string();
          break;
        }
      }
    }
  }
  return spec;
}
}  // namespace

Daemon::Daemon(Engine& engine, const Clock& clock, DaemonOptions options)
    : engine_(engine), options_(std::move(options)), clock_(clock) {}

Result<CommandReply> Daemon::Call(Command command) {
  auto reply = engine_.Post(std::move(command));
  if (reply.wait_for(kCommandTimeout) != std::future_status::ready) {
    return Unavailable("the engine did not answer in time; it may be shutting down");
  }
  return reply.get();
}

Status Daemon::CheckSubmit(const protocol::SubmitRequest& request,
                           const server::Caller& submitter) {
  auto spec = ParseAsSubmitter(request, engine_, submitter);
  if (!spec.ok()) return spec.status();
  DROVER_RETURN_IF_ERROR(ForSubmitter(*spec, submitter));
  return Call(cmd::CheckSubmit{*spec}).status();
}

Status Daemon::ForSubmitter(Spec& spec, const server::Caller& submitter, bool recorded) const {
  if (options_.shared && !submitter.admin && !engine_.runs_as_submitter() && !recorded) {
    // The snapshot is read with the daemon's rights: only a folder the submitter owns. (A root
    // daemon reads it with the submitter's own rights instead: any folder they can read.)
    struct stat st {};
    if (::stat(spec.workdir.c_str(), &st) != 0 ||
        static_cast<int64_t>(st.st_uid) != submitter.user.uid) {
      return PermissionDenied("the project folder " + spec.workdir + " is not " +
                              DisplayName(submitter.user) +
                              "'s: on a shared daemon a user submits from a folder they own");
    }
  }
  if (options_.shared && engine_.runs_as_submitter() && !recorded &&
      (submitter.admin || submitter.user.uid == 0)) {
    // An admin's (root's) rights are not lent to code a user can edit: a project folder of
    // another user's (offered to admins by GET /recipes, or named by hand) is that user's to
    // submit, and its runs would execute as the admin. (A reproduction runs the recorded
    // snapshot as its own submitter.)
    struct stat st {};
    if (::stat(spec.workdir.c_str(), &st) == 0 && st.st_uid != 0 &&
        static_cast<int64_t>(st.st_uid) != submitter.user.uid) {
      const UnixUser owner = LookupUser(st.st_uid, st.st_gid);
      return PermissionDenied(fmt::format(
          "the project folder {} is {}'s: its runs would execute as {} with an admin's rights, "
          "and its code is theirs to change; ask {} to submit it (it then runs as them), or copy "
          "it into a folder of yours first",
          spec.workdir, DisplayName(owner), DisplayName(submitter.user), DisplayName(owner)));
    }
  }
  // Whose share its runs count against: the submitter's own team on a shared daemon.
  DROVER_ASSIGN_OR_RETURN(spec.group, config::GroupFor(submitter.user, submitter.admin, spec.group,
                                                       options_.lab, options_.shared));
  return Status::Ok();
}

Result<protocol::SubmitResponse> Daemon::Submit(const protocol::SubmitRequest& request,
                                                const server::Caller& submitter) {
  // Parsing is pure: do it here, so a bad spec never reaches the loop.
  auto spec = ParseAsSubmitter(request, engine_, submitter);
  if (!spec.ok()) return spec.status();
  return SubmitChecked(*spec, submitter, /*recorded=*/false);
}

Result<protocol::SubmitResponse> Daemon::SubmitSpec(const Spec& given,
                                                    const server::Caller& submitter) {
  // Made by the server from the store's records (a reproduction): its workdir is the recorded
  // snapshot.
  return SubmitChecked(given, submitter, /*recorded=*/true);
}

Result<protocol::SubmitResponse> Daemon::SubmitChecked(const Spec& given,
                                                       const server::Caller& submitter,
                                                       bool recorded) {
  Spec spec = given;
  DROVER_RETURN_IF_ERROR(ForSubmitter(spec, submitter, recorded));
  // Whether it could ever run is the loop's to say (it owns the pool), and quick; the snapshot
  // can take long (a big workdir, a slow git) and happens here, on the HTTP worker, so the loop
  // keeps scheduling, reaping and answering meanwhile.
  DROVER_RETURN_IF_ERROR(Call(cmd::CheckSubmit{spec}).status());
  // A root daemon reads the project as its submitter (their snapshot, their rights).
  const bool as_them = engine_.runs_as_submitter() && submitter.user.uid > 0 &&
                       submitter.user.uid != static_cast<int64_t>(::geteuid());
  auto prepared =
      PrepareSubmit(spec, engine_.store_dir(), clock_.Now(), as_them ? &submitter.user : nullptr);
  if (!prepared.ok()) return prepared.status();
  prepared->submitter = submitter.user;
  DROVER_ASSIGN_OR_RETURN(
      CommandReply reply,
      Call(cmd::Commit{std::make_shared<PreparedSubmit>(std::move(*prepared))}));
  const auto& sub = std::get<std::shared_ptr<SubmitResult>>(reply);
  protocol::SubmitResponse r;
  r.experiment_id = sub->experiment_id;
  for (const auto& run : sub->runs) r.run_ids.push_back(run.id);
  r.notes = sub->notes;
  return r;
}

Result<std::vector<std::string>> Daemon::VerifyCode(const Snapshot& snapshot,
                                                    const UnixUser& owner) {
  // Off the loop, on the HTTP worker: it re-reads the snapshot's files, with their owner's
  // rights on a root daemon.
  const bool as_them = engine_.runs_as_submitter() && owner.uid > 0 &&
                       owner.uid != static_cast<int64_t>(::geteuid());
  return VerifySnapshot(snapshot, engine_.store_dir() + "/snapshots", as_them ? &owner : nullptr);
}

Result<std::vector<std::string>> Daemon::VerifyOutputs(const RunArtifacts& artifacts) {
  // The store's own files (root's on a root daemon): read with the daemon's rights.
  return VerifyArtifacts(engine_.store_dir(), artifacts.source_run, artifacts.files);
}

Result<std::string> Daemon::ExportRun(Store& store, int64_t run_id, bool code,
                                      const UnixUser& owner) {
  // A folder of the archive's own, the owner's on a root daemon (tar runs as them); the route
  // removes it once the archive is served.
  std::string dir = (std::filesystem::temp_directory_path() / "drover-export-out-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return ErrnoStatus("cannot create a temp folder");
  const bool as_them = engine_.runs_as_submitter() && owner.uid > 0 &&
                       owner.uid != static_cast<int64_t>(::geteuid());
  if (as_them && lchown(dir.c_str(), static_cast<uid_t>(owner.uid),
                        static_cast<gid_t>(owner.gid)) != 0) {
    Status st = ErrnoStatus("cannot give the export's folder to " + DisplayName(owner));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return st;
  }
  ExportOptions options;
  options.code = code;
  options.code_owner = as_them ? &owner : nullptr;
  const std::string out = dir + "/export.tar.gz";
  Result<ExportResult> made = drover::ExportRun(store, run_id, out, options);
  if (!made.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return made.status();
  }
  return out;
}

void Daemon::OnExperimentSubmitted(const Experiment& experiment, const std::vector<Run>& runs) {
  // On the loop, so the stream names the experiment before any of its runs' states.
  Json ids = Json::array();
  for (const auto& run : runs) ids.push_back(run.id);
  Json data = {{"experiment_id", experiment.id}, {"name", experiment.name}, {"runs", ids}};
  // Whose: the event stream shows each reader another user's runs redacted (events_routes.cc).
  if (!experiment.user.empty()) data["user"] = experiment.user;
  Publish(EventKind::kExperimentSubmitted, std::move(data));
}

Status Daemon::CancelRun(int64_t run_id) { return Call(cmd::CancelRun{run_id}).status(); }

Status Daemon::CancelExperiment(int64_t experiment_id) {
  return Call(cmd::CancelExperiment{experiment_id}).status();
}

Status Daemon::SetPriority(int64_t run_id, int priority) {
  return Call(cmd::SetPriority{run_id, priority}).status();
}

Result<std::vector<int64_t>> Daemon::Retry(int64_t experiment_id,
                                           const protocol::RetryRequest& which) {
  DROVER_ASSIGN_OR_RETURN(CommandReply reply,
                          Call(cmd::Retry{experiment_id, which.failed, which.cancelled, which.runs,
                                          which.code == protocol::RetryCode::kCurrent}));
  std::vector<int64_t> ids;
  for (const Run& r : std::get<std::vector<Run>>(reply)) ids.push_back(r.id);
  return ids;
}

Result<std::vector<Json>> Daemon::Suggest(int64_t experiment_id, int count) {
  DROVER_ASSIGN_OR_RETURN(CommandReply reply, Call(cmd::Suggest{experiment_id, count}));
  // Proposed here, on the caller's (HTTP worker's) thread: the loop only copied the search.
  return std::get<std::shared_ptr<const ProposalJob>>(reply)->Propose();
}

Status Daemon::Tell(int64_t experiment_id, const protocol::TellRequest& tell) {
  return Call(cmd::Tell{experiment_id, tell.params, tell.value}).status();
}

Result<int64_t> Daemon::AddTrial(int64_t experiment_id, const Json& params) {
  DROVER_ASSIGN_OR_RETURN(CommandReply reply, Call(cmd::AddTrial{experiment_id, params}));
  return std::get<std::vector<Run>>(reply).at(0).id;
}

namespace {
// The loop planned the cleanup (and moved the files into the trash); this HTTP worker measures
// them and deletes what is in the trash, off the loop.
Result<Cleanup> EmptiedAfter(Result<CommandReply> reply, const std::string& store_dir) {
  if (!reply.ok()) return reply.status();
  Cleanup done = std::get<Cleanup>(*reply);
  MeasureCleanup(done);
  if (done.applied) {
    if (Status st = EmptyTrash(store_dir); !st.ok()) spdlog::warn("{}", st.message());
  }
  return done;
}
}  // namespace

Result<Cleanup> Daemon::RemoveExperiments(const std::vector<int64_t>& ids, bool dry_run) {
  return EmptiedAfter(Call(cmd::Remove{ids, dry_run}), engine_.store_dir());
}

Result<Cleanup> Daemon::CollectGarbage(const protocol::GcRequest& request) {
  cmd::CollectGarbage c;
  c.options.older_than_ms = request.older_than_ms;
  c.options.checkpoints = request.checkpoints;
  c.dry_run = request.dry_run;
  return EmptiedAfter(Call(std::move(c)), engine_.store_dir());
}

std::vector<protocol::GpuStatus> Daemon::StatusOf(const GpuReading& reading) {
  std::vector<protocol::GpuStatus> out;
  for (const auto& v : reading.views) {
    protocol::GpuStatus g;
    g.index = v.state.index;
    for (const auto& d : reading.devices) {
      if (d.index != g.index) continue;
      g.name = d.name;
      g.uuid = d.uuid;
      g.memory_device = d.memory_total;
    }
    g.memory_total = v.state.capacity;
    g.memory_reserved = v.state.reserved;
    g.runs = v.runs;
    g.exclusive = v.state.exclusive;
    for (const auto& s : reading.samples) {
      if (s.index == g.index) g.telemetry = s;
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<protocol::GpuStatus> Daemon::Gpus() {
  auto r = Call(cmd::ReadGpus{});
  if (!r.ok()) return {};
  return StatusOf(std::get<GpuReading>(*r));
}

void Daemon::Publish(EventKind kind, Json data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    server::StreamEvent e;
    e.seq = ++seq_;
    e.kind = std::string(ToString(kind));
    e.data = std::move(data);
    events_.push_back(std::move(e));
    while (events_.size() > kMaxBufferedEvents) events_.pop_front();
  }
  cv_.notify_all();
}

std::vector<server::StreamEvent> Daemon::WaitEvents(int64_t after_seq, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return closed_ || seq_ > after_seq; });
  std::vector<server::StreamEvent> out;
  for (const auto& e : events_) {
    if (e.seq > after_seq) out.push_back(e);
  }
  return out;
}

int64_t Daemon::LastEventSeq() {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

void Daemon::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

void Daemon::OnRunChanged(const Run& run, const Attempt* attempt, const std::string& note) {
  Json data = {{"run_id", run.id},
               {"experiment_id", run.experiment_id},
               {"state", ToString(run.state)},
               {"attempt", run.attempts},
               {"reason", run.reason},
               {"note", note}};
  // Whose: the note may quote the run's stderr, which only its submitter and admins are shown.
  if (!run.user.empty()) data["user"] = run.user;
  if (attempt) data["cuda_visible_devices"] = attempt->cuda_visible_devices;
  Publish(EventKind::kRunState, std::move(data));
}

void Daemon::OnMetrics(const Run& run, const std::vector<MetricPoint>& points) {
  // A run printing thousands of lines a second would make each event huge and cost the engine
  // more than storing them: each metric of an event keeps at most kEventPointsPerMetric points
  // (min/max buckets, so spikes survive); the full series is GET /runs/{id}/metrics.
  constexpr size_t kEventPointsPerMetric = 100;
  std::map<std::string, std::vector<MetricPoint>> by_name;
  for (const auto& p : points) by_name[p.name].push_back(p);
  Json pts = Json::array();
  bool thinned = false;
  for (auto& [name, series] : by_name) {
    if (series.size() > kEventPointsPerMetric) {
      series = report::DownsampleMinMax(series, kEventPointsPerMetric);
      thinned = true;
    }
    for (const auto& p : series) pts.push_back(protocol::ToJson(p));
  }
  Json data = {{"run_id", run.id}, {"points", pts}};
  if (!run.user.empty()) data["user"] = run.user;
  if (thinned) data["downsampled_from"] = points.size();
  Publish(EventKind::kMetrics, std::move(data));
}

void Daemon::OnAlert(const Alert& alert) { Publish(EventKind::kAlert, protocol::ToJson(alert)); }

void Daemon::OnStoreStalled(const Status& why, Millis retry_in_ms) {
  // The API keeps answering reads from what is committed; writes get 503 with the reason.
  spdlog::error("{}; running runs keep running, no run starts, writes are refused; retrying in "
                "{} ms",
                why.message(), retry_in_ms);
}

void Daemon::OnStoreRecovered(Millis stalled_ms) {
  spdlog::info("the store commits again after {} ms; nothing was lost", stalled_ms);
}

void Daemon::OnGpuSamples(const std::vector<GpuSample>& samples) {
  Json gpus = Json::array();
  // On the engine's thread already: read its pool directly.
  for (const auto& g : StatusOf(engine_.ReadGpus())) gpus.push_back(protocol::ToJson(g));
  Publish(EventKind::kGpu, {{"t_ms", clock_.Now()}, {"gpus", gpus}});
}

}  // namespace drover
