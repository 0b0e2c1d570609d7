#include "gpu/leases.h"
#include "common/files.h"
#include "common/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

namespace drover {
namespace {

using nlohmann::json;

constexpr size_t kMaxLeaseFileBytes = 1 << 20;  // 1 MiB: thousands of leases
constexpr size_t kMaxLeaseFiles = 4096;         // files looked at per read

Status Errno(const std::string& what) {
  return ErrnoStatus(Code::kUnavailable, what);
}

bool ProcessLives(int64_t pid) { return ProcessAlive(pid); }

// Opens a file of the folder without following a link another user may have put there.
int OpenIn(const std::string& path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

Result<std::string> ReadSmall(const std::string& path) {
  int fd = OpenIn(path, O_RDONLY);
  if (fd < 0) return Errno("cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxLeaseFileBytes) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file of at most 1 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace

std::string FormatLeases(int64_t pid, const std::vector<GpuLease>& leases) {
  json j = {{"pid", pid}, {"leases", json::array()}};
  for (const GpuLease& l : leases) {
    j["leases"].push_back({{"uuid", l.uuid}, {"bytes", l.bytes}, {"whole", l.whole}, {"pid", l.pid}});
  }
  return j.dump() + "\n";
}

Result<std::vector<GpuLease>> ParseLeases(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("leases") || !j["leases"].is_array()) {
    return InvalidArgument("not a lease file (an object with a \"leases\" list)");
  }
  std::vector<GpuLease> out;
  for (const json& e : j["leases"]) {
    if (!e.is_object() || !e.contains("uuid") || !e["uuid"].is_string() ||
        !e.contains("bytes") || !e["bytes"].is_number_integer()) {
      return InvalidArgument("a lease needs a string uuid and integer bytes");
    }
    GpuLease l;
    l.uuid = e["uuid"].get<std::string>();
    // Bounded (1 PiB): a forged huge value must not wrap a sum.
    l.bytes = std::clamp<int64_t>(e["bytes"].get<int64_t>(), 0, int64_t{1} << 50);
    l.whole = e.contains("whole") && e["whole"].is_boolean() && e["whole"].get<bool>();
    if (e.contains("pid") && e["pid"].is_number_integer()) l.pid = e["pid"].get<int64_t>();
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::unique_ptr<FileGpuLedger>> FileGpuLedger::Open(const std::string& dir,
                                                          const std::string& owner) {
  if (owner.empty() || owner.find('/') != std::string::npos || owner[0] == '.') {
    return InvalidArgument("a GPU lease owner is a plain name, not '" + owner + "'");
  }
  if (::mkdir(dir.c_str(), 01777) == 0) {
    ::chmod(dir.c_str(), 01777);  // the umask took bits away: every user's engine writes here
  } else if (errno != EEXIST) {
    return Errno("cannot create the GPU lease folder " + dir +
                 " (set another with --gpu-leases or $DROVER_GPU_LEASES)");
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return InvalidArgument("the GPU lease folder " + dir +
                           " is not a folder (a link or a file); remove it or choose another "
                           "with --gpu-leases");
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return FailedPrecondition(
        "the GPU lease folder " + dir + " belongs to uid " + std::to_string(st.st_uid) +
        ", not to root or this user: whoever owns it can remove every engine's leases. Have root "
        "create it (install -d -m 1777 " + dir + ", deploy/drover-tmpfiles.conf), or choose "
        "another with --gpu-leases");
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    return InvalidArgument("the GPU lease folder " + dir +
                           " is writable by everyone without the sticky bit: any user could "
                           "remove another's leases; chmod 1777 it");
  }
  const std::string live = dir + "/" + owner + ".live";
  int fd = OpenIn(live, O_RDWR | O_CREAT, 0644);
  if (fd < 0) return Errno("cannot open " + live);
  ::fchmod(fd, 0644);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return FailedPrecondition("another engine of this store holds its GPU leases in " + dir);
  }
  return std::unique_ptr<FileGpuLedger>(new FileGpuLedger(dir, owner, fd));
}

FileGpuLedger::~FileGpuLedger() {
  Unlock();
  // Nothing held any more: the file goes. Runs left running (a daemon drained for the next one
  // to adopt) keep their leases: the file stays and counts while their processes live.
  if (published_once_ && published_.empty()) ::unlink((dir_ + "/" + owner_ + ".json").c_str());
  if (live_fd_ >= 0) ::close(live_fd_);
}

Status FileGpuLedger::Lock(int wait_ms) {
  if (lock_fd_ >= 0) return Status::Ok();
  const std::string path = dir_ + "/lock";
  int fd = OpenIn(path, O_RDWR | O_CREAT, 0666);
  if (fd < 0) fd = OpenIn(path, O_RDONLY);  // made by another user with a narrower mode
  if (fd < 0) return Errno("cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_uid == ::geteuid()) ::fchmod(fd, 0666);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      Status st_err = Errno("cannot lock " + path);
      ::close(fd);
      return st_err;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return Unavailable("another engine has held the machine's GPU lock " + path + " for over " +
                         std::to_string(wait_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  lock_fd_ = fd;
  return Status::Ok();
}

void FileGpuLedger::Unlock() {
  if (lock_fd_ < 0) return;
  ::flock(lock_fd_, LOCK_UN);
  ::close(lock_fd_);
  lock_fd_ = -1;
}

Result<std::vector<GpuLease>> FileGpuLedger::Others() {
  std::vector<GpuLease> out;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return Errno("cannot read the GPU lease folder " + dir_);
  std::vector<std::string> owners;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= 5 || !name.ends_with(".json") || name[0] == '.') continue;
    std::string owner = name.substr(0, name.size() - 5);
    if (owner == owner_) continue;
    owners.push_back(std::move(owner));
    if (owners.size() >= kMaxLeaseFiles) break;
  }
  ::closedir(d);
  for (const std::string& owner : owners) {
    const std::string path = dir_ + "/" + owner + ".json";
    auto text = ReadSmall(path);
    if (!text.ok()) {
      if (errno != ENOENT) ++unreadable_;  // (gone meanwhile: its owner ended)
      continue;
    }
    auto leases = ParseLeases(*text);
    if (!leases.ok()) {
      ++unreadable_;
      continue;
    }
    // Whether its engine lives: it holds <owner>.live.
    bool alive = false;
    int fd = OpenIn(dir_ + "/" + owner + ".live", O_RDONLY);
    if (fd >= 0) {
      alive = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
      ::close(fd);
    }
    bool any = false;
    for (GpuLease& l : *leases) {
      if (alive || ProcessLives(l.pid)) {
        out.push_back(std::move(l));
        any = true;
      }
    }
    if (!alive && !any) {  // a dead engine whose runs have all ended: tidy (where allowed)
      ::unlink(path.c_str());
      ::unlink((dir_ + "/" + owner + ".live").c_str());
    }
  }
  return out;
}

Status FileGpuLedger::Publish(const std::vector<GpuLease>& mine) {
  if (published_once_ && mine == published_) return Status::Ok();
  const std::string path = dir_ + "/" + owner_ + ".json";
  // A fresh name each time (a fixed one could be taken by anyone in the folder).
  if (Status st = WriteFileAtomically(path, FormatLeases(::getpid(), mine), {.sync = false}); !st.ok()) {
    return st;
  }
  published_ = mine;
  published_once_ = true;
  return Status::Ok();
}

}  // namespace drover
