#include "sched/predictor.h"

#include <cmath>

namespace drover::sched {

void DurationPredictor::Observe(const std::string& key, int gpus, Millis duration) {
  double v = static_cast<double>(duration);
  Update(by_key_[{key, gpus}], v);
  Update(by_gpus_[gpus], v);
  Update(all_, v);
}

std::optional<Millis> DurationPredictor::Predict(const std::string& key, int gpus) const {
  auto k = by_key_.find({key, gpus});
  if (k != by_key_.end() && k->second) return std::llround(*k->second);
  auto g = by_gpus_.find(gpus);
  if (g != by_gpus_.end() && g->second) return std::llround(*g->second);
  if (all_) return std::llround(*all_);
  return std::nullopt;
}

}  // namespace drover::sched
