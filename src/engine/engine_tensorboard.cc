// TensorBoard event files a run writes become its metric points (docs/metrics.md, "TensorBoard
// logs"): the files are looked for in what the run wrote (an overlay's upper layer, or its plain
// working copy), at most every kEventScanMs, and each is read from the offset stored with the
// attempt; the points and the offsets they reach land in one transaction, like stdout's.
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (e->d_type == DT_DIR) {
      // Folders that never hold a run's logs and may be large.
      if (name == ".git" || name == "__pycache__" || name == "node_modules" || name == ".venv") {
        continue;
      }
      if (depth < kMaxScanDepth) subdirs.emplace_back(name);
    } else if ((e->d_type == DT_REG || e->d_type == DT_UNKNOWN) &&
               tfevents::IsEventFileName(name)) {
      out->push_back(prefix + std::string(name));
    }
  }
  for (const auto& sub : subdirs) {
    if (*budget < 0) break;
    int fd = OpenBeneathAt(dirfd(d), sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd >= 0) FindEventFiles(fd, prefix + sub + "/", depth + 1, budget, out);
  }
  closedir(d);
}

}  // namespace

std::string Engine::EventFileRoot(Live& live) {
  const Spec& spec = SpecOf(live);
  if (spec.tensorboard_off || !live.files) return "";
  // What the run wrote: an overlay's upper layer holds exactly that; a plain copy is small.
  std::error_code ec;
  std::string root =
      fs::is_directory(live.files->changes, ec) ? live.files->changes : live.files->work;
  if (!spec.tensorboard.empty()) root += "/" + spec.tensorboard;
  return root;
}

void Engine::TailEventFiles(Live& live, bool final, Instant now,
                            std::vector<MetricPoint>* points, bool* changed) {
  Attempt& a = *live.attempt;
  const std::string root = EventFileRoot(live);
  if (root.empty()) return;
  if (final || now.mono >= live.event_scan_at_mono) {
    live.event_scan_at_mono = now.mono + kEventScanMs;
    int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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
  if (a.event_files.empty()) return;
  int rootfd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rootfd < 0) return;
  for (auto& [rel, progress] : a.event_files) {
    int fd = OpenBeneathAt(rootfd, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;  // removed, or replaced by a link: nothing to read
    auto r = tfevents::ReadScalars(fd, progress.offset, final, [&](const tfevents::Scalar& s) {
      Millis t = s.wall_time > 0 ? static_cast<Millis>(s.wall_time * 1000) : now.wall;
      TakePoint(live, s.step, std::string(s.tag), s.value, t, now, points);
    });
    close(fd);
    if (!r.ok()) {
      spdlog::warn("run {}: event file {}: {}", a.run_id, rel, r.status().message());
      continue;
    }
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
