// TensorBoard event files a run writes become its metric points (docs/metrics.md, "TensorBoard
// logs"): the files are looked for in what the run wrote (an overlay's upper layer, or its plain
// working copy), at most every kEventScanMs, and each is read from the offset stored with the
// attempt; the points and the offsets they reach land in one transaction, like stdout's.
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/live.h"
#include "exec/file_hashes.h"
#include "tfevents/reader.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

constexpr Millis kEventScanMs = 5000;
constexpr int kMaxScanDepth = 8;
constexpr int kMaxScanEntries = 20000;
constexpr int64_t kEventBytesPerLook = 8 << 20;

// Event files below `dir` (open; closed here), by path relative to the scan's root. Folders are
// opened beneath their parent through no link, so a run's tree cannot lead the walk elsewhere.
void FindEventFiles(int dir, const std::string& prefix, int depth, int* budget,
                    std::vector<std::string>* out) {
  DIR* d = fdopendir(dir);
  if (!d) {
    close(dir);
    return;
  }
  std::vector<std::string> subdirs;
  while (dirent* e = readdir(d)) {
    if (--*budget < 0 || out->size() >= kMaxEventFiles) break;
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {  // file systems that do not say (XFS without ftype, some NFS)
      struct stat st;
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
    }
    if (type == DT_DIR) {
      // Folders that never hold a run's logs and may be large.
      if (name == ".git" || name == "__pycache__" || name == "node_modules" || name == ".venv") {
        continue;
      }
      if (depth < kMaxScanDepth) subdirs.emplace_back(name);
    } else if (type == DT_REG && tfevents::IsEventFileName(name)) {
      out->push_back(prefix + std::string(name));
    }
  }
  for (const auto& sub : subdirs) {
    if (*budget < 0) break;
    int fd = OpenBeneathAt(dirfd(d), sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                           /*same_mount=*/true);
    if (fd >= 0) FindEventFiles(fd, prefix + sub + "/", depth + 1, budget, out);
  }
  closedir(d);
}

}  // namespace

int Engine::OpenEventFileRoot(Live& live) {
  const Spec& spec = SpecOf(live);
  if (spec.tensorboard_off || !live.files) return -1;
  // What the run wrote: an overlay's upper layer holds exactly that; a plain copy is small.
  std::error_code ec;
  const std::string base =
      fs::is_directory(live.files->changes, ec) ? live.files->changes : live.files->work;
  int fd = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || spec.tensorboard.empty()) return fd;
  // The spec's folder, beneath the run's through no link (a run may plant links in its tree).
  int sub = OpenBeneathAt(fd, spec.tensorboard.c_str(), O_RDONLY | O_DIRECTORY,
                          /*same_mount=*/true);
  close(fd);
  return sub;
}

void Engine::TailEventFiles(Live& live, bool final, Instant now,
                            std::vector<MetricPoint>* points, bool* changed) {
  Attempt& a = *live.attempt;
  // A later attempt goes on where the one before it stopped reading the same files (the working
  // copy, and the files in it, are the run's): it must not read them again as its own.
  if (!live.event_files_seeded) {
    live.event_files_seeded = true;
    if (a.number > 1 && a.event_files.empty()) {
      auto earlier = store_.ListAttempts(a.run_id);
      if (earlier.ok()) {
        for (auto it = earlier->rbegin(); it != earlier->rend(); ++it) {
          if (it->id == a.id || it->event_files.empty()) continue;
          for (const auto& [path, progress] : it->event_files) {
            a.event_files[path] = EventFileProgress{progress.offset, 0};
          }
          *changed = true;
          break;
        }
      }
    }
  }
  const int rootfd = OpenEventFileRoot(live);
  if (rootfd < 0) return;
  if (final || now.mono >= live.event_scan_at_mono) {
    live.event_scan_at_mono = now.mono + kEventScanMs;
    int fd = dup(rootfd);
    if (fd >= 0) {
      int budget = kMaxScanEntries;
      std::vector<std::string> found;
      FindEventFiles(fd, "", 0, &budget, &found);
      for (auto& f : found) {
        if (a.event_files.size() >= kMaxEventFiles) break;
        if (!a.event_files.count(f)) {
          a.event_files[f] = EventFileProgress{};
          *changed = true;
        }
      }
    }
  }
  // One budget of bytes per look for all of a run's files together (each file's read stops at a
  // record boundary once it is spent); the last look after the run ended reads everything.
  int64_t budget = kEventBytesPerLook;
  for (auto& [rel, progress] : a.event_files) {
    if (!final && budget <= 0) break;
    int fd = OpenBeneathAt(rootfd, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
                           /*same_mount=*/true);
    if (fd < 0) continue;  // removed, or replaced by a link: nothing to read
    tfevents::ReadLimits limits;
    limits.max_read = std::max<int64_t>(1 << 16, budget);
    const int64_t before = progress.offset;
    auto r = tfevents::ReadScalars(fd, progress.offset, final, [&](const tfevents::Scalar& s) {
      // A writer's wall time, when it is a plausible one; else the time it was read.
      const bool sane = std::isfinite(s.wall_time) && s.wall_time > 0 && s.wall_time < 1e11;
      Millis t = sane ? static_cast<Millis>(s.wall_time * 1000) : now.wall;
      TakePoint(live, s.step, std::string(s.tag), s.value, t, now, points);
    }, limits);
    close(fd);
    if (!r.ok()) {
      spdlog::warn("run {}: event file {}: {}", a.run_id, rel, r.status().message());
      continue;
    }
    budget -= std::max<int64_t>(0, r->offset - before);
    if (r->corrupt > 0) {
      spdlog::warn("run {}: event file {}: skipped {} damaged record(s)", a.run_id, rel,
                   r->corrupt);
    }
    if (r->offset != progress.offset || r->corrupt > 0) {
      progress.offset = r->offset;
      progress.corrupt += r->corrupt;
      *changed = true;
    }
  }
  close(rootfd);
}

}  // namespace drover
