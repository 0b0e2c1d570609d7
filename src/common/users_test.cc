#include "common/users.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

namespace drover {
namespace {

namespace fs = std::filesystem;

bool CanRead(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  close(fd);
  return true;
}

TEST(ActingAs, AThreadReadsWithTheUsersRightsAloneAndComesBack) {
  if (geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  std::string tmpl = (fs::temp_directory_path() / "drover-acting-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  fs::permissions(tmpl, fs::perms::all);
  const std::string secret = tmpl + "/root-only";
  std::ofstream(secret) << "x";
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
  UnixUser nobody = LookupUser(65534, 65534);
  std::promise<void> go;
  std::future<bool> before = std::async(std::launch::async, [&, ready = go.get_future()]() mutable {
    ready.wait();
    return CanRead(secret);
  });
  {
    ActingAs as(&nobody);
    go.set_value();
    ASSERT_TRUE(as.status().ok()) << as.status().ToString();
    EXPECT_TRUE(as.active());
    EXPECT_FALSE(CanRead(secret)) << "the user may not read it";
    // Files made meanwhile are the user's.
    const std::string made = tmpl + "/made";
    std::ofstream(made) << "y";
    struct stat st {};
    ASSERT_EQ(stat(made.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 65534u);
    // A thread started before keeps the process's own rights (one started now would inherit
    // this thread's).
    EXPECT_TRUE(before.get());
    as.Pause();
    EXPECT_TRUE(CanRead(secret));
    as.Resume();
    EXPECT_FALSE(CanRead(secret));
  }
  EXPECT_TRUE(CanRead(secret)) << "this thread is itself again";
  // Root and nobody-at-all change nothing.
  UnixUser root = LookupUser(0, 0);
  ActingAs as_root(&root);
  EXPECT_FALSE(as_root.active());
  ActingAs none(nullptr);
  EXPECT_FALSE(none.active());
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace drover
