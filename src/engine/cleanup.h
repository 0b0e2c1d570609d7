#pragma once
// drover rm and drover gc on a store: planned first (what goes, and why: a dry run prints it),
// then carried out by the store's one writer (the daemon's engine, or the CLI holding the engine
// lock). ApplyCleanup deletes the records in one transaction, then moves the files into
// <store>/trash/ (a rename: fast whatever their size); EmptyTrash deletes them, off the engine's
// loop in the daemon.
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/cleanup.h"
#include "store/store.h"

namespace drover {

struct GcOptions {
  // Working copies of runs that ended at least this long ago.
  Millis older_than_ms = 7LL * 24 * 3600 * 1000;
  // Also the checkpoint folders of succeeded runs that ended that long ago.
  bool checkpoints = false;
  // An engine is storing a run's outputs right now (on its collector's thread): stored output
  // objects are left alone this time, so none goes between being written and being linked.
  bool storing_outputs = false;
};

// A snapshot folder younger than this is never collected: a submit may be taking it right now,
// before its experiment is recorded.
inline constexpr Millis kSnapshotGraceMs = 3600 * 1000;

// Everything of these experiments: their records and their files (logs, working copies, what the
// runs wrote, checkpoints, stored outputs, the HTML report). FailedPrecondition when runs of
// other experiments were cached from theirs (naming them).
// Sizes are left at 0: MeasureCleanup fills them in.
Result<Cleanup> PlanRemoval(Store& store, const std::string& store_dir,
                            const std::vector<int64_t>& experiment_ids);
// Working copies (and with options.checkpoints, checkpoints) of runs that ended before the
// cutoff, snapshots no experiment refers to, folders of runs and experiments the store no longer
// has, stored output objects no run links any more, and what an earlier cleanup left in the
// trash. `busy_runs`: runs never touched (the ones
// an engine is running or has queued).
Result<Cleanup> PlanGc(Store& store, const std::string& store_dir, const GcOptions& options,
                       Millis now_wall, const std::set<int64_t>& busy_runs);
// Deletes the plan's records (one transaction), then moves its files into the trash.
Status ApplyCleanup(Store& store, const std::string& store_dir, Cleanup& plan);
// Each item's size (at its place, or where ApplyCleanup moved it): a walk of every folder, so the
// daemon does it off its loop, once the loop has planned or applied the cleanup.
void MeasureCleanup(Cleanup& plan);
// Deletes what is in <store>/trash/.
Status EmptyTrash(const std::string& store_dir);

}  // namespace drover
