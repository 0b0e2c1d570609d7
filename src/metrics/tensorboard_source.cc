// TensorBoard event files a run writes as a metric source (docs/metrics.md, "TensorBoard logs"):
// the files are looked for in what the run wrote (an overlay's upper layer, or its plain working
// copy), at most every kEventScanMs, and each is read from the offset stored with the attempt;
// the points and the offsets they reach land in one transaction, like stdout's.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "exec/file_hashes.h"
#include "exec/working_copy.h"
#include "metrics/metric_source.h"
#include "tfevents/reader.h"
#include "watch/detectors.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

constexpr Millis kEventScanMs = 5000;
constexpr int kMaxScanDepth = 8;
// Entries one look walks; the look after the run ended walks more, to end the round it is in.
constexpr int kMaxScanEntries = 20000;
constexpr int kFinalScanEntries = 5 * kMaxScanEntries;
constexpr size_t kMaxWalkFolders = 20000;  // folders waiting to be walked in one round
constexpr int64_t kEventBytesPerLook = 8 << 20;

// Folders that never hold a run's logs and may be large.
bool Skipped(std::string_view name) {
  for (std::string_view s : {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv",
                             "site-packages", ".cache", ".mypy_cache", ".pytest_cache", ".tox",
                             "wandb"}) {
    if (name == s) return true;
  }
  return false;
}

// Folders where training scripts put event files: walked before their siblings.
bool Likely(std::string_view name) {
  for (std::string_view s : {"runs", "logs", "log", "tb", "tb_logs", "tensorboard",
                             "lightning_logs", "events", "summaries"}) {
    if (name == s) return true;
  }
  return false;
}

int DepthOf(const std::string& rel) {
  return rel.empty() ? 0 : 1 + static_cast<int>(std::count(rel.begin(), rel.end(), '/'));
}

struct WalkStats {
  int walked = 0;        // entries read in this look
  bool dropped = false;  // folders left out of the round: more than kMaxWalkFolders waited
};

// Walks on for event files below `rootfd` (not closed here) for at most `budget` entries, from
// `walk`: the folders still to walk in this round (relative to the root), each with where its
// listing stopped, the next at the back. An empty `walk` starts a new round at the root; one left
// empty ended its round. So a tree larger than one look's budget is walked across looks, never
// the same first entries again and again, and event files beyond them are found a look later.
// Folders are opened beneath the root through no link, so a run's tree cannot lead the walk
// elsewhere.
WalkStats WalkForEventFiles(int rootfd, int budget,
                            std::vector<std::pair<std::string, long>>* walk,
                            std::vector<std::string>* out) {
  WalkStats stats;
  if (walk->empty()) walk->push_back({"", 0});
  while (!walk->empty() && stats.walked < budget) {
    auto [rel, pos] = std::move(walk->back());
    walk->pop_back();
    // The root opened again (not dup'ed): a listing of its own, from its own position.
    int fd = rel.empty() ? openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                         : OpenBeneathAt(rootfd, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                                         /*same_mount=*/true);
    if (fd < 0) continue;  // removed, or replaced by a link
    DIR* d = fdopendir(fd);
    if (!d) {
      close(fd);
      continue;
    }
    if (pos != 0) seekdir(d, pos);
    const std::string prefix = rel.empty() ? std::string() : rel + "/";
    const bool deeper = DepthOf(rel) < kMaxScanDepth;
    std::vector<std::string> likely, others;
    bool ended = false;
    while (stats.walked < budget) {
      dirent* e = readdir(d);
      if (!e) {
        ended = true;
        break;
      }
      ++stats.walked;
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {  // file systems that do not say (XFS without ftype, some NFS)
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      if (type == DT_DIR) {
        if (deeper && !Skipped(name)) (Likely(name) ? likely : others).push_back(prefix + e->d_name);
      } else if (type == DT_REG && tfevents::IsEventFileName(name) &&
                 out->size() < kMaxEventFiles) {
        out->push_back(prefix + std::string(name));
      }
    }
    const long stopped = ended ? 0 : telldir(d);
    closedir(d);
    // The stack: this folder's subfolders under the rest of its listing, the likely ones on top.
    auto push = [&](std::string path, long at) {
      if (walk->size() >= kMaxWalkFolders) {
        stats.dropped = true;
        return;
      }
      walk->push_back({std::move(path), at});
    };
    for (auto& sub : others) push(std::move(sub), 0);
    for (auto& sub : likely) push(std::move(sub), 0);
    if (!ended) push(std::move(rel), stopped);
  }
  return stats;
}

// The folder a run's event files are looked for in, opened (-1: none).
int OpenEventFileRoot(const Spec& spec, const RunFiles* files) {
  if (spec.tensorboard_off || !files) return -1;
  // What the run wrote: an overlay's upper layer holds exactly that; a plain copy is small.
  std::error_code ec;
  const std::string base = fs::is_directory(files->changes, ec) ? files->changes : files->work;
  int fd = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || spec.tensorboard.empty()) return fd;
  // The spec's folder, beneath the run's through no link (a run may plant links in its tree).
  int sub = OpenBeneathAt(fd, spec.tensorboard.c_str(), O_RDONLY | O_DIRECTORY,
                          /*same_mount=*/true);
  close(fd);
  return sub;
}

class TensorBoardSource : public MetricSource {
 public:
  Result<bool> Read(const SourceLook& look, PointSink& sink) override {
    Attempt& a = *look.attempt;
    const Spec& spec = *look.spec;
    bool changed = false;
    // A later attempt goes on where the one before it stopped reading the same files (the
    // working copy, and the files in it, are the run's): it must not read them again as its own.
    if (a.id != attempt_id_) {
      attempt_id_ = a.id;
      if (a.number > 1 && a.event_files.empty()) {
        auto earlier = sink.EarlierAttempts();
        if (earlier.ok()) {
          for (auto it = earlier->rbegin(); it != earlier->rend(); ++it) {
            if (it->id == a.id || it->event_files.empty()) continue;
            for (const auto& [path, progress] : it->event_files) {
              a.event_files[path] = EventFileProgress{progress.offset, 0};
            }
            changed = true;
            break;
          }
        }
      }
    }
    const int rootfd = OpenEventFileRoot(spec, look.files);
    if (rootfd < 0) return changed;
    const Instant now = look.now;
    if (look.final || now.mono >= scan_at_mono_) {
      scan_at_mono_ = now.mono + kEventScanMs;
      std::vector<std::string> found;
      const WalkStats walked = WalkForEventFiles(
          rootfd, look.final ? kFinalScanEntries : kMaxScanEntries, &walk_, &found);
      for (auto& f : found) {
        if (a.event_files.size() >= kMaxEventFiles) break;
        if (!a.event_files.count(f)) {
          a.event_files[f] = EventFileProgress{};
          changed = true;
        }
      }
      // A tree larger than one look's walk: said once, with what to do about it.
      if ((!walk_.empty() || walked.dropped) && !walk_noted_) {
        walk_noted_ = true;
        watch::Finding f;
        f.kind = "event_files";
        f.severity = "warning";
        f.message = fmt::format(
            "the run's {} holds more than {} files and folders: drover walks {} of them every {} "
            "s looking for TensorBoard event files, so event files may be found late, and at the "
            "end those beyond what it walks in one look ({}) are missed; {}",
            spec.tensorboard.empty() ? std::string("folder")
                                     : "tensorboard folder " + spec.tensorboard,
            kMaxScanEntries, kMaxScanEntries, kEventScanMs / 1000, kFinalScanEntries,
            spec.tensorboard.empty()
                ? "set tensorboard: <folder> in the spec to the folder the event files are in"
                : "name the folder the event files are in (tensorboard: in the spec) more "
                  "narrowly");
        f.data = {{"walked", walked.walked}, {"final", look.final}};
        sink.Warn(f, "event_files");
      }
    }
    // One budget of bytes per look for all of a run's files together (each file's read stops at
    // a record boundary once it is spent); the last look after the run ended reads everything.
    int64_t budget = kEventBytesPerLook;
    for (auto& [rel, progress] : a.event_files) {
      if (!look.final && budget <= 0) break;
      int fd = OpenBeneathAt(rootfd, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
                             /*same_mount=*/true);
      if (fd < 0) continue;  // removed, or replaced by a link: nothing to read
      tfevents::ReadLimits limits;
      limits.max_read = std::max<int64_t>(1 << 16, budget);
      const int64_t before = progress.offset;
      int64_t last_step = INT64_MIN;
      auto r = tfevents::ReadScalars(fd, progress.offset, look.final,
                                     [&](const tfevents::Scalar& s) {
        // A writer's wall time, when it is a plausible one; else the time it was read.
        const bool sane = std::isfinite(s.wall_time) && s.wall_time > 0 && s.wall_time < 1e11;
        Millis t = sane ? static_cast<Millis>(s.wall_time * 1000) : now.wall;
        // One step of one file counts as one line for the new names it may add.
        if (s.step != last_step) sink.BeginLine();
        last_step = s.step;
        sink.Point(s.step, std::string(s.tag), s.value, t);
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
        changed = true;
      }
    }
    close(rootfd);
    return changed;
  }

 private:
  int64_t attempt_id_ = -1;  // the attempt last read (a new one takes its predecessor's offsets)
  Millis scan_at_mono_ = 0;  // when to look for new event files
  // The walk for event files goes on where the last look's budget ended: the folders still to
  // walk in this round, each with where its listing stopped.
  std::vector<std::pair<std::string, long>> walk_;
  bool walk_noted_ = false;  // said once: the run's tree is larger than one look's walk
};

}  // namespace

std::unique_ptr<MetricSource> MakeTensorBoardSource() {
  return std::make_unique<TensorBoardSource>();
}

}  // namespace drover
