#pragma once
// Content hashes of files, and what keeps them cheap: a file's key (device, inode, size, mtime,
// ctime) says whether its bytes may have changed, so a file already hashed under the same key is
// not read again (<dir>/.hashes). Snapshots (exec/snapshot.h), a pipeline's declared inputs and
// its stored outputs (exec/artifacts.h) share it.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file_faults.h"
#include "common/status.h"

namespace drover {

// What identifies a file's content without reading it: the same device, inode, size, mtime and
// ctime (which no user tool can set back) mean the same bytes, as git's index assumes.
struct FileKey {
  uint64_t dev = 0, ino = 0;
  int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileKey&) const = default;
};

FileKey KeyOf(const struct stat& st);

struct FileKeyHash {
  size_t operator()(const FileKey& k) const {
    size_t h = std::hash<uint64_t>()(k.ino);
    for (int64_t v : {static_cast<int64_t>(k.dev), k.size, k.mtime_ns, k.ctime_ns}) {
      h = h * 1'000'003 ^ std::hash<int64_t>()(v);
    }
    return h;
  }
};

// The content hashes of files seen by earlier snapshots, in <snapshots_dir>/.hashes (a line per
// file: dev ino size mtime_ns ctime_ns sha256), so an unchanged workdir is recognised without
// reading it, and a snapshot that exists is not copied again. Written whole through a temp file
// and a rename; a cache that is lost, torn or unreadable only costs reading the files again.
// A file changed within the last second is not cached ("racily clean" in git's words: a
// rewrite within the timestamps' granularity could keep its key).
class HashCache {
 public:
  static constexpr size_t kMaxEntries = 500'000;

  explicit HashCache(std::string dir) : path_(std::move(dir) + "/.hashes") {
    FILE* f = fopen(path_.c_str(), "re");
    if (f == nullptr) return;
    unsigned long long dev, ino;
    long long size, mtime, ctime;
    char hex[65];
    while (fscanf(f, "%llu %llu %lld %lld %lld %64s", &dev, &ino, &size, &mtime, &ctime, hex) == 6) {
      if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64 ||
          map_.size() >= kMaxEntries) {
        break;
      }
      FileKey k{dev, ino, size, mtime, ctime};
      if (map_.emplace(k, hex).second) order_.push_back(k);
    }
    fclose(f);
  }

  const std::string* Find(const FileKey& k) const {
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : &it->second;
  }

  void Add(const FileKey& k, const std::string& hex, int64_t now_ns) {
    if (k.ctime_ns > now_ns - 1'000'000'000 || k.mtime_ns > now_ns - 1'000'000'000) return;
    if (map_.emplace(k, hex).second) {
      order_.push_back(k);
      dirty_ = true;
    }
  }

  // Keeps the newest kMaxEntries entries.
  void Save() {
    if (!dirty_) return;
    // A temp file of its own: two submits may save at once (the last rename wins).
    std::string tmp = path_ + ".tmp-XXXXXX";
    const int fd = FileFault(tmp) ? -1 : mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return;
    FILE* f = fdopen(fd, "w");
    if (f == nullptr) {
      close(fd);
      unlink(tmp.c_str());
      return;
    }
    const size_t skip = order_.size() > kMaxEntries ? order_.size() - kMaxEntries : 0;
    bool ok = true;
    for (size_t i = skip; i < order_.size() && ok; ++i) {
      const FileKey& k = order_[i];
      ok = fprintf(f, "%llu %llu %lld %lld %lld %s\n", static_cast<unsigned long long>(k.dev),
                   static_cast<unsigned long long>(k.ino), static_cast<long long>(k.size),
                   static_cast<long long>(k.mtime_ns), static_cast<long long>(k.ctime_ns),
                   map_.at(k).c_str()) > 0;
    }
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp.c_str(), path_.c_str()) != 0) unlink(tmp.c_str());
  }

 private:
  std::string path_;
  std::unordered_map<FileKey, std::string, FileKeyHash> map_;
  std::vector<FileKey> order_;  // oldest first
  bool dirty_ = false;
};

// Copies one file into the temp tree, hashing the bytes as they are copied, so the hash always
// describes exactly what was stored even when the source changes meanwhile.
// `stable`, when given, is set to the file's key if it did not change while it was read.
// `in` >= 0: the source already opened (by OpenBeneath; taken over and closed), `src` only names
// it in messages.
Status CopyAndHash(const std::string& src, const std::string& dst, bool exec, std::string* hex,
                   int64_t* bytes, std::optional<FileKey>* stable = nullptr, int in = -1);

// `rel` beneath the folder `root`, resolved without following any symbolic link and without
// leaving `root` (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a file in a tree a user
// controls, opened with the daemon's rights. `flags` as open(2)'s (O_CLOEXEC is added); with
// O_PATH | O_NOFOLLOW a trailing link is itself opened. -1 and errno when refused.
int OpenBeneath(const std::string& root, const std::string& rel, int flags);
// The same from an open folder: no allocation (also used in a forked child, exec/working_copy.cc).
// `same_mount`: nor crossing into another mount (RESOLVE_NO_XDEV), for walks over a tree a user
// may have mounted something in (a FUSE folder that never answers must not hang the daemon).
int OpenBeneathAt(int root, const char* rel, int flags, bool same_mount = false);

// The sha256 of one file's content, from `cache` when its key is there (and added to it when the
// file did not change while read). `bytes` gets its size.
Result<std::string> HashFile(const std::string& path, HashCache* cache, int64_t* bytes = nullptr);

// A file or a folder's content as one hash: for a folder, every file under it (links as their
// targets' text, empty folders left out) by its path relative to the folder, sorted, with its
// mode's exec bit and content hash. `files` and `bytes`, when given, count what it holds.
Result<std::string> HashTree(const std::string& path, HashCache* cache, int64_t* files = nullptr,
                             int64_t* bytes = nullptr);

}  // namespace drover
