#include "store/store_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include "store/engine_lock.h"
#include "store/migrations.h"

namespace drover::store {

namespace {

// The wal-index header (https://www.sqlite.org/walformat.html): two 48-byte copies of
// WalIndexHdr, then WalCkptInfo, in the byte order of the machine that wrote them.
constexpr size_t kHeaderBytes = 48;
constexpr size_t kIsInitAt = 12;
constexpr size_t kPageSizeAt = 14;  // u16; 1 means 65536
constexpr size_t kMaxFrameAt = 16;
constexpr size_t kBackfillAt = 2 * kHeaderBytes;  // WalCkptInfo.nBackfill
constexpr size_t kWalHeaderBytes = 32;            // the log file's own header
constexpr size_t kFrameHeaderBytes = 24;

template <typename T>
T At(const unsigned char* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

// A number made only of digits, or nothing.
std::optional<int64_t> NumberName(const char* name) {
  int64_t v = 0;
  const char* end = name + std::strlen(name);
  auto [p, ec] = std::from_chars(name, end, v);
  if (name == end || ec != std::errc() || p != end || v <= 0) return std::nullopt;
  return v;
}

int64_t HighestNumberedEntry(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  int64_t highest = 0;
  while (dirent* e = readdir(d)) {
    if (auto n = NumberName(e->d_name)) highest = std::max(highest, *n);
  }
  closedir(d);
  return highest;
}

// The descriptor through which `pid` still holds `path` after it was deleted, or -1.
int DeletedFileFd(int pid, const std::string& path) {
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  const std::string wanted = path + " (deleted)";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    auto fd = NumberName(e->d_name);
    if (!fd && std::strcmp(e->d_name, "0") == 0) fd = 0;
    if (!fd) continue;
    char target[4096];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (wanted == target) {
      found = static_cast<int>(*fd);
      break;
    }
  }
  closedir(d);
  return found;
}

struct WalLoss {
  uint32_t missing_frames = 0;
  bool absent = false;
  int64_t have_bytes = 0;
  int64_t need_bytes = 0;
};

// The log's loss as the index describes it, or nothing when they agree.
std::optional<WalLoss> Compare(const WalIndex& index, const std::string& wal_path) {
  if (!index.valid || index.max_frame <= index.backfilled) return std::nullopt;
  WalLoss loss;
  loss.missing_frames = index.max_frame - index.backfilled;
  loss.need_bytes = static_cast<int64_t>(kWalHeaderBytes) +
                    static_cast<int64_t>(index.max_frame) *
                        (static_cast<int64_t>(kFrameHeaderBytes) + index.page_size);
  struct stat st;
  if (stat(wal_path.c_str(), &st) != 0) {
    if (errno != ENOENT) return std::nullopt;  // unreadable: SQLite will say why
    loss.absent = true;
    return loss;
  }
  loss.have_bytes = st.st_size;
  if (loss.have_bytes >= loss.need_bytes) return std::nullopt;
  return loss;
}

}  // namespace

WalIndex ReadWalIndex(const std::string& shm_path) {
  WalIndex out;
  int fd = open(shm_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  unsigned char buf[kBackfillAt + 4];
  ssize_t n = pread(fd, buf, sizeof buf, 0);
  close(fd);
  if (n != static_cast<ssize_t>(sizeof buf)) return out;
  // A writer updates the copies one after the other: copies that differ are caught mid-change.
  if (std::memcmp(buf, buf + kHeaderBytes, kHeaderBytes) != 0 || buf[kIsInitAt] == 0) return out;
  const uint16_t page = At<uint16_t>(buf, kPageSizeAt);
  out.page_size = page == 1 ? 65536u : page;
  out.max_frame = At<uint32_t>(buf, kMaxFrameAt);
  out.backfilled = At<uint32_t>(buf, kBackfillAt);
  out.valid = out.page_size >= 512;
  return out;
}

Status CheckWalPresent(const std::string& db_path, const std::string& context) {
  const std::string wal = db_path + "-wal";
  const std::string shm = db_path + "-shm";
  std::optional<WalLoss> loss = Compare(ReadWalIndex(shm), wal);
  // Read twice: a checkpoint that truncates the log resets the index first, so a reading between
  // the two would look like a loss once, never twice with the same index.
  if (loss) loss = Compare(ReadWalIndex(shm), wal);
  if (!loss) return Status::Ok();

  const std::string dir = std::filesystem::path(db_path).parent_path().string();
  std::error_code ec;
  // As /proc names it: the folder's real path (links resolved).
  std::filesystem::path real_dir = std::filesystem::canonical(dir.empty() ? "." : dir, ec);
  if (ec) real_dir = std::filesystem::absolute(dir.empty() ? "." : dir, ec).lexically_normal();
  const std::string abs_wal = (real_dir / std::filesystem::path(wal).filename()).string();
  const std::optional<int> holder = EngineLock::Holder(dir.empty() ? "." : dir);
  const int held_fd = holder ? DeletedFileFd(*holder, abs_wal) : -1;
  std::string what_now;
  if (holder && held_fd >= 0) {
    // Its connection still reads and writes the deleted file, and a clean close checkpoints it
    // into drover.db: nothing is lost unless that process is killed first.
    what_now = fmt::format(
        "the daemon (pid {0}) still has the deleted log open, with those commits: stop it cleanly "
        "(`drover daemon stop`, or SIGTERM; not kill -9) and on its way out it writes them into "
        "drover.db; a copy can be kept first with `cp /proc/{0}/fd/{1} {2}.saved`",
        *holder, held_fd, abs_wal);
  } else if (holder) {
    what_now = fmt::format(
        "the daemon (pid {0}) holds the store: stop it cleanly (`drover daemon stop`), then "
        "restore drover.db and drover.db-wal together from a backup if they still disagree",
        *holder);
  } else {
    what_now = "restore drover.db and drover.db-wal together from a backup";
  }
  return FailedPrecondition(fmt::format(
      "{}: its write-ahead log drover.db-wal is {} but drover.db-shm says it holds {} page(s) not "
      "yet copied into drover.db: the log was deleted or cut short, and the commits in it (runs, "
      "metrics) are not in the database; {}. Nothing was written. To start over instead (what "
      "the log held is lost), move the store's folder away and run again",
      context,
      loss->absent ? std::string("missing")
                   : fmt::format("{} bytes where {} are needed", loss->have_bytes, loss->need_bytes),
      loss->missing_frames, what_now));
}

FolderIds ListFolderIds(const std::string& store_dir) {
  FolderIds ids;
  ids.highest_experiment = HighestNumberedEntry(store_dir + "/logs");
  return ids;
}

Status CheckIdsCoverFolders(sqlite3* db, const FolderIds& ids, const std::string& store_dir,
                            const std::string& context) {
  if (ids.highest_experiment == 0) return Status::Ok();
  int64_t experiments = 0;
  sqlite3_stmt* st = nullptr;
  // No sqlite_sequence table: no row was ever inserted (a new database).
  if (sqlite3_prepare_v2(db, "SELECT seq FROM sqlite_sequence WHERE name = 'experiments'", -1, &st,
                         nullptr) == SQLITE_OK) {
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) experiments = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return SqliteStatus(db, rc, context);
  } else {
    sqlite3_finalize(st);
  }
  if (ids.highest_experiment <= experiments) return Status::Ok();
  const std::string what = fmt::format(
      "the folder holds the logs of experiment {} ({}/logs/{}) but the database's experiments "
      "end at {}",
      ids.highest_experiment, store_dir, ids.highest_experiment, experiments);
  return FailedPrecondition(fmt::format(
      "{}: {}: the database lost its newest commits (its write-ahead log drover.db-wal deleted, "
      "or drover.db restored from an older backup), and new experiments and runs would reuse "
      "those numbers and write over their logs and working copies. Restore drover.db and "
      "drover.db-wal together from a backup; or, to start over, move the store's folder away "
      "(the old runs' files stay in it) and run again. Nothing was written",
      context, what));
}

}  // namespace drover::store
