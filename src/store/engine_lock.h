#pragma once
// One engine per store: the engine owns the store's GPU bookkeeping and is its only writer, so a
// second `drover run` (or, later, a daemon) on the same store must not schedule beside it. The
// lock is an flock on <store>/engine.lock holding the owner's pid; the kernel drops it when the
// process dies, so a crash never leaves a stale lock.
#include <optional>
#include <string>

#include "common/status.h"

namespace drover {

class EngineLock {
 public:
  // Takes the lock or says which process holds it.
  static Result<EngineLock> Acquire(const std::string& store_dir);
  // The pid of the process holding the store's lock, if one does (nothing when it is free).
  static std::optional<int> Holder(const std::string& store_dir);
  EngineLock(EngineLock&& other) noexcept;
  EngineLock& operator=(EngineLock&&) = delete;
  EngineLock(const EngineLock&) = delete;
  ~EngineLock();

 private:
  explicit EngineLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace drover
