#pragma once
// Drained GPUs (docs/metrics.md, "GPU health"): a GPU with an uncorrectable fault is drained, so
// no new run starts on it (runs on it are left alone) until an admin clears it, and that holds
// across daemon restarts. The book is a small JSON file in the store folder,
// <store>/gpu-drain.json, next to drover.db rather than in it: the engine drains (a health
// finding), an admin drains or clears (`drover gpu drain|clear`, through the daemon's HTTP API or,
// with no daemon, directly), and the engine reads it back when it changes. Every change is made
// under an flock of <store>/gpu-drain.lock and lands whole (a temporary file renamed over the
// book).
//
//   {"drained": [{"uuid": "GPU-...", "index": 1, "reason": "...", "by": "drover",
//                 "since_ms": 1700000000000, "kind": "xid:48"}],
//    "seen": {"GPU-...": {"ecc_uncorrected": 2, "pages_pending": 0, "remap_failed": 0}},
//    "cleared": {"GPU-...": {"by": "alice", "at_ms": 1700000100000}}}
//
// "seen" is the engine's: the health counters it last read of each GPU, so a count that was
// already that high (before a restart, or when an admin cleared the GPU without a reset) is not
// taken for a new error. GPUs are named by UUID (MIG instances by theirs): indices can change
// when a machine's GPUs do.
//
// One owner: every read and write of the book is a function here (the engine's health watch,
// the daemon's `POST /api/v1/gpus/{i}/drain|clear`, `drover gpu` with no daemon), each change
// through UpdateDrainBook, under the lock, replaced whole with WriteFileAtomically.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace drover {

// The health counters that drain a GPU when they rise, as last read (-1: unknown).
struct HealthCounters {
  int64_t ecc_uncorrected = -1;
  int pages_pending = -1;
  int remap_failed = -1;
  bool operator==(const HealthCounters&) const = default;
};

struct DrainEntry {
  std::string uuid;
  int index = -1;       // the device's index when it was drained (for messages)
  std::string reason;   // the alert's words, or the admin's
  std::string by;       // "drover" (a health finding), or the admin who drained it
  Millis since_ms = 0;  // wall clock
  std::string kind;     // the finding ("xid:48", "ecc", "pages_pending", ...), or "admin"
  bool operator==(const DrainEntry&) const = default;
};

struct ClearedEntry {
  std::string by;
  Millis at_ms = 0;
  bool operator==(const ClearedEntry&) const = default;
};

struct DrainBook {
  std::vector<DrainEntry> drained;
  std::map<std::string, HealthCounters> seen;   // by the UUID of the GPU (a MIG instance's GPU)
  std::map<std::string, ClearedEntry> cleared;  // by UUID: the latest clear
  const DrainEntry* Find(const std::string& uuid) const {
    for (const DrainEntry& e : drained) {
      if (e.uuid == uuid) return &e;
    }
    return nullptr;
  }
  bool operator==(const DrainBook&) const = default;
};

// The engine's own name in DrainEntry::by.
inline constexpr const char* kDrainedByDrover = "drover";
// A book is a few entries per GPU; anything near this is not one.
inline constexpr size_t kMaxDrainBookBytes = 1 << 20;

// <store>/gpu-drain.json
std::string DrainBookPath(const std::string& store_dir);
std::string FormatDrainBook(const DrainBook& book);
// Entries of another shape are errors: the book decides where runs may start, so a damaged one
// is reported rather than read as "nothing drained".
Result<DrainBook> ParseDrainBook(const std::string& text, const std::string& where);
// The book at `path`; an empty one when there is none yet.
Result<DrainBook> ReadDrainBook(const std::string& path);
// Reads the book, lets `change` edit it, and writes it back (when it changed), all under the
// book's lock. An error from `change` writes nothing.
Status UpdateDrainBook(const std::string& path, const std::function<Status(DrainBook&)>& change);
// An admin's drain: each of `devices` (uuid, index) drained for `reason` by `by`, unless it is
// already (then its entry stays as it was). Returns the indices newly drained.
Result<std::vector<int>> DrainGpus(const std::string& path,
                                   const std::vector<std::pair<std::string, int>>& devices,
                                   const std::string& reason, const std::string& by, Millis now_ms);
// An admin's clear: each of `devices` that is drained is no longer, and the clear is noted.
// Returns the indices that were drained.
Result<std::vector<int>> ClearGpus(const std::string& path,
                                   const std::vector<std::pair<std::string, int>>& devices,
                                   const std::string& by, Millis now_ms);

}  // namespace drover
