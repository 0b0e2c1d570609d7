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

Result<Caller> OnBehalfOf(const Caller& actor, const std::string& owner) {
  if (!owner.empty() && owner == DisplayName(actor.user)) return actor;
  if (owner.empty()) {
    // Recorded before submitters were: only the daemon's own user (an admin) acts on it, as
    // itself (MayActOn has refused everyone else).
    return actor;
  }
  Result<UnixUser> user = LookupUserByName(owner);
  if (!user.ok()) {
    return PermissionDenied(fmt::format(
        "{}'s run is not started again: {} is no user of this machine any more, and a run's code "
        "runs only as its submitter (docs/security.md)",
        owner, owner));
  }
  Caller as;
  as.user = *user;
  as.via = actor.via;
  as.from = fmt::format("{} for {}", actor.from, DisplayName(actor.user));
  as.admin = false;
  return as;
}

}  // namespace drover::server
