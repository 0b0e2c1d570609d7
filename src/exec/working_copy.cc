#include "exec/working_copy.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/file_faults.h"
#include "exec/child.h"
#include "exec/file_hashes.h"
#include "exec/snapshot.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

bool WriteAll(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = write(fd, text.data(), text.size());
  close(fd);
  return n == static_cast<ssize_t>(text.size());
}

Status MakeDir(const std::string& path) {
  if (FileFault(path) || (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)) {
    return ErrnoStatus("cannot create '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace

Result<PreparedOverlay> PrepareOverlay(const OverlayMount& m, const std::string& target,
                                       const std::vector<DataMount>& data) {
  for (const std::string* p : {&m.lower, &m.upper, &m.work, &target}) {
    if (p->find_first_of(",:\\") != std::string::npos) {
      return InvalidArgument("'" + *p +
                             "' holds ',', ':' or '\\', which overlayfs options "
                             "cannot carry");
    }
  }
  PreparedOverlay p;
  p.user_namespace = geteuid() != 0;
  p.options = "lowerdir=" + m.lower + ",upperdir=" + m.upper + ",workdir=" + m.work;
  // In a user namespace overlayfs keeps its bookkeeping in user.* attributes (trusted.* needs
  // the init namespace's CAP_SYS_ADMIN).
  if (p.user_namespace) p.options += ",userxattr";
  p.target = target;
  p.uid_map = std::to_string(geteuid()) + " " + std::to_string(geteuid()) + " 1\n";
  p.gid_map = std::to_string(getegid()) + " " + std::to_string(getegid()) + " 1\n";
  for (const DataMount& d : data) {
    struct stat st;
    if (stat(d.source.c_str(), &st) != 0) {
      return Status(Code::kNotFound, "data '" + d.source + "' is gone: " + ErrnoText(errno) +
                                         "; put it back or remove it from the spec's data:");
    }
    struct statvfs vfs;
    unsigned long flags = 0;
    if (statvfs(d.source.c_str(), &vfs) == 0) {
      if (vfs.f_flag & ST_NOSUID) flags |= MS_NOSUID;
      if (vfs.f_flag & ST_NODEV) flags |= MS_NODEV;
      if (vfs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
      if (vfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
      if (vfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
      if (vfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    }
    p.binds.push_back({d.source, d.target, S_ISDIR(st.st_mode), flags, d.trusted, d.source_root});
  }
  return p;
}

namespace {

// "/proc/self/fd/N" into buf (no allocation: a forked child).
const char* FdPath(char* buf, size_t n, int fd) {
  std::snprintf(buf, n, "/proc/self/fd/%d", fd);
  return buf;
}

// `name` beneath `root`, never through a link, as an O_PATH descriptor (a trailing link is
// opened as itself).
int OpenBeneath(int root, const char* name) {
  return OpenBeneathAt(root, name, O_PATH | O_NOFOLLOW);
}

// The data of a run that drops to its submitter (EnterOverlay), in the forked child.
int BindAsUser(const PreparedOverlay& p, const char** step, const RunAs& as) {
  *step = "opening the working copy for its data";
  const int root = open(p.target.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return errno;
  gid_t own_groups[256];
  const int own_n = getgroups(256, own_groups);
  *step = "taking the submitter's file rights for its data";
  if (own_n < 0 || syscall(SYS_setgroups, as.groups.size(), as.groups.data()) != 0) return errno;
  syscall(SYS_setfsgid, static_cast<gid_t>(as.gid));
  syscall(SYS_setfsuid, static_cast<uid_t>(as.uid));
  int err = 0;
  for (const PreparedOverlay::Bind& b : p.binds) {
    // PrepareOverlay made each target <working copy>/<name>.
    if (b.target.size() <= p.target.size() + 1 ||
        b.target.compare(0, p.target.size(), p.target) != 0) {
      *step = "placing a data mount";
      err = EINVAL;
      break;
    }
    const char* name = b.target.c_str() + p.target.size() + 1;
    *step = "making a data mount point";
    if (b.dir) {
      if (mkdirat(root, name, 0755) != 0 && errno != EEXIST) { err = errno; break; }
    } else {
      int fd = openat(root, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) { err = errno; break; }
      if (fd >= 0) close(fd);
    }
    const int target = OpenBeneath(root, name);
    struct stat st;
    if (target < 0 || fstat(target, &st) != 0) {
      err = errno;
      *step = "opening a data mount point (a link there is refused)";
      if (target >= 0) close(target);
      break;
    }
    if (S_ISDIR(st.st_mode) != b.dir || (!b.dir && !S_ISREG(st.st_mode))) {
      close(target);
      *step = "opening a data mount point (something else is in its place)";
      err = b.dir ? ENOTDIR : EISDIR;
      break;
    }
    *step = b.trusted ? "opening a need's outputs" : "opening the data as the submitter";
    if (b.trusted) {
      syscall(SYS_setfsuid, geteuid());
      syscall(SYS_setfsgid, getegid());
    }
    int source = -1;
    if (b.trusted && !b.source_root.empty() && b.source.size() > b.source_root.size() + 1 &&
        b.source.compare(0, b.source_root.size(), b.source_root) == 0) {
      // Beneath its folder, through no link: a stored output that is a link is not followed.
      const int from = open(b.source_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      source = from < 0 ? -1 : OpenBeneath(from, b.source.c_str() + b.source_root.size() + 1);
      struct stat sst;
      if (source >= 0 && (fstat(source, &sst) != 0 || S_ISLNK(sst.st_mode))) {
        close(source);
        source = -1;
        errno = ELOOP;
      }
      const int e = errno;
      if (from >= 0) close(from);
      errno = e;
    } else if (!b.trusted) {
      source = open(b.source.c_str(), O_PATH | O_CLOEXEC);
    } else {
      errno = EINVAL;
    }
    const int open_err = errno;
    if (b.trusted) {
      syscall(SYS_setfsgid, static_cast<gid_t>(as.gid));
      syscall(SYS_setfsuid, static_cast<uid_t>(as.uid));
    }
    if (source < 0) {
      err = open_err;
      close(target);
      break;
    }
    char src_path[40], dst_path[40];
    *step = "binding data into the working copy";
    const int bound = mount(FdPath(src_path, sizeof src_path, source),
                            FdPath(dst_path, sizeof dst_path, target), nullptr, MS_BIND | MS_REC,
                            nullptr);
    if (bound != 0) err = errno;
    close(source);
    close(target);
    if (bound != 0) break;
    // The new mount's root, for the remount that makes it read-only.
    *step = "making a data mount read-only";
    const int mounted = OpenBeneath(root, name);
    if (mounted < 0) { err = errno; break; }
    if (mount(nullptr, FdPath(dst_path, sizeof dst_path, mounted), nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY | b.flags, nullptr) != 0) {
      err = errno;
      close(mounted);
      break;
    }
    close(mounted);
  }
  close(root);
  // Back to the starter's file rights (a shim goes on as the starter).
  syscall(SYS_setfsuid, geteuid());
  syscall(SYS_setfsgid, getegid());
  syscall(SYS_setgroups, static_cast<size_t>(own_n), own_groups);
  return err;
}

}  // namespace

int EnterOverlay(const PreparedOverlay& p, const char** step, const RunAs* as) {
  if (p.user_namespace) {
    *step = "unshare(CLONE_NEWUSER|CLONE_NEWNS)";
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno;
    // Only the user's own ids are mapped, to themselves: files keep their owners and the run
    // keeps its uid (after exec it has no capability in the namespace either).
    *step = "writing /proc/self/setgroups";
    if (!WriteAll("/proc/self/setgroups", "deny")) return errno ? errno : EIO;
    *step = "writing /proc/self/uid_map";
    if (!WriteAll("/proc/self/uid_map", p.uid_map)) return errno ? errno : EIO;
    *step = "writing /proc/self/gid_map";
    if (!WriteAll("/proc/self/gid_map", p.gid_map)) return errno ? errno : EIO;
  } else {
    *step = "unshare(CLONE_NEWNS)";
    if (unshare(CLONE_NEWNS) != 0) return errno;
  }
  // Mounts made here must not propagate back to the host; the host's later mounts (a data share)
  // still reach the run.
  *step = "making mounts private";
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return errno;
  *step = "mounting the overlay";
  if (mount("overlay", p.target.c_str(), "overlay", 0, p.options.c_str()) != 0) return errno;
  if (as != nullptr && as->set() && !p.binds.empty()) return BindAsUser(p, step, *as);
  // Data, read-only: a bind, then a remount that adds ro (keeping the source mount's flags).
  for (const PreparedOverlay::Bind& b : p.binds) {
    *step = "making a data mount point";
    if (b.dir) {
      if (mkdir(b.target.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    } else {
      int fd = open(b.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return errno;
      close(fd);
    }
    *step = "binding data into the working copy";
    if (mount(b.source.c_str(), b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return errno;
    }
    *step = "making a data mount read-only";
    if (mount(nullptr, b.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | b.flags,
              nullptr) != 0) {
      return errno;
    }
  }
  return 0;
}

WorkingCopies WorkingCopies::CopyOnly(std::string why) {
  WorkingCopies w;
  w.why_not_ = std::move(why);
  return w;
}

WorkingCopies WorkingCopies::Deferred(std::string scratch_dir) {
  WorkingCopies w;
  w.why_not_ = "not probed yet";
  w.scratch_dir_ = scratch_dir.empty() ? std::string(".") : std::move(scratch_dir);
  return w;
}

WorkingCopies WorkingCopies::Probe(const std::string& scratch_dir) {
  const char* forced = getenv("DROVER_WORKING_COPY");
  if (forced != nullptr && std::string(forced) == "copy") {
    return CopyOnly("DROVER_WORKING_COPY=copy");
  }
  std::error_code ec;
  fs::create_directories(scratch_dir, ec);
  std::string dir = (fs::path(scratch_dir) / ".overlay-probe-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr)
    return CopyOnly("cannot create a probe folder in " + scratch_dir);
  auto cleanup = [&] {
    // overlayfs leaves its own work/work folder without permissions when it mounts as a user.
    chmod((dir + "/work/work").c_str(), 0700);
    fs::remove_all(dir, ec);
  };
  OverlayMount m{dir + "/lower", dir + "/upper", dir + "/work"};
  std::string target = dir + "/merged";
  for (const std::string* p : {&m.lower, &m.upper, &m.work, &target}) {
    if (!MakeDir(*p).ok()) {
      cleanup();
      return CopyOnly("cannot create probe folders in " + scratch_dir);
    }
  }
  { std::ofstream(m.lower + "/file") << "snapshot\n"; }
  auto prepared = PrepareOverlay(m, target);
  if (!prepared.ok()) {
    cleanup();
    return CopyOnly(prepared.status().message());
  }
  // The child mounts, writes through the overlay and exits: the snapshot's file must be
  // unchanged and the write must be in the upper layer.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    cleanup();
    return CopyOnly("cannot create a pipe");
  }
  const std::string file = target + "/file";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const char* step = "";
    int err = EnterOverlay(*prepared, &step);
    if (err == 0) {
      int fd = open(file.c_str(), O_WRONLY | O_APPEND);
      if (fd < 0 || write(fd, "run\n", 4) != 4) {
        err = errno ? errno : EIO;
        step = "writing through the overlay";
      }
      if (fd >= 0) close(fd);
    }
    if (err != 0) {
      char msg[256];
      // strerrordesc_np, not ErrnoText: a forked child must not allocate.
      int n = snprintf(msg, sizeof msg, "%s: %s", step, strerrordesc_np(err));
      if (n > 0) (void)!write(fds[1], msg, static_cast<size_t>(n));
    }
    _exit(err == 0 ? 0 : 1);
  }
  close(fds[1]);
  std::string message;
  char buf[256];
  // The probe runs at an engine's first launch, on its loop: it gets 5 s, then copies are used.
  bool gave_up = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    pollfd p{fds[0], POLLIN, 0};
    int r = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      gave_up = r == 0;
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    message.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  if (pid < 0) {
    message = "fork failed";
  } else {
    if (gave_up) kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (gave_up) message = "the overlay probe did not finish within 5 s";
  }
  std::string lower_text, upper_text;
  std::getline(std::ifstream(m.lower + "/file"), lower_text);
  {
    std::ifstream up(m.upper + "/file");
    std::string line;
    while (std::getline(up, line)) upper_text += line + "\n";
  }
  cleanup();
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && lower_text == "snapshot" &&
      upper_text == "snapshot\nrun\n") {
    WorkingCopies w;
    w.overlay_ = true;
    return w;
  }
  if (message.empty())
    message = "the overlay did not keep the snapshot apart from the run's changes";
  return CopyOnly(message);
}

std::string RunFiles::Folder(const std::string& store_dir, const char* name) {
  const std::string path = store_dir + "/" + name;
  char target[4096];
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return path;
  target[n] = '\0';
  // A link to a shared folder (the Slurm executor's shared_dir): the folder itself, so a node
  // that sees only the shared file system reads the paths drover records.
  return target[0] == '/' ? std::string(target) : store_dir + "/" + target;
}

RunFiles RunFiles::In(const std::string& store_dir, int64_t experiment_id, int64_t run_id,
                      bool begun) {
  const std::string id = std::to_string(run_id);
  RunFiles f;
  const std::string runs = Folder(store_dir, "runs");
  const std::string old_dir = runs + "/" + id;
  struct stat st;
  // Only a folder of this process's own user can be an old one: another user's (a root daemon's
  // run as its submitter) decides nothing by what they put in it.
  if (begun && lstat(old_dir.c_str(), &st) == 0 && st.st_uid == ::geteuid() &&
      stat((old_dir + "/work").c_str(), &st) == 0 &&
      stat((old_dir + "/attempt-1.out").c_str(), &st) == 0) {
    // Begun by an older drover: its folder held its logs, working copy and checkpoints.
    f.work = old_dir + "/work";
    f.changes = old_dir + "/changes";
    f.overlay_scratch = old_dir + "/.overlay";
    f.logs = old_dir;
    f.checkpoints = old_dir + "/checkpoints";
    f.log_prefix = old_dir + "/attempt-";
    return f;
  }
  f.work = old_dir;
  f.changes = store_dir + "/changes/" + id;
  f.overlay_scratch = store_dir + "/changes/." + id;
  f.logs = Folder(store_dir, "logs") + "/" + std::to_string(experiment_id);
  f.checkpoints = Folder(store_dir, "checkpoints") + "/" + id;
  f.log_prefix = f.logs + "/" + id + "-";
  return f;
}

Result<WorkingCopy> WorkingCopies::Prepare(const Snapshot& snapshot, const RunFiles& files,
                                           bool fresh, const std::vector<DataMount>& data,
                                           const UnixUser* as) {
  WorkingCopy w;
  w.path = files.work;
  OverlayMount m{snapshot.path, files.changes, files.overlay_scratch};
  // The mount point and the upper layer are the user's (entries of the store's own folders, so
  // given by path without a race); the overlay's scratch folder stays the daemon's.
  auto give = [&](const std::string& dir) -> Status {
    if (as == nullptr) return Status::Ok();
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        lchown(dir.c_str(), static_cast<uid_t>(as->uid), static_cast<gid_t>(as->gid)) != 0) {
      return ErrnoStatus("cannot give '" + dir + "' to " + DisplayName(*as));
    }
    chmod(dir.c_str(), 0700);
    return Status::Ok();
  };
  struct stat st;
  if (!fresh && stat(m.upper.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // An earlier attempt's overlay: its changes are kept for this one (and its mount point and
    // scratch folder made again if a crash came between them).
    DROVER_RETURN_IF_ERROR(MakeDir(m.work));
    DROVER_RETURN_IF_ERROR(MakeDir(w.path));
    DROVER_RETURN_IF_ERROR(give(w.path));
    DROVER_RETURN_IF_ERROR(give(m.upper));
    w.overlay = m;
    return w;
  }
  if (!fresh && stat(w.path.c_str(), &st) == 0) return w;  // an earlier attempt's copy
  const bool small = snapshot.files <= kCopyMaxFiles && snapshot.bytes <= kCopyMaxBytes;
  if ((!small || !data.empty() || as != nullptr) && !probed()) *this = Probe(scratch_dir_);
  // A user's run is mounted wherever overlays work, whatever its size: nothing of it is copied
  // with the daemon's rights.
  const bool copy = !overlay_ || (small && data.empty() && as == nullptr);
  if (copy || !PrepareOverlay(m, w.path).ok()) {
    DROVER_RETURN_IF_ERROR(as != nullptr ? MaterializeSnapshotAs(snapshot, w.path, *as)
                                         : MaterializeSnapshot(snapshot, w.path));
    // No mount namespace for this run: its data are links (writable through; docs/spec.md),
    // made as the user in their working copy.
    ActingAs user(as);
    if (!user.status().ok()) return user.status();
    for (const DataMount& d : data) {
      std::error_code ec;
      fs::remove_all(d.target, ec);
      fs::create_symlink(d.source, d.target, ec);
      if (ec) {
        return IoStatus("cannot link data '" + d.source + "' into the working copy at '" +
                                     d.target + "'", ec);
      }
    }
    return w;
  }
  std::error_code ec;
  if (snapshot.path.empty() || !fs::is_directory(snapshot.path, ec)) {
    return NotFound("snapshot " + snapshot.hash + " is missing at '" + snapshot.path +
                    "'; the store's snapshots folder was changed by hand");
  }
  if (FileFault(m.upper)) ec = std::error_code(errno, std::generic_category());
  else fs::create_directories(fs::path(m.upper).parent_path(), ec);
  if (ec)
    return Status(Code::kIo, "cannot create '" + fs::path(m.upper).parent_path().string() +
                                 "': " + ec.message());
  // The upper layer before the mount point: a folder runs/<id>/ without changes/<id>/ beside it
  // is a copy, so an attempt cut short here must not leave the mount point alone.
  DROVER_RETURN_IF_ERROR(MakeDir(m.work));
  DROVER_RETURN_IF_ERROR(MakeDir(m.upper));
  DROVER_RETURN_IF_ERROR(MakeDir(w.path));
  DROVER_RETURN_IF_ERROR(give(m.upper));
  DROVER_RETURN_IF_ERROR(give(w.path));
  w.overlay = m;
  return w;
}

}  // namespace drover
