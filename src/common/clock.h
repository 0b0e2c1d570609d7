#pragma once
// Time comes from a Clock, never from the wall directly, so retries, backoff and timeouts are
// tested by advancing a FakeClock instead of sleeping. Times are milliseconds since the Unix epoch.
#include <cstdint>

namespace drover {

using Millis = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Millis Now() const = 0;
};

class RealClock : public Clock {
 public:
  Millis Now() const override;
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(Millis start = 1'700'000'000'000) : now_(start) {}
  Millis Now() const override { return now_; }
  void Advance(Millis ms) { now_ += ms; }
  void Set(Millis t) { now_ = t; }

 private:
  Millis now_;
};

}  // namespace drover
