#pragma once
// The pipeline gate, a component of the engine (docs/architecture.md, docs/pipelines.md): which
// unfinished runs wait for others before they may be queued. A pipeline's run waits for the runs
// it needs; a run that may be stood for by another with its fingerprint (a duplicate) waits for
// its twin, the unfinished run with that fingerprint, and is cached from it when it succeeds.
// The gate keeps only who waits for whom; what to do when a wait ends (fingerprint the run,
// cache it, queue it, cancel it) is the engine's.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/run.h"
#include "model/run_lifecycle.h"

namespace drover {

class PipelineGate : public RunLifecycle {
 public:
  enum class Wait {
    kNone,   // not held by the gate: queued, running, or never waited
    kNeeds,  // for the runs it needs to end (then it is looked at: fingerprinted, or cancelled)
    kTwin,   // for its twin to end (then it is cached from it, or runs)
  };
  struct Woken {
    int64_t run_id = 0;
    Wait was = Wait::kNone;
  };

  // Runs are deduplicated per submitter: another user's outputs are not theirs to read, and
  // their runs are not to wait on.
  static std::string TwinKey(const Run& run) { return run.user + '\n' + run.fingerprint; }

  // The run waits for `unfinished`, those of its needs not ended yet; it is held even when none
  // is (the engine looks at it at once, then Releases it). Returns whether it waits for any.
  bool AwaitNeeds(int64_t run_id, const std::vector<int64_t>& unfinished);
  // The run is held for its needs, to be counted later (a restarted engine registers every run
  // before it counts).
  void Hold(int64_t run_id) { waits_[run_id] = {Wait::kNeeds, 0}; }
  // The run waits for its twin `twin_id` to end.
  void AwaitTwin(int64_t run_id, int64_t twin_id);
  // The run is no longer held (its needs were looked at, or its twin ended).
  void Release(int64_t run_id) { waits_.erase(run_id); }
  Wait WaitOf(int64_t run_id) const;
  bool Holds(int64_t run_id) const { return waits_.count(run_id) > 0; }
  size_t held() const { return waits_.size(); }

  // The unfinished run that stands for `key` (0: none).
  int64_t TwinOf(const std::string& key) const;
  // `run_id` stands for its key from now on (Admit: it is queued and others may wait for it).
  void SetTwin(const std::string& key, int64_t run_id) { twins_[key] = run_id; }
  // `run_id` stands for its key unless another run already does (a recovered or retried run).
  void ClaimTwin(const std::string& key, int64_t run_id) { twins_.try_emplace(key, run_id); }

  // `run_id` has ended: the runs to look at now, each told once: those that waited for it as
  // their twin, and those of which it was the last unfinished need. Runs no longer held are
  // left out.
  std::vector<Woken> Ended(int64_t run_id);

  // A final run is held no longer, and no longer stands for its fingerprint.
  void OnFinal(const Run& run) override;

 private:
  struct Held {
    Wait wait = Wait::kNone;
    int unfinished = 0;  // kNeeds: of its needs, those still unfinished (looked at when 0)
  };
  std::map<int64_t, Held> waits_;
  std::map<int64_t, std::vector<int64_t>> dependents_;  // run -> the runs waiting for it
  // The unfinished run each fingerprint's duplicates wait for, by TwinKey, so no two runs with
  // one fingerprint run at once.
  std::unordered_map<std::string, int64_t> twins_;
};

}  // namespace drover
