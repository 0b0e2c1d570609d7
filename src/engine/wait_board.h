#pragma once
// Why each queued run waits (drover why), as the engine's loop last worked it out
// (engine_why.cc), published for the API's threads (thread-safe).
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "protocol/api.h"

namespace drover {

class WaitBoard {
 public:
  void Publish(std::map<int64_t, protocol::WaitInfo> reasons) {
    std::lock_guard<std::mutex> lock(mu_);
    by_run_ = std::move(reasons);
  }
  // Nothing for a run that is not waiting.
  std::optional<protocol::WaitInfo> Of(int64_t run_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_run_.find(run_id);
    if (it == by_run_.end()) return std::nullopt;
    return it->second;
  }
  std::map<int64_t, protocol::WaitInfo> All() const {
    std::lock_guard<std::mutex> lock(mu_);
    return by_run_;
  }

 private:
  mutable std::mutex mu_;
  std::map<int64_t, protocol::WaitInfo> by_run_;
};

}  // namespace drover
