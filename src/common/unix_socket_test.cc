#include "common/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/users.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drover-sock-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/daemon.sock";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(UnixSocketTest, ListensWithTheModeAndTheKernelNamesThePeer) {
  auto l = ListenUnix(path_, 0600, 8);
  ASSERT_TRUE(l.ok()) << l.status().message();
  struct stat st {};
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto c = ConnectUnix(path_, 1000);
  ASSERT_TRUE(c.ok()) << c.status().message();
  int server = ::accept(l->fd, nullptr, nullptr);
  ASSERT_GE(server, 0);
  ucred cr{};
  socklen_t len = sizeof cr;
  ASSERT_EQ(::getsockopt(server, SOL_SOCKET, SO_PEERCRED, &cr, &len), 0);
  EXPECT_EQ(static_cast<uid_t>(cr.uid), ::geteuid());
  EXPECT_EQ(cr.pid, ::getpid());
  ::close(server);
  ::close(*c);
  ::close(l->fd);
  RemoveUnixSocket(path_, l->inode);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(UnixSocketTest, AStaleSocketIsReplacedALiveOneIsNot) {
  auto first = ListenUnix(path_, 0600, 8);
  ASSERT_TRUE(first.ok());
  // Alive: refused, and left as it is.
  auto second = ListenUnix(path_, 0600, 8);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another daemon listens"), std::string::npos);
  // Its daemon died (the fd closed, the file left behind): replaced.
  ::close(first->fd);
  ASSERT_TRUE(fs::exists(path_));
  auto third = ListenUnix(path_, 0666, 8);
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_NE(third->inode, first->inode);
  struct stat st {};
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  // The old daemon's removal at exit leaves the new socket alone.
  RemoveUnixSocket(path_, first->inode);
  EXPECT_TRUE(fs::exists(path_));
  ::close(third->fd);
}

TEST_F(UnixSocketTest, SomethingElseAtThePathIsLeftAlone) {
  std::ofstream(path_) << "precious";
  auto l = ListenUnix(path_, 0600, 8);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("not a socket"), std::string::npos);
  std::ifstream in(path_);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");
}

TEST_F(UnixSocketTest, AFolderOthersMayWriteIsRefused) {
  ::chmod(dir_.c_str(), 0777);
  auto l = ListenUnix(path_, 0600, 8);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("writable by other users"), std::string::npos);
  ::chmod(dir_.c_str(), 01777);  // sticky, like /tmp: allowed
  auto sticky = ListenUnix(path_, 0600, 8);
  ASSERT_TRUE(sticky.ok()) << sticky.status().message();
  ::close(sticky->fd);
}

TEST_F(UnixSocketTest, LongPathsGoThroughTheFolder) {
  std::string deep = dir_;
  while (deep.size() < 150) deep += "/a-rather-long-folder-name";
  fs::create_directories(deep);
  const std::string path = deep + "/daemon.sock";
  ASSERT_GT(path.size(), 108u);
  auto l = ListenUnix(path, 0600, 8);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(fs::exists(path));
  auto c = ConnectUnix(path, 1000);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ::close(*c);
  ::close(l->fd);
}

TEST_F(UnixSocketTest, NothingThereIsNotFound) {
  auto c = ConnectUnix(path_, 100);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kNotFound);
}

TEST(UsersTest, LooksUpTheCallerAndKnowsUnknownUids) {
  UnixUser me = LookupUser(::geteuid(), ::getegid());
  EXPECT_EQ(me.uid, static_cast<int64_t>(::geteuid()));
  EXPECT_FALSE(me.name.empty());
  EXPECT_TRUE(InGroup(me, me.gid));
  auto again = LookupUserByName(me.name);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->uid, me.uid);
  UnixUser ghost = LookupUser(987654, 987654);
  EXPECT_TRUE(ghost.name.empty());
  EXPECT_EQ(DisplayName(ghost), "uid 987654");
  EXPECT_FALSE(LookupUserByName("no-such-user-here").ok());
  EXPECT_FALSE(LookupGroup("no-such-group-here").has_value());
}

}  // namespace
}  // namespace drover
