#pragma once
// Who sends the request a worker serves (docs/lab-server.md, "Who is who"): over the daemon's
// Unix socket the kernel says (SO_PEERCRED: the peer's uid and gid, its groups from the system's
// databases); over TCP the store's token stands for the daemon's own user, and the web UI's
// session cookie for whoever signed in with it. Admins (root, the daemon's own user, members of
// the config's `lab.admin_group`) may act on any experiment; other users on their own.
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/users.h"
#include "model/run.h"

namespace drover::server {

struct Caller {
  UnixUser user;
  std::string via;   // "socket", "token", "session"
  std::string from;  // "unix pid 4242" or "127.0.0.1:51234"
  bool admin = false;
};

// The caller of the request this thread serves (set by the server before routing; a default
// Caller, nobody, outside a request).
const Caller& CurrentCaller();
void SetCurrentCaller(Caller caller);

// Whether `caller` may `what` ("cancel", "read the logs of", ...) an experiment submitted by
// `owner` (its user name; "" for one from before submitters were recorded, which only admins
// may touch): PermissionDenied names the owner and what to do.
Status MayActOn(const Caller& caller, const std::string& owner, std::string_view what);
// The same, knowing the uid the owner had when they submitted (`owner_uid`, -1 when not recorded):
// a later account that took a removed user's name is not that user (its uid differs), and acts on
// none of their experiments.
Status MayActOn(const Caller& caller, const std::string& owner, int64_t owner_uid,
                std::string_view what);
// For a run or an experiment as the store read it.
Status MayActOn(const Caller& caller, const Run& run, std::string_view what);
Status MayActOn(const Caller& caller, const Experiment& experiment, std::string_view what);

// Who a run started by `actor` for `owner`'s experiment runs as: the owner, whoever asks (an
// admin's "reproduce my run" must not run a user's code with the admin's rights). `actor` itself
// when it is the owner; PermissionDenied (saying why) when the owner is no user of this machine
// any more, so their code is never run as anyone else.
Result<Caller> OnBehalfOf(const Caller& actor, const std::string& owner, int64_t owner_uid = -1);

}  // namespace drover::server
