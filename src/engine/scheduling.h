#pragma once
// Scheduling, a component of the engine (docs/scheduling.md, docs/architecture.md): a pass of the
// pure scheduler (sched::Decide) over the engine's run table. It works out what the scheduler is
// shown (the GPUs less the drained ones, with their latest telemetry; the running runs; the
// waiting runs class by class, only as many as could start), keeps what lasts from pass to pass
// (the policy and its Gittins index, how long finished runs took, the run the last preemption
// was for) and publishes why queued runs wait (drover why) for the API's threads. What a pass
// decides the engine carries out (SchedulingHost: start a run, preempt one); the GPUs other
// engines on the machine hold are read from, and this engine's published to, the GPU pool's
// leases.
//
// It reads the engine's run table (its runs, their index by state, its experiments) and GPU
// state, and never includes engine/engine.h.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/engine_options.h"
#include "engine/gpu_pool.h"
#include "engine/health_watch.h"
#include "engine/live.h"
#include "engine/run_queue.h"
#include "engine/run_times.h"
#include "engine/telemetry_sampler.h"
#include "engine/wait_board.h"
#include "protocol/api.h"
#include "sched/scheduler.h"
#include "store/store.h"

namespace drover {

// What a pass's decision asks of the engine.
class SchedulingHost {
 public:
  virtual ~SchedulingHost() = default;
  // Starts the run as the scheduler placed it; false when it could not be prepared for the
  // machine's sake (a full disk): nothing more starts in this pass.
  virtual bool Start(LiveRun& live, const sched::StartAction& action, Instant now) = 0;
  // Stops the running run so that a waiting one can have its GPUs (`why`: the scheduler's words).
  virtual void Preempt(LiveRun& live, const std::string& why, Instant now) = 0;
};

// What a pass reads: the engine's own state, never written here.
struct SchedulingInputs {
  const std::map<int64_t, std::unique_ptr<LiveRun>>& live;  // unfinished runs, by run id
  const std::map<int64_t, std::unique_ptr<ExperimentEntry>>& experiments;
  const RunQueue& queue;  // live indexed: running ones, waiting ones by class
  GpuPool& pool;
  HealthWatch& health;  // drained GPUs
  const TelemetrySampler& sampler;  // the latest reading per GPU
};

class Scheduling {
 public:
  // `options`: the engine's (its scheduler section and CPU slots, read at each pass).
  // `placed_by_executor`: attempts are jobs of an executor that places them (Slurm): each is one
  // slot of the pool and asks for no GPU of drover's.
  Scheduling(const EngineOptions& options, bool placed_by_executor, SchedulingInputs in,
             SchedulingHost& host);

  // How long earlier runs took, from the store (srtf, gittins; once, before the loop).
  void Seed(Store& store) { run_times_.Seed(store); }
  // A succeeded run of this key took `ms` on `gpus` GPUs.
  void Learn(const std::string& key, int gpus, Millis ms) { run_times_.Learn(key, gpus, ms); }

  // One pass: what the scheduler starts and preempts, carried out through the host.
  void Pass(Instant now);

  // Whether it is time to work out again why queued runs wait (every kExplainEveryMs).
  bool ExplainDue(Instant now);
  // Publishes why each run waits: `known` (what the engine itself knows: a stage's needs, a
  // twin, an executor's queue, a start in progress, starts held back) and, for `ask`, the
  // scheduler's reason from a pass of Decide() with explain on.
  void Explain(std::map<int64_t, protocol::WaitInfo> known, const std::vector<const LiveRun*>& ask,
               Instant now);
  const WaitBoard& waiting() const { return waiting_; }
  static constexpr Millis kExplainEveryMs = 2000;

  // Publishes what this engine's running runs hold of the GPUs, for other engines on the machine.
  void PublishLeases();

 private:
  using PredictCache = std::map<int64_t, std::optional<Millis>>;
  sched::ClusterView View(Instant now, PredictCache& predicted, bool* stop_in_flight);
  sched::PendingRun PendingOf(const LiveRun& live, Instant now, PredictCache& predicted);
  std::optional<Millis> Predict(const LiveRun& live, PredictCache& predicted);
  std::vector<GpuHold> Holds() const;
  Resources ResourcesOf(const Resources& asked) const;

  const EngineOptions& options_;
  const bool placed_by_executor_;
  SchedulingInputs in_;
  SchedulingHost& host_;
  sched::PolicyConfig policy_;  // config.Policy(), with the latest Gittins index
  RunTimes run_times_;          // how long succeeded runs took (srtf, gittins)
  int64_t preempt_for_ = 0;     // the waiting run the last preemption was for (ClusterView::first)
  Millis preempt_for_until_mono_ = 0;  // ... until then at most
  Millis explain_at_mono_ = 0;
  WaitBoard waiting_;  // why queued runs wait, published for the API's threads
};

}  // namespace drover
