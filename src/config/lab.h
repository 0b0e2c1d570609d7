#pragma once
// Whose share a run counts against on a shared daemon (docs/lab-server.md, "Teams and fair
// share"): fair share and quotas key on the real user and the teams the config names, never on
// what a spec claims.
//
//   lab:
//     admin_group: drover-admins   # members act on every experiment
//     teams: [vision, nlp]         # Unix groups that are teams; their weight and quota are
//                                  # scheduler.groups.<team>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/users.h"

namespace drover::config {

struct LabConfig {
  std::string admin_group;
  std::vector<std::string> teams;  // Unix group names, in the config's order
};

// The teams `user` belongs to (its Unix groups among lab.teams), in the config's order.
std::vector<std::string> TeamsOf(const UnixUser& user, const LabConfig& lab);

// The fair-share group for a submit of `user` whose spec says `asked` ("" when it says none):
//   - a personal daemon (not shared): what the spec says (one user; groups are projects);
//   - a shared daemon: one of the user's teams (the first when the spec says none); a user in no
//     team is a group of their own (their name). A group the user is not in is refused, naming
//     their teams; admins may name any group.
Result<std::string> GroupFor(const UnixUser& user, bool admin, const std::string& asked,
                             const LabConfig& lab, bool shared);

}  // namespace drover::config
