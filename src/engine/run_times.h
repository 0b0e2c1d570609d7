#pragma once
// Run times, a component of the engine (docs/scheduling.md): how long succeeded runs took, by
// the shape of their experiment (the duration predictor behind srtf and priority's tie-breaks)
// and as GPU time (the sizes behind the Gittins index). Seeded once from the store's newest
// succeeded runs, then told of each run that succeeds.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/strings.h"
#include "sched/gittins.h"
#include "sched/predictor.h"
#include "store/store.h"

namespace drover {

// The duration predictor's key for an experiment's runs: its name and the names of its
// parameters (the shape of its config), so a sweep submitted again is predicted from the last.
template <typename J>
inline std::string PredictorKey(const std::string& name, const J& params) {
  std::vector<std::string> keys;
  for (auto it = params.begin(); it != params.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  return name + "(" + Join(keys, ",") + ")";
}

class RunTimes {
 public:
  // Feeds the predictor with the store's newest succeeded runs, oldest first (once; later calls
  // do nothing). A run's time is its succeeded attempt's plus its preempted ones' (the work its
  // checkpoints kept).
  void Seed(Store& store);
  // A run that succeeded took `run_ms` on `gpus` GPUs.
  void Learn(const std::string& key, int gpus, Millis run_ms);
  std::optional<Millis> Predict(const std::string& key, int gpus) const {
    return predictor_.Predict(key, gpus);
  }
  // The Gittins index over the latest sizes when they changed since the last call (else null).
  std::shared_ptr<const sched::GittinsIndex> TakeGittins();

 private:
  sched::DurationPredictor predictor_;
  bool seeded_ = false;
  std::vector<Millis> sizes_;  // GPU time of the latest succeeded runs
  bool sizes_changed_ = false;
};

}  // namespace drover
