#include "engine/pipeline_gate.h"

namespace drover {

bool PipelineGate::AwaitNeeds(int64_t run_id, const std::vector<int64_t>& unfinished) {
  // Only the unfinished needs are waited for (each tells it when it ends); a count, so a gather
  // over thousands of runs costs one step per need that ends.
  for (int64_t n : unfinished) dependents_[n].push_back(run_id);
  waits_[run_id] = {Wait::kNeeds, static_cast<int>(unfinished.size())};
  return !unfinished.empty();
}

void PipelineGate::AwaitTwin(int64_t run_id, int64_t twin_id) {
  waits_[run_id] = {Wait::kTwin, 0};
  dependents_[twin_id].push_back(run_id);
}

PipelineGate::Wait PipelineGate::WaitOf(int64_t run_id) const {
  auto it = waits_.find(run_id);
  return it == waits_.end() ? Wait::kNone : it->second.wait;
}

int64_t PipelineGate::TwinOf(const std::string& key) const {
  auto it = twins_.find(key);
  return it == twins_.end() ? 0 : it->second;
}

std::vector<PipelineGate::Woken> PipelineGate::Ended(int64_t run_id) {
  std::vector<Woken> woken;
  auto it = dependents_.find(run_id);
  if (it == dependents_.end()) return woken;
  const std::vector<int64_t> waiting = std::move(it->second);
  dependents_.erase(it);
  for (int64_t id : waiting) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;
    if (w->second.wait == Wait::kTwin) {
      woken.push_back({id, Wait::kTwin});
    } else if (--w->second.unfinished <= 0) {
      woken.push_back({id, Wait::kNeeds});
    }
  }
  return woken;
}

void PipelineGate::OnFinal(const Run& run) {
  waits_.erase(run.id);
  if (auto twin = twins_.find(TwinKey(run)); twin != twins_.end() && twin->second == run.id) {
    twins_.erase(twin);
  }
}

}  // namespace drover
