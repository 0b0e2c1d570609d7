// Copying a run's output into the store keeps its holes (exec/file_hashes.h, CopyAndHash), on
// real files.
#include "exec/file_hashes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "exec/artifacts.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

class FileHashesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("drover-file-hashes-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != end(it); ++it) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(dir_);
  }
  // A file of `size` bytes that holds `head` at its start and `tail` at its end, holes between.
  static void MakeSparse(const fs::path& p, off_t size, const std::string& head,
                         const std::string& tail) {
    fs::create_directories(p.parent_path());
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, size), 0);
    ASSERT_EQ(pwrite(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
    ASSERT_EQ(pwrite(fd, tail.data(), tail.size(), size - static_cast<off_t>(tail.size())),
              static_cast<ssize_t>(tail.size()));
    close(fd);
  }
  static std::string ReadAt(const std::string& p, off_t at, size_t n) {
    std::string out(n, '\0');
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(pread(fd, out.data(), n, at), static_cast<ssize_t>(n));
    close(fd);
    return out;
  }
  fs::path dir_;
};

// Issue 39, item 14: a 2 GiB sparse output was stored densely (2 GiB of the store's disk for a
// few bytes of data). Now its holes stay holes, and its hash is still that of every byte.
TEST_F(FileHashesTest, ASparseOutputIsStoredSparse) {
  constexpr off_t kSize = off_t{2} << 30;
  const fs::path work = dir_ / "work";
  MakeSparse(work / "out" / "big.bin", kSize, "head of the file", "its tail");
  struct stat src {};
  ASSERT_EQ(stat((work / "out" / "big.bin").c_str(), &src), 0);
  if (src.st_blocks * 512 >= kSize) GTEST_SKIP() << "this file system keeps no holes";

  const std::string store = (dir_ / "store").string();
  auto stored = StoreOutputs(store, 3, {work.string(), "", ""}, {"out"});
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  ASSERT_EQ(stored->size(), 1u);
  const Artifact& a = (*stored)[0];
  EXPECT_EQ(a.bytes, kSize);

  const std::string object = ArtifactObject(store, a.hash);
  struct stat st {};
  ASSERT_EQ(stat(object.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, kSize);
  // A few blocks for the data, none for the holes (dense: 4 Mi blocks of 512 bytes).
  EXPECT_LT(st.st_blocks * 512, off_t{1} << 20) << st.st_blocks << " blocks";
  EXPECT_EQ(ReadAt(object, 0, 16), "head of the file");
  EXPECT_EQ(ReadAt(object, kSize - 8, 8), "its tail");
  EXPECT_EQ(ReadAt(object, 1 << 20, 4), std::string(4, '\0'));
  // Its hash is the content's (holes read as zeros): the next test compares it with a dense
  // read on a smaller file.
  EXPECT_EQ(a.hash.size(), 64u);
}

// Data between holes, and a file that ends in a hole, come back byte for byte.
TEST_F(FileHashesTest, DataBetweenHolesAndATrailingHoleAreCopiedExactly) {
  const fs::path src = dir_ / "holes.bin";
  int fd = open(src.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const off_t kSize = 64 << 20;
  ASSERT_EQ(ftruncate(fd, kSize), 0);
  const std::string middle(100000, 'm');
  ASSERT_EQ(pwrite(fd, middle.data(), middle.size(), 8 << 20), 100000);
  close(fd);
  std::string hex;
  int64_t bytes = 0;
  const std::string dst = (dir_ / "copy.bin").string();
  ASSERT_TRUE(CopyAndHash(src.string(), dst, false, &hex, &bytes, nullptr).ok());
  EXPECT_EQ(bytes, kSize);
  EXPECT_EQ(fs::file_size(dst), static_cast<uintmax_t>(kSize));
  EXPECT_EQ(ReadAt(dst, 8 << 20, middle.size()), middle);
  EXPECT_EQ(ReadAt(dst, (8 << 20) - 1, 1), std::string(1, '\0'));
  EXPECT_EQ(ReadAt(dst, kSize - 1, 1), std::string(1, '\0'));
  auto again = HashFile(src.string(), nullptr, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, hex);
}

}  // namespace
}  // namespace drover
