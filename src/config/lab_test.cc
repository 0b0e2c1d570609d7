#include "config/lab.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace drover::config {
namespace {

UnixUser Someone(const std::string& name, std::vector<int64_t> groups) {
  UnixUser u;
  u.uid = 4242;
  u.gid = groups.empty() ? 4242 : groups.front();
  u.name = name;
  u.groups = std::move(groups);
  return u;
}

TEST(GroupForTest, APersonalDaemonTakesWhatTheSpecSays) {
  auto g = GroupFor(Someone("alice", {}), false, "anything", LabConfig{}, /*shared=*/false);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, "anything");
}

TEST(GroupForTest, OnASharedDaemonAUserInNoTeamIsAGroupOfTheirOwn) {
  LabConfig lab;
  auto none = GroupFor(Someone("alice", {}), false, "", lab, true);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "alice");
  auto own = GroupFor(Someone("alice", {}), false, "alice", lab, true);
  EXPECT_TRUE(own.ok());
  auto forged = GroupFor(Someone("alice", {}), false, "vision", lab, true);
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.status().code(), Code::kPermissionDenied);
  EXPECT_NE(forged.status().message().find("group: vision is not alice's"), std::string::npos)
      << forged.status().message();
  // An admin may name any group.
  EXPECT_TRUE(GroupFor(Someone("boss", {}), true, "vision", lab, true).ok());
}

TEST(GroupForTest, TeamsAreTheUnixGroupsTheConfigNames) {
  // gid 0 is "root" on every Debian machine.
  LabConfig lab;
  lab.teams = {"no-such-group-here", "root"};
  UnixUser member = Someone("alice", {0});
  EXPECT_EQ(TeamsOf(member, lab), std::vector<std::string>{"root"});
  auto first = GroupFor(member, false, "", lab, true);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, "root");
  UnixUser outsider = Someone("bob", {4242});
  EXPECT_TRUE(TeamsOf(outsider, lab).empty());
  EXPECT_FALSE(GroupFor(outsider, false, "root", lab, true).ok());
}

}  // namespace
}  // namespace drover::config
