#include "exec/artifacts.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "common/hash.h"
#include "exec/file_hashes.h"

namespace drover {

namespace fs = std::filesystem;

namespace {

// A file of an output as the run left it: where its bytes are, and whether it is a link.
struct Found {
  std::string source;
  bool link = false;
  bool exec = false;
  std::string root;  // the tree it was found in (source is root/rel)
};

bool Opaque(const std::string& dir) {
  char v[4];
  for (const char* name : {"user.overlay.opaque", "trusted.overlay.opaque"}) {
    ssize_t n = lgetxattr(dir.c_str(), name, v, sizeof v);
    if (n == 1 && v[0] == 'y') return true;
  }
  return false;
}

bool Whiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == 0; }

// Every file under `root`/`rel` (a file or a folder) into `out` by its path inside the working
// copy; whiteouts and opaque folders (an overlay's upper layer) hide what is below.
void Walk(const std::string& root, const std::string& rel, std::map<std::string, Found>& out,
          std::set<std::string>& hidden, bool upper) {
  const std::string path = root + "/" + rel;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return;
  auto is_hidden = [&](const std::string& r) {
    for (std::string p = r;;) {
      if (hidden.count(p)) return true;
      size_t slash = p.rfind('/');
      if (slash == std::string::npos) return false;
      p.resize(slash);
    }
  };
  if (!upper && is_hidden(rel)) return;
  if (upper && Whiteout(st)) {
    hidden.insert(rel);
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    if (upper && Opaque(path)) hidden.insert(rel);
    std::error_code ec;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      Walk(root, rel + "/" + it->path().filename().string(), out, hidden, upper);
    }
    return;
  }
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) return;
  if (out.count(rel)) return;  // the upper layer's wins
  out[rel] = Found{path, S_ISLNK(st.st_mode), (st.st_mode & 0111) != 0, root};
}

Status Link(const std::string& object, const std::string& dest) {
  std::error_code ec;
  fs::create_directories(fs::path(dest).parent_path(), ec);
  if (ec) return Status(Code::kIo, "cannot create '" + dest + "': " + ec.message());
  unlink(dest.c_str());
  if (link(object.c_str(), dest.c_str()) == 0) return Status::Ok();
  // Another file system (an outputs folder moved by hand): a copy.
  fs::copy_file(object, dest, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status(Code::kIo, "cannot store '" + dest + "': " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string OutputsDir(const std::string& store_dir, int64_t run_id) {
  return store_dir + "/outputs/" + std::to_string(run_id);
}

std::string ArtifactObject(const std::string& store_dir, const std::string& hash) {
  return store_dir + "/artifacts/" + hash.substr(0, 2) + "/" + hash;
}

Result<std::vector<Artifact>> StoreOutputs(const std::string& store_dir, int64_t run_id,
                                           const RunTree& tree,
                                           const std::vector<std::string>& outputs) {
  std::map<std::string, Found> files;
  for (const std::string& o : outputs) {
    std::set<std::string> hidden;
    bool exists = false;
    struct stat st {};
    if (tree.upper.empty()) {
      exists = lstat((tree.work + "/" + o).c_str(), &st) == 0;
      Walk(tree.work, o, files, hidden, false);
    } else {
      const bool up = lstat((tree.upper + "/" + o).c_str(), &st) == 0;
      exists = up && !Whiteout(st);
      Walk(tree.upper, o, files, hidden, true);
      if (!hidden.count(o)) {
        exists = exists || lstat((tree.lower + "/" + o).c_str(), &st) == 0;
        Walk(tree.lower, o, files, hidden, false);
      }
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
  if (ec) return Status(Code::kIo, "cannot create '" + objects + "': " + ec.message());
  std::vector<Artifact> stored;
  for (const auto& [rel, f] : files) {
    Artifact a;
    a.run_id = run_id;
    a.path = rel;
    // In a user's tree, opened beneath its root through no link.
    int in = -1;
    if (tree.confined) {
      in = OpenBeneath(f.root, rel, f.link ? O_PATH | O_NOFOLLOW : O_RDONLY | O_NONBLOCK);
      if (in < 0) {
        return FailedPrecondition(
            fmt::format("its output '{}' cannot be read inside its working copy ({}); an output "
                        "is not stored through a symbolic link",
                        rel, std::strerror(errno)));
      }
    }
    if (f.link) {
      // A link is kept as a link (its target's text), not followed out of the working copy.
      std::string target;
      if (in >= 0) {
        char buf[4096];
        const ssize_t n = readlinkat(in, "", buf, sizeof buf);
        close(in);
        if (n < 0) return ErrnoStatus("cannot read link '" + f.source + "'");
        target.assign(buf, static_cast<size_t>(n));
      } else {
        target = fs::read_symlink(f.source, ec).string();
      }
      if (ec) return Status(Code::kIo, "cannot read link '" + f.source + "': " + ec.message());
      a.hash = Sha256Hex(target);
      a.bytes = static_cast<int64_t>(target.size());
      a.mode = 0120777;
      const std::string dest = out_dir + "/" + rel;
      fs::create_directories(fs::path(dest).parent_path(), ec);
      fs::create_symlink(target, dest, ec);
      if (ec) return Status(Code::kIo, "cannot store link '" + dest + "': " + ec.message());
      stored.push_back(a);
      continue;
    }
    // Copied beside the objects while hashed, then renamed to its hash (kept once).
    std::string tmp = objects + "/.tmp-XXXXXX";
    int fd = mkstemp(tmp.data());
    if (fd < 0) {
      if (in >= 0) close(in);
      return ErrnoStatus("cannot write under '" + objects + "'");
    }
    close(fd);
    unlink(tmp.c_str());
    std::string hex;
    int64_t bytes = 0;
    std::optional<FileKey> stable;
    Status s = CopyAndHash(f.source, tmp, f.exec, &hex, &bytes, &stable, in);
    if (!s.ok()) {
      unlink(tmp.c_str());
      return s;
    }
    chmod(tmp.c_str(), f.exec ? 0555 : 0444);
    const std::string object = ArtifactObject(store_dir, hex);
    fs::create_directories(fs::path(object).parent_path(), ec);
    const std::string dest = out_dir + "/" + rel;
    fs::create_directories(fs::path(dest).parent_path(), ec);
    unlink(dest.c_str());
    if (link(object.c_str(), dest.c_str()) == 0) {
      unlink(tmp.c_str());  // the same content, stored before: one copy, linked
    } else {
      // Not stored before (or collected by a gc a moment ago): this copy becomes the object.
      if (rename(tmp.c_str(), object.c_str()) != 0) {
        Status err = ErrnoStatus("cannot store '" + object + "'");
        unlink(tmp.c_str());
        return err;
      }
      DROVER_RETURN_IF_ERROR(Link(object, dest));
    }
    a.hash = hex;
    a.bytes = bytes;
    a.mode = f.exec ? 0755 : 0644;
    stored.push_back(a);
  }
  // Declared folders that came out empty are still there for the stages that need them.
  for (const std::string& o : outputs) {
    if (!fs::exists(out_dir + "/" + o, ec)) fs::create_directories(out_dir + "/" + o, ec);
  }
  // The stored tree is drover's (root's on a root daemon) and read-only; its folders are open to
  // whoever reaches them (a later stage's run, as its user, through its bind: outputs/ itself is
  // the daemon's alone).
  std::error_code walk;
  for (fs::recursive_directory_iterator it(out_dir, walk), end; !walk && it != end;
       it.increment(walk)) {
    std::error_code kind;
    if (it->is_directory(kind) && !it->is_symlink(kind)) chmod(it->path().c_str(), 0755);
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
