#include "server/identity.h"

#include <fmt/format.h>

namespace drover::server {
namespace {

thread_local Caller t_caller;

}  // namespace

const Caller& CurrentCaller() { return t_caller; }
void SetCurrentCaller(Caller caller) { t_caller = std::move(caller); }

Status MayActOn(const Caller& caller, const std::string& owner, std::string_view what) {
  if (caller.admin) return Status::Ok();
  if (!owner.empty() && owner == DisplayName(caller.user)) return Status::Ok();
  return PermissionDenied(fmt::format(
      "{} may not {} {}: only its submitter and the daemon's admins may (ask {}, or an admin: "
      "docs/lab-server.md)",
      DisplayName(caller.user), what,
      owner.empty() ? "an experiment recorded without a submitter" : "a run of " + owner + "'s",
      owner.empty() ? "the daemon's owner" : owner));
}

}  // namespace drover::server
