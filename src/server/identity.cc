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

Status MayActOn(const Caller& caller, const std::string& owner, int64_t owner_uid,
                std::string_view what) {
  DROVER_RETURN_IF_ERROR(MayActOn(caller, owner, what));
  if (caller.admin || owner_uid < 0 || owner_uid == caller.user.uid) return Status::Ok();
  return PermissionDenied(fmt::format(
      "{} may not {} a run of {}'s: it was submitted by uid {}, an earlier account of that name "
      "(ask an admin: docs/lab-server.md)",
      DisplayName(caller.user), what, owner, owner_uid));
}

Status MayActOn(const Caller& caller, const Run& run, std::string_view what) {
  return MayActOn(caller, run.user, run.user_uid, what);
}

Status MayActOn(const Caller& caller, const Experiment& experiment, std::string_view what) {
  return MayActOn(caller, experiment.user, experiment.uid, what);
}

Result<Caller> OnBehalfOf(const Caller& actor, const std::string& owner, int64_t owner_uid) {
  if (!owner.empty() && owner == DisplayName(actor.user) &&
      (owner_uid < 0 || owner_uid == actor.user.uid)) {
    return actor;
  }
  if (owner.empty()) {
    // Recorded before submitters were: only the daemon's own user (an admin) acts on it, as
    // itself (MayActOn has refused everyone else).
    return actor;
  }
  Result<UnixUser> user = LookupUserByName(owner);
  // The account that submitted it, by its uid then: a later account that took the name is
  // someone else.
  if (user.ok() && owner_uid >= 0 && user->uid != owner_uid) user = NotFound(owner);
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
