#pragma once
// Duration prediction for the policies that rank by remaining time (srtf, priority, default): an
// EWMA of the run times of finished runs with the same key (experiment, user or config shape,
// as the caller names it) and GPU count; for an unseen key, the EWMA of all runs of that GPU
// count; then of all runs; nothing before the first run ends. Pure and deterministic.
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/clock.h"

namespace drover::sched {

class DurationPredictor {
 public:
  explicit DurationPredictor(double alpha = 0.3) : alpha_(alpha) {}

  void Observe(const std::string& key, int gpus, Millis duration);
  std::optional<Millis> Predict(const std::string& key, int gpus) const;

 private:
  void Update(std::optional<double>& ewma, double v) const {
    ewma = ewma ? alpha_ * v + (1 - alpha_) * *ewma : v;
  }
  double alpha_;
  std::map<std::pair<std::string, int>, std::optional<double>> by_key_;
  std::map<int, std::optional<double>> by_gpus_;
  std::optional<double> all_;
};

}  // namespace drover::sched
