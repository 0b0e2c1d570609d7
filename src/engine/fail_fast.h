#pragma once
// Fail fast, a component of the engine (docs/spec.md, "fail_fast"): an experiment whose first
// runs to end all failed the same way stops, instead of running (or a search proposing) every
// other config into the same error: a script that cannot import its framework, a typo in a
// flag, a missing data file. "The same way": the same outcome (a non-zero exit, a crash, a
// command that could not start) and the same last line of stderr (the exception), numbers
// aside, so `ValueError: lr 0.1 too high` and `... 0.3 ...` are one error.
//
// The first `spec.fail_fast` runs of the experiment to end in this engine are looked at (3 by
// default; 0 turns it off). A run that succeeds, is pruned, or fails another way before then
// ends the watch: the experiment runs to its end as before. When they all failed the same way,
// the engine stops the experiment (FailFastHost: its search proposes no more trials, its waiting
// runs are cancelled; running ones go on) and an alert `experiment_stopped` says why with the
// error, which `drover run` prints at its end. Cancelled runs are neither counted nor end the
// watch. `drover retry` watches the experiment afresh.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/engine_context.h"
#include "model/run.h"
#include "model/run_lifecycle.h"
#include "model/spec.h"

namespace drover {

// What fail fast asks of the engine.
class FailFastHost {
 public:
  virtual ~FailFastHost() = default;
  // Stops the experiment: no more trials proposed, its waiting runs cancelled with `note` as
  // their event's text; running runs go on. Returns how many runs were cancelled.
  virtual int StopExperiment(int64_t experiment_id, const std::string& note, Instant now) = 0;
};

class FailFast : public RunLifecycle {
 public:
  FailFast(EngineContext& ctx, FailFastHost& host) : ctx_(ctx), host_(host) {}

  // Watches the experiment from now on (again after a retry: counting starts afresh).
  void Watch(const Experiment& e, const Spec& spec);
  void Forget(int64_t experiment_id) { watched_.erase(experiment_id); }

  // A final run of a watched experiment is counted (its last attempt's error read from the
  // store when it failed). The stop itself waits for Apply: OnFinal is called while a run is
  // being retired.
  void OnFinal(const Run& run) override;
  // Stops the experiments whose watch found one error (between two passes of the loop).
  void Apply(Instant now);

  // The error a failure is known by: its outcome and the last non-empty line of its stderr
  // (`error`), each number in it as one '#'.
  static std::string Signature(const Run& run, const std::string& error);
  // The last non-empty line of `error`.
  static std::string LastLine(const std::string& error);

 private:
  struct Watched {
    std::string name;   // the experiment's, for the alert
    int threshold = 3;  // spec.fail_fast
    std::string signature;
    std::string error;           // the first failure's last line, as it was
    std::vector<int64_t> runs;   // the failed runs counted so far
    bool over = false;           // decided: stopped, or a run ended otherwise
    bool stop = false;           // to be stopped at the next Apply
  };

  EngineContext& ctx_;
  FailFastHost& host_;
  std::map<int64_t, Watched> watched_;  // by experiment id
};

}  // namespace drover
