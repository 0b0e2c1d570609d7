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

// The environment of `user`'s login, nothing of ours: HOME, USER, LOGNAME, SHELL,
// PATH=/usr/local/bin:/usr/bin:/bin, LANG (ours, or C.UTF-8).
std::vector<std::string> LoginEnvironment(const UnixUser& user);
// `argv` run as `user` (their uid, gid and groups) through setpriv(1), as a helper that dies with
// the thread that started it (RunAndCapture).
std::vector<std::string> AsUserArgv(const UnixUser& user, std::vector<std::string> argv);

// Reads and writes files with `user`'s rights on the calling thread alone, while it lives: the
// thread's file-system uid and gid and its supplementary groups become the user's (setfsuid,
// setfsgid and a raw setgroups: glibc's would change every thread). A root daemon reads a
// submitter's project folder this way (docs/lab-server.md, "Runs as their submitter"), so a user
// cannot make it read what they could not. Does nothing when `user` is null, is root, or this
// process is not root. Pause()/Resume() step back to the process's own rights in between (to
// write the store).
class ActingAs {
 public:
  explicit ActingAs(const UnixUser* user);
  ~ActingAs();
  ActingAs(const ActingAs&) = delete;
  ActingAs& operator=(const ActingAs&) = delete;
  // Whether the switch is on now; false also when it could not be made (then Status says why).
  bool active() const { return active_; }
  const Status& status() const { return status_; }
  void Pause();
  void Resume();

 private:
  const UnixUser* user_ = nullptr;
  bool active_ = false;
  Status status_;
  std::vector<unsigned> own_groups_;
  unsigned own_fsuid_ = 0, own_fsgid_ = 0;
};

}  // namespace drover
