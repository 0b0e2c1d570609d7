#pragma once
// Time comes from a Clock, never from the wall directly, so retries, backoff and timeouts are
// tested by advancing a FakeClock instead of sleeping. Two clocks: wall time (milliseconds since
// the Unix epoch) for what is recorded, monotonic time for what is waited for, which a step of
// the wall clock (NTP, a suspended VM, an admin's `date -s`) must not move.
#include <cstdint>

namespace drover {

using Millis = int64_t;

// One moment, read from both clocks at once: `wall` for records (start and end times, events,
// the scheduler's ages), `mono` for deadlines (timeouts, grace periods, retry backoff, stall
// detection, periodic work).
struct Instant {
  Millis wall = 0;
  Millis mono = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Millis Now() const = 0;        // wall clock
  virtual Millis Monotonic() const = 0;  // since an arbitrary start; never steps
  Instant At() const { return {Now(), Monotonic()}; }
};

class RealClock : public Clock {
 public:
  Millis Now() const override;
  Millis Monotonic() const override;
};

// Both clocks advance together; StepWall moves the wall clock alone, as NTP would.
class FakeClock : public Clock {
 public:
  explicit FakeClock(Millis start = 1'700'000'000'000) : now_(start), mono_(1'000'000) {}
  Millis Now() const override { return now_; }
  Millis Monotonic() const override { return mono_; }
  void Advance(Millis ms) {
    now_ += ms;
    mono_ += ms;
  }
  // Time passes until wall time `t` (monotonic time moves as much, never back).
  void Set(Millis t) {
    if (t > now_) mono_ += t - now_;
    now_ = t;
  }
  void StepWall(Millis delta) { now_ += delta; }

 private:
  Millis now_;
  Millis mono_;
};

}  // namespace drover
