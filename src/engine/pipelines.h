#pragma once
// Pipelines, a component of the engine (docs/pipelines.md, docs/architecture.md): runs that wait
// for the runs they need (the gate), fingerprints that take in their needs' outputs, runs that an
// earlier success with the same fingerprint stands for (cached) or that wait for an unfinished
// twin, needs' outputs shown in a run's working copy, and outputs stored off the loop when a
// stage succeeds (the collection). It acts on runs through the RunTable and on the store through
// the EngineContext; it never includes engine/engine.h.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/engine_context.h"
#include "engine/live.h"
#include "engine/output_collection.h"
#include "engine/pipeline_gate.h"
#include "engine/run_table.h"
#include "model/run_lifecycle.h"

namespace drover {

class Pipelines : public RunLifecycle {
 public:
  // `wake`: from the collector's thread, when a stage's outputs are stored; `off_loop`: outputs
  // are stored on a thread of their own (else at once, on the loop's).
  Pipelines(EngineContext& ctx, RunTable& runs, std::string store_dir, std::function<void()> wake,
            bool off_loop)
      : ctx_(ctx), runs_(runs), store_dir_(std::move(store_dir)),
        outputs_(std::move(wake), off_loop) {}

  // The stage views of a pipeline's entry (ExperimentEntry::stages).
  static void InitStages(ExperimentEntry& ep);

  // A new or recovered unfinished run: registered with the runs it needs and, until they have
  // all succeeded, kept out of the queue. Returns whether it waits.
  bool AwaitNeeds(LiveRun& live);
  // A recovered run, held for its needs until every run is registered (then AwaitNeeds).
  void Hold(int64_t run_id) { gate_.Hold(run_id); }
  bool Holds(int64_t run_id) const { return gate_.Holds(run_id); }
  // A run's needs changed (one ended): it is queued (or reused from an earlier success) once
  // all have succeeded, and cancelled when one did not.
  void NeedsChanged(LiveRun& live, Instant now);
  // The runs waiting on `run_id`, told it ended.
  void WakeDependents(int64_t run_id, Instant now);
  // A run ready to be queued: cached from an earlier success, or waiting for an unfinished run
  // with its fingerprint (its twin) to end, or queued (and the twin others wait for).
  void Admit(LiveRun& live, Instant now);
  // Whether a run may be stood for by another with its fingerprint (a stage not forced, a plain
  // run without rerun, not a search's trial).
  bool Dedups(const LiveRun& live) const;
  // A recovered run that holds or had an attempt stands for its fingerprint (Admit's twin).
  void ClaimTwin(const LiveRun& live);
  // A stage the last engine started without recording it (nor its fingerprint): fingerprinted
  // now, so later runs of the stage may be cached from it.
  void FingerprintTakenOverStage(LiveRun& live);
  // Why a run waits, as the gate has it (drover why).
  const PipelineGate& gate() const { return gate_; }

  // The needs' outputs shown in this run's working copy, and $DROVER_INPUTS' file.
  Result<std::vector<DataMount>> NeedMounts(LiveRun& live, const std::string& workdir);
  // A succeeded attempt of a stage with outputs: stored on the collector's thread; the run ends
  // when they are (TakeCollected).
  void CollectOutputs(LiveRun& live);
  void TakeCollected(Instant now);
  bool Collecting(int64_t run_id) const { return outputs_.Collecting(run_id); }
  // Outputs being stored or held for room: the loop stays for them.
  bool busy() const { return outputs_.busy(); }

  void OnFinal(const Run& run) override {
    gate_.OnFinal(run);
    outputs_.OnFinal(run);
  }

 private:
  // Whether a run with the same fingerprint succeeded before and may stand for this one: then
  // this run is recorded as succeeded, cached from it, and retired.
  bool TryCache(LiveRun& live, Instant now);
  // A stage's fingerprint from its own command, parameters, code and inputs and its (succeeded)
  // needs' fingerprints and outputs.
  Result<std::string> StageFingerprintOf(const LiveRun& live, const std::vector<Run>& needs);
  // The run's row written again (its fingerprint, its priority) in the loop's transaction.
  void Update(const Run& run);

  EngineContext& ctx_;
  RunTable& runs_;
  std::string store_dir_;
  PipelineGate gate_;          // which runs wait for their needs or their twin
  OutputCollection outputs_;   // succeeded stages' outputs being stored (or held for room)
};

}  // namespace drover
