#include "common/users.h"

#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace drover {
namespace {

constexpr size_t kBuf = 16384;
constexpr int kMaxGroups = 1024;

UnixUser FromPasswd(const passwd& pw) {
  UnixUser u;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.name = pw.pw_name ? pw.pw_name : "";
  u.home = pw.pw_dir ? pw.pw_dir : "";
  u.shell = pw.pw_shell ? pw.pw_shell : "";
  int n = kMaxGroups;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) n = std::min(n, kMaxGroups);
  n = std::max(0, std::min(n, kMaxGroups));
  for (int i = 0; i < n; ++i) u.groups.push_back(groups[static_cast<size_t>(i)]);
  if (std::find(u.groups.begin(), u.groups.end(), u.gid) == u.groups.end()) u.groups.push_back(u.gid);
  std::sort(u.groups.begin(), u.groups.end());
  u.groups.erase(std::unique(u.groups.begin(), u.groups.end()), u.groups.end());
  return u;
}

}  // namespace

UnixUser LookupUser(int64_t uid, int64_t gid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(kBuf);
  if (uid >= 0 && getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 &&
      found != nullptr) {
    return FromPasswd(pw);
  }
  UnixUser u;
  u.uid = uid;
  u.gid = gid;
  if (gid >= 0) u.groups.push_back(gid);
  return u;
}

Result<UnixUser> LookupUserByName(const std::string& name) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(kBuf);
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return NotFound("no user named '" + name + "' on this machine");
  }
  return FromPasswd(pw);
}

std::optional<int64_t> LookupGroup(const std::string& name) {
  group gr{};
  group* found = nullptr;
  std::vector<char> buf(kBuf * 4);
  if (getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return static_cast<int64_t>(gr.gr_gid);
}

std::string DisplayName(const UnixUser& user) {
  return user.name.empty() ? "uid " + std::to_string(user.uid) : user.name;
}

bool InGroup(const UnixUser& user, int64_t gid) {
  return gid >= 0 && std::find(user.groups.begin(), user.groups.end(), gid) != user.groups.end();
}

std::vector<std::string> LoginEnvironment(const UnixUser& user) {
  std::vector<std::string> env = {
      "HOME=" + (user.home.empty() ? std::string("/") : user.home),
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "SHELL=" + (user.shell.empty() ? std::string("/bin/sh") : user.shell),
  };
  if (!user.name.empty()) {
    env.push_back("USER=" + user.name);
    env.push_back("LOGNAME=" + user.name);
  }
  const char* lang = std::getenv("LANG");
  env.push_back(std::string("LANG=") + (lang != nullptr && *lang != '\0' ? lang : "C.UTF-8"));
  return env;
}

std::vector<std::string> AsUserArgv(const UnixUser& user, std::vector<std::string> argv) {
  std::string groups;
  for (int64_t g : user.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  std::vector<std::string> out = {"setpriv", "--reuid=" + std::to_string(user.uid),
                                  "--regid=" + std::to_string(user.gid),
                                  groups.empty() ? "--clear-groups" : "--groups=" + groups,
                                  // The kernel clears the parent-death signal RunAndCapture set
                                  // when the rights change: set again, the helper still dies
                                  // with its daemon.
                                  "--pdeathsig=KILL", "--"};
  out.insert(out.end(), std::make_move_iterator(argv.begin()), std::make_move_iterator(argv.end()));
  return out;
}

ActingAs::ActingAs(const UnixUser* user) {
  if (user == nullptr || user->uid <= 0 || ::geteuid() != 0) return;
  user_ = user;
  const int n = ::getgroups(0, nullptr);
  own_groups_.resize(static_cast<size_t>(std::max(n, 0)));
  if (n > 0) {
    std::vector<gid_t> g(static_cast<size_t>(n));
    const int got = ::getgroups(n, g.data());
    own_groups_.assign(g.begin(), g.begin() + std::max(got, 0));
  }
  own_fsuid_ = ::geteuid();
  own_fsgid_ = ::getegid();
  Resume();
}

ActingAs::~ActingAs() { Pause(); }

void ActingAs::Resume() {
  if (user_ == nullptr || active_) return;
  std::vector<gid_t> groups;
  for (int64_t g : user_->groups) groups.push_back(static_cast<gid_t>(g));
  // Raw syscalls: they change this thread's credentials alone.
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    status_ = ErrnoStatus("cannot take the groups of " + DisplayName(*user_));
    return;
  }
  ::syscall(SYS_setfsgid, static_cast<gid_t>(user_->gid));
  ::syscall(SYS_setfsuid, static_cast<uid_t>(user_->uid));
  // setfsuid reports nothing: read the value back.
  if (static_cast<int64_t>(::syscall(SYS_setfsuid, static_cast<uid_t>(-1))) != user_->uid) {
    status_ = Internal("cannot act as " + DisplayName(*user_));
    Pause();
    return;
  }
  active_ = true;
}

void ActingAs::Pause() {
  if (user_ == nullptr) return;
  ::syscall(SYS_setfsuid, own_fsuid_);
  ::syscall(SYS_setfsgid, own_fsgid_);
  std::vector<gid_t> groups(own_groups_.begin(), own_groups_.end());
  ::syscall(SYS_setgroups, groups.size(), groups.data());
  active_ = false;
}

}  // namespace drover
