#include "gpu/leases.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace drover {
namespace {

class LeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drover-leases-test-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    dir_ = root_ + "/leases";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_, dir_;
};

TEST_F(LeasesTest, FolderIsMadeStickyAndWritableByAll) {
  auto a = FileGpuLedger::Open(dir_, "aaaa");
  ASSERT_TRUE(a.ok()) << a.status().message();
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
}

TEST_F(LeasesTest, EachEngineSeesTheOthersLeasesNotItsOwn) {
  auto a = FileGpuLedger::Open(dir_, "aaaa");
  auto b = FileGpuLedger::Open(dir_, "bbbb");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Publish({{"GPU-fake-0", 4 << 20, false, 0}, {"GPU-fake-1", 0, true, 0}}).ok());
  ASSERT_TRUE((*b)->Publish({{"GPU-fake-0", 1 << 20, false, 0}}).ok());
  auto seen_by_b = (*b)->Others();
  ASSERT_TRUE(seen_by_b.ok());
  ASSERT_EQ(seen_by_b->size(), 2u);
  EXPECT_EQ((*seen_by_b)[0].uuid, "GPU-fake-0");
  EXPECT_EQ((*seen_by_b)[0].bytes, 4 << 20);
  EXPECT_TRUE((*seen_by_b)[1].whole);
  auto seen_by_a = (*a)->Others();
  ASSERT_TRUE(seen_by_a.ok());
  ASSERT_EQ(seen_by_a->size(), 1u);
  EXPECT_EQ((*seen_by_a)[0].bytes, 1 << 20);
  // A new list replaces the old one.
  ASSERT_TRUE((*a)->Publish({}).ok());
  EXPECT_TRUE((*b)->Others()->empty());
}

TEST_F(LeasesTest, TheSameOwnerCannotOpenTwice) {
  auto a = FileGpuLedger::Open(dir_, "aaaa");
  ASSERT_TRUE(a.ok());
  auto again = FileGpuLedger::Open(dir_, "aaaa");
  EXPECT_FALSE(again.ok());
  a->reset();
  EXPECT_TRUE(FileGpuLedger::Open(dir_, "aaaa").ok());  // released with its holder
}

TEST_F(LeasesTest, ADeadEnginesLeasesCountOnlyForRunsThatLive) {
  // Another engine (a child process) publishes a lease for a live run (this test's own pid) and
  // one for a run that has ended, then dies without tidying.
  pid_t ended = fork();
  if (ended == 0) _exit(0);
  ::waitpid(ended, nullptr, 0);
  pid_t engine = fork();
  if (engine == 0) {
    auto other = FileGpuLedger::Open(dir_, "dead");
    if (!other.ok()) _exit(2);
    if (!(*other)->Publish({{"GPU-fake-0", 100, false, ::getppid()}, {"GPU-fake-1", 0, true, ended}})
             .ok()) {
      _exit(3);
    }
    _exit(0);  // no destructor: as if killed
  }
  int status = 0;
  ::waitpid(engine, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto me = FileGpuLedger::Open(dir_, "mine");
  ASSERT_TRUE(me.ok());
  auto seen = (*me)->Others();
  ASSERT_TRUE(seen.ok());
  ASSERT_EQ(seen->size(), 1u);  // the ended run's lease no longer counts
  EXPECT_EQ((*seen)[0].uuid, "GPU-fake-0");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/dead.json"));

  // Once none of its runs lives, the dead engine's file is removed.
  pid_t engine2 = fork();
  if (engine2 == 0) {
    auto other = FileGpuLedger::Open(dir_, "dead2");
    if (!other.ok() || !(*other)->Publish({{"GPU-fake-0", 100, false, ended}}).ok()) _exit(2);
    _exit(0);
  }
  ::waitpid(engine2, nullptr, 0);
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/dead2.json"));
  ASSERT_EQ((*me)->Others()->size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dead2.json"));
}

TEST_F(LeasesTest, TheLockIsExclusiveAndBounded) {
  auto a = FileGpuLedger::Open(dir_, "aaaa");
  auto b = FileGpuLedger::Open(dir_, "bbbb");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Lock(100).ok());
  Status busy = (*b)->Lock(30);
  EXPECT_EQ(busy.code(), Code::kUnavailable) << busy.message();
  (*a)->Unlock();
  EXPECT_TRUE((*b)->Lock(30).ok());
  (*b)->Unlock();
}

TEST_F(LeasesTest, GarbageAndLinksAreSkippedNotTrusted) {
  auto me = FileGpuLedger::Open(dir_, "mine");
  ASSERT_TRUE(me.ok());
  std::ofstream(dir_ + "/junk.json") << "{not json";
  std::ofstream(root_ + "/target.json") << FormatLeases(1, {{"GPU-fake-0", 1, false, 1}});
  std::filesystem::create_symlink(root_ + "/target.json", dir_ + "/link.json");
  auto seen = (*me)->Others();
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(seen->empty());
  EXPECT_EQ((*me)->unreadable(), 2);
}

TEST_F(LeasesTest, AFolderThatIsALinkOrOpenToAllWithoutStickyIsRefused) {
  std::filesystem::create_directory(root_ + "/real");
  std::filesystem::create_directory_symlink(root_ + "/real", dir_);
  EXPECT_FALSE(FileGpuLedger::Open(dir_, "aaaa").ok());
  std::filesystem::remove(dir_);
  std::filesystem::create_directory(dir_);
  ::chmod(dir_.c_str(), 0777);
  auto open = FileGpuLedger::Open(dir_, "aaaa");
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("sticky"), std::string::npos);
}

TEST(ParseLeasesTest, RoundTripAndRefusals) {
  std::vector<GpuLease> l = {{"GPU-1", 5, false, 7}, {"GPU-2", 9, true, 0}};
  auto back = ParseLeases(FormatLeases(3, l));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, l);
  EXPECT_FALSE(ParseLeases("[]").ok());
  EXPECT_FALSE(ParseLeases(R"({"leases":[{"uuid":1,"bytes":2}]})").ok());
  EXPECT_FALSE(ParseLeases(R"({"leases":[{"uuid":"x","bytes":"2"}]})").ok());
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

class LeasesRedTeamTest : public LeasesTest {};

TEST_F(LeasesRedTeamTest, HugeBytesAreBoundedNotWrapped) {
  auto parsed = ParseLeases(R"({"leases":[{"uuid":"GPU-fake-0","bytes":9223372036854775000}]})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ((*parsed)[0].bytes, int64_t{1} << 50);
  auto negative = ParseLeases(R"({"leases":[{"uuid":"GPU-fake-0","bytes":-5}]})");
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ((*negative)[0].bytes, 0);
}

TEST_F(LeasesRedTeamTest, AnEngineThatClosesWithRunsLeftKeepsTheirLeases) {
  {
    auto a = FileGpuLedger::Open(dir_, "aaaa");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE((*a)->Publish({{"GPU-fake-0", 100, false, ::getpid()}}).ok());
  }  // closed (a daemon drained, its run left for the next one)
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/aaaa.json"));
  auto b = FileGpuLedger::Open(dir_, "bbbb");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->Others()->size(), 1u);  // its run lives: still counted
  {
    auto c = FileGpuLedger::Open(dir_, "cccc");
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Publish({}).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cccc.json"));  // held nothing: gone
}

TEST_F(LeasesRedTeamTest, ATakenTempNameDoesNotStopPublishing) {
  auto a = FileGpuLedger::Open(dir_, "aaaa");
  ASSERT_TRUE(a.ok());
  std::ofstream(dir_ + "/.aaaa.json.tmp") << "squatter";
  ASSERT_TRUE((*a)->Publish({{"GPU-fake-0", 1, false, 0}}).ok());
  auto b = FileGpuLedger::Open(dir_, "bbbb");
  EXPECT_EQ((*b)->Others()->size(), 1u);
}

TEST_F(LeasesRedTeamTest, AFolderOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the folder away";
  std::filesystem::create_directory(dir_);
  ::chmod(dir_.c_str(), 01777);
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);  // nobody
  auto open = FileGpuLedger::Open(dir_, "aaaa");
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("belongs to uid 65534"), std::string::npos)
      << open.status().message();
}

}  // namespace
}  // namespace drover
