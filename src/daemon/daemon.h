#pragma once
// The daemon glue: implements the HTTP layer's EngineControl on top of the engine (commands are
// posted to the engine's loop thread and answered through futures) and turns the engine's
// observer callbacks into the event stream (a bounded ring buffer that SSE readers wait on).
#include <condition_variable>
#include <deque>
#include <mutex>

#include "common/clock.h"
#include "config/lab.h"
#include "engine/engine.h"
#include "server/engine_control.h"

namespace drover {

// Who the daemon serves (docs/lab-server.md): a shared daemon puts each submit in its
// submitter's own team (config::GroupFor).
struct DaemonOptions {
  config::LabConfig lab;
  bool shared = false;
};

class Daemon : public server::EngineControl, public EngineObserver {
 public:
  Daemon(Engine& engine, const Clock& clock, DaemonOptions options = {});

  // server::EngineControl, from HTTP threads.
  Result<protocol::SubmitResponse> Submit(const protocol::SubmitRequest& request,
                                          const server::Caller& submitter) override;
  Result<protocol::SubmitResponse> SubmitSpec(const Spec& spec, const server::Caller& submitter) override;
  Result<std::vector<std::string>> VerifyCode(const Snapshot& snapshot,
                                              const UnixUser& owner) override;
  Result<std::vector<std::string>> VerifyOutputs(const RunArtifacts& artifacts) override;
  Result<std::string> ExportRun(Store& store, int64_t run_id, bool code,
                                const UnixUser& owner) override;
  Status CancelRun(int64_t run_id) override;
  Status CancelExperiment(int64_t experiment_id) override;
  Status SetPriority(int64_t run_id, int priority) override;
  Status CheckSubmit(const protocol::SubmitRequest& request,
                     const server::Caller& submitter) override;
  Result<std::vector<int64_t>> Retry(int64_t experiment_id,
                                     const protocol::RetryRequest& which) override;
  Result<std::vector<Json>> Suggest(int64_t experiment_id, int count) override;
  Status Tell(int64_t experiment_id, const protocol::TellRequest& tell) override;
  Result<int64_t> AddTrial(int64_t experiment_id, const Json& params) override;
  Result<Cleanup> RemoveExperiments(const std::vector<int64_t>& ids, bool dry_run) override;
  Result<Cleanup> CollectGarbage(const protocol::GcRequest& request) override;
  std::vector<protocol::GpuStatus> Gpus() override;
  std::optional<protocol::WaitInfo> WaitingReason(int64_t run_id) override {
    return engine_.waiting().Of(run_id);
  }
  std::map<int64_t, protocol::WaitInfo> WaitingReasons() override {
    return engine_.waiting().All();
  }
  std::vector<server::StreamEvent> WaitEvents(int64_t after_seq, int64_t timeout_ms) override;
  int64_t LastEventSeq() override;

  // EngineObserver, on the engine's thread.
  void OnRunChanged(const Run& run, const Attempt* attempt, const std::string& note) override;
  void OnExperimentSubmitted(const Experiment& experiment, const std::vector<Run>& runs) override;
  void OnMetrics(const Run& run, const std::vector<MetricPoint>& points) override;
  void OnAlert(const Alert& alert) override;
  void OnStoreStalled(const Status& why, Millis retry_in_ms) override;
  void OnStoreRecovered(Millis stalled_ms) override;
  void OnGpuSamples(const std::vector<GpuSample>& samples) override;

  // Wakes every waiting reader (shutdown).
  void Close();

 private:
  // What a shared daemon asks of a submit (docs/lab-server.md): a project folder the submitter
  // owns, and their own team as the spec's group.
  // `recorded`: the spec's workdir is a snapshot the store recorded (a reproduction), the
  // daemon's own to read, not a folder the submitter named.
  Status ForSubmitter(Spec& spec, const server::Caller& submitter, bool recorded = false) const;
  Result<protocol::SubmitResponse> SubmitChecked(const Spec& spec, const server::Caller& submitter,
                                                 bool recorded);
  // Posts `command` to the engine's loop and waits for its reply.
  Result<CommandReply> Call(Command command);
  void Publish(EventKind kind, Json data);
  static std::vector<protocol::GpuStatus> StatusOf(const GpuReading& reading);

  Engine& engine_;
  DaemonOptions options_;
  const Clock& clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<server::StreamEvent> events_;
  int64_t seq_ = 0;
  bool closed_ = false;
};

}  // namespace drover
