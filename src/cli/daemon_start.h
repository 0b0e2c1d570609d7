#pragma once
// A daemon started on demand (docs/lab-server.md, "Daemons started on demand"): `drover mcp` and
// `drover run` start `drover serve` for their store when none serves it, detached (its own
// session, so its runs outlive the caller's terminal or agent), logging to <store>/serve.log,
// and exiting by itself once idle for `idle_exit`.
#include <string>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/engine_setup.h"

namespace drover::cli {

struct OnDemandDaemon {
  std::string fake_gpus;  // --fake-gpus for it ("" for real GPUs)
  int cpus = 0;           // --cpus (0: the machine's)
  std::string idle_exit;  // --idle-exit ("" or "0": never)
  EngineFlags engine;     // --config, --policy, --gpu-leases, --fake-telemetry
};

// Starts it and waits (up to 10 s) until it serves; another drover that won the race to own the
// store serves instead. Its SIGCHLD is ignored from then on (the kernel reaps it).
Result<DaemonInfo> StartDaemonOnDemand(const Globals& g, const OnDemandDaemon& o);

// A command that would have started a daemon with `o` found one serving the store already: it
// must serve what was asked. With --fake-gpus given, the daemon's GPUs must be those (count and
// memory each); otherwise FailedPrecondition says what it has and what to type (`drover daemon
// stop`, then the command again), rather than the flag going nowhere (issue 40).
Status CheckJoinedDaemon(const DaemonInfo& daemon, const OnDemandDaemon& o);

// How a daemon that serves the store exits: "it exits after 5m00s idle" or "it runs until
// stopped".
std::string HowItExits(const DaemonInfo& daemon);

// `refusal` (the store's engine lock is held) said again, where a daemon serves the store, as
// what a user can act on: which daemon (pid), how it exits, and the two ways on (submit to it,
// or `drover daemon stop`). Otherwise `refusal` itself.
Status ADaemonServesTheStore(const Globals& g, Status refusal);

}  // namespace drover::cli
