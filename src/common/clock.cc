#include "common/clock.h"

#include <chrono>

namespace drover {

Millis RealClock::Now() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Millis RealClock::Monotonic() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace drover
