#include "common/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace drover {

Result<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes,
                                    std::string_view what, std::string_view hint,
                                    std::optional<int64_t> owner) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(fmt::format("{} '{}' not found; check the path", what, path));
    return ErrnoStatus(fmt::format("reading {} '{}'", what, path));
  }
  auto fail = [&](Status s) {
    close(fd);
    return s;
  };
  struct stat st;
  if (fstat(fd, &st) != 0) return fail(ErrnoStatus(fmt::format("reading {} '{}'", what, path)));
  if (owner && static_cast<int64_t>(st.st_uid) != *owner) {
    return fail(PermissionDenied(fmt::format("{} '{}' is not uid {}'s file", what, path, *owner)));
  }
  if (S_ISDIR(st.st_mode)) {
    return fail(InvalidArgument(fmt::format("'{}' is a directory, not a {}; {}", path, what, hint)));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(
        InvalidArgument(fmt::format("'{}' is not a regular file, so not a {}; {}", path, what, hint)));
  }
  if (st.st_size > static_cast<off_t>(max_bytes)) {
    return fail(InvalidArgument(fmt::format("{} '{}' is {} bytes, over the limit of {}; {}", what,
                                            path, st.st_size, max_bytes, hint)));
  }
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(ErrnoStatus(fmt::format("reading {} '{}'", what, path)));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      return fail(InvalidArgument(fmt::format("{} '{}' grew past the limit of {} bytes while it "
                                              "was read; {}",
                                              what, path, max_bytes, hint)));
    }
  }
  close(fd);
  return text;
}

Status WriteFileAtomically(const std::string& path, std::string_view data, const AtomicWrite& how) {
  const size_t slash = path.rfind('/');
  std::string tmp = slash == std::string::npos
                        ? "." + path + ".XXXXXX"
                        : path.substr(0, slash + 1) + "." + path.substr(slash + 1) + ".XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot write " + path);
  auto fail = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoStatus("cannot write " + path, err);
  };
  if (::fchmod(fd, static_cast<mode_t>(how.mode)) != 0) return fail(errno);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  if (how.sync && ::fsync(fd) != 0) return fail(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus("cannot write " + path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus("cannot replace " + path, err);
  }
  return Status::Ok();
}

}  // namespace drover
