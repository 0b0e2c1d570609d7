// Helpers shared by the route files: the per-thread store, long-poll slots, JSON replies, and
// checked parsing of ids, query parameters and bodies.
#include <charconv>
#include <set>

#include "server/routes.h"

namespace drover::server {
namespace {

struct ThreadStoreSlot {
  std::string path;
  std::unique_ptr<Store> store;
};

ThreadStoreSlot& Slot() {
  // One connection per worker thread and store path; closed when the worker thread ends (when the
  // server stops).
  thread_local ThreadStoreSlot slot;
  return slot;
}

}  // namespace

std::optional<int64_t> ParseInt64(const std::string& text) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (text.empty() || ec != std::errc() || p != e) return std::nullopt;
  return v;
}

Result<Store*> ServerContext::ThreadStore() {
  ThreadStoreSlot& s = Slot();
  if (!s.store || s.path != options.store_path) {
    s.store.reset();
    auto opened = Store::Open(options.store_path);
    if (!opened.ok()) return opened.status().WithContext("opening the store");
    s.store = std::move(*opened);
    s.path = options.store_path;
  }
  return s.store.get();
}

void ServerContext::DropThreadStore() { Slot().store.reset(); }

std::shared_ptr<void> ServerContext::AcquireLongPoll() {
  // On a shared daemon one user (not an admin) holds at most a quarter of them, so nobody can
  // take every event stream and log follow from the others.
  const Caller& caller = CurrentCaller();
  const bool capped = options.shared && !caller.admin;
  const int64_t uid = caller.user.uid;
  if (capped) {
    std::lock_guard<std::mutex> lock(long_polls_mu);
    int& mine = long_polls_by_user[uid];
    if (mine >= std::max(1, MaxLongPolls() / 4)) return nullptr;
    ++mine;
  }
  auto release_user = [this, capped, uid] {
    if (!capped) return;
    std::lock_guard<std::mutex> lock(long_polls_mu);
    auto it = long_polls_by_user.find(uid);
    if (it != long_polls_by_user.end() && --it->second <= 0) long_polls_by_user.erase(it);
  };
  if (++long_polls > MaxLongPolls()) {
    --long_polls;
    release_user();
    return nullptr;
  }
  return std::shared_ptr<void>(static_cast<void*>(this), [this, release_user](void*) {
    --long_polls;
    release_user();
  });
}

int ServerContext::MaxLongPolls() const { return std::max(1, std::max(options.threads, 9) - 8); }

std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void SendJson(httplib::Response& res, int http_status, const Json& body) {
  res.status = http_status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(DumpJson(body), "application/json");
}

void SendError(httplib::Response& res, const Status& st) {
  SendJson(res, protocol::HttpStatusFor(st.code()), protocol::ErrorJson(st));
}

void SendErrorCode(httplib::Response& res, int http_status, const std::string& code,
                   const std::string& message) {
  SendJson(res, http_status, Json{{"error", {{"code", code}, {"message", message}}}});
}

Result<int64_t> ParseId(const std::string& text, const char* what) {
  auto v = ParseInt64(text);
  if (!v || *v <= 0) {
    return InvalidArgument(std::string(what) + " must be a positive integer, got '" + text + "'");
  }
  return *v;
}

Result<std::optional<int64_t>> QueryInt(const httplib::Request& req, const char* name, int64_t lo,
                                        int64_t hi) {
  if (!req.has_param(name)) return std::optional<int64_t>();
  std::string text = req.get_param_value(name);
  auto v = ParseInt64(text);
  if (!v || *v < lo || *v > hi) {
    return InvalidArgument("query parameter '" + std::string(name) + "' must be an integer from " +
                           std::to_string(lo) + " to " + std::to_string(hi) + ", got '" + text +
                           "'");
  }
  return std::optional<int64_t>(*v);
}

Result<bool> QueryBool(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  std::string v = req.get_param_value(name);
  if (v == "1" || v == "true" || v == "yes" || v.empty()) return true;
  if (v == "0" || v == "false" || v == "no") return false;
  return InvalidArgument("query parameter '" + std::string(name) + "' must be 1 or 0, got '" + v +
                         "'");
}

Result<Json> ParseJsonBody(const httplib::Request& req) {
  if (req.body.empty()) return InvalidArgument("the request body is empty; send a JSON object");
  try {
    return Json::parse(req.body);
  } catch (const Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." -> from "parse".
    std::string what = e.what();
    size_t at = what.find("] ");
    if (at != std::string::npos) what = what.substr(at + 2);
    return InvalidArgument("malformed JSON body: " + what);
  } catch (const Json::exception& e) {
    // A number past a double (a 5000-digit integer, 1e400) is out_of_range, not a parse_error.
    std::string what = e.what();
    size_t at = what.find("] ");
    if (at != std::string::npos) what = what.substr(at + 2);
    return InvalidArgument("malformed JSON body: " + what + "; numbers must fit a double");
  }
}

Result<Run> LoadRun(ServerContext& ctx, int64_t run_id) {
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  auto run = store->GetRun(run_id);
  if (!run.ok()) return run.status();
  if (!run->has_value()) return NotFound("no run " + std::to_string(run_id));
  return std::move(**run);
}

Result<Experiment> LoadExperiment(ServerContext& ctx, const std::string& id_or_name) {
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  auto e = store->FindExperiment(id_or_name);
  if (!e.ok()) return e.status();
  if (!e->has_value()) return NotFound("no experiment '" + id_or_name + "' (by id or name)");
  return std::move(**e);
}

namespace {

constexpr const char* kHidden = "(hidden)";

// What of a spec, at the top or of one stage, another user is shown: an allowlist, so a field
// added to the spec later is hidden until someone decides it may be shown. What runs (command,
// env values, data: and inputs: paths, the project's folders, container mounts) stays the
// submitter's; what was asked for (parameters, resources, objective, stages' names) is the
// lab's to see.
const std::set<std::string>& ShownSpecFields() {
  static const std::set<std::string> kShown = {
      "name",          "shell",       "params",         "param_order",      "resources",
      "priority",      "group",       "preemptible",    "checkpoint",       "metrics",
      "max_parallel",  "retries",     "retries_given",  "retry_backoff_ms", "timeout_ms",
      "objective",     "oom",         "search",         "prune",            "monitor",
      "force",         "rerun",       "max_runs",       "executor_kind",    "gather",
      "needs",         "outputs",     "fail_fast"};
  return kShown;
}

// The names of a mapping's keys with each value hidden (env: which variables, not their values).
Json KeysOnly(const Json& j) {
  if (!j.is_object()) return kHidden;
  Json out = Json::object();
  for (const auto& [key, value] : j.items()) out[key] = kHidden;
  return out;
}

Json RedactedSpecPart(const Json& part, bool top) {
  if (!part.is_object()) return kHidden;
  Json out = Json::object();
  for (const auto& [key, value] : part.items()) {
    if (ShownSpecFields().count(key)) {
      out[key] = value;
    } else if (key == "env" || key == "data") {  // (input_hashes are keyed by paths: hidden)
      out[key] = KeysOnly(value);
    } else if (key == "inputs" && value.is_array()) {
      out[key] = Json::array();
      for (size_t i = 0; i < value.size(); ++i) out[key].push_back(kHidden);
    } else if (key == "container" && value.is_object()) {
      // The image is what the run ran in (show names it); the mounts are the submitter's paths.
      Json c = Json::object();
      for (const char* shown : {"image", "runtime", "network", "image_id", "digest"}) {
        if (value.contains(shown)) c[shown] = value[shown];
      }
      out[key] = c;
    } else if (key == "stages" && top) {
      // Stored as a list of stages; a spec written by hand has a mapping of name: stage.
      if (value.is_array()) {
        out[key] = Json::array();
        for (const Json& st : value) out[key].push_back(RedactedSpecPart(st, false));
      } else if (value.is_object()) {
        out[key] = Json::object();
        for (const auto& [name, st] : value.items()) out[key][name] = RedactedSpecPart(st, false);
      } else {
        out[key] = kHidden;
      }
    } else {
      out[key] = kHidden;  // command, workdir, project_dir, and anything not named above
    }
  }
  return out;
}

}  // namespace

Json RedactedSpec(const Json& spec) { return RedactedSpecPart(spec, true); }

Experiment RedactedFor(const Caller& caller, Experiment e) {
  if (MayActOn(caller, e, "read").ok()) return e;
  e.spec = RedactedSpec(e.spec);
  e.spec_yaml = "(not shown: another user's spec)";
  if (!e.git_diff.empty()) e.git_diff = "(not shown: another user's changes)";
  return e;
}

Json RedactedEvent(const std::string& kind, const Json& data) {
  // What every event about a run may say to anyone: which run, which experiment, whose, its
  // state and the reason code. Notes (a failure's last stderr line, paths) are the submitter's.
  static const std::set<std::string> kIds = {"run_id", "experiment_id", "state",  "attempt",
                                             "reason", "user",          "runs",   "name",
                                             "cuda_visible_devices"};
  std::set<std::string> shown = kIds;
  if (kind == "metrics") {
    // The same points GET /runs/{id}/metrics gives anyone.
    shown.insert({"points", "downsampled_from"});
  } else if (kind == "gpu") {
    return data;  // the pool's telemetry: no run's text
  } else if (kind == "alert") {
    shown.insert({"id", "kind", "severity", "gpu", "first_ms", "last_ms", "count"});
    // Drover's own detectors word their messages; an alert a run raised itself (drover.alert,
    // kind "run") is in the script's words, with its details and key.
    const bool own_words = data.value("kind", std::string()) == "run";
    if (!own_words) shown.insert({"message", "key", "data"});
  }
  if (!data.is_object()) return Json::object();
  Json out = Json::object();
  for (const auto& [key, value] : data.items()) {
    if (shown.count(key)) out[key] = value;
  }
  if (data.contains("note")) out["note"] = "";
  if (kind == "alert" && !shown.count("message")) out["message"] = "(hidden: another user's alert)";
  return out;
}

void RedactAttempt(Attempt& a) {
  a.error.clear();  // the last lines of its stderr: the submitter's to read
  a.argv = {"(hidden: another user's command)"};
  // Logged hyper-parameters hold the script's flags (a key passed as one too).
  if (!a.hparams.empty()) a.hparams = Json{{"hidden", "another user's logged hyper-parameters"}};
}

}  // namespace drover::server
