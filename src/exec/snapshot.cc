#include "exec/snapshot.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "common/files.h"
#include "common/clock.h"
#include "common/file_faults.h"
#include "common/hash.h"
#include "common/subprocess.h"
#include "exec/file_hashes.h"

extern char** environ;

namespace drover {

namespace fs = std::filesystem;

namespace {

// Git helpers run with our environment minus what would point git at another repository, and
// with optional locks off so a snapshot never contends with the user's own git commands for the
// index lock.
// For a snapshot read with its submitter's rights (SnapshotOptions::owner), git runs as them too
// (setpriv: their uid, gid and groups, their HOME so their git config and excludes apply).
CaptureOptions GitOptions(const UnixUser* as) {
  CaptureOptions o;
  o.unset_env = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OPTIONAL_LOCKS"};
  o.set_env = {"GIT_OPTIONAL_LOCKS=0"};
  if (as != nullptr) {
    // The user's login environment, nothing of the daemon's.
    o.clean_env = true;
    const std::vector<std::string> login = LoginEnvironment(*as);
    o.set_env.insert(o.set_env.end(), login.begin(), login.end());
  }
  // A repository on a hung network mount must not hold a submit for ever.
  o.timeout_ms = 120'000;
  return o;
}

std::vector<std::string> AsUser(std::vector<std::string> args, const UnixUser* as) {
  return as == nullptr ? args : AsUserArgv(*as, std::move(args));
}

Result<Captured> RunGit(const std::vector<std::string>& args, const UnixUser* as) {
  return RunAndCapture(AsUser(args, as), GitOptions(as));
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
  const UnixUser* as = nullptr;       // git runs as this user (SnapshotOptions::owner)
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
    if (ec) return IoStatus("cannot list '" + full + "'", ec);
  }
  return Status::Ok();
}

// Runs a git listing (`ls-files -z`) and adds each path as git prints it, so a workdir over a
// limit stops git as soon as the limit is passed.
Status AddListed(const fs::path& root, const std::vector<std::string>& git_args, Listing* entries) {
  std::string partial;
  Status added;
  CaptureOptions o = GitOptions(entries->as);
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
  auto run = RunAndCapture(AsUser(git_args, entries->as), o);
  if (!added.ok()) return added;
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return Internal("git ls-files failed in '" + root.string() + "' (exit " +
                    std::to_string(run->exit_code) + "); run it there to see why");
  }
  return Status::Ok();
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

// The tree's hash: every path, mode and content hash, in path order (content[i] is entries[i]'s).
// A submitter's own snapshot (its files are theirs) is stored apart from the same tree of anyone
// else's: the owner is part of it. TakeSnapshot and HashSnapshot both hash this way.
std::string TreeHash(const std::vector<Entry>& entries, const std::vector<std::string>& content,
                     const UnixUser* owner) {
  const std::string_view nul("\0", 1);
  Sha256 tree;
  if (owner != nullptr) {
    tree.Update("owner " + std::to_string(owner->uid) + ":" + std::to_string(owner->gid));
    tree.Update(nul);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    tree.Update(entries[i].rel);
    tree.Update(nul);
    tree.Update(ModeString(entries[i].kind));
    tree.Update(nul);
    tree.Update(content[i]);
    tree.Update(nul);
  }
  return tree.HexDigest();
}

// A link's content: its target's text (never followed).
Result<std::string> LinkHash(const std::string& path) {
  std::string target(4096, '\0');
  ssize_t n = readlink(path.c_str(), target.data(), target.size());
  if (n < 0) return ErrnoStatus("cannot read link '" + path + "'");
  target.resize(static_cast<size_t>(n));
  return Sha256Hex(target);
}

// What a snapshot of `workdir` holds, listed (not read): the files in path order, and whether it
// is a git work tree (with its commit and diff when `with_diff`). A throwaway git folder, when
// one is needed to honour .gitignore outside a repository, is made in `scratch_dir` through
// `as_store` (which runs it with the store's rights).
struct Listed {
  std::string root;
  Listing listing;
  bool git = false;
  std::string git_commit, git_diff;
};

Result<Listed> ListWorkdir(const std::string& workdir, const std::string& snapshots_dir,
                           const SnapshotOptions& options, const UnixUser* git_as,
                           const std::string& scratch_dir, bool with_diff,
                           const std::function<bool(const std::function<bool()>&)>& as_store) {
  std::error_code ec;
  fs::path root = fs::canonical(workdir, ec);
  if (ec || !fs::is_directory(root)) {
    return NotFound("workdir '" + workdir + "' is not a readable directory" +
                    (ec ? ": " + ec.message() : std::string()) + "; check the spec's workdir");
  }
  Listed out;
  const std::string root_s = root.string();
  out.root = root_s;
  Listing& listing = out.listing;
  listing.root = root_s;
  listing.max_bytes = options.max_bytes;
  listing.max_files = options.max_files;
  listing.as = git_as;
  // The store's folders, where they lie inside the workdir: a store captured into itself grows
  // with every submit, and its temp folders vanish while they are copied.
  for (const std::string& folder : {snapshots_dir, options.excluded, options.spec_file}) {
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
  auto inside = RunGit({"git", "-C", root_s, "rev-parse", "--is-inside-work-tree"}, git_as);
  const bool have_git = inside.ok();
  out.git = inside.ok() && inside->exit_code == 0 && TrimNewline(inside->out) == "true";

  if (out.git) {
    // The commit and the diff are asked for while the files are listed: three helpers at once
    // rather than one after another (a submit and `drover run` wait for all of them). Paths in
    // the diff are relative to the repository's top, so `git apply` at the top of a checkout of
    // git_commit restores the tracked changes (untracked files are in the files); without a
    // commit there is no diff.
    auto head = std::async(std::launch::async, [&] {
      return RunGit({"git", "-C", root_s, "rev-parse", "--verify", "-q", "HEAD"}, git_as);
    });
    auto diff = std::async(std::launch::async, [&]() -> Result<Captured> {
      if (!with_diff) return Captured{};
      return RunGit({"git", "-C", root_s, "diff", "HEAD", "--binary", "--no-color",
                     "--no-ext-diff", "--", "."},
                    git_as);
    });
    // Tracked plus untracked-but-not-ignored, relative to the workdir: the committed tree plus
    // the uncommitted changes, as `git status` sees them.
    Status listed = AddListed(
        root, {"git", "-C", root_s, "ls-files", "-z", "-co", "--exclude-standard"}, &listing);
    Result<Captured> commit = head.get();
    Result<Captured> changes = diff.get();
    DROVER_RETURN_IF_ERROR(listed);
    if (commit.ok() && commit->exit_code == 0) {
      out.git_commit = TrimNewline(commit->out);
      if (changes.ok() && changes->exit_code == 0) out.git_diff = std::move(changes->out);
    }
  } else if (have_git) {
    // Not a repository: list the files through a throwaway empty repository whose work tree is
    // the workdir, so .gitignore files (and the user's global excludes) are honoured.
    std::error_code mk;
    std::string tmpl = (fs::path(scratch_dir) / ".tmp-gitdir-XXXXXX").string();
    const bool made = as_store([&] {
      fs::create_directories(scratch_dir, mk);
      if (mkdtemp(tmpl.data()) == nullptr) return false;
      // The throwaway repository is the submitter's to write.
      if (git_as != nullptr && lchown(tmpl.c_str(), static_cast<uid_t>(git_as->uid),
                                      static_cast<gid_t>(git_as->gid)) != 0) {
        return false;
      }
      return true;
    });
    if (!made) return ErrnoStatus("cannot create a temp folder in '" + scratch_dir + "'");
    const std::string gitdir = tmpl;
    auto init = RunGit({"git", "init", "-q", "--bare", "--template=", gitdir}, git_as);
    Status listed = Internal("git init failed");
    if (init.ok() && init->exit_code == 0) {
      listed = AddListed(root,
                         {"git", "--git-dir=" + gitdir, "--work-tree=" + root_s, "-C", root_s,
                          "ls-files", "-z", "-co", "--exclude-standard"},
                         &listing);
    }
    as_store([&] { return fs::remove_all(gitdir, mk) > 0; });
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
  return out;
}

}  // namespace

static Status SealSnapshot(const Snapshot& snap, const std::string& snapshots_dir,
                           const UnixUser* owner);

// Runs the store's side of a step with drover's own rights, then goes back to acting as the
// submitter if it was (TakeSnapshot and HashSnapshot read a submitter's files as them).
template <typename Step>
static auto WithOurRights(ActingAs& as, Step&& step) {
  const bool was = as.active();
  as.Pause();
  auto result = step();
  if (was) as.Resume();
  return result;
}

Result<Snapshot> TakeSnapshot(const std::string& workdir, const std::string& snapshots_dir,
                              const SnapshotOptions& options) {
  // The submitter's files are read with the submitter's rights (a root daemon's submits): this
  // thread acts as them, stepping back to the daemon's own rights only to write the store.
  const UnixUser* owner = options.owner;
  ActingAs as(owner);
  if (!as.status().ok()) return as.status();
  const UnixUser* git_as = as.active() ? owner : nullptr;
  // Runs the store's side of the work with the daemon's own rights, then goes back to acting as
  // the submitter if it was.
  auto own = [&](auto&& step) { return WithOurRights(as, step); };
  std::error_code ec;
  DROVER_ASSIGN_OR_RETURN(
      Listed listed,
      ListWorkdir(workdir, snapshots_dir, options, git_as, snapshots_dir, /*with_diff=*/true,
                  [&](const std::function<bool()>& step) { return own(step); }));
  const std::string root_s = listed.root;
  Snapshot snap;
  snap.git = listed.git;
  snap.git_commit = std::move(listed.git_commit);
  snap.git_diff = std::move(listed.git_diff);
  std::vector<Entry>& entries = listed.listing.entries;

  auto tree_hash = [&](const std::vector<std::string>& content) {
    return TreeHash(entries, content, owner);
  };
  // What `drover verify` checks the stored files against (exec/snapshot.h: SnapshotManifest).
  auto write_manifest = [&](const std::vector<std::string>& content) {
    as.Pause();
    struct Resume {
      ActingAs& as;
      ~Resume() { as.Resume(); }
    } resume{as};
    const std::string path = SnapshotManifest(snapshots_dir, snap.hash);
    struct stat st;
    if (stat(path.c_str(), &st) == 0) return;
    std::error_code mk;
    fs::create_directories(fs::path(path).parent_path(), mk);
    std::string text;
    for (size_t i = 0; i < entries.size(); ++i) {
      text += std::string(ModeString(entries[i].kind)) + " " + content[i] + " " + entries[i].rel + "\n";
    }
    // Written whole or not at all (a missing manifest only means `drover verify` has less to
    // check); never through a fixed temporary name someone else could have made.
    (void)WriteFileAtomically(path, text);
  };
  auto finish = [&](const fs::path& final_path, int64_t bytes) {
    snap.path = fs::absolute(final_path).lexically_normal().string();
    snap.bytes = bytes;
    snap.files = static_cast<int64_t>(entries.size());
    snap.created_ms = options.now;
    return snap;
  };
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  // Whether a stored snapshot of a submitter's may be reused: its seal holds, or it has none (made
  // before seals) and its files are the manifest's, which seals it now.
  auto intact = [&](const fs::path& stored) {
    if (owner == nullptr) return true;
    return own([&] {
      Snapshot s;
      s.hash = snap.hash;
      s.path = fs::absolute(stored).lexically_normal().string();
      struct stat st;
      if (stat(SnapshotSeal(snapshots_dir, s.hash).c_str(), &st) != 0) {
        return SealSnapshot(s, snapshots_dir, owner).ok();
      }
      auto changed = CheckSnapshotSeal(s, snapshots_dir);
      return changed.ok() && changed->empty();
    });
  };
  HashCache cache = own([&] { return HashCache(snapshots_dir); });
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
      // A submitter's stored snapshot is reused only while its seal holds (they can reach
      // its files); one they changed is stored afresh below, in its place.
      if (fs::is_directory(final_path, ec) && intact(final_path)) {
        write_manifest(known);
        return finish(final_path, bytes);
      }
    }
  }

  // Copy into a temp folder beside the final one and rename it into place at the end, so a crash
  // never leaves a half-written snapshot under a hash name.
  std::string tmp = (fs::path(snapshots_dir) / ".tmp-XXXXXX").string();
  Status made = own([&]() -> Status {
    fs::create_directories(snapshots_dir, ec);
    if (ec) return IoStatus("cannot create '" + snapshots_dir + "'", ec);
    RemoveStaleTemps(snapshots_dir);
    if (FileFault(tmp) || mkdtemp(tmp.data()) == nullptr) {
      return ErrnoStatus("cannot create a temp folder in '" + snapshots_dir + "'");
    }
    if (owner == nullptr) {
      chmod(tmp.c_str(), 0755);  // mkdtemp makes it 0700
      return Status::Ok();
    }
    // A submitter's snapshot is theirs alone: they write it (as them, below), and others
    // cannot enter it; the folder of snapshots only lets them through to it.
    if (git_as != nullptr) {  // acting as them (paused just now)
      chmod(snapshots_dir.c_str(), 0711);
      if (lchown(tmp.c_str(), static_cast<uid_t>(owner->uid), static_cast<gid_t>(owner->gid)) !=
          0) {
        return ErrnoStatus("cannot give '" + tmp + "' to " + DisplayName(*owner));
      }
    }
    return Status::Ok();
  });
  if (!made.ok()) return made;

  auto drop_tmp = [&] {
    std::error_code ignored;
    own([&] { return fs::remove_all(tmp, ignored); });
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
        return fail(IoStatus("cannot create a folder in '" + tmp + "'", ec));
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
  // The rest is the store's: the daemon's own rights.
  as.Pause();
  cache.Save();

  snap.hash = tree_hash(content);
  const fs::path final_path = fs::path(snapshots_dir) / snap.hash;
  bool fresh = false;
  if (fs::exists(final_path, ec) && !intact(final_path)) {
    // A submitter changed their stored snapshot: it goes, and this copy takes its place.
    char aside[] = "/.tmp-changed-XXXXXX";
    std::string moved = snapshots_dir + aside;
    if (mkdtemp(moved.data()) != nullptr) {
      const std::string target = moved + "/old";
      if (rename(final_path.c_str(), target.c_str()) == 0) {
        std::error_code ignored;
        fs::remove_all(moved, ignored);
      }
    }
  }
  if (fs::exists(final_path, ec)) {
    drop_tmp();  // the same tree was captured before: reuse it
  } else if (rename(tmp.c_str(), final_path.c_str()) == 0) {
    fresh = true;
  } else {
    int err = errno;
    if (err != EEXIST && err != ENOTEMPTY) {
      return fail(ErrnoStatus("cannot store snapshot '" + final_path.string() + "'", err));
    }
    drop_tmp();  // another drover stored the same tree meanwhile
  }
  write_manifest(content);
  Snapshot done = finish(final_path, bytes);
  if (owner != nullptr && fresh) {
    // The seal is the store's (write_manifest resumed acting as the submitter).
    DROVER_RETURN_IF_ERROR(own([&] { return SealSnapshot(done, snapshots_dir, owner); }));
  }
  return done;
}

Result<SnapshotDigest> HashSnapshot(const std::string& workdir, const std::string& snapshots_dir,
                                    const SnapshotOptions& options) {
  // As TakeSnapshot: the files read with their owner's rights, the store's cache with ours.
  const UnixUser* owner = options.owner;
  ActingAs as(owner);
  if (!as.status().ok()) return as.status();
  const UnixUser* git_as = as.active() ? owner : nullptr;
  auto own = [&](auto&& step) { return WithOurRights(as, step); };
  // Nothing is written under the store: a throwaway git folder goes to the temp folder.
  std::error_code tmp_ec;
  const std::string scratch = fs::temp_directory_path(tmp_ec).string();
  DROVER_ASSIGN_OR_RETURN(
      Listed listed,
      ListWorkdir(workdir, snapshots_dir, options, git_as, tmp_ec ? "/tmp" : scratch,
                  /*with_diff=*/false,
                  [&](const std::function<bool()>& step) { return own(step); }));
  const std::vector<Entry>& entries = listed.listing.entries;
  // Read, never saved: what an earlier snapshot hashed is not read again.
  HashCache cache = own([&] { return HashCache(snapshots_dir); });
  SnapshotDigest out;
  out.git = listed.git;
  out.git_commit = listed.git_commit;
  std::vector<std::string> content;
  content.reserve(entries.size());
  for (const Entry& e : entries) {
    const std::string src = listed.root + "/" + e.rel;
    if (e.kind == Kind::kLink) {
      DROVER_ASSIGN_OR_RETURN(std::string hex, LinkHash(src));
      content.push_back(std::move(hex));
    } else {
      int64_t size = 0;
      DROVER_ASSIGN_OR_RETURN(std::string hex, HashFile(src, &cache, &size));
      out.bytes += size;
      content.push_back(std::move(hex));
    }
    out.files.push_back({e.rel, ModeString(e.kind), content.back()});
  }
  out.hash = TreeHash(entries, content, owner);
  return out;
}

std::string SnapshotSeal(const std::string& snapshots_dir, const std::string& hash) {
  return snapshots_dir + "/.seals/" + hash;
}

namespace {

// One line per entry of the tree, "<ctime ns> <mode> <path>", sorted: walked beneath the root's
// descriptor with no link followed (a folder swapped for a link fails the walk). A change to any
// file or folder moves its ctime, which no user can set back.
Status SealWalk(int dirfd, const std::string& rel, int depth, std::vector<std::string>* out) {
  if (depth > 256) return FailedPrecondition("the snapshot is nested too deep to check");
  const int fd = dup(dirfd);
  if (fd < 0) return ErrnoStatus("cannot read snapshot folder '" + rel + "'");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return ErrnoStatus("cannot read snapshot folder '" + rel + "'");
  }
  rewinddir(d);
  Status result = Status::Ok();
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = rel.empty() ? name : rel + "/" + name;
    struct stat st {};
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      result = ErrnoStatus("cannot read '" + child + "'");
      break;
    }
    out->push_back(fmt::format("{} {:o} {}",
                               int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec,
                               st.st_mode, child));
    if (!S_ISDIR(st.st_mode)) continue;
    const int sub = openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      result = ErrnoStatus("cannot read '" + child + "'");
      break;
    }
    result = SealWalk(sub, child, depth + 1, out);
    close(sub);
    if (!result.ok()) break;
  }
  closedir(d);
  return result;
}

Result<std::vector<std::string>> SealOf(const std::string& path) {
  const int root = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) return ErrnoStatus("cannot open snapshot '" + path + "'");
  struct stat st {};
  std::vector<std::string> lines;
  Status walked = fstat(root, &st) == 0 ? SealWalk(root, "", 0, &lines)
                                        : ErrnoStatus("cannot read '" + path + "'");
  close(root);
  DROVER_RETURN_IF_ERROR(walked);
  lines.push_back(fmt::format("{} {:o} .",
                              int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec,
                              st.st_mode));
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.find(' ', a.find(' ') + 1)) < b.substr(b.find(' ', b.find(' ') + 1));
  });
  return lines;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

}  // namespace

Result<std::vector<std::string>> CheckSnapshotSeal(const Snapshot& snapshot,
                                                   const std::string& snapshots_dir) {
  std::ifstream in(SnapshotSeal(snapshots_dir, snapshot.hash));
  if (!in) return std::vector<std::string>{};  // not sealed (a snapshot of no one's in particular)
  std::map<std::string, std::string> was;  // path -> line
  for (std::string l; std::getline(in, l);) {
    const size_t b = l.find(' ', l.find(' ') + 1);
    if (b != std::string::npos) was[l.substr(b + 1)] = l;
  }
  std::vector<std::string> changed;
  auto now = SealOf(snapshot.path);
  if (!now.ok()) {
    changed.push_back(now.status().message());
    return changed;
  }
  std::map<std::string, std::string> is;
  for (const std::string& l : *now) is[l.substr(l.find(' ', l.find(' ') + 1) + 1)] = l;
  for (const auto& [path, line] : was) {
    auto it = is.find(path);
    if (it == is.end()) changed.push_back(path + ": missing");
    else if (it->second != line) changed.push_back(path + ": changed");
  }
  for (const auto& [path, line] : is) {
    if (!was.count(path)) changed.push_back(path + ": added");
  }
  // The files first: the folder's own change ("." or a folder's) follows from theirs.
  std::stable_partition(changed.begin(), changed.end(),
                        [](const std::string& c) { return !c.starts_with(".:"); });
  return changed;
}

// A snapshot just stored for `owner` (their files, which they can reach): its state is recorded
// once what it holds is checked against the manifest, and that check is known to have seen the
// sealed state (the tree walked before and after it alike). The seal is the daemon's file.
static Status SealSnapshot(const Snapshot& snap, const std::string& snapshots_dir,
                           const UnixUser* owner) {
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> before, SealOf(snap.path));
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> wrong,
                          VerifySnapshot(snap, snapshots_dir, owner));
  DROVER_ASSIGN_OR_RETURN(std::vector<std::string> after, SealOf(snap.path));
  if (!wrong.empty() || before != after) {
    return FailedPrecondition(
        "the code snapshot changed while it was being stored" +
        (wrong.empty() ? std::string() : " (" + wrong.front() + ")") + "; submit again");
  }
  const std::string path = SnapshotSeal(snapshots_dir, snap.hash);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  return WriteFileAtomically(path, Joined(after));
}

std::string SnapshotManifest(const std::string& snapshots_dir, const std::string& hash) {
  return snapshots_dir + "/.manifests/" + hash;
}

std::optional<std::vector<SnapshotFile>> ReadSnapshotManifest(const std::string& snapshots_dir,
                                                              const std::string& hash) {
  FILE* f = fopen(SnapshotManifest(snapshots_dir, hash).c_str(), "re");
  if (f == nullptr) return std::nullopt;
  std::vector<SnapshotFile> files;
  std::string l;
  char chunk[8192];
  // A line per file: "<mode> <sha256> <path>" (the path may hold spaces; lines may be long).
  while (fgets(chunk, sizeof chunk, f) != nullptr) {
    l += chunk;
    if (l.empty() || l.back() != '\n') {
      if (!feof(f)) continue;
    } else {
      l.pop_back();
    }
    const size_t a = l.find(' '), b = a == std::string::npos ? a : l.find(' ', a + 1);
    if (b != std::string::npos) {
      files.push_back({l.substr(b + 1), l.substr(0, a), l.substr(a + 1, b - a - 1)});
    }
    l.clear();
  }
  fclose(f);
  return files;
}

Result<std::vector<std::string>> VerifySnapshot(const Snapshot& snapshot,
                                                const std::string& snapshots_dir,
                                                const UnixUser* as) {
  // What was stored, read with the daemon's own rights (the manifests are the store's).
  std::map<std::string, std::pair<std::string, std::string>> was;  // rel -> (mode, hash)
  const std::optional<std::vector<SnapshotFile>> manifest =
      ReadSnapshotManifest(snapshots_dir, snapshot.hash);
  const bool have_manifest = manifest.has_value();
  if (manifest) {
    for (const SnapshotFile& file : *manifest) was[file.path] = {file.mode, file.hash};
  }
  // The snapshot's files are its owner's (a root daemon's submit): read with their rights, so a
  // file swapped for a link to what they could not read is not read for them.
  ActingAs acting(as);
  if (!acting.status().ok()) return acting.status();
  std::error_code ec;
  if (snapshot.path.empty() || !fs::is_directory(snapshot.path, ec)) {
    return NotFound("snapshot " + snapshot.hash + " is not in the store (at '" + snapshot.path +
                    "'); drover gc removes snapshots no experiment uses");
  }
  // What is there now: every file by path, with its mode and content hash.
  std::map<std::string, std::pair<std::string, std::string>> now;  // rel -> (mode, hash)
  for (fs::recursive_directory_iterator it(snapshot.path, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string file = it->path().string();
    struct stat st;
    if (lstat(file.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    const std::string rel = file.substr(snapshot.path.size() + 1);
    if (S_ISLNK(st.st_mode)) {
      now[rel] = {ModeString(Kind::kLink), Sha256Hex(fs::read_symlink(file, ec).string())};
      continue;
    }
    Result<std::string> hex = HashFile(file, nullptr);
    if (!hex.ok()) return hex.status();
    now[rel] = {ModeString((st.st_mode & 0100) ? Kind::kExec : Kind::kFile), *hex};
  }
  if (ec) return IoStatus("cannot list '" + snapshot.path + "'", ec);
  std::vector<std::string> bad;
  if (!have_manifest) {
    // A snapshot stored before manifests: its hash says whether anything changed, not what.
    Sha256 tree;
    const std::string_view nul("\0", 1);
    for (const auto& [rel, mh] : now) {
      tree.Update(rel);
      tree.Update(nul);
      tree.Update(mh.first);
      tree.Update(nul);
      tree.Update(mh.second);
      tree.Update(nul);
    }
    if (tree.HexDigest() != snapshot.hash) {
      bad.push_back("the snapshot's files no longer hash to " + snapshot.hash.substr(0, 16) +
                    " (stored before drover kept per-file hashes, so which file is not known)");
    }
    return bad;
  }
  for (const auto& [rel, mh] : was) {
    auto it = now.find(rel);
    if (it == now.end()) {
      bad.push_back(rel + ": missing");
    } else if (it->second.second != mh.second) {
      bad.push_back(rel + ": its content changed (sha256 " + mh.second.substr(0, 12) + " was stored, " +
                    it->second.second.substr(0, 12) + " is there now)");
    } else if (it->second.first != mh.first) {
      bad.push_back(rel + ": its mode changed (" + mh.first + " -> " + it->second.first + ")");
    }
  }
  for (const auto& [rel, mh] : now) {
    if (!was.count(rel)) bad.push_back(rel + ": added after the snapshot was taken");
  }
  return bad;
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
      if (ec) return IoStatus("cannot create working copy '" + dir + "'", ec);
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

Status MaterializeSnapshotAs(const Snapshot& snapshot, const std::string& dest,
                             const UnixUser& as) {
  std::error_code ec;
  const std::string partial = dest + ".partial";
  const uid_t uid = static_cast<uid_t>(as.uid);
  const gid_t gid = static_cast<gid_t>(as.gid);
  // The folder is made by the daemon (its parent is the store's) and given to the user; what
  // goes in it is copied as the user, so nothing they could plant in it acts with the daemon's
  // rights. A partial copy of an earlier try is emptied as the user first.
  struct stat st {};
  if (lstat(partial.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode) || st.st_uid != uid) {
      if (S_ISDIR(st.st_mode)) {
        fs::remove_all(partial, ec);
      } else {
        unlink(partial.c_str());
      }
    } else {
      ActingAs user(&as);
      if (!user.status().ok()) return user.status();
      for (fs::directory_iterator it(partial, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code ignored;
        fs::remove_all(it->path(), ignored);
      }
    }
  }
  if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus("cannot create working copy '" + partial + "'");
  }
  if (lstat(partial.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      lchown(partial.c_str(), uid, gid) != 0) {
    return ErrnoStatus("cannot give working copy '" + partial + "' to " + DisplayName(as));
  }
  {
    ActingAs user(&as);
    if (!user.status().ok()) return user.status();
    if (snapshot.files > 0) {
      fs::copy(snapshot.path, partial,
               fs::copy_options::recursive | fs::copy_options::copy_symlinks |
                   fs::copy_options::overwrite_existing,
               ec);
    }
    if (ec) {
      // The user's own files would not copy (something in their snapshot that is not a file,
      // a link or a folder): this run's failure, not the machine's.
      return FailedPrecondition("cannot copy snapshot " + snapshot.hash + " to '" + dest +
                                "' as " + DisplayName(as) + ": " + ec.message());
    }
  }
  if (rename(partial.c_str(), dest.c_str()) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) return Status::Ok();
    return ErrnoStatus("cannot move working copy into '" + dest + "'");
  }
  return Status::Ok();
}

}  // namespace drover
