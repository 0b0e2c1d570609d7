#pragma once
// Where a run's files live in the store, and its working copy: where it runs, writable, isolated
// from the snapshot and from every other run, and cheap whatever the size of the code
// (docs/execution.md, "Working copies"; docs/store.md, "Files").
//
// A snapshot of more than a few small files is not copied: the launcher mounts an overlay of the
// read-only snapshot (the lower layer) and changes/<id>/ (the upper layer, what the run wrote,
// kept after it ends) onto runs/<id>/ in a private mount namespace of the run, between fork
// and exec: as root a mount
// namespace of its own, otherwise also a user namespace that maps only the user to itself (so
// the run keeps its uid and, after exec, no capability). A run that rewrites, appends to,
// truncates, chmods or deletes a file changes only its changes/; the mount goes away with the
// run's last process, so nothing needs unmounting and a killed engine leaves no mount behind.
// Materialising costs three folders and one mount, the same for 1 MiB as for 1 GiB of code.
//
// A snapshot of a few small files is copied instead (cheaper than a mount: short runs' launch
// throughput), and so is every snapshot where overlays cannot be mounted (no user namespaces, a
// file system overlayfs refuses): Probe() says which, once per engine, the first time a snapshot
// too big to copy comes (an engine whose snapshots are all small never pays for the probe, a
// fork and a mount).
#include <string>
#include <vector>

#include "common/status.h"
#include "common/users.h"
#include "model/run.h"

namespace drover {

// What the launcher mounts for a run (LaunchSpec::overlay): `lower` read-only under `upper` at
// the run's cwd. Empty: the cwd is used as it is.
// A path of the machine shown read-only in a run's working copy (a spec's data:): bound at
// `target` in the run's own mount namespace, or, where there is none, a symbolic link there.
struct DataMount {
  std::string source;  // absolute
  std::string target;  // <working copy>/<name>
  // drover's own (a pipeline's earlier outputs under <store>/outputs): bound with the daemon's
  // rights even for a run as its submitter, whose data are reached with theirs.
  bool trusted = false;
  // A trusted one's folder, beneath which `source` is opened through no link (a need's output
  // that is itself a link, stored as the run wrote it, is refused rather than followed).
  std::string source_root;
};

struct OverlayMount {
  std::string lower;  // the snapshot
  std::string upper;  // <run>/changes
  std::string work;   // <run>/.overlay
  bool empty() const { return lower.empty(); }
};

// One run's files. Few folders per run: each costs an inode, and inodes are most of what
// launching short runs costs on a real disk (bench/README.md, "Launch throughput").
struct RunFiles {
  // The layout of new runs; a run begun by an older drover (runs/<id>/work/ beside its logs)
  // keeps its old folders. `begun`: the run may have been started before (by an older drover);
  // false for a run never started, whose layout is the new one without a look at the disk.
  static RunFiles In(const std::string& store_dir, int64_t experiment_id, int64_t run_id,
                     bool begun = true);
  // <store>/<name> (runs, logs, checkpoints), or where it links to: with the Slurm executor's
  // shared_dir these are links into a folder every node sees (docs/slurm.md).
  static std::string Folder(const std::string& store_dir, const char* name);
  std::string work;             // runs/<id>/: the run's cwd, its working copy
  std::string changes;          // changes/<id>/: what an overlay run wrote
  std::string overlay_scratch;  // changes/.<id>/: overlayfs' own
  std::string logs;             // logs/<experiment>/: one folder per experiment
  std::string checkpoints;      // checkpoints/<id>/: $DROVER_CHECKPOINT_DIR, made by the run
  std::string log_prefix;       // logs/<experiment>/<id>-
  std::string Stdout(int attempt) const { return log_prefix + std::to_string(attempt) + ".out"; }
  std::string Stderr(int attempt) const { return log_prefix + std::to_string(attempt) + ".err"; }
  std::string Exit(int attempt) const { return log_prefix + std::to_string(attempt) + ".exit"; }
};

struct WorkingCopy {
  std::string path;      // the run's cwd (RunFiles::work)
  OverlayMount overlay;  // empty when path is a plain copy
  // What is shown read-only in it (the spec's data, a pipeline stage's needs' outputs): bound in
  // the overlay, or linked in the copy.
  std::vector<DataMount> data;
};

// Snapshots up to these sizes are copied rather than mounted.
inline constexpr int64_t kCopyMaxFiles = 8;
inline constexpr int64_t kCopyMaxBytes = 1 << 20;

class WorkingCopies {
 public:
  // Whether overlays can be mounted here, tried once in a child process on a scratch folder
  // under `scratch_dir` (created and removed). `why` says why not.
  static WorkingCopies Probe(const std::string& scratch_dir);
  // Probe(scratch_dir) when the first snapshot too big to copy comes, not before.
  static WorkingCopies Deferred(std::string scratch_dir);
  // Plain copies only (tests, DROVER_WORKING_COPY=copy).
  static WorkingCopies CopyOnly(std::string why);

  bool probed() const { return scratch_dir_.empty(); }
  bool overlay() const { return overlay_; }  // false until probed
  const std::string& why_not() const { return why_not_; }

  // The working copy of one run, made on its first attempt and reused by later ones (however
  // the first was made). `fresh`: no attempt of this run can have made one (its first start, in
  // the engine that queued it), so nothing is looked for first.
  // `data`: the run's data (DataMount::target inside files.work); an overlay is used even for a
  // small snapshot then, so the data can be bound read-only in the run's mount namespace; a copy
  // gets symbolic links to it instead.
  // `as` set (a root daemon's run, docs/lab-server.md): the working copy is that user's: a copy
  // is made as them (MaterializeSnapshotAs), an overlay's mount point and upper layer are given
  // to them (top folders only: their parents are the store's).
  Result<WorkingCopy> Prepare(const Snapshot& snapshot, const RunFiles& files, bool fresh = false,
                              const std::vector<DataMount>& data = {},
                              const UnixUser* as = nullptr);

 private:
  bool overlay_ = false;
  std::string why_not_;
  std::string scratch_dir_;  // set while the probe is still to come
};

// In a child between fork and exec (async-signal-safe: no allocation): enters a private mount
// namespace (with a user namespace mapping `uid`/`gid` to themselves when not root) and mounts
// the overlay whose options are `options` onto `target`. Returns 0, or the errno of the step
// that failed, with that step's name in *step.
struct PreparedOverlay {
  std::string options;  // "lowerdir=...,upperdir=...,workdir=...[,userxattr]"
  std::string target;
  bool user_namespace = false;
  std::string uid_map;  // "<uid> <uid> 1\n"
  std::string gid_map;
  // Bound read-only after the overlay is mounted; flags: what the source's mount has that a
  // read-only remount must keep (nosuid, nodev, ...: locked in a user namespace).
  struct Bind {
    std::string source;
    std::string target;
    bool dir = true;
    unsigned long flags = 0;
    bool trusted = false;  // DataMount::trusted
    std::string source_root;  // DataMount::source_root
  };
  std::vector<Bind> binds;
};
// Fails (InvalidArgument) for paths overlayfs' options cannot carry (',', ':', '\\').
Result<PreparedOverlay> PrepareOverlay(const OverlayMount& mount, const std::string& target,
                                       const std::vector<DataMount>& data = {});
// `as` set (a run that will drop to its submitter, exec/child.h): the data are bound with the
// user's file rights (a source they cannot reach is refused) onto mount points resolved beneath
// the working copy without following any link (openat2), so nothing the user put in their
// working copy can point a mount made with the daemon's rights elsewhere.
struct RunAs;
int EnterOverlay(const PreparedOverlay& p, const char** step, const RunAs* as = nullptr);

}  // namespace drover
