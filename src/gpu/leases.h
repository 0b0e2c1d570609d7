#pragma once
// One owner of the GPUs per machine (docs/lab-server.md, "One owner of the GPUs"): every engine
// on a machine (a daemon per store, a foreground `drover run`) publishes what it holds of each
// GPU in a machine-wide folder, and takes a machine-wide lock while it decides what to start, so
// two engines never hand out the same GPU memory twice. GPUs are named by UUID (fake GPUs by
// their stable "GPU-fake-N").
//
// The folder (default /tmp/drover-gpu-leases, mode 1777 like /tmp) holds:
//   lock          flock'ed by an engine from reading the others' leases to publishing its own
//   <owner>.live  flock'ed by the engine for as long as it lives (the kernel drops it on death)
//   <owner>.json  its leases: {"pid": N, "leases": [{"uuid", "bytes", "whole", "pid"}]}
// A lease file whose owner is dead still counts for its runs whose processes live (a daemon's
// runs outlive it until the next daemon adopts them); once none lives it is removed.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover {

struct GpuLease {
  std::string uuid;
  int64_t bytes = 0;   // memory held on it (the whole capacity when `whole`)
  bool whole = false;  // held whole by one run
  int64_t pid = 0;     // the run's process, when known (0: starting)
  bool operator==(const GpuLease&) const = default;
};

class GpuLedger {
 public:
  virtual ~GpuLedger() = default;
  // Takes the machine-wide lock, waiting at most wait_ms (another engine deciding holds it for
  // milliseconds); fails with Unavailable when it is still held.
  virtual Status Lock(int wait_ms) = 0;
  virtual void Unlock() = 0;
  // What every other engine on the machine holds now.
  virtual Result<std::vector<GpuLease>> Others() = 0;
  // Replaces what this engine holds (atomically: a reader sees the old list or the new one).
  virtual Status Publish(const std::vector<GpuLease>& mine) = 0;
  virtual std::string Where() const = 0;  // for messages
};

// The folder's default, and where `--gpu-leases` / $DROVER_GPU_LEASES point it instead.
inline constexpr const char* kDefaultGpuLeaseDir = "/tmp/drover-gpu-leases";

class FileGpuLedger : public GpuLedger {
 public:
  // Creates the folder (1777) when missing and takes this owner's liveness lock. `owner` names
  // this engine's files (a store's id: one engine per store). Fails when the folder is not a
  // folder, or another live engine has this owner's name.
  static Result<std::unique_ptr<FileGpuLedger>> Open(const std::string& dir,
                                                     const std::string& owner);
  ~FileGpuLedger() override;

  Status Lock(int wait_ms) override;
  void Unlock() override;
  Result<std::vector<GpuLease>> Others() override;
  Status Publish(const std::vector<GpuLease>& mine) override;
  std::string Where() const override { return dir_; }

  // For tests and messages: lease files skipped because they could not be read or parsed.
  int64_t unreadable() const { return unreadable_; }

 private:
  FileGpuLedger(std::string dir, std::string owner, int live_fd)
      : dir_(std::move(dir)), owner_(std::move(owner)), live_fd_(live_fd) {}
  std::string dir_;
  std::string owner_;
  int live_fd_ = -1;
  int lock_fd_ = -1;
  int64_t unreadable_ = 0;
  std::vector<GpuLease> published_;
  bool published_once_ = false;
};

// The lease file's text and back (exposed for tests). A malformed file is an error.
std::string FormatLeases(int64_t pid, const std::vector<GpuLease>& leases);
Result<std::vector<GpuLease>> ParseLeases(const std::string& text);

}  // namespace drover
