#pragma once
// What the engine waits out and retries with backoff: a store that cannot commit for want of
// room, and starts that cannot be prepared.
#include "common/clock.h"
#include "common/status.h"
#include "exec/process_launcher.h"

namespace drover {

// Something the engine waits out and retries: since when, why at the last try, and when it tries
// again (after 1 s, doubling to 30 s). Both waits below share it.
struct Retrying {
  Status why;
  Millis since_wall = 0;
  Millis since_mono = 0;
  Millis backoff_ms = 0;
  Millis retry_mono = 0;
  int tries = 0;
  // The first failure (tries == 0) or a failed retry: the next try is scheduled.
  void Failed(const Status& status, Instant now);
};

// The engine's state while its store cannot commit for want of room (Engine::EnterStall).
struct StoreStall : Retrying {
  WaitResult held;  // what the launcher reported meanwhile, handled once the store recovers
};

// The engine's state while no run can be prepared to start (its working copy or log folder
// cannot be made: a full or failing disk under the store's runs folder; or the executor's
// controller does not answer, e.g. Slurm down): Engine::HoldStarts.
struct StartHold : Retrying {};

}  // namespace drover
