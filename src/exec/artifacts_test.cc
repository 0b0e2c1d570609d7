// Declared outputs stored by content (exec/artifacts.h) and content hashes with their cache by
// file key (exec/file_hashes.h), on real files.
#include "exec/artifacts.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "exec/file_hashes.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

class ArtifactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("drover-artifacts-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    // Stored objects are read-only: made writable again to be removed.
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != end(it); ++it) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(dir_);
  }
  void Put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path dir_;
};

TEST_F(ArtifactsTest, OutputsAreStoredOnceByContentAndLinkedUnderTheRun) {
  const std::string store = (dir_ / "store").string();
  Put(dir_ / "w1/ckpt/model.pt", "weights");
  Put(dir_ / "w1/ckpt/sub/log.txt", "log");
  Put(dir_ / "w1/notes.txt", "not declared");
  fs::create_symlink("model.pt", dir_ / "w1/ckpt/latest");
  Put(dir_ / "w2/ckpt/model.pt", "weights");  // the same content in another run
  auto a = StoreOutputs(store, 7, {(dir_ / "w1").string(), "", ""}, {"ckpt"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].path, "ckpt/latest");
  EXPECT_EQ((*a)[0].mode, 0120777);
  EXPECT_EQ((*a)[1].path, "ckpt/model.pt");
  EXPECT_EQ((*a)[1].bytes, 7);
  EXPECT_EQ(Read(OutputsDir(store, 7) + "/ckpt/model.pt"), "weights");
  EXPECT_EQ(fs::read_symlink(OutputsDir(store, 7) + "/ckpt/latest"), "model.pt");
  EXPECT_FALSE(fs::exists(OutputsDir(store, 7) + "/notes.txt"));
  auto b = StoreOutputs(store, 8, {(dir_ / "w2").string(), "", ""}, {"ckpt/model.pt"});
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].hash, (*a)[1].hash);
  // One object, three names (the object and each run's link).
  struct stat st;
  ASSERT_EQ(stat(ArtifactObject(store, (*a)[1].hash).c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 3u);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_TRUE(VerifyArtifacts(store, 7, *a).empty());
  // The same outputs hash the same, whatever run they came from; a change shows.
  std::vector<Artifact> one = {(*a)[1]};
  EXPECT_EQ(ArtifactsHash(one), ArtifactsHash(*b));
  EXPECT_NE(ArtifactsHash(*a), ArtifactsHash(*b));
}

TEST_F(ArtifactsTest, AMissingOutputIsNamed) {
  Put(dir_ / "w/x.txt", "x");
  auto a = StoreOutputs((dir_ / "store").string(), 1, {(dir_ / "w").string(), "", ""},
                        {"x.txt", "never"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("did not write its declared output 'never'"),
            std::string::npos);
}

TEST_F(ArtifactsTest, AnOverlaysUpperLayerHidesWhatItDeletedFromTheSnapshot) {
  // lower: the snapshot; upper: what the run wrote, with overlayfs' whiteouts (a 0/0 character
  // device) and an opaque folder (its lower contents were deleted, then it was made again).
  Put(dir_ / "lower/data/keep.txt", "from the snapshot");
  Put(dir_ / "lower/data/gone.txt", "deleted by the run");
  Put(dir_ / "lower/data/old/a.txt", "under an opaque folder");
  Put(dir_ / "upper/data/new.txt", "written by the run");
  Put(dir_ / "upper/data/keep.txt.bak", "x");
  if (mknod((dir_ / "upper/data/gone.txt").c_str(), S_IFCHR | 0000, makedev(0, 0)) != 0) {
    GTEST_SKIP() << "cannot make a whiteout here (mknod needs CAP_MKNOD)";
  }
  fs::create_directories(dir_ / "upper/data/old");
  Put(dir_ / "upper/data/old/b.txt", "b");
  if (setxattr((dir_ / "upper/data/old").c_str(), "trusted.overlay.opaque", "y", 1, 0) != 0 &&
      setxattr((dir_ / "upper/data/old").c_str(), "user.overlay.opaque", "y", 1, 0) != 0) {
    GTEST_SKIP() << "cannot set the opaque attribute here";
  }
  auto a = StoreOutputs((dir_ / "store").string(), 3,
                        {(dir_ / "work").string(), (dir_ / "upper").string(),
                         (dir_ / "lower").string()},
                        {"data"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  std::vector<std::string> paths;
  for (const Artifact& x : *a) paths.push_back(x.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"data/keep.txt", "data/keep.txt.bak", "data/new.txt",
                                             "data/old/b.txt"}));
}

TEST_F(ArtifactsTest, ALinkTheRunPutInPlaceOfAFolderHidesTheSnapshotBelowItAndIsNeverWrittenThrough) {
  // The snapshot has a/passwd; the run replaced `a` with a link to a folder outside (as
  // `rm -rf a && ln -s /etc a` does in the merged view: the upper layer holds the link).
  Put(dir_ / "lower/a/passwd", "the user's text");
  Put(dir_ / "outside/passwd", "not the run's");
  fs::create_directories(dir_ / "upper");
  fs::create_symlink(dir_ / "outside", dir_ / "upper/a");
  const std::string store = (dir_ / "store").string();
  auto a = StoreOutputs(store, 4,
                        {(dir_ / "work").string(), (dir_ / "upper").string(),
                         (dir_ / "lower").string()},
                        {"a"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->size(), 1u);  // the link alone: nothing of the snapshot below it
  EXPECT_EQ((*a)[0].path, "a");
  EXPECT_EQ((*a)[0].mode, 0120777);
  EXPECT_EQ(Read(dir_ / "outside/passwd"), "not the run's");
  EXPECT_TRUE(fs::is_symlink(OutputsDir(store, 4) + "/a"));
  // Declared as a folder below the link: refused, never made through it.
  auto b = StoreOutputs(store, 5,
                        {(dir_ / "work").string(), (dir_ / "upper").string(),
                         (dir_ / "lower").string()},
                        {"a/passwd"});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("lies under a symbolic link"), std::string::npos)
      << b.status().message();
  EXPECT_EQ(Read(dir_ / "outside/passwd"), "not the run's");
}

TEST_F(ArtifactsTest, AnOutputBeneathALinkIsRefusedWithoutNamingWhatIsThere) {
  // A copied working copy (no overlay) with `d -> a folder outside`, `outputs: [d/sub]`.
  Put(dir_ / "outside/sub/first-secret-name", "x");
  fs::create_directories(dir_ / "w");
  fs::create_symlink(dir_ / "outside", dir_ / "w/d");
  auto a = StoreOutputs((dir_ / "store").string(), 6, {(dir_ / "w").string(), "", ""}, {"d/sub"});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("lies under a symbolic link"), std::string::npos);
  EXPECT_EQ(a.status().message().find("first-secret-name"), std::string::npos);
  EXPECT_FALSE(fs::exists(OutputsDir((dir_ / "store").string(), 6) + "/d/sub/first-secret-name"));
}

TEST_F(ArtifactsTest, AnUnchangedTreeIsHashedFromItsKeysAndAChangeIsSeen) {
  Put(dir_ / "in/a.txt", "a");
  Put(dir_ / "in/sub/b.txt", "b");
  // Older than a second, so the cache may keep them (a file changed within the last second is
  // always read).
  const auto old = fs::file_time_type::clock::now() - std::chrono::seconds(5);
  fs::last_write_time(dir_ / "in/a.txt", old);
  fs::last_write_time(dir_ / "in/sub/b.txt", old);
  sleep(1);  // their ctime too
  int64_t files = 0, bytes = 0;
  std::string first;
  {
    HashCache cache((dir_ / "cache").string());
    fs::create_directories(dir_ / "cache");
    auto h = HashTree((dir_ / "in").string(), &cache, &files, &bytes);
    ASSERT_TRUE(h.ok()) << h.status().message();
    first = *h;
    cache.Save();
  }
  EXPECT_EQ(files, 2);
  EXPECT_EQ(bytes, 2);
  EXPECT_EQ(Read(dir_ / "cache/.hashes").size() > 0, true);
  HashCache cache((dir_ / "cache").string());
  auto again = HashTree((dir_ / "in").string(), &cache);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, first);
  // A file's content changed (its key with it): another hash.
  Put(dir_ / "in/sub/b.txt", "B");
  auto changed = HashTree((dir_ / "in").string(), &cache);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(*changed, first);
  // A file: its own hash.
  auto file = HashTree((dir_ / "in/a.txt").string(), nullptr);
  ASSERT_TRUE(file.ok());
  EXPECT_NE(*file, first);
}

}  // namespace
}  // namespace drover
