#include "exec/file_hashes.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/file_faults.h"
#include "common/hash.h"

namespace drover {

namespace fs = std::filesystem;

FileKey KeyOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

int OpenBeneathAt(int root, const char* rel, int flags, bool same_mount) {
  open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  if (same_mount) how.resolve |= RESOLVE_NO_XDEV;
  return static_cast<int>(syscall(SYS_openat2, root, rel, &how, sizeof how));
}

int OpenBeneath(const std::string& root, const std::string& rel, int flags) {
  const int dir = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -1;
  const int fd = OpenBeneathAt(dir, rel.c_str(), flags);
  const int err = errno;
  close(dir);
  errno = err;
  return fd;
}

Status CopyAndHash(const std::string& src, const std::string& dst, bool exec, std::string* hex,
                   int64_t* bytes, std::optional<FileKey>* stable, int in) {
  // Non-blocking: a file swapped for a FIFO since it was listed must not hang the copy (and the
  // daemon's worker with it); only a regular file is copied.
  if (in < 0) in = open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (in < 0) return ErrnoStatus("cannot read '" + src + "'");
  struct stat before {};
  if (fstat(in, &before) != 0 || !S_ISREG(before.st_mode)) {
    close(in);
    return Status(Code::kInvalidArgument,
                  "'" + src + "' is not a regular file (a FIFO, socket or device); it cannot be "
                  "captured");
  }
  const bool stat_before = stable != nullptr;
  const mode_t mode = exec ? 0755 : 0644;
  int out = FileFault(dst) ? -1 : open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (out < 0) {
    Status s = ErrnoStatus("cannot write '" + dst + "'");
    close(in);
    return s;
  }
  Sha256 sha;
  Status status;
  // Holes stay holes: the data between them (SEEK_DATA, SEEK_HOLE) is copied to the same offsets
  // and the holes are hashed as the zeros they read as, never read or written, so a 2 GiB sparse
  // output costs its data's blocks in the store and not 2 GiB (issue 39). A file system that
  // cannot say where the data is gets the file copied whole, as data.
  static const char kZeros[1 << 16] = {};
  auto hash_zeros = [&](off_t n) {
    *bytes += n;
    for (; n > 0; n -= std::min<off_t>(n, sizeof kZeros)) {
      sha.Update(std::string_view(kZeros, static_cast<size_t>(std::min<off_t>(n, sizeof kZeros))));
    }
  };
  char buf[1 << 16];
  off_t pos = 0;
  bool seekable = true;
  for (bool eof = false; !eof && status.ok();) {
    off_t data_end = std::numeric_limits<off_t>::max();
    if (seekable) {
      const off_t data = lseek(in, pos, SEEK_DATA);
      if (data < 0 && errno == ENXIO) {
        // No data past pos: the rest, up to the end, is a hole.
        struct stat now {};
        if (fstat(in, &now) != 0) {
          status = ErrnoStatus("cannot stat '" + src + "'");
          break;
        }
        if (now.st_size > pos) hash_zeros(now.st_size - pos);
        pos = std::max<off_t>(pos, now.st_size);
        break;
      }
      if (data < 0) {
        seekable = false;
      } else {
        if (data > pos) hash_zeros(data - pos);
        pos = data;
        const off_t hole = lseek(in, pos, SEEK_HOLE);
        if (hole > pos) data_end = hole;
      }
    }
    while (pos < data_end) {
      const size_t want = static_cast<size_t>(std::min<off_t>(sizeof buf, data_end - pos));
      ssize_t n = pread(in, buf, want, pos);
      if (n < 0) {
        if (errno == EINTR) continue;
        status = ErrnoStatus("cannot read '" + src + "'");
        break;
      }
      if (n == 0) {
        eof = true;
        break;
      }
      sha.Update(std::string_view(buf, static_cast<size_t>(n)));
      *bytes += n;
      for (ssize_t done = 0; done < n;) {
        ssize_t w = FileFault(dst) ? -1
                                   : pwrite(out, buf + done, static_cast<size_t>(n - done),
                                            pos + done);
        if (w < 0) {
          if (errno == EINTR) continue;
          status = ErrnoStatus("cannot write '" + dst + "'");
          break;
        }
        done += w;
      }
      if (!status.ok()) break;
      pos += n;
    }
  }
  // A hole at the end is only a length.
  if (status.ok() && ftruncate(out, pos) != 0) status = ErrnoStatus("cannot write '" + dst + "'");
  if (status.ok() && fchmod(out, mode) != 0) status = ErrnoStatus("cannot chmod '" + dst + "'");
  struct stat after {};
  if (status.ok() && stat_before && fstat(in, &after) == 0 && KeyOf(before) == KeyOf(after)) {
    *stable = KeyOf(before);
  }
  close(in);
  if (close(out) != 0 && status.ok()) status = ErrnoStatus("cannot write '" + dst + "'");
  *hex = sha.HexDigest();
  return status;
}


Result<std::string> HashFile(const std::string& path, HashCache* cache, int64_t* bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("cannot read '" + path + "'");
  struct stat before {};
  if (fstat(fd, &before) != 0) {
    Status s = ErrnoStatus("cannot stat '" + path + "'");
    close(fd);
    return s;
  }
  if (!S_ISREG(before.st_mode)) {
    close(fd);
    return Status(Code::kInvalidArgument, "'" + path + "' is not a regular file; it cannot be hashed");
  }
  if (bytes) *bytes = before.st_size;
  const FileKey key = KeyOf(before);
  if (cache) {
    if (const std::string* known = cache->Find(key)) {
      close(fd);
      return *known;
    }
  }
  Sha256 sha;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = ErrnoStatus("cannot read '" + path + "'");
      close(fd);
      return s;
    }
    if (n == 0) break;
    sha.Update(std::string_view(buf, static_cast<size_t>(n)));
  }
  struct stat after {};
  const bool stable = fstat(fd, &after) == 0 && KeyOf(after) == key;
  close(fd);
  std::string hex = sha.HexDigest();
  if (cache && stable) {
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    cache->Add(key, hex, now_ns);
  }
  return hex;
}

Result<std::string> HashTree(const std::string& path, HashCache* cache, int64_t* files,
                             int64_t* bytes) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus("cannot read '" + path + "'");
  int64_t nfiles = 0, nbytes = 0;
  std::vector<std::string> lines;
  auto add = [&](const std::string& file, const std::string& rel) -> Status {
    struct stat fst {};
    if (lstat(file.c_str(), &fst) != 0) return ErrnoStatus("cannot read '" + file + "'");
    if (S_ISLNK(fst.st_mode)) {
      std::error_code ec;
      const std::string target = fs::read_symlink(file, ec).string();
      if (ec) return IoStatus("cannot read link '" + file + "'", ec);
      lines.push_back("link " + rel + " " + Sha256Hex(target));
      ++nfiles;
      return Status::Ok();
    }
    if (!S_ISREG(fst.st_mode)) return Status::Ok();  // sockets, fifos, devices: not content
    int64_t size = 0;
    DROVER_ASSIGN_OR_RETURN(std::string hex, HashFile(file, cache, &size));
    lines.push_back(std::string((fst.st_mode & 0111) ? "exec " : "file ") + rel + " " + hex);
    ++nfiles;
    nbytes += size;
    return Status::Ok();
  };
  if (!S_ISDIR(st.st_mode)) {
    DROVER_RETURN_IF_ERROR(add(path, "."));
  } else {
    std::error_code ec;
    fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end;
    if (ec) return IoStatus("cannot list '" + path + "'", ec);
    for (; it != end; it.increment(ec)) {
      if (ec) return IoStatus("cannot list '" + path + "'", ec);
      if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
      const std::string file = it->path().string();
      DROVER_RETURN_IF_ERROR(add(file, file.substr(path.size() + 1)));
    }
    if (ec) return IoStatus("cannot list '" + path + "'", ec);
  }
  std::sort(lines.begin(), lines.end());
  Sha256 sha;
  for (const std::string& l : lines) {
    sha.Update(l);
    sha.Update("\n");
  }
  if (files) *files = nfiles;
  if (bytes) *bytes = nbytes;
  return sha.HexDigest();
}

}  // namespace drover
