#pragma once
// Drained GPUs (docs/metrics.md, "GPU health"): a GPU with an uncorrectable fault is drained, so
// no new run starts on it (runs on it are left alone) until an admin clears it, and that holds
// across daemon restarts. The book is a small JSON file in the store folder, <store>/gpu-drain.json,
// next to drover.db rather than in it: the engine drains (a health finding), an admin drains or
// clears (`drover gpu drain|clear`, through the daemon's HTTP API or, with no daemon, directly),
// and the engine reads it back when it changes. Every change is made under an flock of
// <store>/gpu-drain.lock and lands whole (a temporary file renamed over the book).
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
// Header-only: the server, which does not link the GPU probes, writes it too.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/files.h"
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

inline std::string DrainBookPath(const std::string& store_dir) {
  return (std::filesystem::path(store_dir) / "gpu-drain.json").string();
}

inline std::string FormatDrainBook(const DrainBook& book) {
  using nlohmann::json;
  json drained = json::array();
  for (const DrainEntry& e : book.drained) {
    drained.push_back({{"uuid", e.uuid},
                       {"index", e.index},
                       {"reason", e.reason},
                       {"by", e.by},
                       {"since_ms", e.since_ms},
                       {"kind", e.kind}});
  }
  json seen = json::object();
  for (const auto& [uuid, c] : book.seen) {
    seen[uuid] = {{"ecc_uncorrected", c.ecc_uncorrected},
                  {"pages_pending", c.pages_pending},
                  {"remap_failed", c.remap_failed}};
  }
  json cleared = json::object();
  for (const auto& [uuid, c] : book.cleared) cleared[uuid] = {{"by", c.by}, {"at_ms", c.at_ms}};
  return json{{"drained", drained}, {"seen", seen}, {"cleared", cleared}}.dump(2) + "\n";
}

// Entries of another shape are errors: the book decides where runs may start, so a damaged one
// is reported rather than read as "nothing drained".
inline Result<DrainBook> ParseDrainBook(const std::string& text, const std::string& where) {
  using nlohmann::json;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return InvalidArgument(fmt::format("{}: {}; fix or delete it (drained GPUs are then "
                                       "forgotten)",
                                       where, why));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  DrainBook book;
  auto str = [](const json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [](const json& o, const char* k, int64_t fallback) {
    auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
  };
  if (auto it = j.find("drained"); it != j.end()) {
    if (!it->is_array()) return bad("'drained' is not a list");
    for (const json& e : *it) {
      if (!e.is_object() || str(e, "uuid").empty()) return bad("a drained entry has no uuid");
      DrainEntry d;
      d.uuid = str(e, "uuid");
      d.index = static_cast<int>(num(e, "index", -1));
      d.reason = str(e, "reason");
      d.by = str(e, "by");
      d.since_ms = num(e, "since_ms", 0);
      d.kind = str(e, "kind");
      book.drained.push_back(std::move(d));
    }
  }
  if (auto it = j.find("seen"); it != j.end()) {
    if (!it->is_object()) return bad("'seen' is not an object");
    for (const auto& [uuid, c] : it->items()) {
      if (!c.is_object()) return bad("a 'seen' entry is not an object");
      HealthCounters h;
      h.ecc_uncorrected = num(c, "ecc_uncorrected", -1);
      h.pages_pending = static_cast<int>(num(c, "pages_pending", -1));
      h.remap_failed = static_cast<int>(num(c, "remap_failed", -1));
      book.seen[uuid] = h;
    }
  }
  if (auto it = j.find("cleared"); it != j.end()) {
    if (!it->is_object()) return bad("'cleared' is not an object");
    for (const auto& [uuid, c] : it->items()) {
      if (!c.is_object()) return bad("a 'cleared' entry is not an object");
      book.cleared[uuid] = ClearedEntry{str(c, "by"), num(c, "at_ms", 0)};
    }
  }
  return book;
}

// The book at `path`; an empty one when there is none yet.
inline Result<DrainBook> ReadDrainBook(const std::string& path) {
  Result<std::string> text = ReadBoundedFile(path, kMaxDrainBookBytes, "GPU drain book", "");
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return DrainBook{};
    return text.status();
  }
  return ParseDrainBook(*text, path);
}

// Reads the book, lets `change` edit it, and writes it back (when it changed), all under the
// book's lock. An error from `change` writes nothing.
inline Status UpdateDrainBook(const std::string& path,
                              const std::function<Status(DrainBook&)>& change) {
  const std::string lock_path =
      (std::filesystem::path(path).parent_path() / "gpu-drain.lock").string();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (lock < 0) return ErrnoStatus(fmt::format("cannot open the GPU drain lock {}", lock_path));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing drops the flock
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoStatus(fmt::format("cannot lock {}", lock_path));
  }
  DROVER_ASSIGN_OR_RETURN(DrainBook book, ReadDrainBook(path));
  const DrainBook before = book;
  DROVER_RETURN_IF_ERROR(change(book));
  if (book == before) return Status::Ok();
  static std::atomic<int> serial{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), serial++);
  const std::string text = FormatDrainBook(book);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrnoStatus(fmt::format("cannot write the GPU drain book {}", tmp));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status st = ErrnoStatus(fmt::format("cannot write the GPU drain book {}", tmp));
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Status st = ErrnoStatus(fmt::format("cannot write the GPU drain book {}", tmp));
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = ErrnoStatus(fmt::format("cannot replace the GPU drain book {}", path));
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

// An admin's drain: each of `devices` (uuid, index) drained for `reason` by `by`, unless it is
// already (then its entry stays as it was). Returns the indices newly drained.
inline Result<std::vector<int>> DrainGpus(const std::string& path,
                                          const std::vector<std::pair<std::string, int>>& devices,
                                          const std::string& reason, const std::string& by,
                                          Millis now_ms) {
  std::vector<int> done;
  DROVER_RETURN_IF_ERROR(UpdateDrainBook(path, [&](DrainBook& book) {
    done.clear();
    for (const auto& [uuid, index] : devices) {
      if (book.Find(uuid) != nullptr) continue;
      book.drained.push_back(DrainEntry{uuid, index, reason, by, now_ms, "admin"});
      done.push_back(index);
    }
    return Status::Ok();
  }));
  return done;
}

// An admin's clear: each of `devices` that is drained is no longer, and the clear is noted.
// Returns the indices that were drained.
inline Result<std::vector<int>> ClearGpus(const std::string& path,
                                          const std::vector<std::pair<std::string, int>>& devices,
                                          const std::string& by, Millis now_ms) {
  std::vector<int> done;
  DROVER_RETURN_IF_ERROR(UpdateDrainBook(path, [&](DrainBook& book) {
    done.clear();
    for (const auto& device : devices) {
      const std::string& uuid = device.first;  // a named copy: lambdas cannot capture bindings
      const int index = device.second;
      if (book.Find(uuid) == nullptr) continue;
      std::erase_if(book.drained, [&](const DrainEntry& e) { return e.uuid == uuid; });
      book.cleared[uuid] = ClearedEntry{by, now_ms};
      done.push_back(index);
    }
    return Status::Ok();
  }));
  return done;
}

}  // namespace drover
