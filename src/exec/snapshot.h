#pragma once
// Code snapshots: at submit time the workdir is captured immutably and content-addressed under
// <store>/snapshots/<hash>/, so editing code after submitting changes nothing queued.
// In a git work tree the captured files are the tracked and untracked-but-not-ignored ones
// (`git ls-files -co --exclude-standard`), i.e. the committed tree plus uncommitted changes; the
// commit and `git diff HEAD` are recorded. Elsewhere every file is copied, honouring .gitignore
// files when git is installed, and refusing when the total passes max_bytes.
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/users.h"
#include "model/run.h"

namespace drover {

inline constexpr int64_t kDefaultSnapshotMaxBytes = 256LL * 1024 * 1024;
inline constexpr int64_t kDefaultSnapshotMaxFiles = 100'000;

struct SnapshotOptions {
  int64_t max_bytes = kDefaultSnapshotMaxBytes;
  int64_t max_files = kDefaultSnapshotMaxFiles;
  // A folder never captured: the store, when it lies inside the workdir (`drover run spec.yaml
  // --store runs-db` in the project folder). snapshots_dir is never captured either, and a folder
  // named .drover (the default store) is skipped wherever it is.
  std::string excluded;
  // A file never captured: the spec file the experiment was submitted from, where it lies inside
  // the workdir. The spec is stored with the experiment; as code it would make every run's
  // fingerprint change with any value in it (issue 40).
  std::string spec_file;
  // Set (a root daemon's submit, docs/lab-server.md): the workdir is read with this user's rights
  // (git runs as them) and the snapshot's files are theirs, stored apart from anyone else's same
  // tree (the owner is part of the hash).
  const UnixUser* owner = nullptr;
  // When the snapshot is recorded as taken (Snapshot::created_ms): the caller's clock, so a
  // daemon's records come from its one time source.
  Millis now = 0;
};

// Captures `workdir` into `<snapshots_dir>/<hash>` (reused when it exists). A workdir over
// either limit is refused as soon as the walk passes it. Git helpers are killed after 2 minutes.
// Safe to call from any thread (it touches no store): the daemon calls it off the engine's loop.
Result<Snapshot> TakeSnapshot(const std::string& workdir, const std::string& snapshots_dir,
                              const SnapshotOptions& options = {});

// One file of a snapshot: its path relative to the workdir, its mode as git writes it ("100644",
// "100755", "120000" for a link) and its content's sha256 (a link's: its target's text).
struct SnapshotFile {
  std::string path, mode, hash;
  bool operator==(const SnapshotFile&) const = default;
};

// What TakeSnapshot would store for `workdir` now, without storing anything: the same file list
// and the same tree hash (they share the listing and the hashing), each file's content hash
// (known files from the store's hash cache, read but never written). For `drover run --dry-run`,
// which says which runs an unchanged code snapshot would let be cached, and which files changed.
struct SnapshotDigest {
  std::string hash;
  bool git = false;
  std::string git_commit;
  int64_t bytes = 0;
  std::vector<SnapshotFile> files;  // in path order
};
Result<SnapshotDigest> HashSnapshot(const std::string& workdir, const std::string& snapshots_dir,
                                    const SnapshotOptions& options = {});

// <snapshots_dir>/.manifests/<hash>: each file's mode, content hash and path, written when the
// snapshot is stored, so `drover verify` names a file that changed since.
std::string SnapshotManifest(const std::string& snapshots_dir, const std::string& hash);
// The manifest of a stored snapshot, in path order; nullopt when it has none (stored before
// drover kept them, or removed).
std::optional<std::vector<SnapshotFile>> ReadSnapshotManifest(const std::string& snapshots_dir,
                                                              const std::string& hash);
// Re-reads a stored snapshot: the files whose content or mode changed, that are missing or were
// added, each with what is wrong (empty: intact). NotFound when the snapshot is gone.
// `as`: the snapshot's owner, whose rights its files are read with (a root daemon's; null: the
// caller's own).
Result<std::vector<std::string>> VerifySnapshot(const Snapshot& snapshot,
                                                const std::string& snapshots_dir,
                                                const UnixUser* as = nullptr);

// A submitter's snapshot on a root daemon is theirs (their runs' overlays show its files as
// theirs), so they can reach and change it. Its seal, <snapshots_dir>/.seals/<hash> (the
// daemon's file), records every entry's ctime once the stored files were checked against the
// manifest; a change of any file or folder moves a ctime, which no user can set back.
std::string SnapshotSeal(const std::string& snapshots_dir, const std::string& hash);
// What changed in a sealed snapshot since it was sealed ("path: changed|added|missing"); empty
// when intact or not sealed (a snapshot of a daemon's own user, or from before seals). A walk
// of stats, no content read: a root daemon runs it before each start of a submitter's run.
Result<std::vector<std::string>> CheckSnapshotSeal(const Snapshot& snapshot,
                                                   const std::string& snapshots_dir);

// Copies a snapshot's files into `dest` (created), a writable working copy for one run.
Status MaterializeSnapshot(const Snapshot& snapshot, const std::string& dest);
// The same for a run that executes as `as` (a root daemon's, docs/lab-server.md): the folder is
// made by the caller and given to the user, its files are copied as the user (ActingAs), so the
// copy is theirs and nothing in it acts with the caller's rights. A copy that fails as the user
// is FailedPrecondition (the run's failure).
Status MaterializeSnapshotAs(const Snapshot& snapshot, const std::string& dest,
                             const UnixUser& as);

}  // namespace drover
