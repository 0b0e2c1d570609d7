#include "protocol/api.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>
#include <string_view>

#include "common/strings.h"
#include "protocol/json_codec.h"

namespace drover::protocol {
namespace {

// Reads the fields of one JSON object into a record, remembering the first error. Missing fields
// keep their defaults (an older server may not send a newer field) unless marked required; a
// field of the wrong type is an error that names it ("run.state: ...").
class FieldReader {
 public:
  FieldReader(const Json& j, std::string what) : j_(j), what_(std::move(what)) {
    if (!j_.is_object()) {
      status_ =
          InvalidArgument(what_ + ": expected a JSON object, got " + std::string(j_.type_name()));
    }
  }

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

  // Refuses fields not in `known` (for requests, where a misspelt field must not be ignored).
  void RejectUnknown(const std::set<std::string>& known) {
    if (!ok()) return;
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (known.count(it.key())) continue;
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      Fail(it.key(), "unknown field (known: " + list + ")");
      return;
    }
  }

  // Returns the field, or nullptr when it is absent (an error when required).
  const Json* Find(const char* key, bool required) {
    if (!ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) Fail(key, "missing");
      return nullptr;
    }
    return &*it;
  }

  void Get(const char* key, std::string& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    if (!v->is_string()) return WrongType(key, "a string", *v);
    out = v->get<std::string>();
  }

  void Get(const char* key, bool& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    if (!v->is_boolean()) return WrongType(key, "true or false", *v);
    out = v->get<bool>();
  }

  void Get(const char* key, int64_t& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    auto n = Int(key, *v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (n) out = *n;
  }

  void Get(const char* key, int& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    auto n = Int(key, *v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    if (n) out = static_cast<int>(*n);
  }

  // JSON has no NaN: the codec writes NaN (and infinities) as null, read back as NaN.
  void Get(const char* key, double& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    if (v->is_null()) {
      out = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    if (!v->is_number()) return WrongType(key, "a number", *v);
    out = v->get<double>();
  }

  // A field that may be null (unknown, or not about a run/GPU): null leaves `out` as it is.
  template <typename T>
  void GetUnlessNull(const char* key, T& out) {
    if (j_.is_object()) {
      auto it = j_.find(key);
      if (it != j_.end() && it->is_null()) return;
    }
    Get(key, out);
  }

  // Any JSON value; `want_object` insists on an object (params, metrics, spec).
  void GetJson(const char* key, Json& out, bool want_object, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    if (want_object && !v->is_object()) return WrongType(key, "an object", *v);
    out = *v;
  }

  void Get(const char* key, std::vector<std::string>& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    if (!v->is_array()) return WrongType(key, "a list of strings", *v);
    std::vector<std::string> r;
    for (const auto& e : *v) {
      if (!e.is_string()) return WrongType(key, "a list of strings", *v);
      r.push_back(e.get<std::string>());
    }
    out = std::move(r);
  }

  template <typename T>
  void GetInts(const char* key, std::vector<T>& out, bool required = false) {
    const Json* v = Find(key, required);
    if (!v) return;
    if (!v->is_array()) return WrongType(key, "a list of integers", *v);
    std::vector<T> r;
    for (const auto& e : *v) {
      auto n = Int(key, e, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
      if (!n) return;
      r.push_back(static_cast<T>(*n));
    }
    out = std::move(r);
  }

  void Fail(std::string_view key, std::string_view why) {
    if (ok()) status_ = InvalidArgument(what_ + "." + std::string(key) + ": " + std::string(why));
  }

 private:
  std::optional<int64_t> Int(const char* key, const Json& v, int64_t lo, int64_t hi) {
    if (!v.is_number_integer()) {
      WrongType(key, "an integer", v);
      return std::nullopt;
    }
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(key, "integer out of range");
      return std::nullopt;
    }
    int64_t n = v.get<int64_t>();
    if (n < lo || n > hi) {
      Fail(key, "integer out of range");
      return std::nullopt;
    }
    return n;
  }

  void WrongType(const char* key, std::string_view want, const Json& got) {
    Fail(key, "must be " + std::string(want) + ", got " + std::string(got.type_name()));
  }

  const Json& j_;
  std::string what_;
  Status status_;
};

std::optional<Code> CodeFromName(std::string_view name) {
  for (Code c : {Code::kOk, Code::kInvalidArgument, Code::kNotFound, Code::kFailedPrecondition,
                 Code::kIo, Code::kInternal, Code::kUnavailable, Code::kCancelled,
                 Code::kPermissionDenied}) {
    if (CodeName(c) == name) return c;
  }
  return std::nullopt;
}

Code CodeFromHttp(int http_status) {
  switch (http_status) {
    case 400:
    case 411:
    case 413:
    case 414:
    case 422:
      return Code::kInvalidArgument;
    case 401:  // wrong or missing token
    case 403:  // refused Host or Origin
    case 409:
      return Code::kFailedPrecondition;
    case 404:
      return Code::kNotFound;
    case 503:
      return Code::kUnavailable;
    default:
      return Code::kInternal;
  }
}

}  // namespace

Json ErrorJson(const Status& st) {
  return {{"error", {{"code", std::string(CodeName(st.code()))}, {"message", st.message()}}}};
}

int HttpStatusFor(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return 400;
    case Code::kNotFound:
      return 404;
    case Code::kFailedPrecondition:
      return 409;
    case Code::kCancelled:
      return 409;
    case Code::kPermissionDenied:
      return 403;
    case Code::kUnavailable:
      return 503;
    case Code::kIo:
    case Code::kInternal:
      return 500;
  }
  return 500;
}

Status StatusFromErrorJson(const Json& body, int http_status) {
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const Json& e = body["error"];
    std::string message = e.value("message", std::string());
    std::optional<Code> code;
    if (e.contains("code") && e["code"].is_string())
      code = CodeFromName(e["code"].get<std::string>());
    // Codes outside common/status.h (unauthenticated, permission_denied) map by HTTP status.
    if (!code || *code == Code::kOk) code = CodeFromHttp(http_status);
    if (message.empty()) message = "HTTP " + std::to_string(http_status);
    return Status(*code, message);
  }
  if (http_status >= 200 && http_status < 300) return Status::Ok();
  std::string text =
      body.is_null() ? "" : body.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return Status(CodeFromHttp(http_status),
                "HTTP " + std::to_string(http_status) + (text.empty() ? "" : ": " + text));
}

Json ToJson(const SubmitRequest& r) {
  return {{"spec_yaml", r.spec_yaml},
          {"spec_name", r.spec_name},
          {"base_dir", r.base_dir},
          {"overrides", r.overrides}};
}

Result<SubmitRequest> SubmitRequestFromJson(const Json& j) {
  SubmitRequest r;
  FieldReader f(j, "submit request");
  f.RejectUnknown({"spec_yaml", "spec_name", "base_dir", "overrides"});
  f.Get("spec_yaml", r.spec_yaml, true);
  f.Get("spec_name", r.spec_name);
  f.Get("base_dir", r.base_dir);
  f.Get("overrides", r.overrides);
  if (!f.ok()) return f.status();
  if (!j.contains("base_dir")) {
    return InvalidArgument(
        "submit request.base_dir: missing: send the absolute folder the spec's relative paths "
        "start at (drover submit sends the spec file's folder)");
  }
  // The daemon's own folder means nothing to the client: a relative base is not guessed.
  if (r.base_dir.empty() || r.base_dir[0] != '/') {
    return InvalidArgument("submit request.base_dir: '" + r.base_dir +
                           "' is not an absolute path; send the folder the spec's relative paths "
                           "start at, such as /home/me/project");
  }
  return r;
}

Json ToJson(const SubmitResponse& r) {
  Json j = {{"experiment_id", r.experiment_id}, {"run_ids", r.run_ids}};
  if (!r.notes.empty()) j["notes"] = r.notes;
  return j;
}

Result<SubmitResponse> SubmitResponseFromJson(const Json& j) {
  SubmitResponse r;
  FieldReader f(j, "submit response");
  f.Get("experiment_id", r.experiment_id, true);
  f.GetInts("run_ids", r.run_ids, true);
  f.Get("notes", r.notes);
  if (!f.ok()) return f.status();
  return r;
}

Json ToJson(const ReproduceResponse& r) {
  return {{"experiment_id", r.experiment_id}, {"run_id", r.run_id}, {"run_ids", r.run_ids}};
}

Result<ReproduceResponse> ReproduceResponseFromJson(const Json& j) {
  ReproduceResponse r;
  FieldReader f(j, "reproduce response");
  f.Get("experiment_id", r.experiment_id, true);
  f.Get("run_id", r.run_id, true);
  f.GetInts("run_ids", r.run_ids, true);
  if (!f.ok()) return f.status();
  return r;
}

Result<PriorityRequest> PriorityRequestFromJson(const Json& j) {
  PriorityRequest r;
  FieldReader f(j, "priority request");
  f.RejectUnknown({"priority"});
  f.Get("priority", r.priority, true);
  if (!f.ok()) return f.status();
  return r;
}

std::string_view ToString(RetryCode c) {
  return c == RetryCode::kCurrent ? "current" : "submitted";
}

std::optional<RetryCode> ParseRetryCode(std::string_view s) {
  if (s == "submitted") return RetryCode::kSubmitted;
  if (s == "current") return RetryCode::kCurrent;
  return std::nullopt;
}

Json ToJson(const RetryRequest& r) {
  return {{"failed", r.failed}, {"cancelled", r.cancelled}, {"runs", r.runs},
          {"code", ToString(r.code)}};
}

Result<RetryRequest> RetryRequestFromJson(const Json& j) {
  RetryRequest r;
  FieldReader f(j, "retry request");
  f.RejectUnknown({"failed", "cancelled", "runs", "code"});
  f.Get("failed", r.failed);
  f.Get("cancelled", r.cancelled);
  f.GetInts("runs", r.runs);
  std::string code = "submitted";
  f.Get("code", code);
  if (!f.ok()) return f.status();
  if (auto c = ParseRetryCode(code)) {
    r.code = *c;
  } else {
    return InvalidArgument(fmt::format(
        "retry request: code must be \"submitted\" (the snapshot recorded at the submit) or "
        "\"current\" (the workdir as it is now), got \"{}\"",
        code.substr(0, 40)));
  }
  if (r.runs.size() > RetryRequest::kMaxRuns) {
    return InvalidArgument(fmt::format("retry request: runs: at most {} ids at once, got {}",
                                       RetryRequest::kMaxRuns, r.runs.size()));
  }
  if (!r.failed && !r.cancelled && r.runs.empty()) {
    return InvalidArgument(
        "retry request: say which runs to retry: \"failed\": true, \"cancelled\": true or "
        "\"runs\": [ids]");
  }
  return r;
}

Json ToJson(const RetryResponse& r) {
  Json j = {{"experiment_id", r.experiment_id}, {"run_ids", r.run_ids}};
  if (!r.snapshot.empty()) j["snapshot"] = r.snapshot;
  if (!r.code.empty()) j["code"] = r.code;
  return j;
}

std::string RetryCodeNote(const Experiment& e, const std::string& current) {
  if (!current.empty()) {
    return fmt::format(
        "the runs run the workdir as it is now (snapshot {}, taken by this retry), as new attempts "
        "of the same runs: their checkpoints are kept; the code recorded when experiment {} was "
        "submitted (snapshot {}) stays with their earlier attempts",
        current.substr(0, 12), e.id, e.snapshot_hash.substr(0, 12));
  }
  std::string git;
  if (!e.git_commit.empty()) {
    git = fmt::format(", git {}{}", e.git_commit.substr(0, 12),
                      e.git_diff.empty() ? "" : " + its uncommitted changes");
  }
  return fmt::format(
      "the runs run the code recorded when experiment {} was submitted (snapshot {}{}), not the "
      "workdir as it is now: edits made since are not in it; to run them, retry with --code "
      "current (the API and MCP: \"code\": \"current\")",
      e.id, e.snapshot_hash.substr(0, 12), git);
}

Result<RetryResponse> RetryResponseFromJson(const Json& j) {
  RetryResponse r;
  FieldReader f(j, "retry response");
  f.Get("experiment_id", r.experiment_id, true);
  f.GetInts("run_ids", r.run_ids, true);
  f.Get("snapshot", r.snapshot);
  f.Get("code", r.code);
  if (!f.ok()) return f.status();
  return r;
}

Json ToJson(const Cleanup& c) {
  Json files = Json::array();
  for (const auto& f : c.files) files.push_back({{"path", f.path}, {"why", f.why}, {"bytes", f.bytes}});
  return {{"experiments", c.experiments}, {"runs", c.runs},         {"snapshots", c.snapshots},
          {"files", files},               {"bytes", c.Bytes()},     {"applied", c.applied}};
}

Result<Cleanup> CleanupFromJson(const Json& j) {
  Cleanup c;
  FieldReader f(j, "cleanup");
  f.GetInts("experiments", c.experiments, true);
  f.Get("runs", c.runs, true);
  f.Get("snapshots", c.snapshots, true);
  f.Get("applied", c.applied, true);
  const Json* files = f.Find("files", true);
  if (!f.ok()) return f.status();
  if (!files->is_array()) return InvalidArgument("cleanup.files: expected a list");
  for (const Json& item : *files) {
    DiskItem d;
    FieldReader fi(item, "cleanup.files[]");
    fi.Get("path", d.path, true);
    fi.Get("why", d.why);
    fi.Get("bytes", d.bytes);
    if (!fi.ok()) return fi.status();
    c.files.push_back(std::move(d));
  }
  return c;
}

Json ToJson(const GcRequest& r) {
  return {{"older_than", FormatDuration(r.older_than_ms)},
          {"checkpoints", r.checkpoints},
          {"dry_run", r.dry_run}};
}

Result<GcRequest> GcRequestFromJson(const Json& j) {
  GcRequest r;
  FieldReader f(j, "gc request");
  f.RejectUnknown({"older_than", "checkpoints", "dry_run"});
  std::string older;
  f.Get("older_than", older);
  f.Get("checkpoints", r.checkpoints);
  f.Get("dry_run", r.dry_run);
  if (!f.ok()) return f.status();
  if (!older.empty()) {
    auto ms = ParseDurationMs(older);
    if (!ms.ok()) return ms.status().WithContext("gc request.older_than");
    r.older_than_ms = *ms;
  }
  return r;
}

Json ToJson(const GpuStatus& g) {
  return {{"index", g.index},
          {"name", g.name},
          {"uuid", g.uuid},
          {"memory_total", g.memory_total},
          {"memory_device", g.memory_device},
          {"memory_reserved", g.memory_reserved},
          {"runs", g.runs},
          {"exclusive", g.exclusive},
          {"telemetry", g.telemetry ? ToJson(*g.telemetry) : Json(nullptr)}};
}

Json ToJson(const GpuSample& s) {
  auto value = [](double v) { return v < 0 ? Json(nullptr) : Json(v); };
  auto bytes = [](int64_t v) { return v < 0 ? Json(nullptr) : Json(v); };
  Json procs = Json::array();
  for (const auto& p : s.processes) {
    procs.push_back({{"pid", p.pid}, {"memory_used", bytes(p.memory_used)}});
  }
  return {{"gpu", s.index},
          {"t_ms", s.t_ms},
          {"utilization", value(s.utilization)},
          {"memory_used", bytes(s.memory_used)},
          {"memory_total", bytes(s.memory_total)},
          {"temperature_c", value(s.temperature_c)},
          {"power_w", value(s.power_w)},
          {"pcie_tx_bytes_per_s", value(s.pcie_tx_bytes_per_s)},
          {"pcie_rx_bytes_per_s", value(s.pcie_rx_bytes_per_s)},
          {"processes", procs}};
}

Result<Alert> AlertFromJson(const Json& j) {
  Alert a;
  FieldReader f(j, "alert");
  f.Get("id", a.id, true);
  f.Get("kind", a.kind, true);
  f.Get("severity", a.severity);
  f.Get("key", a.key);
  f.Get("message", a.message);
  f.GetJson("data", a.data, /*want_object=*/true);
  f.Get("first_ms", a.first_ms);
  f.Get("last_ms", a.last_ms);
  f.Get("count", a.count);
  // null: not about a run, an experiment or a GPU.
  f.GetUnlessNull("experiment_id", a.experiment_id);
  f.GetUnlessNull("run_id", a.run_id);
  f.GetUnlessNull("gpu", a.gpu);
  if (!f.ok()) return f.status();
  return a;
}

Result<GpuSample> GpuSampleFromJson(const Json& j) {
  GpuSample s;
  FieldReader f(j, "gpu sample");
  f.Get("gpu", s.index, true);
  f.Get("t_ms", s.t_ms);
  // null (unknown) reads as NaN here; the record says unknown with -1.
  auto value = [&](const char* key, double& out) {
    f.Get(key, out);
    if (std::isnan(out)) out = -1;
  };
  value("utilization", s.utilization);
  f.GetUnlessNull("memory_used", s.memory_used);
  f.GetUnlessNull("memory_total", s.memory_total);
  value("temperature_c", s.temperature_c);
  value("power_w", s.power_w);
  value("pcie_tx_bytes_per_s", s.pcie_tx_bytes_per_s);
  value("pcie_rx_bytes_per_s", s.pcie_rx_bytes_per_s);
  if (!f.ok()) return f.status();
  if (j.contains("processes") && j["processes"].is_array()) {
    for (const auto& p : j["processes"]) {
      GpuProcess gp;
      FieldReader pf(p, "gpu sample process");
      pf.Get("pid", gp.pid, true);
      pf.GetUnlessNull("memory_used", gp.memory_used);
      if (!pf.ok()) return pf.status();
      s.processes.push_back(gp);
    }
  }
  return s;
}

Result<GpuStatus> GpuStatusFromJson(const Json& j) {
  GpuStatus g;
  FieldReader f(j, "gpu");
  f.Get("index", g.index, true);
  f.Get("name", g.name);
  f.Get("uuid", g.uuid);
  f.Get("memory_total", g.memory_total);
  f.Get("memory_device", g.memory_device);
  f.Get("memory_reserved", g.memory_reserved);
  f.GetInts("runs", g.runs);
  f.Get("exclusive", g.exclusive);
  if (!f.ok()) return f.status();
  if (j.contains("telemetry") && !j["telemetry"].is_null()) {
    DROVER_ASSIGN_OR_RETURN(auto t, GpuSampleFromJson(j["telemetry"]));
    g.telemetry = t;
  }
  return g;
}

// ToJson(Experiment) carries `git_dirty`, not the diff. The diff is kept when the JSON has it
// (GET /experiments/{id} adds "git_diff" and "spec_yaml"); otherwise a dirty experiment gets a
// marker diff, so `!git_diff.empty()` still says "uncommitted changes" and re-encoding gives the
// same JSON.
constexpr const char* kDiffNotIncluded = "(uncommitted changes; diff not included)\n";

Result<Experiment> ExperimentFromJson(const Json& j) {
  Experiment e;
  FieldReader f(j, "experiment");
  f.Get("id", e.id, true);
  f.Get("name", e.name);
  std::string status(ToString(e.status));
  f.Get("status", status);
  f.Get("snapshot", e.snapshot_hash);
  f.Get("git_commit", e.git_commit);
  bool dirty = false;
  f.Get("git_dirty", dirty);
  f.Get("git_diff", e.git_diff);
  f.Get("spec_yaml", e.spec_yaml);
  f.Get("created_ms", e.created_ms);
  f.Get("user", e.user);
  f.GetJson("spec", e.spec, false);
  if (!f.ok()) return f.status();
  std::optional<ExperimentStatus> parsed = ParseExperimentStatus(status);
  if (!parsed) {
    return InvalidArgument("experiment.status: unknown status '" + status +
                           "' (expected active or done)");
  }
  e.status = *parsed;
  if (dirty && e.git_diff.empty()) e.git_diff = kDiffNotIncluded;
  if (!dirty) e.git_diff.clear();
  return e;
}

Result<RunCounts> RunCountsFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("counts: expected an object of states");
  RunCounts c;
  for (const auto& [name, n] : j.items()) {
    auto state = ParseRunState(name);
    if (!state) continue;  // a state of a newer drover: not ours to count
    if (!n.is_number_integer() || n.get<int64_t>() < 0) {
      return InvalidArgument("counts." + name + ": expected a count");
    }
    if (n.get<int64_t>() > 0) c.by_state[*state] = n.get<int64_t>();
  }
  return c;
}

Json ToJson(const ExperimentListing& l) {
  Json j = ToJson(l.experiment);
  j["counts"] = ToJson(l.runs);
  j["total_runs"] = l.runs.Total();
  return j;
}

Result<ExperimentListing> ExperimentListingFromJson(const Json& j) {
  ExperimentListing l;
  DROVER_ASSIGN_OR_RETURN(l.experiment, ExperimentFromJson(j));
  if (j.contains("counts")) {
    DROVER_ASSIGN_OR_RETURN(l.runs, RunCountsFromJson(j.at("counts")));
  }
  return l;
}

Result<RunArtifacts> RunArtifactsFromJson(const Json& j) {
  RunArtifacts a;
  FieldReader f(j, "artifacts");
  f.Get("run_id", a.run_id, true);
  f.Get("source_run", a.source_run);
  f.Get("dir", a.dir);
  if (!f.ok()) return f.status();
  for (const Json& x : j.value("files", Json::array())) {
    Artifact art;
    FieldReader ff(x, "artifacts.files");
    ff.Get("path", art.path, true);
    ff.Get("sha256", art.hash, true);
    ff.Get("bytes", art.bytes);
    ff.Get("mode", art.mode);
    if (!ff.ok()) return ff.status();
    art.run_id = a.source_run;
    a.files.push_back(std::move(art));
  }
  return a;
}

Result<Run> RunFromJson(const Json& j) {
  Run r;
  FieldReader f(j, "run");
  f.Get("id", r.id, true);
  f.Get("experiment_id", r.experiment_id);
  f.Get("user", r.user);
  f.Get("index", r.index);
  std::string state = std::string(ToString(r.state));
  f.Get("state", state);
  f.GetJson("params", r.params, true);
  f.GetJson("current_params", r.current_params, true);
  f.Get("fingerprint", r.fingerprint);
  f.Get("priority", r.priority);
  if (const Json* res = f.Find("resources", false)) {
    FieldReader rf(*res, "run.resources");
    rf.Get("gpus", r.resources.gpus);
    rf.Get("gpu_memory", r.resources.gpu_memory);
    rf.Get("cpus", r.resources.cpus);
    if (!rf.ok()) return rf.status();
  }
  f.Get("attempts", r.attempts);
  f.Get("retries_used", r.retries_used);
  f.Get("reason", r.reason);
  f.Get("created_ms", r.created_ms);
  f.Get("started_ms", r.started_ms);
  f.Get("ended_ms", r.ended_ms);
  f.GetJson("metrics", r.final_metrics, true);
  f.Get("stage", r.stage);
  f.Get("cached_from", r.cached_from);
  f.Get("snapshot_hash", r.snapshot_hash);
  f.Get("snapshot_from", r.snapshot_from);
  std::string origin;
  f.Get("origin", origin);
  if (!f.ok()) return f.status();
  // What it says of the run, not what the run is: an origin a newer daemon names and this
  // client does not know is left out, not an error that stops a follower.
  r.origin = ParseTrialOrigin(origin).value_or(TrialOrigin::kNone);
  if (j.contains("needs") && j["needs"].is_array()) {
    for (const Json& n : j["needs"]) {
      if (n.is_number_integer()) r.needs.push_back(n.get<int64_t>());
    }
  }
  auto parsed = ParseRunState(state);
  if (!parsed) {
    return InvalidArgument("run.state: unknown state '" + state +
                           "' (known: queued, running, retrying, succeeded, failed, cancelled, "
                           "pruned)");
  }
  r.state = *parsed;
  return r;
}

Result<Attempt> AttemptFromJson(const Json& j) {
  Attempt a;
  FieldReader f(j, "attempt");
  f.Get("id", a.id, true);
  f.Get("run_id", a.run_id);
  f.Get("number", a.number);
  f.Get("ended", a.ended);
  f.Get("reason", a.reason);
  f.Get("exit_code", a.exit_code);
  f.Get("signal", a.signal);
  f.Get("pid", a.pid);
  f.GetInts("gpus", a.gpus);
  f.Get("cuda_visible_devices", a.cuda_visible_devices);
  f.GetJson("params", a.params, true);
  f.Get("argv", a.argv);
  f.Get("workdir", a.workdir);
  f.Get("pid_start", a.pid_start);
  f.Get("exit_path", a.exit_path);
  f.Get("error", a.error);
  f.Get("started_ms", a.started_ms);
  f.Get("ended_ms", a.ended_ms);
  f.Get("stdout_path", a.stdout_path);
  f.Get("stderr_path", a.stderr_path);
  f.Get("hostname", a.hostname);
  f.Get("drover_version", a.drover_version);
  if (!f.ok()) return f.status();
  if (auto it = j.find("executor"); it != j.end() && it->is_object()) a.executor = *it;
  if (auto it = j.find("hparams"); it != j.end() && it->is_object()) a.hparams = *it;
  if (auto it = j.find("checkpoint"); it != j.end() && it->is_object()) {
    auto step = it->find("step");
    auto t = it->find("t_ms");
    if (step != it->end() && step->is_number_integer()) {
      a.checkpoint = CheckpointMark{step->get<int64_t>(),
                                    t != it->end() && t->is_number_integer() ? t->get<Millis>() : 0};
    }
  }
  if (auto it = j.find("event_files"); it != j.end() && it->is_object()) {
    for (auto f = it->begin(); f != it->end() && a.event_files.size() < kMaxEventFiles; ++f) {
      if (!f->is_object()) continue;
      auto num = [&](const char* k) {
        auto v = f->find(k);
        return v != f->end() && v->is_number_integer() ? v->get<int64_t>() : int64_t{0};
      };
      a.event_files[f.key()] = EventFileProgress{num("offset"), num("corrupt")};
    }
  }
  if (auto it = j.find("stopping"); it != j.end() && it->is_string()) {
    a.stopping = ParseStopReason(it->get<std::string>());
  }
  return a;
}

Result<MetricPoint> MetricPointFromJson(const Json& j) {
  MetricPoint p;
  FieldReader f(j, "metric point");
  f.Get("attempt_id", p.attempt_id);
  f.Get("step", p.step);
  f.Get("name", p.name, true);
  f.Get("t_ms", p.t_ms);
  if (!f.ok()) return f.status();
  // A number, "NaN", "Infinity" or "-Infinity" (NumberJson); null from an older daemon: NaN.
  auto v = j.find("value");
  if (v == j.end()) return InvalidArgument("metric point.value: missing");
  if (v->is_null()) {
    p.value = std::numeric_limits<double>::quiet_NaN();
  } else {
    auto d = NumberFromJson(*v);
    if (!d.ok()) return InvalidArgument("metric point.value: " + d.status().message());
    p.value = *d;
  }
  return p;
}

Json NumberJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

Result<double> NumberFromJson(const Json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return InvalidArgument("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", got " +
                         j.dump().substr(0, 40));
}

Json CurveSummariesJson(const std::map<int64_t, CurveSummary>& curves) {
  Json runs = Json::array();
  for (const auto& [id, c] : curves) {
    runs.push_back({{"run_id", id},
                    {"points", c.points},
                    {"last", NumberJson(c.last)},
                    {"lowest", NumberJson(c.lowest)},
                    {"highest", NumberJson(c.highest)},
                    {"mean_last", NumberJson(c.mean_last)}});
  }
  return {{"runs", std::move(runs)}};
}

Result<std::map<int64_t, CurveSummary>> CurveSummariesFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array()) {
    return InvalidArgument("curve summaries: expected an object with a runs list");
  }
  std::map<int64_t, CurveSummary> out;
  for (const Json& r : j["runs"]) {
    if (!r.is_object() || !r.contains("run_id") || !r["run_id"].is_number_integer()) {
      return InvalidArgument("curve summaries: each run needs an integer run_id");
    }
    CurveSummary c;
    if (r.contains("points")) {
      if (!r["points"].is_number_integer()) {
        return InvalidArgument("curve summaries: points must be an integer");
      }
      c.points = r["points"].get<int64_t>();
    }
    for (auto [key, field] : {std::pair<const char*, double*>{"last", &c.last},
                              {"lowest", &c.lowest},
                              {"highest", &c.highest},
                              {"mean_last", &c.mean_last}}) {
      if (!r.contains(key)) continue;
      Result<double> v = NumberFromJson(r[key]);
      if (!v.ok()) return InvalidArgument(std::string("curve summaries: ") + key + ": " +
                                          v.status().message());
      *field = *v;
    }
    out[r["run_id"].get<int64_t>()] = c;
  }
  return out;
}

Result<SuggestRequest> SuggestRequestFromJson(const Json& j) {
  SuggestRequest r;
  if (!j.is_object()) return InvalidArgument("the body must be a JSON object such as {\"count\": 2}");
  if (j.contains("count")) {
    const Json& c = j["count"];
    if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > SuggestRequest::kMaxCount) {
      return InvalidArgument(fmt::format("count must be an integer from 1 to {}",
                                         SuggestRequest::kMaxCount));
    }
    r.count = c.get<int>();
  }
  return r;
}

Json ToJson(const TellRequest& r) {
  return {{"params", r.params}, {"value", r.value ? Json(*r.value) : Json()}};
}

Result<TellRequest> TellRequestFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("params") || !j["params"].is_object()) {
    return InvalidArgument("the body must be {\"params\": {...}, \"value\": number or null}");
  }
  TellRequest r;
  r.params = j["params"];
  if (!j.contains("value")) {
    return InvalidArgument("value is missing: give the objective's value, or null when the "
                           "config failed");
  }
  if (!j["value"].is_null()) {
    if (!j["value"].is_number() || !std::isfinite(j["value"].get<double>())) {
      return InvalidArgument("value must be a finite number, or null when the config failed");
    }
    r.value = j["value"].get<double>();
  }
  return r;
}

Result<AddTrialRequest> AddTrialRequestFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("params") || !j["params"].is_object()) {
    return InvalidArgument("the body must be {\"params\": {...}}");
  }
  return AddTrialRequest{j["params"]};
}

Json ToJson(const RunDetail& d) {
  Json j = ToJson(d.run);
  j["experiment"] = {{"id", d.experiment.id},
                     {"name", d.experiment.name},
                     {"user", d.experiment.user},
                     {"created_ms", d.experiment.created_ms}};
  j["attempt_list"] = Json::array();
  for (const auto& a : d.attempts) j["attempt_list"].push_back(ToJson(a));
  if (d.snapshot) {
    j["snapshot"] = ToJson(*d.snapshot);
    // The experiment's own commit: a snapshot is shared by every experiment with the same files.
    j["snapshot"]["git_commit"] = d.experiment.git_commit;
    j["snapshot"]["git_dirty"] = !d.experiment.git_diff.empty();
    j["snapshot"]["git_diff"] = d.experiment.git_diff;
  }
  j["environments"] = Json::array();
  for (const auto& env : d.environments) j["environments"].push_back(ToJson(env));
  // The image the run ran in, pinned at submit (docs/containers.md); absent on the host.
  if (d.experiment.spec.is_object() && d.experiment.spec.contains("container") &&
      d.experiment.spec["container"].is_object()) {
    j["container"] = d.experiment.spec["container"];
    j["container"]["description"] = DescribeContainer(d.experiment.spec);
  }
  if (d.waiting) j["waiting"] = {{"code", d.waiting->code}, {"reason", d.waiting->reason}};
  // What the rungs judged: the prune rule's metric and what rungs count.
  if (d.experiment.spec.is_object() && d.experiment.spec.contains("prune") &&
      d.experiment.spec["prune"].is_object()) {
    j["prune"] = {{"metric", d.experiment.spec["prune"].value("metric", "")},
                  {"resource", d.experiment.spec["prune"].value("resource", "")}};
  }
  j["rungs"] = Json::array();
  for (const RungRecord& r : d.rungs) {
    j["rungs"].push_back({{"bracket", r.bracket}, {"rung", r.rung}, {"step", r.step},
                          {"unit", r.unit}, {"report_step", r.report_step},
                          {"value", std::isfinite(r.value) ? Json(r.value) : Json()},
                          {"pruned", r.pruned}});
  }
  return j;
}

Result<RunDetail> RunDetailFromJson(const Json& j) {
  RunDetail d;
  DROVER_ASSIGN_OR_RETURN(d.run, RunFromJson(j));
  try {
    d.experiment.id = j.at("experiment").at("id").get<int64_t>();
    d.experiment.name = j.at("experiment").at("name").get<std::string>();
    d.experiment.user = j.at("experiment").value("user", std::string());
    d.experiment.created_ms = j.at("experiment").value("created_ms", int64_t{0});
    for (const auto& a : j.at("attempt_list")) {
      DROVER_ASSIGN_OR_RETURN(Attempt at, AttemptFromJson(a));
      d.attempts.push_back(std::move(at));
    }
    if (auto w = j.find("waiting"); w != j.end() && w->is_object()) {
      d.waiting = WaitInfo{w->value("code", std::string()), w->value("reason", std::string())};
    }
    if (j.contains("snapshot") && j["snapshot"].is_object()) {
      const Json& s = j["snapshot"];
      Snapshot snap;
      snap.hash = s.value("hash", "");
      snap.path = s.value("path", "");
      snap.git = s.value("git", false);
      snap.git_commit = s.value("git_commit", "");
      snap.git_diff = s.value("git_diff", "");
      // Integers only: a float past int64 converted to one is undefined behaviour.
      auto count = [&](const char* key) -> int64_t {
        auto it = s.find(key);
        return it != s.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
      };
      snap.bytes = count("bytes");
      snap.files = count("files");
      snap.created_ms = count("created_ms");
      d.experiment.git_commit = snap.git_commit;
      d.experiment.git_diff = snap.git_diff;
      d.snapshot = snap;
    }
    if (auto c = j.find("container"); c != j.end() && c->is_object()) {
      d.experiment.spec = {{"container", ContainerJson(ContainerFrom(*c))}};
    }
    for (const auto& e : j.value("environments", Json::array())) {
      Environment env;
      env.experiment_id = d.experiment.id;
      env.interpreter = e.value("interpreter", "");
      env.packages = e.value("packages", "");
      env.hostname = e.value("hostname", "");
      env.gpu_info = e.value("gpu_info", "");
      d.environments.push_back(std::move(env));
    }
    if (auto p = j.find("prune"); p != j.end() && p->is_object()) {
      if (!d.experiment.spec.is_object()) d.experiment.spec = Json::object();
      d.experiment.spec["prune"] = *p;
    }
    for (const auto& r : j.value("rungs", Json::array())) {
      RungRecord rung;
      rung.run_id = d.run.id;
      rung.bracket = r.value("bracket", 0);
      rung.rung = r.value("rung", 0);
      rung.step = r.value("step", int64_t{0});
      rung.value = r.contains("value") && r["value"].is_number()
                       ? r["value"].get<double>()
                       : std::numeric_limits<double>::quiet_NaN();
      rung.pruned = r.value("pruned", false);
      rung.unit = r.value("unit", std::string("step"));
      rung.report_step = r.value("report_step", int64_t{0});
      d.rungs.push_back(rung);
    }
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("run detail: ") + e.what());
  }
  return d;
}

}  // namespace drover::protocol
