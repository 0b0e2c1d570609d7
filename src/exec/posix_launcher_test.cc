// The launcher's own tests start real processes (sh, sleep, true) in temp folders.
#include "exec/posix_launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include "testutil/handles.h"
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "testutil/process_groups.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::GroupGoneWithin;
using testing::GroupHasLiveMember;
const auto& ReadFile = testing::ReadWholeFile;

class PosixLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-launcher-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = fs::canonical(tmpl).string();
  }
  void TearDown() override {
    for (int pgid : started_) kill(-pgid, SIGKILL);
    // Collect what the test left so no zombie outlives it.
    for (int i = 0; i < 100 && !started_.empty(); ++i) {
      for (const ProcessExit& e : launcher_.Wait(100).exits) started_.erase(e.handle.id);
    }
    fs::remove_all(dir_);
  }

  LaunchSpec Spec(std::vector<std::string> argv) {
    LaunchSpec spec;
    spec.argv = std::move(argv);
    spec.env = {std::string("PATH=") + getenv("PATH")};
    spec.cwd = dir_;
    spec.stdout_path = dir_ + "/out.txt";
    spec.stderr_path = dir_ + "/err.txt";
    return spec;
  }

  int StartOk(const LaunchSpec& spec) {
    Result<int> pid = testing::PidOf(launcher_.Start(spec));
    EXPECT_TRUE(pid.ok()) << pid.status().ToString();
    if (!pid.ok()) return -1;
    started_.insert(*pid);
    return *pid;
  }

  // Waits (up to 10 s) until `pid` is reported; other exits are kept in others_.
  ProcessExit WaitFor(int pid) {
    auto end = steady_clock::now() + milliseconds(10000);
    while (steady_clock::now() < end) {
      if (auto it = others_.find(pid); it != others_.end()) {
        ProcessExit e = it->second;
        others_.erase(it);
        return e;
      }
      WaitResult r = launcher_.Wait(1000);
      for (const ProcessExit& e : r.exits) {
        started_.erase(e.handle.id);
        others_[e.handle.id] = e;
      }
    }
    ADD_FAILURE() << "pid " << pid << " was not reported within 10 s";
    return ProcessExit{};
  }

  std::string dir_;
  PosixLauncher launcher_;
  std::set<int> started_;
  std::map<int, ProcessExit> others_;
};

TEST_F(PosixLauncherTest, AProgramFoundInPathIsRememberedForASecondAndAMissingOneNever) {
  // A sweep starts one program thousands of times: its PATH look-up (a stat per entry) is kept
  // for a second. A program installed meanwhile earlier in PATH is used from then on; one that
  // was not found is looked for again at the next start.
  fs::create_directories(dir_ + "/a");
  fs::create_directories(dir_ + "/b");
  auto install = [&](const std::string& folder) {
    std::string path = dir_ + "/" + folder + "/which-one";
    std::ofstream(path) << "#!/bin/sh\necho " << folder << "\n";
    fs::permissions(path, fs::perms::owner_all);
  };
  LaunchSpec spec = Spec({"which-one"});
  spec.env = {"PATH=" + dir_ + "/a:" + dir_ + "/b:/usr/bin:/bin"};
  EXPECT_FALSE(launcher_.Start(spec).ok());  // in neither folder yet
  install("b");
  auto run = [&] {
    int pid = StartOk(spec);
    WaitFor(pid);
    return ReadFile(spec.stdout_path);
  };
  EXPECT_EQ(run(), "b\n");  // found at once: a miss is not remembered
  install("a");
  EXPECT_EQ(run(), "b\n");  // the look-up of a moment ago
  std::this_thread::sleep_for(milliseconds(PosixLauncher::kResolvedMs + 100));
  EXPECT_EQ(run(), "a\n");
}

// A handle no process of this machine can have (a Slurm job id past pid_t, from a store that
// moved executors; 0; 1, init's) is never signalled or read: Stop and Identity do nothing, and
// adopting it reports it at the next Wait, lost (it left no record here).
TEST_F(PosixLauncherTest, AHandleNoLocalProcessCanHaveIsNeverSignalledAndIsReportedLost) {
  for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{1} << 40}) {
    const ExecHandle h(id);
    EXPECT_EQ(PosixLauncher::PidOf(h), -1) << id;
    EXPECT_EQ(launcher_.Identity(h), 0) << id;
    EXPECT_EQ(launcher_.EnvOf(h, "PATH"), std::nullopt) << id;
    launcher_.Stop(h, StopSignal::kKill);  // harmless: this test process lives on
    launcher_.Adopt(h, 12345, {"/nonexistent/drover-test.exit", ""});
    WaitResult r = launcher_.Wait(0);
    ASSERT_EQ(r.exits.size(), 1u) << id;
    EXPECT_EQ(r.exits[0].handle, h);
    EXPECT_TRUE(r.exits[0].lost);
  }
}

TEST_F(PosixLauncherTest, ReportsExitCode) {
  int pid = StartOk(Spec({"sh", "-c", "exit 3"}));
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.handle.id, pid);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.signal, 0);
}

TEST_F(PosixLauncherTest, ReportsSignal) {
  int pid = StartOk(Spec({"sh", "-c", "kill -9 $$"}));
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_EQ(e.exit_code, -1);
}

TEST_F(PosixLauncherTest, StdoutAndStderrLandInTheirFiles) {
  std::ofstream(dir_ + "/out.txt") << "old content that must be truncated\n";
  int pid = StartOk(Spec({"sh", "-c", "echo to-out; echo to-err >&2"}));
  EXPECT_EQ(WaitFor(pid).exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "to-out\n");
  EXPECT_EQ(ReadFile(dir_ + "/err.txt"), "to-err\n");
}

TEST_F(PosixLauncherTest, SameFileForBothStreamsKeepsBoth) {
  LaunchSpec spec = Spec({"sh", "-c", "echo one; echo two >&2; echo three"});
  spec.stderr_path = spec.stdout_path;
  EXPECT_EQ(WaitFor(StartOk(spec)).exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "one\ntwo\nthree\n");
}

TEST_F(PosixLauncherTest, StdinIsDevNull) {
  // cat would wait forever on an inherited terminal or pipe.
  EXPECT_EQ(WaitFor(StartOk(Spec({"cat"}))).exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "");
}

TEST_F(PosixLauncherTest, EnvAndCwdApplied) {
  fs::create_directory(dir_ + "/work");
  LaunchSpec spec = Spec({"sh", "-c", "echo \"$FOO\"; pwd; echo \"${HOME-unset}\""});
  spec.env.push_back("FOO=bar baz");
  spec.cwd = dir_ + "/work";
  EXPECT_EQ(WaitFor(StartOk(spec)).exit_code, 0);
  // The environment is exactly the spec's: HOME is not inherited.
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "bar baz\n" + dir_ + "/work\nunset\n");
}

TEST_F(PosixLauncherTest, ProgramFoundInTheChildsPath) {
  fs::create_directory(dir_ + "/bin");
  std::ofstream(dir_ + "/bin/drover-test-tool") << "#!/bin/sh\necho tool ran\n";
  chmod((dir_ + "/bin/drover-test-tool").c_str(), 0755);
  LaunchSpec spec = Spec({"drover-test-tool"});
  spec.env = {"PATH=" + dir_ + "/bin:/usr/bin:/bin"};
  EXPECT_EQ(WaitFor(StartOk(spec)).exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "tool ran\n");
}

TEST_F(PosixLauncherTest, RelativeProgramResolvedInCwd) {
  std::ofstream(dir_ + "/run.sh") << "#!/bin/sh\nexit 7\n";
  chmod((dir_ + "/run.sh").c_str(), 0755);
  EXPECT_EQ(WaitFor(StartOk(Spec({"./run.sh"}))).exit_code, 7);
}

TEST_F(PosixLauncherTest, MissingProgramIsAClearError) {
  Result<int> r = testing::PidOf(launcher_.Start(Spec({"no-such-program-drover"})));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "cannot start 'no-such-program-drover': No such file or directory; check the "
            "command's program name and PATH");
  Result<int> r2 = testing::PidOf(launcher_.Start(Spec({"./missing.sh"})));
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().message(),
            "cannot start './missing.sh': No such file or directory; check the command's "
            "program name and PATH");
}

TEST_F(PosixLauncherTest, MissingCwdIsAClearError) {
  LaunchSpec spec = Spec({"true"});
  spec.cwd = dir_ + "/nope";
  Result<int> r = testing::PidOf(launcher_.Start(spec));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot start 'true': working directory '" + dir_ +
                                      "/nope': No such file or directory; check the run's "
                                      "workdir");
}

TEST_F(PosixLauncherTest, UnwritableOutputIsAClearError) {
  LaunchSpec spec = Spec({"true"});
  spec.stdout_path = dir_ + "/no/such/dir/out.txt";
  Result<int> r = testing::PidOf(launcher_.Start(spec));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no/such/dir/out.txt"), std::string::npos);
}

TEST_F(PosixLauncherTest, ChildLeadsItsOwnGroupWithCleanSignals) {
  // Neither our blocked mask nor our ignored signals may reach the child, nor any fd of ours
  // beyond 0-2.
  int leak = open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  ASSERT_GE(leak, 3);
  auto old_pipe = signal(SIGPIPE, SIG_IGN);
  auto old_hup = signal(SIGHUP, SIG_IGN);
  int pid = StartOk(Spec({"sh", "-c",
                          "grep -E '^(SigBlk|SigIgn)' /proc/self/status; echo FDS; ls "
                          "/proc/self/fd"}));
  signal(SIGPIPE, old_pipe);
  signal(SIGHUP, old_hup);
  close(leak);
  EXPECT_EQ(getpgid(pid), pid);
  EXPECT_EQ(WaitFor(pid).exit_code, 0);
  std::string out = ReadFile(dir_ + "/out.txt");
  auto mask = [&](const std::string& key) {
    size_t at = out.find(key + ":\t");
    return at == std::string::npos ? ~0ULL
                                   : std::stoull(out.substr(at + key.size() + 2), nullptr, 16);
  };
  EXPECT_EQ(mask("SigBlk"), 0u) << out;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP}) {
    EXPECT_EQ(mask("SigIgn") & (1ULL << (sig - 1)), 0u) << "signal " << sig << "\n" << out;
  }
  // ls sees 0, 1, 2 and its own directory fd (3), nothing more.
  EXPECT_EQ(out.substr(out.find("FDS\n")), "FDS\n0\n1\n2\n3\n") << out;
}

TEST_F(PosixLauncherTest, SignalGroupKillsTheWholeGroup) {
  int pid = StartOk(Spec({"sh", "-c", "sleep 100 & sleep 100 & wait"}));
  // Let the shell start its children (they must be in the group for the test to mean much).
  auto end = steady_clock::now() + milliseconds(5000);
  while (ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children")
                 .find(' ') == std::string::npos &&
         steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  launcher_.SignalGroup(pid, SIGTERM);
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, SIGTERM);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
  launcher_.SignalGroup(pid, SIGTERM);  // harmless once it has ended
}

TEST_F(PosixLauncherTest, TimeoutThenTerminate) {
  int pid = StartOk(Spec({"sleep", "100"}));
  auto t0 = steady_clock::now();
  WaitResult r = launcher_.Wait(100);
  EXPECT_TRUE(r.exits.empty());
  EXPECT_EQ(r.interrupt_signal, 0);
  EXPECT_GE(steady_clock::now() - t0, milliseconds(95));
  launcher_.SignalGroup(pid, SIGTERM);
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, 15);
  EXPECT_EQ(e.exit_code, -1);
}

TEST_F(PosixLauncherTest, NoOrphansAfterTheLeaderExits) {
  int pid = StartOk(Spec({"sh", "-c", "sleep 100 & echo $! > bg.pid; exit 0"}));
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.exit_code, 0);
  int bg = std::atoi(ReadFile(dir_ + "/bg.pid").c_str());
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
}

TEST_F(PosixLauncherTest, SigtermIgnoringChildNeedsSigkill) {
  int pid = StartOk(Spec({"sh", "-c", "trap '' TERM; echo ready; sleep 100; sleep 100"}));
  auto end = steady_clock::now() + milliseconds(5000);
  while (ReadFile(dir_ + "/out.txt").empty() && steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  launcher_.SignalGroup(pid, SIGTERM);
  EXPECT_TRUE(launcher_.Wait(200).exits.empty());
  launcher_.SignalGroup(pid, SIGKILL);
  EXPECT_EQ(WaitFor(pid).signal, SIGKILL);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
}

TEST_F(PosixLauncherTest, InterruptEndsTheWait) {
  int pid = StartOk(Spec({"sleep", "100"}));
  std::thread sender([] {
    std::this_thread::sleep_for(milliseconds(50));
    kill(getpid(), SIGINT);
  });
  WaitResult r = launcher_.Wait(10000);
  sender.join();
  EXPECT_EQ(r.interrupt_signal, SIGINT);
  EXPECT_TRUE(r.exits.empty());
  // The run did not see the Ctrl-C: it is in its own group.
  EXPECT_EQ(kill(pid, 0), 0);
  kill(getpid(), SIGTERM);
  EXPECT_EQ(launcher_.Wait(1000).interrupt_signal, SIGTERM);
  // A closed terminal (SIGHUP) stops drover's runs cleanly instead of killing drover.
  kill(getpid(), SIGHUP);
  EXPECT_EQ(launcher_.Wait(1000).interrupt_signal, SIGHUP);
}

TEST_F(PosixLauncherTest, ManyShortProcessesAllReaped) {
  std::set<int> pids;
  for (int i = 0; i < 200; ++i) pids.insert(StartOk(Spec({"true"})));
  ASSERT_EQ(pids.size(), 200u);
  int collected = 0;
  auto end = steady_clock::now() + milliseconds(30000);
  while (collected < 200 && steady_clock::now() < end) {
    for (const ProcessExit& e : launcher_.Wait(1000).exits) {
      EXPECT_EQ(pids.count(e.handle.id), 1u);
      EXPECT_EQ(e.exit_code, 0);
      started_.erase(e.handle.id);
      ++collected;
    }
  }
  EXPECT_EQ(collected, 200);
}

TEST_F(PosixLauncherTest, OtherChildrenAreNotReaped) {
  // A helper the process runs itself (as snapshots run git) must stay ours to wait for.
  pid_t helper = fork();
  if (helper == 0) _exit(5);
  int pid = StartOk(Spec({"true"}));
  EXPECT_EQ(WaitFor(pid).exit_code, 0);
  int status = 0;
  ASSERT_EQ(waitpid(helper, &status, 0), helper);
  EXPECT_EQ(WEXITSTATUS(status), 5);
}


TEST_F(PosixLauncherTest, WakeFromAnotherThreadEndsTheWaitAtOnce) {
  int pid = StartOk(Spec({"sleep", "5"}));
  std::thread waker([this] {
    std::this_thread::sleep_for(milliseconds(50));
    launcher_.Wake();
  });
  auto t0 = steady_clock::now();
  WaitResult r = launcher_.Wait(10'000);
  auto took = steady_clock::now() - t0;
  waker.join();
  EXPECT_TRUE(r.exits.empty());
  EXPECT_EQ(r.interrupt_signal, 0);
  EXPECT_LT(took, milliseconds(2000));
  // A Wake() with nobody waiting makes the next Wait() return at once, once.
  launcher_.Wake();
  t0 = steady_clock::now();
  EXPECT_TRUE(launcher_.Wait(10'000).exits.empty());
  EXPECT_LT(steady_clock::now() - t0, milliseconds(2000));
  t0 = steady_clock::now();
  EXPECT_TRUE(launcher_.Wait(100).exits.empty());
  EXPECT_GE(steady_clock::now() - t0, milliseconds(90));
  launcher_.SignalGroup(pid, SIGKILL);
}

TEST_F(PosixLauncherTest, ARunGivenAUserRunsWithItsIdsAndGroupsOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
  fs::permissions(dir_, fs::perms::all);
  LaunchSpec spec = Spec({"sh", "-c", "id -u; id -g; id -G; cat /proc/self/status | grep ^CapEff"});
  spec.run_as.uid = 65534;
  spec.run_as.gid = 65534;
  spec.run_as.groups = {65534, 100};
  ProcessExit e = WaitFor(StartOk(spec));
  EXPECT_EQ(e.exit_code, 0);
  std::ifstream in(dir_ + "/out.txt");
  std::stringstream out;
  out << in.rdbuf();
  // Its uid, gid and exactly the groups given (none of root's), and no capability left.
  EXPECT_EQ(out.str(), "65534\n65534\n65534 100\nCapEff:\t0000000000000000\n");
}

TEST_F(PosixLauncherTest, ARunThatCannotEnterItsFolderAsItsUserFailsToStart) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
  fs::create_directories(dir_ + "/private");
  fs::permissions(dir_ + "/private", fs::perms::owner_all);
  fs::permissions(dir_, fs::perms::all);
  LaunchSpec spec = Spec({"true"});
  spec.cwd = dir_ + "/private";
  spec.run_as.uid = 65534;
  spec.run_as.gid = 65534;
  Result<int> pid = testing::PidOf(launcher_.Start(spec));
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("entering the working directory"), std::string::npos)
      << pid.status().message();
}
}  // namespace
}  // namespace drover
