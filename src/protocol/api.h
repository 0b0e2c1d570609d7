#pragma once
// The HTTP API's request and response types and their JSON: one module shared by the daemon
// (src/server/), the CLI client and later the MCP layer, so the shapes never drift apart.
// docs/http-api.md documents every route with an example.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/cleanup.h"
#include "model/gpu.h"
#include "model/run.h"

namespace drover::protocol {

inline constexpr const char* kApiPrefix = "/api/v1";
// Bodies larger than this are refused with 413 before they are read.
inline constexpr size_t kMaxBodyBytes = 1 << 20;

// Errors travel as {"error": {"code": "...", "message": "..."}} with the matching HTTP status.
Json ErrorJson(const Status& st);
int HttpStatusFor(Code code);
// The Status an error body describes (for clients).
Status StatusFromErrorJson(const Json& body, int http_status);

// POST /api/v1/experiments
struct SubmitRequest {
  std::string spec_yaml;                // the spec file's text
  std::string spec_name = "spec.yaml";  // for error messages (file:line:column)
  std::string base_dir;                 // where a relative workdir resolves (the spec's folder)
  std::vector<std::string> overrides;   // --set key=value
};
Json ToJson(const SubmitRequest& r);
Result<SubmitRequest> SubmitRequestFromJson(const Json& j);

struct SubmitResponse {
  int64_t experiment_id = 0;
  std::vector<int64_t> run_ids;
  std::vector<std::string> notes;  // said to the submitter, nothing refused ("notes", when any)
};
Json ToJson(const SubmitResponse& r);
Result<SubmitResponse> SubmitResponseFromJson(const Json& j);

// POST /runs/{id}/reproduce: the experiment that runs the run again (spec/reproduce.h), and its
// run of the same stage (the one to compare).
struct ReproduceResponse {
  int64_t experiment_id = 0;
  int64_t run_id = 0;
  std::vector<int64_t> run_ids;  // all its runs (a stage's needs, cached where they can be)
};
Json ToJson(const ReproduceResponse& r);
Result<ReproduceResponse> ReproduceResponseFromJson(const Json& j);

// POST /api/v1/runs/{id}/priority
struct PriorityRequest {
  int priority = 0;
};
Result<PriorityRequest> PriorityRequestFromJson(const Json& j);

// POST /api/v1/experiments/{id}/retry: which finished runs go back to the queue as new attempts
// of the same runs (drover retry, drover run --resume). At least one of the three.
// Which code a retry runs: the snapshot recorded at the submit, or the workdir as it is now (a
// new snapshot, for the retried runs from their next attempt on).
enum class RetryCode { kSubmitted, kCurrent };
std::string_view ToString(RetryCode c);
std::optional<RetryCode> ParseRetryCode(std::string_view s);

struct RetryRequest {
  bool failed = false;
  bool cancelled = false;
  std::vector<int64_t> runs;  // run ids, in any finished state
  RetryCode code = RetryCode::kSubmitted;
  // At most this many ids in one request.
  static constexpr size_t kMaxRuns = 100'000;
};
Json ToJson(const RetryRequest& r);
Result<RetryRequest> RetryRequestFromJson(const Json& j);

// Its answer: the runs queued again (none when nothing matched).
struct RetryResponse {
  int64_t experiment_id = 0;
  std::vector<int64_t> run_ids;
  // The code they run ("code": its words; "snapshot": its hash): the snapshot recorded when the
  // experiment was submitted, or with code "current" the one this retry took of the workdir.
  std::string snapshot;
  std::string code;
};
// What a retry runs, in words: the experiment's recorded snapshot (its git commit, uncommitted
// changes), and that edits since the submit are not in it and how to run them; or, given the
// snapshot a --code current retry took (`current`), that one.
std::string RetryCodeNote(const Experiment& e, const std::string& current = "");
Json ToJson(const RetryResponse& r);
Result<RetryResponse> RetryResponseFromJson(const Json& j);

// Ask/tell on a search (docs/search.md, "Ask/tell"):
// POST /api/v1/experiments/{id}/suggest: the search's next `count` configs (1 to kMaxCount),
// proposed honouring its running trials; nothing is recorded.
struct SuggestRequest {
  int count = 1;
  static constexpr int kMaxCount = 100;
};
Result<SuggestRequest> SuggestRequestFromJson(const Json& j);
// POST /api/v1/experiments/{id}/tell: a result for a config the caller ran itself (value null:
// it failed); stored as an observation of the search.
struct TellRequest {
  Json params = Json::object();
  std::optional<double> value;
};
Json ToJson(const TellRequest& r);
Result<TellRequest> TellRequestFromJson(const Json& j);
// POST /api/v1/experiments/{id}/trials: a config of the caller's choosing, run as the search's
// next trial. Answers with the run made ({"run_id": N}).
struct AddTrialRequest {
  Json params = Json::object();
};
Result<AddTrialRequest> AddTrialRequestFromJson(const Json& j);

// DELETE /api/v1/experiments/{id} (drover rm) and POST /api/v1/store/gc (drover gc) answer with
// what was deleted, or with dry_run what would be.
Json ToJson(const Cleanup& c);
Result<Cleanup> CleanupFromJson(const Json& j);

// POST /api/v1/store/gc
struct GcRequest {
  int64_t older_than_ms = 7LL * 24 * 3600 * 1000;  // "older_than": a duration such as "7d"
  bool checkpoints = false;
  bool dry_run = false;
};
Json ToJson(const GcRequest& r);
Result<GcRequest> GcRequestFromJson(const Json& j);

// Live state of one GPU (GET /api/v1/gpus).
struct GpuStatus {
  int index = 0;
  std::string name;
  std::string uuid;
  int64_t memory_total = 0;     // what drover may hand out to runs
  int64_t memory_device = 0;    // the device's own total: the rest is kept (scheduler.gpu_reserve
                                // and memory in use when drover started); 0 = unknown
  int64_t memory_reserved = 0;  // by drover's runs
  std::vector<int64_t> runs;    // run ids on it now
  bool exclusive = false;
  std::optional<GpuSample> telemetry;  // the latest reading (utilisation, temperature, ...)
};
Json ToJson(const GpuStatus& g);
// A telemetry reading; unknown values (negative) are null. Processes are listed with their pid.
Json ToJson(const GpuSample& s);
Result<GpuSample> GpuSampleFromJson(const Json& j);
// An alert as json_codec's ToJson(Alert) writes it.
Result<Alert> AlertFromJson(const Json& j);
Result<RunArtifacts> RunArtifactsFromJson(const Json& j);
Result<GpuStatus> GpuStatusFromJson(const Json& j);

// Everything recorded about one run (GET /api/v1/runs/{id}, `drover show RUN --json`).
// Why a queued run waits, as the daemon's scheduler says it (drover why; sched::WaitKind's name
// as the code: gpu_memory, whole_gpus, max_parallel, quota, held_for_run, cpu_slots, backoff,
// preempting, queued; and needs, executor, starting, not_scheduled for what the engine knows).
struct WaitInfo {
  std::string code;
  std::string reason;
};

struct RunDetail {
  Run run;
  std::vector<Attempt> attempts;
  Experiment experiment;  // id, name, git_commit, git_diff
  std::optional<Snapshot> snapshot;
  std::vector<Environment> environments;
  std::vector<RungRecord> rungs;  // where the prune rule compared it (and stopped it)
  std::optional<WaitInfo> waiting;  // a queued run on a daemon: why it waits
};
Json ToJson(const RunDetail& d);
Result<RunDetail> RunDetailFromJson(const Json& j);

// Decoders of the records' JSON (src/protocol/json_codec.h writes them).
Result<Experiment> ExperimentFromJson(const Json& j);
Result<RunCounts> RunCountsFromJson(const Json& j);  // ToJson(const RunCounts&)'s object

// One row of GET /experiments: the experiment and how many of its runs are in each state
// ("counts" and "total_runs" beside the experiment's own fields).
struct ExperimentListing {
  Experiment experiment;
  RunCounts runs;
};
Json ToJson(const ExperimentListing& l);
Result<ExperimentListing> ExperimentListingFromJson(const Json& j);
Result<Run> RunFromJson(const Json& j);
Result<Attempt> AttemptFromJson(const Json& j);
Result<MetricPoint> MetricPointFromJson(const Json& j);

// A number that may be NaN or infinite, as JSON (which has no such numbers) carries it: a number,
// or the text "NaN", "Infinity", "-Infinity" (what JavaScript's Number() and Python's float()
// read back).
Json NumberJson(double v);
// NumberJson's text back; InvalidArgument for anything else.
Result<double> NumberFromJson(const Json& j);

// GET /experiments/{id}/summaries?metric=NAME&last=K: each run's curve of one metric summed up
// (Store::MetricSummaries), {"runs": [{"run_id", "points", "last", "lowest", "highest",
// "mean_last"}]}.
Json CurveSummariesJson(const std::map<int64_t, CurveSummary>& curves);
Result<std::map<int64_t, CurveSummary>> CurveSummariesFromJson(const Json& j);

}  // namespace drover::protocol
