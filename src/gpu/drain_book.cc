// The book of drained GPUs (drain_book.h).
#include "gpu/drain_book.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/files.h"

namespace drover {

std::string DrainBookPath(const std::string& store_dir) {
  return (std::filesystem::path(store_dir) / "gpu-drain.json").string();
}

std::string FormatDrainBook(const DrainBook& book) {
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
Result<DrainBook> ParseDrainBook(const std::string& text, const std::string& where) {
  using nlohmann::json;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return InvalidArgument(
        fmt::format("{}: {}; fix or delete it (drained GPUs are then "
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
Result<DrainBook> ReadDrainBook(const std::string& path) {
  Result<std::string> text = ReadBoundedFile(path, kMaxDrainBookBytes, "GPU drain book", "");
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return DrainBook{};
    return text.status();
  }
  return ParseDrainBook(*text, path);
}

// Reads the book, lets `change` edit it, and writes it back (when it changed), all under the
// book's lock. An error from `change` writes nothing.
Status UpdateDrainBook(const std::string& path, const std::function<Status(DrainBook&)>& change) {
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
  return WriteFileAtomically(path, FormatDrainBook(book));
}

// An admin's drain: each of `devices` (uuid, index) drained for `reason` by `by`, unless it is
// already (then its entry stays as it was). Returns the indices newly drained.
Result<std::vector<int>> DrainGpus(const std::string& path,
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
Result<std::vector<int>> ClearGpus(const std::string& path,
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
