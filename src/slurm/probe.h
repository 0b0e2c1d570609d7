#pragma once
// Whether Slurm's nodes see the store's folders (issue 17): drover writes a file with a fresh
// nonce in the folder, a small job on the cluster copies it beside itself, and drover reads the
// copy back. Run at daemon start with the Slurm executor; its error says what to fix.
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "slurm/cluster.h"

namespace drover::slurm {

// OK when a job placed by `target` read what was written in `dir` and wrote back into it.
// FailedPrecondition naming the folder and what to do when it did not; Unavailable when the
// job did not end within timeout_ms (saying why it waits, Slurm's Reason).
Status ProbeSharedFolder(Cluster& cluster, const Target& target, const std::string& dir,
                         Millis timeout_ms);

}  // namespace drover::slurm
