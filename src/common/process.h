#pragma once
// Whether a process is alive, for the checks that decide from a recorded pid (a daemon's
// daemon.json, the store's engine.lock, a GPU lease). kill(pid, 0) alone says yes for a zombie:
// a daemon that exited after it was reparented stays one for as long as its new parent leaves
// it unreaped, which in a container whose init does not reap is forever.
#include <cstdint>

namespace drover {

// True while `pid` exists and has not exited (a zombie has). A process of another user counts
// (EPERM). Non-positive or out-of-range pids are not alive.
bool ProcessAlive(int64_t pid);

}  // namespace drover
