#pragma once
// A lab's shared daemon with real users (root only: the test makes them with useradd): a service
// user, two researchers in two teams and an admin; the daemon is root's (each run as its
// submitter) or, with root_daemon_ false, the service user's. Used by the lab and hardening e2e
// tests (docs/lab-server.md, docs/security.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"

namespace drover::testing {

namespace shared_fs = std::filesystem;

// Users made for the test (root only): a service user that runs the shared daemon, two
// researchers and an admin in the admin group.
inline constexpr const char* kSvc = "drover-t-svc";
inline constexpr const char* kAlice = "drover-t-alice";
inline constexpr const char* kBob = "drover-t-bob";
inline constexpr const char* kAdmin = "drover-t-adm";
inline constexpr const char* kAdmins = "drover-t-admins";
inline constexpr const char* kVision = "drover-t-vision";  // Alice's team
inline constexpr const char* kNlp = "drover-t-nlp";        // Bob's

inline int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

class SharedDaemonFixture : public CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (::geteuid() != 0 || Sh("command -v useradd setpriv >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "needs root, useradd and setpriv to make the test's users";
    }
    for (const char* u : {kSvc, kAlice, kBob, kAdmin}) {
      Sh(std::string("id ") + u + " >/dev/null 2>&1 || useradd -M -s /bin/sh " + u);
    }
    Sh(std::string("getent group ") + kAdmins + " >/dev/null || groupadd " + kAdmins);
    Sh(std::string("usermod -aG ") + kAdmins + " " + kAdmin);
    for (const char* team : {kVision, kNlp}) {
      Sh(std::string("getent group ") + team + " >/dev/null || groupadd " + team);
    }
    Sh(std::string("usermod -aG ") + kVision + " " + kAlice);
    Sh(std::string("usermod -aG ") + kNlp + " " + kBob);
    shared_fs::permissions(dir_, shared_fs::perms::owner_all | shared_fs::perms::group_read | shared_fs::perms::group_exec |
                              shared_fs::perms::others_read | shared_fs::perms::others_exec);
    store_ = (dir_ / "shared-store").string();
    shared_fs::create_directories(store_);
    if (!root_daemon_) Sh("chown " + std::string(kSvc) + ": " + store_);
    for (const char* u : {kAlice, kBob}) {
      const shared_fs::path home = dir_ / u;
      shared_fs::create_directories(home);
      Write(std::string(u) + "/long.yaml",
            "name: long\ncommand: sh -c 'sleep 60' --key=cmd-" + std::string(u).substr(9) +
                "-secret\nenv: {API_KEY: sk-" + std::string(u).substr(9) + "-secret}\n");
      Write(std::string(u) + "/who.yaml", "name: who\ncommand: sh -c \"id -un > " +
                                              (dir_ / "out" / "ran-as.txt").string() + "\"\n");
      Sh("chown -R " + std::string(u) + ": " + home.string() + " && chmod -R a+rX " + home.string());
    }
    shared_fs::create_directories(dir_ / "out");
    shared_fs::permissions(dir_ / "out", shared_fs::perms::all);
    Write("config.yaml", std::string("lab: {admin_group: ") + kAdmins + ", teams: [" + kVision +
                             ", " + kNlp + "]}\n" + "scheduler: {grace: 1s, groups: {" + kVision +
                             ": {quota: 1}, " + kNlp + ": {quota: 1}}}\n");
    for (const char* u : {kAlice, kBob}) {
      Write(std::string(u) + "/flood.yaml",
            "name: flood\ncommand: sleep 60\nparams: {i: [1, 2, 3, 4]}\nresources: {gpus: 1}\n"
            "preemptible: true\n");  // they may be stopped: only such runs borrow past a quota
      Write(std::string(u) + "/forged.yaml",
            std::string("name: forged\ncommand: sleep 1\ngroup: ") + kNlp + "\n");
      Sh("chown -R " + std::string(u) + ": " + (dir_ / u).string() + " && chmod -R a+rX " +
         (dir_ / u).string());
    }
    StartDaemon();
  }
  void TearDown() override {
    if (daemon_ > 0) {
      ::kill(daemon_, SIGTERM);
      WaitExit(daemon_);
    }
    KillRunsOfThisStore();
    CliFixture::TearDown();
  }

  // Ends what this test's runs left running (`sleep 60`s), and nothing of another test's: tests
  // run side by side as the same users, and `pkill -u alice sleep` killed another test's run in
  // its `sleep 1` (its run failed, exit 1). A run's processes carry DROVER_STORE=<its store>.
  void KillRunsOfThisStore() {
    const std::string mark = "DROVER_STORE=" + store_;
    std::error_code ec;
    for (const auto& entry : shared_fs::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string env = ReadFile(entry.path().string() + "/environ");
      size_t at = 0;
      while (at < env.size()) {
        const size_t end = env.find('\0', at);
        const std::string var = env.substr(at, end == std::string::npos ? end : end - at);
        if (var == mark) {
          ::kill(static_cast<pid_t>(std::stol(name)), SIGKILL);
          break;
        }
        if (end == std::string::npos) break;
        at = end + 1;
      }
    }
  }

  // `drover ARGS` as `user`, in `cwd` (setpriv: the user's uid, gid and groups).
  CliResult As(const std::string& user, std::vector<std::string> args,
                        const std::string& cwd = "") {
    static int n = 0;
    const std::string base = (dir_ / ("as-" + std::to_string(n++))).string();
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + user, "--regid=" + user,
                                     "--init-groups", DroverBin(), "--store", store_};
    argv.insert(argv.end(), args.begin(), args.end());
    CliResult r;
    r.exit_code = WaitExit(Spawn(argv, base + ".out", base + ".err", cwd));
    r.out = ReadFile(base + ".out");
    r.err = ReadFile(base + ".err");
    return r;
  }

  pid_t Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err,
              const std::string& cwd) {
    std::vector<char*> cargv;
    std::vector<std::string> copy = args;
    for (auto& a : copy) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    pid_t pid = -1;
    posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
  }

  // The lab's daemon: root's (the system service: each run as its submitter), or with
  // root_daemon_ false a service user's (every run as that user).
  void StartDaemon() {
    shared_fs::remove(store_ + "/daemon.json");
    std::vector<std::string> argv = {DroverBin(), "--store", store_, "serve",
                                     "--listen", "127.0.0.1:0", "--shared", "--config",
                                     (dir_ / "config.yaml").string(), "--fake-gpus", "2x16GiB",
                                     "--gpu-leases", "off"};
    if (!root_daemon_) {
      argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=" + std::string(kSvc),
                                 "--regid=" + std::string(kSvc), "--init-groups"});
    }
    // Something of the daemon's own environment that its users' runs must not see.
    ::setenv("DROVER_TEST_DAEMONS_OWN", "not-for-runs", 1);
    daemon_ = Spawn(argv, (dir_ / "serve.out").string(), (dir_ / "serve.err").string(),
                    dir_.string());
    ::unsetenv("DROVER_TEST_DAEMONS_OWN");
    for (int i = 0; i < 600 && !shared_fs::exists(store_ + "/daemon.json"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(shared_fs::exists(store_ + "/daemon.json")) << ReadFile((dir_ / "serve.err").string());
  }

  std::string Home(const char* user) { return (dir_ / user).string(); }

  // Opens `n` event streams at once as `user` and, holding them, one as `other`: the HTTP status
  // of each ("200 200 ... | 200"). One root process switches its effective ids around each
  // connect (the kernel names a socket's peer by the effective ids at connect time).
  std::string StreamsAs(const std::string& user, int n, const std::string& other) {
    const std::string base = (dir_ / ("streams-" + user)).string();
    const std::string script =
        "import os,pwd,socket,sys\n"
        "def open_as(name):\n"
        "  pw=pwd.getpwnam(name); os.setegid(pw.pw_gid); os.seteuid(pw.pw_uid)\n"
        "  s=socket.socket(socket.AF_UNIX); s.connect('daemon.sock')\n"
        "  os.seteuid(0); os.setegid(0)\n"
        "  s.sendall(b'GET /api/v1/events HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "  line=b''\n"
        "  while not line.endswith(b'\\r\\n'): line+=s.recv(1)\n"
        "  return s, line.split()[1].decode()\n"
        "held=[open_as(sys.argv[1]) for _ in range(int(sys.argv[2]))]\n"
        "last=open_as(sys.argv[3])\n"
        "print(' '.join(c for _,c in held)+' | '+last[1])\n";
    WaitExit(Spawn({"/usr/bin/python3", "-c", script, user, std::to_string(n), other},
                            base + ".out", base + ".err", store_));
    return ReadFile(base + ".out") + ReadFile(base + ".err");
  }

  // A raw GET over the daemon's socket as `user` (Python's socket module, from the store folder:
  // the socket's full path is longer than AF_UNIX takes), the whole reply.
  std::string RawGetAs(const std::string& user, const std::string& target) {
    return RawRequestAs(user, "GET", target);
  }
  // Any request as `user` over the daemon's socket (a JSON body when given): the whole reply.
  std::string RawRequestAs(const std::string& user, const std::string& method,
                           const std::string& target, const std::string& body = "") {
    static int n = 0;
    const std::string base = (dir_ / ("raw-" + std::to_string(n++))).string();
    const std::string script =
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
        "b=sys.argv[4].encode()\n"
        "s.sendall((sys.argv[2]+' '+sys.argv[3]+' HTTP/1.1\\r\\nHost: x\\r\\nConnection: "
        "close\\r\\nContent-Type: application/json\\r\\nContent-Length: '+str(len(b))+"
        "'\\r\\n\\r\\n').encode()+b)\n"
        "out=b''\nwhile True:\n  x=s.recv(65536)\n  if not x: break\n  out+=x\n"
        "sys.stdout.write(out.decode('utf-8','replace'))\n";
    WaitExit(Spawn({"/usr/bin/setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups",
                    "/usr/bin/python3", "-c", script, "daemon.sock", method, target, body},
                   base + ".out", base + ".err", store_));
    return ReadFile(base + ".out") + ReadFile(base + ".err");
  }
  pid_t daemon_ = -1;
  bool root_daemon_ = true;
};

}  // namespace drover::testing
