// Run times (run_times.h).
#include "engine/run_times.h"

#include <spdlog/spdlog.h>

#include <map>

namespace drover {

void RunTimes::Seed(Store& store) {
  if (seeded_) return;
  seeded_ = true;
  // The newest succeeded runs, fed oldest first (the EWMA weighs the latest most).
  RunFilter filter;
  filter.state = RunState::kSucceeded;
  filter.newest_first = true;
  filter.limit = 2000;
  auto runs = store.ListRuns(filter);
  if (!runs.ok()) {
    spdlog::warn("reading past run times for the duration predictor: {}", runs.status().message());
    return;
  }
  std::map<int64_t, std::string> keys;  // experiment -> predictor key
  for (auto r = runs->rbegin(); r != runs->rend(); ++r) {
    auto key = keys.find(r->experiment_id);
    if (key == keys.end()) {
      auto e = store.GetExperiment(r->experiment_id);
      std::string k = e.ok() && *e ? PredictorKey((*e)->name, r->params) : "";
      key = keys.emplace(r->experiment_id, k).first;
    }
    auto attempts = store.ListAttempts(r->id);
    if (!attempts.ok() || key->second.empty()) continue;
    Millis ran = 0;
    for (const Attempt& a : *attempts) {
      auto outcome = ParseAttemptOutcome(a.reason);
      if (a.ended &&
          (outcome == AttemptOutcome::kSucceeded || outcome == AttemptOutcome::kPreempted) &&
          a.ended_ms >= a.started_ms) {
        ran += a.ended_ms - a.started_ms;
      }
    }
    if (ran > 0) Learn(key->second, r->resources.gpus, ran);
  }
}

void RunTimes::Learn(const std::string& key, int gpus, Millis run_ms) {
  predictor_.Observe(key, gpus, run_ms);
  constexpr size_t kKeep = 2000;
  if (sizes_.size() >= kKeep) sizes_.erase(sizes_.begin());
  sizes_.push_back(run_ms * std::max(1, gpus));
  sizes_changed_ = true;
}

std::shared_ptr<const sched::GittinsIndex> RunTimes::TakeGittins() {
  if (!sizes_changed_) return nullptr;
  sizes_changed_ = false;
  return std::make_shared<const sched::GittinsIndex>(sizes_);
}

}  // namespace drover
