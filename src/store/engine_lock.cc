#include "store/engine_lock.h"

#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace drover {

Result<EngineLock> EngineLock::Acquire(const std::string& store_dir) {
  std::error_code ec;
  std::filesystem::create_directories(store_dir, ec);
  if (ec) {
    return Status(Code::kIo,
                  fmt::format("cannot create the store folder {}: {}", store_dir, ec.message()));
  }
  std::string path = store_dir + "/engine.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("opening " + path);
  // The holder named in the file is gone, yet the lock is held: a short-lived child of it
  // (forked while it held the lock: a working-copy probe) still has the lock's file open. It
  // lets go within moments; wait for it rather than refuse a restarted daemon.
  auto holder_gone = [&] {
    char b[32] = {0};
    const ssize_t got = ::pread(fd, b, sizeof b - 1, 0);
    const long holder = got > 0 ? std::strtol(b, nullptr, 10) : 0;
    return holder > 0 && !ProcessAlive(holder);  // exited, even if not reaped yet
  };
  for (int tries = 0; tries < 50 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK &&
                      holder_gone();
       ++tries) {
    ::usleep(100'000);
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {0};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return ErrnoStatus("locking " + path, err);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return FailedPrecondition(fmt::format(
        "another drover (pid {}) is running experiments from the store {}; wait for it to "
        "finish, or give this experiment its own --store (one engine per store keeps the GPU "
        "bookkeeping right)",
        pid, store_dir));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    Status st = ErrnoStatus("writing " + path);
    ::close(fd);
    return st;
  }
  return EngineLock(fd);
}

std::optional<int> EngineLock::Holder(const std::string& store_dir) {
  const std::string path = store_dir + "/engine.lock";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<int> holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    char buf[32] = {0};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    const int pid = n > 0 ? std::atoi(buf) : 0;
    if (pid > 0) holder = pid;
  }
  ::close(fd);  // a shared lock taken here goes with it
  return holder;
}

EngineLock::EngineLock(EngineLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

EngineLock::~EngineLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace drover
