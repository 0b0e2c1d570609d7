#include "exec/artifacts.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <dirent.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "common/hash.h"
#include "exec/file_hashes.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

// An open file descriptor, closed with its scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// A file of an output as the run left it: in which layer, and what it is.
struct Found {
  int layer = 0;  // index into the layers walked (the upper layer or the copy first)
  bool link = false;
  bool exec = false;
};

// One tree the run's files are in, opened once: every path below it is resolved beneath this
// descriptor without following any link (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so a
// link the run planted (`a -> /etc`) is never walked through, whoever the daemon is.
struct Layer {
  std::string root;  // for messages
  Fd fd;
  bool upper = false;  // an overlay's upper layer (whiteouts and opaque folders hide below)
};

bool Whiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == 0; }

bool Opaque(int dir_fd) {
  char v[4];
  for (const char* name : {"user.overlay.opaque", "trusted.overlay.opaque"}) {
    ssize_t n = fgetxattr(dir_fd, name, v, sizeof v);
    if (n == 1 && v[0] == 'y') return true;
  }
  return false;
}

// Whether `rel` or a folder above it is in `hidden` (what the upper layer hides below it).
bool Hidden(const std::set<std::string>& hidden, const std::string& rel) {
  for (std::string p = rel;;) {
    if (hidden.count(p)) return true;
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return false;
    p.resize(slash);
  }
}

Status ThroughALink(const std::string& rel) {
  return FailedPrecondition(fmt::format(
      "its output '{}' lies under a symbolic link the run made; an output is never stored "
      "through a link (declare the folder the link points to, inside the working copy)",
      rel));
}

// Every file under `rel` (a file or a folder) of `layer` into `out` by its path inside the
// working copy. In the upper layer, whatever is not a plain folder (a file, a link, a whiteout)
// and an opaque folder hide what the lower layer has at and below that path, as overlayfs does.
Status Walk(const Layer& layer, int index, const std::string& rel,
            std::map<std::string, Found>& out, std::set<std::string>& hidden, int depth = 0) {
  if (depth > 256) return FailedPrecondition("its output '" + rel + "' is nested too deeply");
  if (!layer.upper && Hidden(hidden, rel)) return Status::Ok();
  Fd fd(OpenBeneathAt(layer.fd.get(), rel.c_str(), O_PATH | O_NOFOLLOW));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::Ok();
    if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR) return ThroughALink(rel);
    return ErrnoStatus("cannot open '" + layer.root + "/" + rel + "'");
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("cannot stat '" + layer.root + "/" + rel + "'");
  if (layer.upper && Whiteout(st)) {
    hidden.insert(rel);
    return Status::Ok();
  }
  if (S_ISDIR(st.st_mode)) {
    Fd dir(OpenBeneathAt(layer.fd.get(), rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
    if (dir.get() < 0) return ErrnoStatus("cannot read '" + layer.root + "/" + rel + "'");
    if (layer.upper && Opaque(dir.get())) hidden.insert(rel);
    DIR* d = fdopendir(dir.get());
    if (d == nullptr) return ErrnoStatus("cannot read '" + layer.root + "/" + rel + "'");
    dir.release();  // closedir closes it
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        names.emplace_back(e->d_name);
      }
    }
    closedir(d);
    for (const std::string& name : names) {
      DROVER_RETURN_IF_ERROR(Walk(layer, index, rel + "/" + name, out, hidden, depth + 1));
    }
    return Status::Ok();
  }
  if (layer.upper) hidden.insert(rel);  // a file or a link here: nothing of the lower layer below
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) return Status::Ok();
  if (!out.count(rel)) out[rel] = Found{index, S_ISLNK(st.st_mode), (st.st_mode & 0111) != 0};
  return Status::Ok();
}

// What the upper layer has at each folder above `rel` hides the lower layer's `rel` too: a file
// or a link in place of the folder (`rm -rf a && ln -s /etc a`), or a folder made opaque.
void HideBelowUpper(const Layer& upper, const std::string& rel, std::set<std::string>& hidden) {
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
    const std::string above = rel.substr(0, slash);
    Fd fd(OpenBeneathAt(upper.fd.get(), above.c_str(), O_PATH | O_NOFOLLOW));
    if (fd.get() < 0) return;  // not in the upper layer: the lower one shows
    struct stat st {};
    if (fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      hidden.insert(above);
      return;
    }
    Fd dir(OpenBeneathAt(upper.fd.get(), above.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
    if (dir.get() >= 0 && Opaque(dir.get())) {
      hidden.insert(above);
      return;
    }
  }
}

// The folder that will hold `rel` beneath `root` (the run's outputs tree, the daemon's own),
// each folder made and opened through no link: a link stored as an output is never a way out.
Result<Fd> ParentBeneath(int root, const std::string& rel, std::string* leaf) {
  Fd dir(fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (dir.get() < 0) return ErrnoStatus("cannot open the outputs folder");
  size_t start = 0;
  for (size_t slash = rel.find('/'); slash != std::string::npos;
       start = slash + 1, slash = rel.find('/', start)) {
    const std::string name = rel.substr(start, slash - start);
    if (mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus("cannot create the folder of '" + rel + "'");
    }
    Fd next(openat(dir.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) return ThroughALink(rel);
    dir = std::move(next);
  }
  *leaf = rel.substr(start);
  return dir;
}

}  // namespace

std::string OutputsDir(const std::string& store_dir, int64_t run_id) {
  return store_dir + "/outputs/" + std::to_string(run_id);
}

std::string ArtifactObject(const std::string& store_dir, const std::string& hash) {
  return ArtifactObjectPath(store_dir, hash);
}

Result<std::vector<Artifact>> StoreOutputs(const std::string& store_dir, int64_t run_id,
                                           const RunTree& tree,
                                           const std::vector<std::string>& outputs) {
  // The run's trees, each opened once: the copy, or the overlay's upper layer over the snapshot.
  std::vector<Layer> layers;
  for (const std::string& root : tree.upper.empty()
                                     ? std::vector<std::string>{tree.work}
                                     : std::vector<std::string>{tree.upper, tree.lower}) {
    Layer l;
    l.root = root;
    l.fd = Fd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (l.fd.get() < 0) return ErrnoStatus("cannot open the run's folder '" + root + "'");
    l.upper = !tree.upper.empty() && layers.empty();
    layers.push_back(std::move(l));
  }
  std::map<std::string, Found> files;
  for (const std::string& o : outputs) {
    std::set<std::string> hidden;
    bool exists = false;
    for (size_t i = 0; i < layers.size(); ++i) {
      const Layer& layer = layers[i];
      if (!layer.upper && !tree.upper.empty()) HideBelowUpper(layers[0], o, hidden);
      if (!layer.upper && Hidden(hidden, o)) break;
      Fd at(OpenBeneathAt(layer.fd.get(), o.c_str(), O_PATH | O_NOFOLLOW));
      struct stat st {};
      if (at.get() < 0 && (errno == ELOOP || errno == EXDEV || errno == ENOTDIR)) {
        return ThroughALink(o);
      }
      if (at.get() >= 0 && fstat(at.get(), &st) == 0 && !(layer.upper && Whiteout(st))) {
        exists = true;
      }
      DROVER_RETURN_IF_ERROR(Walk(layer, static_cast<int>(i), o, files, hidden));
    }
    if (!exists) {
      return FailedPrecondition(fmt::format(
          "it did not write its declared output '{}' (outputs: in the spec); write it there, or "
          "remove it from outputs",
          o));
    }
  }
  const std::string objects = store_dir + "/artifacts";
  const std::string out_dir = OutputsDir(store_dir, run_id);
  std::error_code ec;
  fs::remove_all(out_dir, ec);  // a half-made tree of an earlier try
  fs::create_directories(objects, ec);
  if (ec) return IoStatus("cannot create '" + objects + "'", ec);
  fs::create_directories(out_dir, ec);
  if (ec) return IoStatus("cannot create '" + out_dir + "'", ec);
  Fd out(open(out_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (out.get() < 0) return ErrnoStatus("cannot open '" + out_dir + "'");
  std::vector<Artifact> stored;
  for (const auto& [rel, f] : files) {
    const Layer& layer = layers[static_cast<size_t>(f.layer)];
    const std::string source = layer.root + "/" + rel;
    Artifact a;
    a.run_id = run_id;
    a.path = rel;
    // Opened again beneath its tree through no link, and checked on the descriptor: what is
    // read is what was walked, even if the run swapped the path for a link meanwhile.
    Fd in(OpenBeneathAt(layer.fd.get(), rel.c_str(),
                        f.link ? O_PATH | O_NOFOLLOW : O_RDONLY | O_NONBLOCK | O_NOFOLLOW));
    if (in.get() < 0) {
      if (errno == ELOOP || errno == EXDEV || errno == ENOTDIR) return ThroughALink(rel);
      return FailedPrecondition(fmt::format(
          "its output '{}' cannot be read inside its working copy ({})", rel,
          ErrnoText(errno)));
    }
    std::string leaf;
    DROVER_ASSIGN_OR_RETURN(Fd parent, ParentBeneath(out.get(), rel, &leaf));
    unlinkat(parent.get(), leaf.c_str(), 0);
    if (f.link) {
      // A link is kept as a link (its target's text), never followed out of the working copy.
      char buf[4096];
      const ssize_t n = readlinkat(in.get(), "", buf, sizeof buf);
      if (n < 0) return ErrnoStatus("cannot read link '" + source + "'");
      const std::string target(buf, static_cast<size_t>(n));
      a.hash = Sha256Hex(target);
      a.bytes = static_cast<int64_t>(target.size());
      a.mode = 0120777;
      if (symlinkat(target.c_str(), parent.get(), leaf.c_str()) != 0) {
        return ErrnoStatus("cannot store link '" + out_dir + "/" + rel + "'");
      }
      stored.push_back(a);
      continue;
    }
    // Copied beside the objects while hashed, then renamed to its hash (kept once).
    std::string tmp = objects + "/.tmp-XXXXXX";
    int fd = mkstemp(tmp.data());
    if (fd < 0) return ErrnoStatus("cannot write under '" + objects + "'");
    close(fd);
    unlink(tmp.c_str());
    std::string hex;
    int64_t bytes = 0;
    std::optional<FileKey> stable;
    Status s = CopyAndHash(source, tmp, f.exec, &hex, &bytes, &stable, in.release());
    if (!s.ok()) {
      unlink(tmp.c_str());
      return s;
    }
    chmod(tmp.c_str(), f.exec ? 0555 : 0444);
    const std::string object = ArtifactObject(store_dir, hex);
    fs::create_directories(fs::path(object).parent_path(), ec);
    if (linkat(AT_FDCWD, object.c_str(), parent.get(), leaf.c_str(), 0) == 0) {
      unlink(tmp.c_str());  // the same content, stored before: one copy, linked
    } else {
      // Not stored before (or collected by a gc a moment ago): this copy becomes the object.
      if (rename(tmp.c_str(), object.c_str()) != 0) {
        Status err = ErrnoStatus("cannot store '" + object + "'");
        unlink(tmp.c_str());
        return err;
      }
      if (linkat(AT_FDCWD, object.c_str(), parent.get(), leaf.c_str(), 0) != 0) {
        // Another file system (an outputs folder moved by hand): a copy.
        Fd src(open(object.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
        Fd dst(openat(parent.get(), leaf.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444));
        if (src.get() < 0 || dst.get() < 0) {
          return ErrnoStatus("cannot store '" + out_dir + "/" + rel + "'");
        }
        char buf[1 << 16];
        for (ssize_t n; (n = read(src.get(), buf, sizeof buf)) != 0;) {
          if (n < 0 && errno == EINTR) continue;
          if (n < 0 || write(dst.get(), buf, static_cast<size_t>(n)) != n) {
            return ErrnoStatus("cannot store '" + out_dir + "/" + rel + "'");
          }
        }
      }
    }
    a.hash = hex;
    a.bytes = bytes;
    a.mode = f.exec ? 0755 : 0644;
    stored.push_back(a);
  }
  // Declared folders that came out empty are still there for the stages that need them (made
  // through no link, like every file above).
  for (const std::string& o : outputs) {
    std::string leaf;
    DROVER_ASSIGN_OR_RETURN(Fd parent, ParentBeneath(out.get(), o, &leaf));
    if (mkdirat(parent.get(), leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus("cannot create '" + out_dir + "/" + o + "'");
    }
  }
  // The stored tree is drover's (root's on a root daemon) and read-only; its folders are open to
  // whoever reaches them (a later stage's run, as its user, through its bind: outputs/ itself is
  // the daemon's alone).
  std::error_code walk;
  for (fs::recursive_directory_iterator it(out_dir, walk), end; !walk && it != end;
       it.increment(walk)) {
    std::error_code kind;
    if (it->is_symlink(kind)) continue;
    if (it->is_directory(kind)) chmod(it->path().c_str(), 0755);
  }
  chmod(out_dir.c_str(), 0755);
  return stored;
}

std::string ArtifactsHash(const std::vector<Artifact>& artifacts) {
  std::vector<std::string> lines;
  for (const Artifact& a : artifacts) {
    lines.push_back(fmt::format("{:o} {} {}", a.mode, a.path, a.hash));
  }
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  return Sha256Hex(all);
}

std::vector<std::string> VerifyArtifacts(const std::string& store_dir, int64_t run_id,
                                         const std::vector<Artifact>& artifacts) {
  std::vector<std::string> bad;
  const std::string out_dir = OutputsDir(store_dir, run_id);
  for (const Artifact& a : artifacts) {
    const std::string dest = out_dir + "/" + a.path;
    if (a.mode == 0120777) {
      std::error_code ec;
      const std::string target = fs::read_symlink(dest, ec).string();
      if (ec || Sha256Hex(target) != a.hash) bad.push_back(a.path + ": the link was changed");
      continue;
    }
    for (const std::string& file : {ArtifactObject(store_dir, a.hash), dest}) {
      Result<std::string> hex = HashFile(file, nullptr);
      if (!hex.ok()) {
        bad.push_back(fmt::format("{}: {}", a.path, hex.status().message()));
        break;
      }
      if (*hex != a.hash) {
        bad.push_back(fmt::format("{}: its content changed (sha256 {} was stored, {} is there "
                                  "now at {})",
                                  a.path, a.hash.substr(0, 12), hex->substr(0, 12), file));
        break;
      }
    }
  }
  return bad;
}

}  // namespace drover
