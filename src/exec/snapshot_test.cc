// Snapshots against real git repositories and plain folders in temp dirs.
#include "exec/snapshot.h"
#include "exec/file_hashes.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <chrono>
#include <thread>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/file_faults.h"
#include "common/hash.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

bool IsExecutable(const fs::path& p) {
  return (fs::status(p).permissions() & fs::perms::owner_exec) != fs::perms::none;
}

std::vector<std::string> ListTree(const fs::path& root) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    // Files and links (dangling ones too); folders show through their contents.
    if (it->is_symlink() || !it->is_directory()) {
      out.push_back(it->path().lexically_relative(root).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-snapshot-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = fs::canonical(tmpl);
    work_ = dir_ / "work";
    store_ = dir_ / "store" / "snapshots";
    fs::create_directories(work_);
    // The user's own git config (global excludes, hooks) must not change what the tests see.
    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs a shell command in the workdir; fails the test when it fails.
  void Sh(const std::string& cmd) {
    std::string full = "cd '" + work_.string() + "' && (" + cmd + ") >/dev/null 2>&1";
    ASSERT_EQ(std::system(full.c_str()), 0) << cmd;
  }
  void Git(const std::string& args) {
    Sh("git -c user.email=test@example.com -c user.name=Test -c init.defaultBranch=main " + args);
  }
  std::string Out(const std::string& cmd) {
    std::string full = "cd '" + work_.string() + "' && " + cmd;
    FILE* p = popen(full.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  Snapshot Take(const fs::path& workdir) {
    Result<Snapshot> s = TakeSnapshot(workdir.string(), store_.string());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : Snapshot{};
  }

  fs::path dir_, work_, store_;
};

TEST_F(SnapshotTest, GitRepoCapturesCommittedTreePlusUncommittedChanges) {
  Git("init -q");
  WriteFile(work_ / ".gitignore", "*.log\n");
  WriteFile(work_ / "committed.txt", "same\n");
  WriteFile(work_ / "modified.txt", "before\n");
  WriteFile(work_ / "deleted.txt", "gone soon\n");
  Git("add -A");
  Git("commit -qm init");
  WriteFile(work_ / "modified.txt", "after\n");
  WriteFile(work_ / "untracked.txt", "new\n");
  WriteFile(work_ / "ignored.log", "noise\n");
  fs::remove(work_ / "deleted.txt");

  // Recorded as taken at the caller's time (its Clock), not the machine's.
  Result<Snapshot> taken =
      TakeSnapshot(work_.string(), store_.string(), {.now = 1'700'000'000'123});
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  const Snapshot& s = *taken;
  EXPECT_TRUE(s.git);
  EXPECT_EQ(s.git_commit, Out("git rev-parse HEAD"));
  EXPECT_EQ(s.git_commit.size(), 40u);
  EXPECT_NE(s.git_diff.find("diff --git a/modified.txt b/modified.txt"), std::string::npos);
  EXPECT_NE(s.git_diff.find("+after"), std::string::npos);
  EXPECT_NE(s.git_diff.find("deleted.txt"), std::string::npos);
  EXPECT_EQ(s.git_diff.find("untracked"), std::string::npos);  // untracked files are not in a diff
  EXPECT_EQ(s.hash.size(), 64u);
  EXPECT_EQ(fs::path(s.path), store_ / s.hash);
  EXPECT_EQ(ListTree(s.path), (std::vector<std::string>{".gitignore", "committed.txt",
                                                        "modified.txt", "untracked.txt"}));
  EXPECT_EQ(ReadFile(fs::path(s.path) / "modified.txt"), "after\n");
  EXPECT_EQ(s.files, 4);
  EXPECT_EQ(s.bytes, 6 + 5 + 6 + 4);
  EXPECT_EQ(s.created_ms, 1'700'000'000'123);
  // Nothing but the snapshot itself and its file list is left in the store (no temp folders).
  EXPECT_EQ(ListTree(store_).size(), 5u);
  EXPECT_TRUE(fs::exists(SnapshotManifest(store_.string(), s.hash)));
}

TEST_F(SnapshotTest, CleanRepoHasEmptyDiff) {
  Git("init -q");
  WriteFile(work_ / "a.py", "print(1)\n");
  Git("add -A");
  Git("commit -qm init");
  Snapshot s = Take(work_);
  EXPECT_TRUE(s.git);
  EXPECT_EQ(s.git_diff, "");
  EXPECT_FALSE(s.git_commit.empty());
}

TEST_F(SnapshotTest, RepoWithoutCommits) {
  Git("init -q");
  WriteFile(work_ / "a.py", "print(1)\n");
  Snapshot s = Take(work_);
  EXPECT_TRUE(s.git);
  EXPECT_EQ(s.git_commit, "");
  EXPECT_EQ(s.git_diff, "");
  EXPECT_EQ(ListTree(s.path), (std::vector<std::string>{"a.py"}));
}

TEST_F(SnapshotTest, WorkdirInsideARepoTakesPathsRelativeToIt) {
  Git("init -q");
  WriteFile(work_ / "top.txt", "top\n");
  WriteFile(work_ / "code" / "train.py", "v1\n");
  WriteFile(work_ / "code" / "lib" / "util.py", "u\n");
  Git("add -A");
  Git("commit -qm init");
  WriteFile(work_ / "code" / "train.py", "v2\n");
  WriteFile(work_ / "top.txt", "top changed\n");
  Snapshot s = Take(work_ / "code");
  EXPECT_TRUE(s.git);
  EXPECT_EQ(ListTree(s.path), (std::vector<std::string>{"lib/util.py", "train.py"}));
  // The diff covers the workdir's path only, with paths from the repository's top.
  EXPECT_NE(s.git_diff.find("a/code/train.py"), std::string::npos);
  EXPECT_EQ(s.git_diff.find("top.txt"), std::string::npos);
}

TEST_F(SnapshotTest, SameContentSameHashAndChangeGivesNewHash) {
  Git("init -q");
  WriteFile(work_ / "train.py", "lr = 0.1\n");
  Snapshot a = Take(work_);
  Snapshot b = Take(work_);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.path, b.path);
  WriteFile(work_ / "train.py", "lr = 0.2\n");
  Snapshot c = Take(work_);
  EXPECT_NE(c.hash, a.hash);
  EXPECT_TRUE(fs::exists(a.path));
  EXPECT_TRUE(fs::exists(c.path));
  // Only the exec bit changes: a new hash too.
  fs::permissions(work_ / "train.py", fs::perms::owner_exec, fs::perm_options::add);
  Snapshot d = Take(work_);
  EXPECT_NE(d.hash, c.hash);
}

// An unchanged workdir is known by its files' keys (device, inode, size, mtime, ctime): the
// second snapshot reads and copies nothing (no temp folder, so the snapshots folder is not
// touched) and gives the same hash. A file rewritten with the same size and its mtime set back
// has a new ctime, so it is read again.
TEST_F(SnapshotTest, AnUnchangedWorkdirIsKnownWithoutReadingIt) {
  WriteFile(work_ / "train.py", "lr = 0.1\n");
  fs::create_directories(work_ / "data");
  WriteFile(work_ / "data" / "big.bin", std::string(1 << 20, 'x'));
  // Files changed within the last second are not trusted by their keys.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Snapshot a = Take(work_);
  ASSERT_TRUE(fs::exists(store_ / ".hashes"));
  // Every file write in the store fails meanwhile: a copy would fail, knowing does not.
  ArmFileFaults({EIO, store_.string(), 0, -1});
  const int64_t faults_before = InjectedFileFaults();
  Snapshot b = Take(work_);
  EXPECT_EQ(InjectedFileFaults(), faults_before);  // nothing was written
  DisarmFileFaults();
  EXPECT_EQ(b.hash, a.hash);
  EXPECT_EQ(b.path, a.path);
  EXPECT_EQ(b.files, 2);
  EXPECT_EQ(b.bytes, a.bytes);

  struct stat st;
  ASSERT_EQ(stat((work_ / "train.py").c_str(), &st), 0);
  WriteFile(work_ / "train.py", "lr = 0.2\n");  // the same size
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, (work_ / "train.py").c_str(), times, 0), 0);
  Snapshot c = Take(work_);
  EXPECT_NE(c.hash, a.hash);
  EXPECT_EQ(ReadFile(fs::path(c.path) / "train.py"), "lr = 0.2\n");
  // A lost or torn cache costs a read, nothing else.
  WriteFile(store_ / ".hashes", "12 34 garbage\n");
  EXPECT_EQ(Take(work_).hash, c.hash);
}

TEST_F(SnapshotTest, HashIsOverSortedPathModeAndContentHash) {
  WriteFile(work_ / "b.txt", "bee\n");
  WriteFile(work_ / "a.txt", "ay\n");
  Snapshot s = Take(work_);
  std::string z("\0", 1);
  Sha256 expected;
  expected.Update("a.txt" + z + "100644" + z + Sha256Hex("ay\n") + z);
  expected.Update("b.txt" + z + "100644" + z + Sha256Hex("bee\n") + z);
  EXPECT_EQ(s.hash, expected.HexDigest());
}

TEST_F(SnapshotTest, EditingTheWorkdirLaterLeavesTheSnapshotAlone) {
  Git("init -q");
  WriteFile(work_ / "train.py", "original\n");
  Snapshot s = Take(work_);
  WriteFile(work_ / "train.py", "edited\n");
  WriteFile(work_ / "new.py", "new\n");
  EXPECT_EQ(ReadFile(fs::path(s.path) / "train.py"), "original\n");
  EXPECT_FALSE(fs::exists(fs::path(s.path) / "new.py"));
}

TEST_F(SnapshotTest, PlainFolderHonoursGitignore) {
  WriteFile(work_ / ".gitignore", "data/\n*.ckpt\n");
  WriteFile(work_ / "train.py", "code\n");
  WriteFile(work_ / "sub" / "model.py", "model\n");
  WriteFile(work_ / "sub" / ".gitignore", "scratch.txt\n");
  WriteFile(work_ / "sub" / "scratch.txt", "x\n");
  WriteFile(work_ / "data" / "big.bin", std::string(1000, 'x'));
  WriteFile(work_ / "model.ckpt", "weights\n");
  WriteFile(work_ / ".drover" / "store.db", "the store\n");
  Snapshot s = Take(work_);
  EXPECT_FALSE(s.git);
  EXPECT_EQ(s.git_commit, "");
  EXPECT_EQ(ListTree(s.path),
            (std::vector<std::string>{".gitignore", "sub/.gitignore", "sub/model.py", "train.py"}));
}

TEST_F(SnapshotTest, PlainFolderWithoutGitTakesEverything) {
  WriteFile(work_ / ".gitignore", "*.ckpt\n");
  WriteFile(work_ / "train.py", "code\n");
  WriteFile(work_ / "model.ckpt", "weights\n");
  WriteFile(work_ / ".git" / "HEAD", "not a real repo\n");
  WriteFile(work_ / ".drover" / "store.db", "the store\n");
  // No git on PATH.
  std::string old_path = getenv("PATH");
  fs::create_directory(dir_ / "empty-bin");
  setenv("PATH", (dir_ / "empty-bin").c_str(), 1);
  Result<Snapshot> s = TakeSnapshot(work_.string(), store_.string());
  setenv("PATH", old_path.c_str(), 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->git);
  EXPECT_EQ(ListTree(s->path), (std::vector<std::string>{".gitignore", "model.ckpt", "train.py"}));
}

// A dry run's digest (drover run --dry-run): the hash and file list TakeSnapshot stores, in a
// git repository and in a plain folder, with nothing written under the store.
TEST_F(SnapshotTest, HashSnapshotAgreesWithTakeSnapshotAndStoresNothing) {
  WriteFile(work_ / ".gitignore", "data/\n");
  WriteFile(work_ / "train.py", "code\n");
  WriteFile(work_ / "run.sh", "#!/bin/sh\n");
  fs::permissions(work_ / "run.sh", fs::perms::owner_exec, fs::perm_options::add);
  fs::create_symlink("train.py", work_ / "link.py");
  WriteFile(work_ / "data" / "big.bin", "ignored\n");
  WriteFile(work_ / "spec.yaml", "name: x\n");
  const SnapshotOptions options{.spec_file = (work_ / "spec.yaml").string()};
  for (const bool git : {false, true}) {
    SCOPED_TRACE(git ? "git" : "plain");
    if (git) {
      Git("init -q");
      Git("add .gitignore train.py");
      Git("commit -qm init");
    }
    Result<SnapshotDigest> digest = HashSnapshot(work_.string(), store_.string(), options);
    ASSERT_TRUE(digest.ok()) << digest.status().ToString();
    EXPECT_FALSE(fs::exists(store_));  // nothing stored, not even the folder
    Result<Snapshot> s = TakeSnapshot(work_.string(), store_.string(), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(digest->hash, s->hash);
    EXPECT_EQ(digest->git, git);
    EXPECT_EQ(static_cast<int64_t>(digest->files.size()), s->files);
    std::vector<std::string> paths;
    for (const SnapshotFile& f : digest->files) paths.push_back(f.path);
    EXPECT_EQ(paths, (std::vector<std::string>{".gitignore", "link.py", "run.sh", "train.py"}));
    EXPECT_EQ(digest->files[2].mode, "100755");
    EXPECT_EQ(digest->files[1].mode, "120000");
    EXPECT_EQ(digest->files[3].hash, Sha256Hex("code\n"));
    // The stored manifest is the digest's file list.
    EXPECT_EQ(ReadSnapshotManifest(store_.string(), s->hash), digest->files);
    // Hashed again from the cache the snapshot filled: the same.
    Result<SnapshotDigest> again = HashSnapshot(work_.string(), store_.string(), options);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->hash, s->hash);
    // A change is a new hash, and names the file.
    WriteFile(work_ / "train.py", "code 2\n");
    Result<SnapshotDigest> changed = HashSnapshot(work_.string(), store_.string(), options);
    ASSERT_TRUE(changed.ok());
    EXPECT_NE(changed->hash, s->hash);
    EXPECT_EQ(changed->files[3].hash, Sha256Hex("code 2\n"));
    WriteFile(work_ / "train.py", "code\n");
    fs::remove_all(store_);
  }
  EXPECT_EQ(ReadSnapshotManifest(store_.string(), "nope"), std::nullopt);
}

TEST_F(SnapshotTest, AStoreInsideTheWorkdirIsNeverCaptured) {
  // `drover run spec.yaml --store st` in the project folder: the store (its database, logs and
  // snapshots, and the throwaway git folder that lists a plain folder) lies inside the workdir.
  WriteFile(work_ / "train.py", "code\n");
  WriteFile(work_ / "st" / "drover.db", "the store\n");
  WriteFile(work_ / "st" / "logs" / "1.out", "a log\n");
  WriteFile(work_ / "stable.py", "not the store\n");
  const fs::path snapshots = work_ / "st" / "snapshots";
  Result<Snapshot> s =
      TakeSnapshot(work_.string(), snapshots.string(), {.excluded = (work_ / "st").string()});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(ListTree(s->path), (std::vector<std::string>{"stable.py", "train.py"}));
  // Taken again, the same: the first snapshot is not in the second.
  Result<Snapshot> again =
      TakeSnapshot(work_.string(), snapshots.string(), {.excluded = (work_ / "st").string()});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->hash, s->hash);
}

TEST_F(SnapshotTest, RefusesAWorkdirOverTheLimit) {
  WriteFile(work_ / "train.py", "code\n");
  WriteFile(work_ / "a.bin", std::string(3 << 20, 'a'));
  WriteFile(work_ / "b.bin", std::string(2 << 20, 'b'));
  WriteFile(work_ / "c.bin", std::string(1 << 20, 'c'));
  WriteFile(work_ / "d.bin", std::string(1 << 10, 'd'));
  Result<Snapshot> s = TakeSnapshot(work_.string(), store_.string(), {.max_bytes = 4LL << 20});
  ASSERT_FALSE(s.ok());
  // Refused once the walk passes the limit: which files it had seen depends on the folder's
  // order, but the message says where the limit is and what to do.
  EXPECT_TRUE(s.status().message().starts_with(
      "workdir " + work_.string() +
      " holds more than the snapshot limit of 4.0 MiB; add a .gitignore for data and outputs, or "
      "point workdir at the code folder (biggest: "))
      << s.status().message();
  EXPECT_NE(s.status().message().find("a.bin (3.0 MiB)"), std::string::npos)
      << s.status().message();
  // Nothing stored, no temp folder left behind.
  EXPECT_TRUE(!fs::exists(store_) || fs::is_empty(store_));
}

TEST_F(SnapshotTest, RefusesAWorkdirOfTooManyFilesBeforeWalkingItAll) {
  WriteFile(work_ / "train.py", "code\n");
  for (int d = 0; d < 20; ++d) {
    for (int f = 0; f < 50; ++f) {
      WriteFile(work_ / "data" / std::to_string(d) / std::to_string(f), "x");
    }
  }
  Result<Snapshot> s = TakeSnapshot(work_.string(), store_.string(), {.max_bytes = 1LL << 30, .max_files = 100});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("holds more than 100 files"), std::string::npos)
      << s.status().message();
  EXPECT_TRUE(!fs::exists(store_) || fs::is_empty(store_));
}

TEST_F(SnapshotTest, MissingWorkdirIsAClearError) {
  Result<Snapshot> s = TakeSnapshot((dir_ / "nope").string(), store_.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("nope"), std::string::npos);
}

TEST_F(SnapshotTest, MaterializeKeepsExecBitsAndSymlinks) {
  Git("init -q");
  WriteFile(work_ / "run.sh", "#!/bin/sh\necho hi\n");
  fs::permissions(work_ / "run.sh", fs::perms::owner_all | fs::perms::group_read |
                                        fs::perms::group_exec | fs::perms::others_read |
                                        fs::perms::others_exec);
  WriteFile(work_ / "lib" / "data.txt", "data\n");
  fs::create_symlink("run.sh", work_ / "link.sh");
  fs::create_symlink("/definitely/not/there", work_ / "dangling");
  Snapshot s = Take(work_);
  EXPECT_TRUE(fs::is_symlink(fs::path(s.path) / "link.sh"));

  fs::path dest = dir_ / "runs" / "1" / "work";
  ASSERT_TRUE(MaterializeSnapshot(s, dest.string()).ok());
  EXPECT_EQ(ListTree(dest),
            (std::vector<std::string>{"dangling", "lib/data.txt", "link.sh", "run.sh"}));
  EXPECT_TRUE(IsExecutable(dest / "run.sh"));
  EXPECT_FALSE(IsExecutable(dest / "lib" / "data.txt"));
  ASSERT_TRUE(fs::is_symlink(dest / "link.sh"));
  EXPECT_EQ(fs::read_symlink(dest / "link.sh"), "run.sh");
  EXPECT_EQ(fs::read_symlink(dest / "dangling"), "/definitely/not/there");
  EXPECT_EQ(ReadFile(dest / "lib" / "data.txt"), "data\n");
  // The working copy is writable and separate from the snapshot.
  WriteFile(dest / "lib" / "data.txt", "changed by the run\n");
  EXPECT_EQ(ReadFile(fs::path(s.path) / "lib" / "data.txt"), "data\n");
  // A second working copy from the same snapshot.
  fs::path dest2 = dir_ / "runs" / "2" / "work";
  ASSERT_TRUE(MaterializeSnapshot(s, dest2.string()).ok());
  EXPECT_EQ(ReadFile(dest2 / "lib" / "data.txt"), "data\n");
}

TEST_F(SnapshotTest, AWorkingCopyCutShortIsNeverTakenForAWholeOne) {
  // The copy is made beside its place and renamed into it: a disk that fills up during the copy
  // (or a crash) leaves no folder under the working copy's name, which the next attempt would
  // reuse as it is, and a half copy left by a crash is made again.
  WriteFile(work_ / "train.py", "print('v1')\n");
  WriteFile(work_ / "lib" / "data.txt", "data\n");
  Snapshot s = Take(work_);
  fs::path dest = dir_ / "runs" / "1";
  fs::create_directories(dir_ / "runs" / "1.partial");
  WriteFile(dir_ / "runs" / "1.partial" / "train.py", "half");
  for (int err : {ENOSPC, EIO}) {
    ArmFileFaults({.error = err, .under = dest.string(), .after = 1});
    Status st = MaterializeSnapshot(s, dest.string());
    DisarmFileFaults();
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Code::kIo);
    EXPECT_NE(st.message().find(std::strerror(err)), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(dest));
    EXPECT_FALSE(fs::exists(dir_ / "runs" / "1.partial"));
  }
  ASSERT_TRUE(MaterializeSnapshot(s, dest.string()).ok());
  EXPECT_EQ(ListTree(dest), (std::vector<std::string>{"lib/data.txt", "train.py"}));
  EXPECT_EQ(ReadFile(dest / "train.py"), "print('v1')\n");
  EXPECT_FALSE(fs::exists(dir_ / "runs" / "1.partial"));
}

TEST_F(SnapshotTest, MaterializeMissingSnapshotIsAnError) {
  Snapshot s;
  s.hash = "abc";
  s.path = (dir_ / "gone").string();
  s.files = 1;
  Status st = MaterializeSnapshot(s, (dir_ / "dest").string());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kNotFound);
  // An empty snapshot has nothing to copy: its working copy is an empty folder, whatever is
  // left of the snapshot's own.
  s.files = 0;
  ASSERT_TRUE(MaterializeSnapshot(s, (dir_ / "empty").string()).ok());
  EXPECT_TRUE(fs::is_directory(dir_ / "empty"));
  EXPECT_TRUE(fs::is_empty(dir_ / "empty"));
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(CopyAndHashTest, AFifoIsRefusedAtOnceNotWaitedOn) {
  char tmpl[] = "/tmp/drover-fifo-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string fifo = dir + "/swapped";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::string hex;
  int64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  Status st = CopyAndHash(fifo, dir + "/copy", false, &hex, &bytes, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  auto hashed = HashFile(fifo, nullptr, nullptr);
  EXPECT_FALSE(hashed.ok());
  std::filesystem::remove_all(dir);
}

TEST_F(SnapshotTest, ASubmittersSnapshotIsReadWithTheirRightsAndIsTheirs) {
  if (geteuid() != 0) GTEST_SKIP() << "reading as another user needs root";
  UnixUser nobody = LookupUser(65534, 65534);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_exec | fs::perms::others_read);
  fs::permissions(work_, fs::perms::owner_all | fs::perms::others_exec | fs::perms::others_read);
  WriteFile(work_ / "train.py", "print(1)\n");
  WriteFile(work_ / "sub" / "util.py", "x = 2\n");
  fs::permissions(work_ / "sub", fs::perms::owner_all | fs::perms::others_exec |
                                     fs::perms::others_read);
  fs::permissions(work_ / "sub" / "util.py", fs::perms::owner_read | fs::perms::others_read);
  WriteFile(work_ / "secret.key", "root only\n");
  fs::permissions(work_ / "secret.key", fs::perms::owner_read | fs::perms::owner_write);
  // A file the user may not read is not read for them (git ignores nothing here: no repo).
  SnapshotOptions as_nobody;
  as_nobody.owner = &nobody;
  Result<Snapshot> refused = TakeSnapshot(work_.string(), store_.string(), as_nobody);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("secret.key"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("Permission denied"), std::string::npos);
  // This thread is itself again: root reads it.
  EXPECT_EQ(ReadFile(work_ / "secret.key"), "root only\n");
  fs::remove(work_ / "secret.key");
  Result<Snapshot> theirs = TakeSnapshot(work_.string(), store_.string(), as_nobody);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  Snapshot plain = Take(work_);
  // The same tree, stored apart: theirs is theirs, files and folders.
  EXPECT_NE(theirs->hash, plain.hash);
  for (const fs::path& p : {fs::path(theirs->path), fs::path(theirs->path) / "train.py",
                            fs::path(theirs->path) / "sub" / "util.py"}) {
    struct stat st {};
    ASSERT_EQ(lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 65534u) << p;
  }
  struct stat st {};
  ASSERT_EQ(stat(theirs->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "nobody else enters a submitter's snapshot";
  ASSERT_EQ(stat(plain.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  // Taken again: the same snapshot, found without a copy.
  Result<Snapshot> again = TakeSnapshot(work_.string(), store_.string(), as_nobody);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->hash, theirs->hash);
}
TEST_F(SnapshotTest, AWorkingCopyForAUserIsCopiedAsThemAndIsTheirs) {
  if (geteuid() != 0) GTEST_SKIP() << "copying as another user needs root";
  UnixUser nobody = LookupUser(65534, 65534);
  WriteFile(work_ / "train.py", "print(1)\n");
  WriteFile(work_ / "pkg" / "mod.py", "x = 1\n");
  Snapshot snap = Take(work_);
  // Their snapshot is theirs to read; here the store's is opened to them for the copy.
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_exec);
  fs::permissions(dir_ / "store", fs::perms::owner_all | fs::perms::others_exec);
  fs::permissions(store_, fs::perms::owner_all | fs::perms::others_exec);
  for (const auto& e : fs::recursive_directory_iterator(snap.path)) {
    if (e.is_directory()) fs::permissions(e.path(), fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  }
  fs::permissions(snap.path, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  const fs::path runs = dir_ / "runs";
  fs::create_directories(runs);
  // A partial copy left by an earlier try holds a link the user planted: emptied as the user.
  const fs::path partial = runs / "7.partial";
  fs::create_directories(partial);
  fs::create_symlink("/etc", partial / "etc");
  ASSERT_EQ(lchown(partial.c_str(), 65534, 65534), 0);
  ASSERT_TRUE(MaterializeSnapshotAs(snap, (runs / "7").string(), nobody).ok());
  for (const fs::path& p : {runs / "7", runs / "7" / "train.py", runs / "7" / "pkg" / "mod.py"}) {
    struct stat st {};
    ASSERT_EQ(lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 65534u) << p;
  }
  std::error_code ec;
  EXPECT_FALSE(fs::exists(runs / "7" / "etc", ec));
  EXPECT_TRUE(fs::exists("/etc/passwd"));
}

}  // namespace
}  // namespace drover
