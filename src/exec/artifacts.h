#pragma once
// A run's declared outputs (a pipeline stage's outputs:, docs/pipelines.md), kept in the store
// by content: each file once under <store>/artifacts/<h[0:2]>/<h> (read-only), and each run's
// outputs as a tree of hard links to them under <store>/outputs/<run id>/, which later stages
// are shown read-only and `drover artifacts` lists.
#include <string>
#include <vector>

#include "common/status.h"
#include "model/run.h"

namespace drover {

// Where a finished run's files are: a copied working copy (`upper` empty), or an overlay's
// upper layer over the snapshot (`lower`).
struct RunTree {
  std::string work;   // the working copy (a copy)
  std::string upper;  // the overlay's upper layer ("" for a copy)
  std::string lower;  // the snapshot under it
  // Whether the tree is a user's and the caller is not (a root daemon's run). Kept for callers
  // that say so; every tree is walked alike now: each file is opened beneath its layer's root
  // through no link (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and checked on its
  // descriptor, a file or link in the upper layer hides the lower layer below it (as overlayfs
  // does), and the outputs tree is written through no link, so a link the run planted
  // (`rm -rf a && ln -s /etc a`, `d -> /root` with `outputs: [d/sub]`) is never walked or
  // written through (docs/security.md).
  bool confined = false;
};

// <store>/outputs/<run id>: the run's outputs, as it wrote them.
std::string OutputsDir(const std::string& store_dir, int64_t run_id);
// <store>/artifacts/<h[0:2]>/<h>.
std::string ArtifactObject(const std::string& store_dir, const std::string& hash);

// Stores `outputs` (paths inside the run's working copy, files or folders) of run `run_id`.
// An output the run did not write is an error naming it (FailedPrecondition). Safe off the
// engine's loop (it reads and writes files only).
Result<std::vector<Artifact>> StoreOutputs(const std::string& store_dir, int64_t run_id,
                                           const RunTree& tree,
                                           const std::vector<std::string>& outputs);

// One hash over a run's artifacts (paths, modes and contents): what a later stage's fingerprint
// takes from this run.
std::string ArtifactsHash(const std::vector<Artifact>& artifacts);

// Re-reads each artifact's object and its link under outputs/: the paths whose content is no
// longer what was stored (or that are gone), each with what is wrong.
std::vector<std::string> VerifyArtifacts(const std::string& store_dir, int64_t run_id,
                                         const std::vector<Artifact>& artifacts);

}  // namespace drover
