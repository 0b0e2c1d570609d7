#include "config/lab.h"

#include <fmt/format.h>

#include <algorithm>

namespace drover::config {

std::vector<std::string> TeamsOf(const UnixUser& user, const LabConfig& lab) {
  std::vector<std::string> out;
  for (const std::string& team : lab.teams) {
    auto gid = LookupGroup(team);
    if (gid && InGroup(user, *gid)) out.push_back(team);
  }
  return out;
}

Result<std::string> GroupFor(const UnixUser& user, bool admin, const std::string& asked,
                             const LabConfig& lab, bool shared) {
  if (!shared) return asked;
  const std::vector<std::string> teams = TeamsOf(user, lab);
  const std::string own = teams.empty() ? DisplayName(user) : teams.front();
  if (asked.empty()) return own;
  if (asked == own || std::find(teams.begin(), teams.end(), asked) != teams.end()) return asked;
  if (admin) return asked;
  std::string theirs;
  for (const std::string& t : teams) theirs += (theirs.empty() ? "" : ", ") + t;
  return PermissionDenied(fmt::format(
      "group: {} is not {}'s to use: runs count against the submitter's own team ({}); leave "
      "group out, or ask an admin to add {} to the Unix group (docs/lab-server.md)",
      asked, DisplayName(user),
      teams.empty() ? DisplayName(user) + ", a group of their own, as they are in no team"
                    : theirs,
      DisplayName(user)));
}

}  // namespace drover::config
