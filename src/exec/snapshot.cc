#include "exec/snapshot.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/file_faults.h"
#include "common/hash.h"
#include "common/subprocess.h"

extern char** environ;

namespace drover {

namespace fs = std::filesystem;

namespace {

// Git helpers run with our environment minus what would point git at another repository, and
// with optional locks off so a snapshot never contends with the user's own git commands for the
// index lock.
CaptureOptions GitOptions() {
  CaptureOptions o;
  o.unset_env = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OPTIONAL_LOCKS"};
  o.set_env = {"GIT_OPTIONAL_LOCKS=0"};
  // A repository on a hung network mount must not hold a submit for ever.
  o.timeout_ms = 120'000;
  return o;
}

Result<Captured> RunGit(const std::vector<std::string>& args) {
  return RunAndCapture(args, GitOptions());
}

std::string TrimNewline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// ---- Collecting the file list -----------------------------------------------------------------

enum class Kind { kFile, kExec, kLink };

struct Entry {
  std::string rel;  // path relative to the workdir, '/'-separated
  Kind kind = Kind::kFile;
  int64_t size = 0;
};

// Git's own mode strings, so the hash input reads like a tree listing.
const char* ModeString(Kind k) {
  switch (k) {
    case Kind::kFile:
      return "100644";
    case Kind::kExec:
      return "100755";
    case Kind::kLink:
      return "120000";
  }
  return "?";
}

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// The files found so far, counted against the limits as they are found: a workdir over a limit
// is refused as soon as it is passed, not after walking all of it (a data folder of millions of
// files would otherwise cost minutes and the memory of its listing).
struct Listing {
  std::string root;
  std::vector<std::string> excluded;  // folders relative to root, never captured
  int64_t max_bytes = 0;
  int64_t max_files = 0;
  int64_t bytes = 0;
  std::vector<Entry> entries;

  Status Add(Entry e) {
    bytes += e.size;
    entries.push_back(std::move(e));
    if (bytes > max_bytes) {
      return FailedPrecondition("workdir " + root + " holds more than the snapshot limit of " +
                                Mib(max_bytes) + " MiB; add a .gitignore for data and outputs, " +
                                "or point workdir at the code folder (biggest: " + Biggest() + ")");
    }
    if (static_cast<int64_t>(entries.size()) > max_files) {
      return FailedPrecondition("workdir " + root + " holds more than " +
                                std::to_string(max_files) +
                                " files, the snapshot limit; add a .gitignore for data, outputs "
                                "and environments (node_modules, .venv), or point workdir at the "
                                "code folder");
    }
    return Status::Ok();
  }

  std::string Biggest() const {
    std::vector<const Entry*> big;
    for (const Entry& e : entries) big.push_back(&e);
    const size_t n = std::min<size_t>(3, big.size());
    std::partial_sort(big.begin(), big.begin() + n, big.end(), [](const Entry* a, const Entry* b) {
      return a->size != b->size ? a->size > b->size : a->rel < b->rel;
    });
    std::string out;
    for (size_t i = 0; i < n; ++i) {
      out += (i ? ", " : "") + big[i]->rel + " (" + Mib(big[i]->size) + " MiB)";
    }
    return out;
  }
};

// .git holds a repository, not code; .drover holds the store (snapshots included), which must
// never be captured into itself.
bool SkippedName(std::string_view name) { return name == ".git" || name == ".drover"; }

bool HasSkippedComponent(const std::string& rel) {
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    if (SkippedName(std::string_view(rel).substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

// Adds `rel` (relative to root) to entries: a file or symlink as itself, a directory (a
// submodule or nested repository that git lists as one entry, or a whole tree without git)
// by walking it. Paths that vanished since they were listed (deleted but still tracked) are
// skipped; sockets, fifos and devices too.
Status AddPath(const fs::path& root, const std::string& rel, Listing* entries) {
  if (rel.empty() || HasSkippedComponent(rel)) return Status::Ok();
  for (const std::string& ex : entries->excluded) {
    if (rel == ex || (rel.size() > ex.size() && rel.starts_with(ex) && rel[ex.size()] == '/')) {
      return Status::Ok();
    }
  }
  const std::string full = (root / rel).string();
  struct stat st;
  if (lstat(full.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Ok();
    return ErrnoStatus("cannot read '" + full + "'");
  }
  if (S_ISLNK(st.st_mode)) {
    return entries->Add({rel, Kind::kLink, 0});
  } else if (S_ISREG(st.st_mode)) {
    return entries->Add({rel, (st.st_mode & S_IXUSR) ? Kind::kExec : Kind::kFile, st.st_size});
  } else if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (fs::directory_iterator it(full, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (SkippedName(name)) continue;
      DROVER_RETURN_IF_ERROR(AddPath(root, rel == "." ? name : rel + "/" + name, entries));
    }
    if (ec) return Status(Code::kIo, "cannot list '" + full + "': " + ec.message());
  }
  return Status::Ok();
}

// Runs a git listing (`ls-files -z`) and adds each path as git prints it, so a workdir over a
// limit stops git as soon as the limit is passed.
Status AddListed(const fs::path& root, const std::vector<std::string>& git_args, Listing* entries) {
  std::string partial;
  Status added;
  CaptureOptions o = GitOptions();
  o.on_output = [&](std::string_view chunk) {
    partial.append(chunk);
    size_t start = 0;
    for (size_t end; (end = partial.find('\0', start)) != std::string::npos; start = end + 1) {
      std::string rel = partial.substr(start, end - start);
      while (!rel.empty() && rel.back() == '/') rel.pop_back();  // "nested-repo/"
      added = AddPath(root, rel, entries);
      if (!added.ok()) return false;
    }
    partial.erase(0, start);
    return true;
  };
  auto run = RunAndCapture(git_args, o);
  if (!added.ok()) return added;
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return Internal("git ls-files failed in '" + root.string() + "' (exit " +
                    std::to_string(run->exit_code) + "); run it there to see why");
  }
  return Status::Ok();
}

// ---- The hash cache --------------------------------------------------------------------------

// What identifies a file's content without reading it: the same device, inode, size, mtime and
// ctime (which no user tool can set back) mean the same bytes, as git's index assumes.
struct FileKey {
  uint64_t dev = 0, ino = 0;
  int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileKey&) const = default;
};

FileKey KeyOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

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

// ---- Copying ---------------------------------------------------------------------------------

// Copies one file into the temp tree, hashing the bytes as they are copied, so the hash always
// describes exactly what was stored even when the source changes meanwhile.
// `stable`, when given, is set to the file's key if it did not change while it was read.
Status CopyAndHash(const std::string& src, const std::string& dst, bool exec, std::string* hex,
                   int64_t* bytes, std::optional<FileKey>* stable = nullptr) {
  int in = open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return ErrnoStatus("cannot read '" + src + "'");
  struct stat before {};
  const bool stat_before = stable != nullptr && fstat(in, &before) == 0;
  const mode_t mode = exec ? 0755 : 0644;
  int out = FileFault(dst) ? -1 : open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (out < 0) {
    Status s = ErrnoStatus("cannot write '" + dst + "'");
    close(in);
    return s;
  }
  Sha256 sha;
  Status status;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      status = ErrnoStatus("cannot read '" + src + "'");
      break;
    }
    if (n == 0) break;
    sha.Update(std::string_view(buf, static_cast<size_t>(n)));
    *bytes += n;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = FileFault(dst) ? -1 : write(out, buf + done, static_cast<size_t>(n - done));
      if (w < 0) {
        if (errno == EINTR) continue;
        status = ErrnoStatus("cannot write '" + dst + "'");
        break;
      }
      done += w;
    }
    if (!status.ok()) break;
  }
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

// Removes temp trees left by a crashed TakeSnapshot (a day old, so none still being written).
void RemoveStaleTemps(const fs::path& dir) {
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->path().filename().string().starts_with(".tmp-")) continue;
    std::error_code ec2;
    if (it->last_write_time(ec2) < cutoff && !ec2) fs::remove_all(it->path(), ec2);
  }
}

}  // namespace

Result<Snapshot> TakeSnapshot(const std::string& workdir, const std::string& snapshots_dir,
                              const SnapshotOptions& options) {
  std::error_code ec;
  fs::path root = fs::canonical(workdir, ec);
  if (ec || !fs::is_directory(root)) {
    return NotFound("workdir '" + workdir + "' is not a readable directory" +
                    (ec ? ": " + ec.message() : std::string()) + "; check the spec's workdir");
  }
  const std::string root_s = root.string();
  Snapshot snap;
  Listing listing;
  listing.root = root_s;
  listing.max_bytes = options.max_bytes;
  listing.max_files = options.max_files;
  // The store's folders, where they lie inside the workdir: a store captured into itself grows
  // with every submit, and its temp folders vanish while they are copied.
  for (const std::string& folder : {snapshots_dir, options.excluded}) {
    if (folder.empty()) continue;
    std::error_code wc;
    fs::path abs = fs::weakly_canonical(fs::absolute(folder, wc), wc);
    if (wc) continue;
    fs::path rel = abs.lexically_relative(root);
    std::string r = rel.string();
    if (r.empty() || r == "." || r.starts_with("..")) continue;  // outside the workdir
    listing.excluded.push_back(r);
  }

  // Is it a git work tree? (No git installed reads as "no".)
  auto inside = RunGit({"git", "-C", root_s, "rev-parse", "--is-inside-work-tree"});
  const bool have_git = inside.ok();
  snap.git = inside.ok() && inside->exit_code == 0 && TrimNewline(inside->out) == "true";

  if (snap.git) {
    // The commit and the diff are asked for while the files are listed: three helpers at once
    // rather than one after another (a submit and `drover run` wait for all of them). Paths in
    // the diff are relative to the repository's top, so `git apply` at the top of a checkout of
    // git_commit restores the tracked changes (untracked files are in the files); without a
    // commit there is no diff.
    auto head = std::async(std::launch::async, [&] {
      return RunGit({"git", "-C", root_s, "rev-parse", "--verify", "-q", "HEAD"});
    });
    auto diff = std::async(std::launch::async, [&] {
      return RunGit({"git", "-C", root_s, "diff", "HEAD", "--binary", "--no-color",
                     "--no-ext-diff", "--", "."});
    });
    // Tracked plus untracked-but-not-ignored, relative to the workdir: the committed tree plus
    // the uncommitted changes, as `git status` sees them.
    Status listed = AddListed(
        root, {"git", "-C", root_s, "ls-files", "-z", "-co", "--exclude-standard"}, &listing);
    Result<Captured> commit = head.get();
    Result<Captured> changes = diff.get();
    DROVER_RETURN_IF_ERROR(listed);
    if (commit.ok() && commit->exit_code == 0) {
      snap.git_commit = TrimNewline(commit->out);
      if (changes.ok() && changes->exit_code == 0) snap.git_diff = std::move(changes->out);
    }
  } else if (have_git) {
    // Not a repository: list the files through a throwaway empty repository whose work tree is
    // the workdir, so .gitignore files (and the user's global excludes) are honoured.
    std::error_code mk;
    fs::create_directories(snapshots_dir, mk);
    std::string tmpl = (fs::path(snapshots_dir) / ".tmp-gitdir-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      return ErrnoStatus("cannot create a temp folder in '" + snapshots_dir + "'");
    const std::string gitdir = tmpl;
    auto init = RunGit({"git", "init", "-q", "--bare", "--template=", gitdir});
    Status listed = Internal("git init failed");
    if (init.ok() && init->exit_code == 0) {
      listed = AddListed(root,
                         {"git", "--git-dir=" + gitdir, "--work-tree=" + root_s, "-C", root_s,
                          "ls-files", "-z", "-co", "--exclude-standard"},
                         &listing);
    }
    fs::remove_all(gitdir, mk);
    if (listed.code() == Code::kFailedPrecondition) return listed;  // over a limit
    if (!listed.ok()) {
      listing.entries.clear();
      listing.bytes = 0;
      DROVER_RETURN_IF_ERROR(AddPath(root, ".", &listing));  // git could not help: take it all
    }
  } else {
    DROVER_RETURN_IF_ERROR(AddPath(root, ".", &listing));
  }

  std::vector<Entry>& entries = listing.entries;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.rel < b.rel; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& a, const Entry& b) { return a.rel == b.rel; }),
                entries.end());

  const std::string_view nul("\0", 1);
  // The tree's hash: every path, mode and content hash, in path order.
  auto tree_hash = [&](const std::vector<std::string>& content) {
    Sha256 tree;
    for (size_t i = 0; i < entries.size(); ++i) {
      tree.Update(entries[i].rel);
      tree.Update(nul);
      tree.Update(ModeString(entries[i].kind));
      tree.Update(nul);
      tree.Update(content[i]);
      tree.Update(nul);
    }
    return tree.HexDigest();
  };
  auto finish = [&](const fs::path& final_path, int64_t bytes) {
    snap.path = fs::absolute(final_path).lexically_normal().string();
    snap.bytes = bytes;
    snap.files = static_cast<int64_t>(entries.size());
    snap.created_ms = RealClock().Now();
    return snap;
  };
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  HashCache cache(snapshots_dir);
  {
    // Unchanged files since an earlier snapshot are known by their keys: when all are and that
    // snapshot is stored, it is the answer, and nothing is read or copied.
    std::vector<std::string> known;
    int64_t bytes = 0;
    for (const Entry& e : entries) {
      const std::string src = root_s + "/" + e.rel;
      struct stat st;
      if (lstat(src.c_str(), &st) != 0) break;
      if (e.kind == Kind::kLink) {
        std::string target(4096, '\0');
        ssize_t n = readlink(src.c_str(), target.data(), target.size());
        if (n < 0) break;
        target.resize(static_cast<size_t>(n));
        known.push_back(Sha256Hex(target));
        continue;
      }
      const std::string* hex = S_ISREG(st.st_mode) ? cache.Find(KeyOf(st)) : nullptr;
      if (hex == nullptr) break;
      known.push_back(*hex);
      bytes += st.st_size;
    }
    if (known.size() == entries.size()) {
      snap.hash = tree_hash(known);
      const fs::path final_path = fs::path(snapshots_dir) / snap.hash;
      if (fs::is_directory(final_path, ec)) return finish(final_path, bytes);
    }
  }

  // Copy into a temp folder beside the final one and rename it into place at the end, so a crash
  // never leaves a half-written snapshot under a hash name.
  fs::create_directories(snapshots_dir, ec);
  if (ec) return Status(Code::kIo, "cannot create '" + snapshots_dir + "': " + ec.message());
  RemoveStaleTemps(snapshots_dir);
  std::string tmp = (fs::path(snapshots_dir) / ".tmp-XXXXXX").string();
  if (FileFault(tmp) || mkdtemp(tmp.data()) == nullptr) {
    return ErrnoStatus("cannot create a temp folder in '" + snapshots_dir + "'");
  }
  chmod(tmp.c_str(), 0755);  // mkdtemp makes it 0700

  auto drop_tmp = [&] {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
  };
  auto fail = [&](Status s) {
    drop_tmp();
    return s;
  };
  std::vector<std::string> content;
  content.reserve(entries.size());
  int64_t bytes = 0;
  for (const Entry& e : entries) {
    const std::string src = root_s + "/" + e.rel;
    const std::string dst = tmp + "/" + e.rel;
    const size_t slash = e.rel.rfind('/');
    if (slash != std::string::npos) {
      const std::string folder = tmp + "/" + e.rel.substr(0, slash);
      if (FileFault(folder)) ec = std::error_code(errno, std::generic_category());
      else fs::create_directories(folder, ec);
      if (ec)
        return fail(Status(Code::kIo, "cannot create a folder in '" + tmp + "': " + ec.message()));
    }
    std::string content_hash;
    if (e.kind == Kind::kLink) {
      // Kept as a link (never followed): its target is its content.
      std::string target(4096, '\0');
      ssize_t n = readlink(src.c_str(), target.data(), target.size());
      if (n < 0) return fail(ErrnoStatus("cannot read link '" + src + "'"));
      target.resize(static_cast<size_t>(n));
      if (FileFault(dst) || symlink(target.c_str(), dst.c_str()) != 0) {
        return fail(ErrnoStatus("cannot write '" + dst + "'"));
      }
      content_hash = Sha256Hex(target);
    } else {
      std::optional<FileKey> stable;
      Status s = CopyAndHash(src, dst, e.kind == Kind::kExec, &content_hash, &bytes, &stable);
      if (!s.ok()) return fail(s);
      if (stable) cache.Add(*stable, content_hash, now_ns);
    }
    content.push_back(std::move(content_hash));
  }
  cache.Save();

  snap.hash = tree_hash(content);
  const fs::path final_path = fs::path(snapshots_dir) / snap.hash;
  if (fs::exists(final_path, ec)) {
    drop_tmp();  // the same tree was captured before: reuse it
  } else if (rename(tmp.c_str(), final_path.c_str()) != 0) {
    int err = errno;
    if (err != EEXIST && err != ENOTEMPTY) {
      return fail(ErrnoStatus("cannot store snapshot '" + final_path.string() + "'", err));
    }
    drop_tmp();  // another drover stored the same tree meanwhile
  }
  return finish(final_path, bytes);
}

Status MaterializeSnapshot(const Snapshot& snapshot, const std::string& dest) {
  std::error_code ec;
  // An empty snapshot has nothing to copy: not looked for (a stat per launch).
  if (snapshot.files > 0 && (snapshot.path.empty() || !fs::is_directory(snapshot.path, ec))) {
    return NotFound("snapshot " + snapshot.hash + " is missing at '" + snapshot.path +
                    "'; the store's snapshots folder was changed by hand");
  }
  // An empty workdir: the folder is the copy. One mkdir where the parent exists (the usual case:
  // runs/ of the store), the whole path otherwise: a launch costs as few system calls as it can.
  auto make = [&](const std::string& dir) -> Status {
    if (FileFault(dir)) return ErrnoStatus("cannot create working copy '" + dir + "'");
    if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
      fs::create_directories(dir, ec);
      if (ec) return Status(Code::kIo, "cannot create working copy '" + dir + "': " + ec.message());
    }
    return Status::Ok();
  };
  if (snapshot.files == 0) return make(dest);
  // Copied beside its place and renamed into it, so a copy cut short (a full disk, a crash) is
  // never taken for a whole one by the next attempt, which reuses a working copy it finds.
  const std::string partial = dest + ".partial";
  fs::remove_all(partial, ec);
  DROVER_RETURN_IF_ERROR(make(partial));
  auto fail = [&](Status s) {
    std::error_code ignored;
    fs::remove_all(partial, ignored);
    return s;
  };
  // Files keep their permission bits (the exec bit) and links stay links.
  if (FileFault(partial)) {
    return fail(ErrnoStatus("cannot copy snapshot " + snapshot.hash + " to '" + dest + "'"));
  }
  fs::copy(snapshot.path, partial,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks |
               fs::copy_options::overwrite_existing,
           ec);
  if (ec) {
    return fail(Status(Code::kIo, "cannot copy snapshot " + snapshot.hash + " to '" + dest +
                                      "': " + ec.message()));
  }
  if (rename(partial.c_str(), dest.c_str()) != 0) {
    // A whole copy is already there (renamed in by an attempt the caller did not know of): that
    // one is the working copy, as it would have been found had the caller looked first.
    if (errno == ENOTEMPTY || errno == EEXIST) return fail(Status::Ok());
    return fail(ErrnoStatus("cannot move working copy into '" + dest + "'"));
  }
  return Status::Ok();
}

}  // namespace drover
