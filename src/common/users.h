#pragma once
// Unix users and groups as the system's databases (passwd, group, NSS) know them: who a uid is,
// their primary and supplementary groups, and whether they belong to a named group
// (docs/lab-server.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover {

struct UnixUser {
  int64_t uid = -1;
  int64_t gid = -1;                 // primary group
  std::string name;                 // "" when the uid has no passwd entry ("uid 1234" in messages)
  std::string home;
  std::string shell;
  std::vector<int64_t> groups;      // every group it is in, the primary one included
  bool operator==(const UnixUser&) const = default;
};

// The user with this uid and their groups. A uid without a passwd entry is still a user: its
// name is empty and its groups are `gid` alone.
UnixUser LookupUser(int64_t uid, int64_t gid);
// By name; NotFound when there is no such user.
Result<UnixUser> LookupUserByName(const std::string& name);
// A group's id by name, or nothing.
std::optional<int64_t> LookupGroup(const std::string& name);
// "alice" or "uid 1234".
std::string DisplayName(const UnixUser& user);
bool InGroup(const UnixUser& user, int64_t gid);

}  // namespace drover
