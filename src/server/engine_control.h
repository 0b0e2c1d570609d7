#pragma once
// What the HTTP layer may ask of the engine. The engine loop owns all state and is the only
// writer to the store; HTTP threads read the store through their own connections and send
// commands through this interface, which queues them to the loop and waits for the answer.
// Tests use a fake.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/status.h"
#include "common/users.h"
#include "server/identity.h"
#include "model/spec.h"
#include "protocol/api.h"
#include "store/store.h"

namespace drover::server {

// One event for the stream (GET /api/v1/events): run state changes, new metric points, GPU
// samples. `seq` increases by one per event and is the SSE id; clients resume with
// Last-Event-ID / ?after=.
struct StreamEvent {
  int64_t seq = 0;
  std::string kind;  // "run_state", "metrics", "gpu"
  Json data;
};

class EngineControl {
 public:
  virtual ~EngineControl() = default;
  // `submitter` is recorded as the experiment's, and on a shared daemon decides its fair-share
  // group (docs/lab-server.md).
  virtual Result<protocol::SubmitResponse> Submit(const protocol::SubmitRequest& request,
                                                  const Caller& submitter) = 0;
  // A spec made by the server itself from what the store recorded (a run to reproduce): submitted
  // as Submit does, without parsing.
  virtual Result<protocol::SubmitResponse> SubmitSpec(const Spec& spec,
                                                      const Caller& submitter) = 0;
  // The files of a recorded code snapshot that changed since it was stored (empty: intact), as
  // `drover verify` names them; run again only when intact (its owner could edit it).
  virtual Result<std::vector<std::string>> VerifyCode(const Snapshot& snapshot,
                                                      const UnixUser& owner) = 0;
  // The stored outputs of a run whose bytes are no longer what was stored (empty: intact).
  virtual Result<std::vector<std::string>> VerifyOutputs(const RunArtifacts& artifacts) = 0;
  // drover export through the daemon: writes run `run_id`'s archive (records read from `store`,
  // the code read as `owner`) into a new folder of its own and returns the archive's path; the
  // caller serves it and removes that folder.
  virtual Result<std::string> ExportRun(Store& store, int64_t run_id, bool code,
                                        const UnixUser& owner) = 0;
  // Whether the spec is valid and its runs could ever start on the pool; records nothing.
  virtual Status CheckSubmit(const protocol::SubmitRequest& request, const Caller& submitter) = 0;
  virtual Status CancelRun(int64_t run_id) = 0;
  virtual Status CancelExperiment(int64_t experiment_id) = 0;
  virtual Status SetPriority(int64_t run_id, int priority) = 0;
  // Queues finished runs of the experiment again; returns the ids queued.
  virtual Result<std::vector<int64_t>> Retry(int64_t experiment_id,
                                             const protocol::RetryRequest& which) = 0;
  // drover rm: deletes experiments with their records and files (dry_run: only says what).
  virtual Result<Cleanup> RemoveExperiments(const std::vector<int64_t>& ids, bool dry_run) = 0;
  // drover gc.
  virtual Result<Cleanup> CollectGarbage(const protocol::GcRequest& request) = 0;
  // Ask/tell on a search (docs/search.md): its next configs; a result for a config run outside
  // it; a config of the caller's choosing run as its next trial (the run's id).
  virtual Result<std::vector<Json>> Suggest(int64_t experiment_id, int count) = 0;
  virtual Status Tell(int64_t experiment_id, const protocol::TellRequest& tell) = 0;
  virtual Result<int64_t> AddTrial(int64_t experiment_id, const Json& params) = 0;
  virtual std::vector<protocol::GpuStatus> Gpus() = 0;
  // Events after `after_seq`, waiting up to timeout_ms for at least one. Events older than the
  // buffer are gone; the first returned then has a seq > after_seq + 1.
  virtual std::vector<StreamEvent> WaitEvents(int64_t after_seq, int64_t timeout_ms) = 0;
  virtual int64_t LastEventSeq() = 0;
  // Why a queued run waits, as the scheduler last said (drover why); nothing when unknown.
  virtual std::optional<protocol::WaitInfo> WaitingReason(int64_t run_id) { return std::nullopt; }
  virtual std::map<int64_t, protocol::WaitInfo> WaitingReasons() { return {}; }
};

}  // namespace drover::server
