#include "engine/run_queue.h"

namespace drover {

void RunQueue::Unwait(int64_t run_id) {
  auto it = class_of_.find(run_id);
  if (it == class_of_.end()) return;
  auto cls = waiting_.find(it->second);
  if (cls != waiting_.end()) {
    cls->second.erase(run_id);
    if (cls->second.empty()) waiting_.erase(cls);
  }
  class_of_.erase(it);
}

void RunQueue::Wait(int64_t run_id, const WaitClass& c) {
  Unwait(run_id);
  running_.erase(run_id);
  waiting_[c].insert(run_id);
  class_of_[run_id] = c;
}

void RunQueue::Run(int64_t run_id) {
  Unwait(run_id);
  Backoff(run_id, 0);
  running_.insert(run_id);
}

void RunQueue::Drop(int64_t run_id) {
  Unwait(run_id);
  Backoff(run_id, 0);
  running_.erase(run_id);
}

void RunQueue::Backoff(int64_t run_id, Millis at_mono) {
  if (auto it = retry_of_.find(run_id); it != retry_of_.end()) {
    retries_.erase({it->second, run_id});
    retry_of_.erase(it);
  }
  if (at_mono <= 0) return;
  retries_.insert({at_mono, run_id});
  retry_of_[run_id] = at_mono;
}

const WaitClass* RunQueue::ClassOf(int64_t run_id) const {
  auto it = class_of_.find(run_id);
  return it == class_of_.end() ? nullptr : &it->second;
}

Millis RunQueue::NextRetry(Millis now_mono) const {
  // Backoffs that have ended stay until their run starts: skipped here, by the set's order.
  auto it = retries_.upper_bound({now_mono, INT64_MAX});
  return it == retries_.end() ? 0 : it->first;
}

}  // namespace drover
