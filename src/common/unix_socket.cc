#include "common/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace drover {
namespace {

Status Errno(const std::string& what) {
  const int e = errno;
  return ErrnoStatus(e == ENOENT ? Code::kNotFound : Code::kUnavailable, what, e);
}

// sockaddr_un for `path`: itself, or /proc/self/fd/<dir>/<name> through an O_PATH fd of its
// folder (returned in *dir_fd, to close after bind or connect) when it is too long.
Status AddressOf(const std::string& path, sockaddr_un* addr, int* dir_fd) {
  *dir_fd = -1;
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  std::string target = path;
  if (target.size() >= sizeof addr->sun_path) {
    const std::filesystem::path p(path);
    const std::string dir = p.parent_path().string();
    *dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0) return Errno("cannot open the socket's folder " + dir);
    target = "/proc/self/fd/" + std::to_string(*dir_fd) + "/" + p.filename().string();
    if (target.size() >= sizeof addr->sun_path) {
      ::close(*dir_fd);
      *dir_fd = -1;
      return InvalidArgument("the socket's name is too long: " + path);
    }
  }
  std::memcpy(addr->sun_path, target.c_str(), target.size() + 1);
  return Status::Ok();
}

}  // namespace

Result<int> ConnectUnix(const std::string& path, int timeout_ms) {
  sockaddr_un addr;
  int dir_fd = -1;
  DROVER_RETURN_IF_ERROR(AddressOf(path, &addr, &dir_fd));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    if (dir_fd >= 0) ::close(dir_fd);
    return Errno("cannot create a socket");
  }
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  if (dir_fd >= 0) ::close(dir_fd);
  if (rc != 0 && err == EAGAIN) {
    // The backlog is full: wait for room.
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) == 1) {
      int so = 0;
      socklen_t len = sizeof so;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len);
      rc = so == 0 ? 0 : -1;
      errno = so;
    } else {
      errno = ETIMEDOUT;
    }
  } else if (rc != 0) {
    errno = err;
  }
  if (rc != 0) {
    Status st = Errno("cannot connect to " + path);
    ::close(fd);
    return st;
  }
  // Blocking from here; the caller bounds reads and writes with poll.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<UnixListener> ListenUnix(const std::string& path, int mode, int backlog) {
  const std::filesystem::path p(path);
  const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode)) {
    return Errno("the socket's folder " + dir + " is not a folder");
  }
  if ((ds.st_mode & (S_IWOTH | S_IWGRP)) && !(ds.st_mode & S_ISVTX)) {
    return FailedPrecondition("the socket's folder " + dir +
                              " is writable by other users: one could put their own socket in "
                              "its place; use a folder only the daemon's user may write "
                              "(docs/lab-server.md)");
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPrecondition(path + " exists and is not a socket; it was left alone (remove it, "
                                       "or choose another --socket)");
    }
    auto live = ConnectUnix(path, 1000);
    if (live.ok()) {
      ::close(*live);
      return FailedPrecondition("another daemon listens on " + path);
    }
    // Nobody answers: a dead daemon's socket, replaced below.
  }
  const std::string tmp = dir + "/.drover-sock-" + std::to_string(::getpid()) + ".tmp";
  ::unlink(tmp.c_str());
  sockaddr_un addr;
  int dir_fd = -1;
  DROVER_RETURN_IF_ERROR(AddressOf(tmp, &addr, &dir_fd));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (dir_fd >= 0) ::close(dir_fd);
    return Errno("cannot create a socket");
  }
  // Created without any access for others; opened up (when asked) once in place.
  const mode_t old = ::umask(0177);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::umask(old);
  if (dir_fd >= 0) ::close(dir_fd);
  if (rc != 0) {
    errno = err;
    Status s = Errno("cannot bind " + tmp);
    ::close(fd);
    return s;
  }
  if (::chmod(tmp.c_str(), static_cast<mode_t>(mode)) != 0 || ::listen(fd, backlog) != 0 ||
      ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Errno("cannot listen on " + path);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  UnixListener out;
  out.fd = fd;
  if (::lstat(path.c_str(), &st) == 0) out.inode = static_cast<int64_t>(st.st_ino);
  return out;
}

void RemoveUnixSocket(const std::string& path, int64_t inode) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      static_cast<int64_t>(st.st_ino) == inode) {
    ::unlink(path.c_str());
  }
}

}  // namespace drover
