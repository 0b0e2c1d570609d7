// Runs under the shim (`drover __shim`) and adoption of shims an engine left behind: real
// processes, with the built drover as the shim ($DROVER_BIN, set by CTest; export it when running
// exec_test by hand).
#include "exec/shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include "testutil/handles.h"
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "exec/posix_launcher.h"
#include "testutil/process_groups.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::GroupGoneWithin;
using testing::GroupHasLiveMember;
const auto& ReadFile = testing::ReadWholeFile;

int64_t WallMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The pids of `pid`'s children ("" while it has none).
std::string ChildrenOf(int pid) {
  return ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
}

// Waits until the shim `pid` has started its run (so it has set up its signal dispositions).
void WaitUntilRunning(int pid) {
  auto end = steady_clock::now() + milliseconds(5000);
  while (ChildrenOf(pid).empty() && steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_FALSE(ChildrenOf(pid).empty()) << "shim " << pid << " did not start its run";
}

// The built drover, as an absolute path (it is spawned after the chdir into the run's cwd).
std::string DroverBin() {
  const char* bin = std::getenv("DROVER_BIN");
  std::string path = bin && *bin ? bin : "./drover";
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.string();
}

// Every test runs twice: with the shim as a fork() of the launcher (what drover does when it has
// no supervisor) and with the built drover exec'd in `__shim` mode.
enum class ShimMode { kFork, kExec };

class ShimTest : public ::testing::TestWithParam<ShimMode> {
 protected:
  void SetUp() override {
    bin_ = DroverBin();
    ASSERT_EQ(access(bin_.c_str(), X_OK), 0)
        << "the shim tests need the built drover: set DROVER_BIN (CTest does), tried " << bin_;
    if (GetParam() == ShimMode::kExec) launcher_.SetShimBinary(bin_);
    std::string tmpl = (fs::temp_directory_path() / "drover-shim-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = fs::canonical(tmpl).string();
    exit_path_ = dir_ + "/attempt-1.exit";
  }
  void TearDown() override {
    for (int pgid : started_) kill(-pgid, SIGKILL);
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
    spec.exit_path = exit_path_;
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
      for (const ProcessExit& e : launcher_.Wait(1000).exits) {
        started_.erase(e.handle.id);
        others_[e.handle.id] = e;
      }
    }
    ADD_FAILURE() << "pid " << pid << " was not reported within 10 s";
    return ProcessExit{};
  }

  // Starts `spec` from a child process that exits right after (as an engine killed with -9
  // would), so the shim is not our child. Returns the shim's pid and start ticks.
  std::pair<int, int64_t> StartInDyingEngine(const LaunchSpec& spec) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_t engine = fork();
    if (engine == 0) {
      close(fds[0]);
      int64_t msg[2] = {-1, 0};
      {
        PosixLauncher a;
        a.SetShimBinary(bin_);
        Result<int> pid = testing::PidOf(a.Start(spec));
        if (pid.ok()) msg[0] = *pid, msg[1] = a.StartTicks(*pid);
      }
      ssize_t ignored = write(fds[1], msg, sizeof msg);
      (void)ignored;
      _exit(0);
    }
    close(fds[1]);
    int64_t msg[2] = {-1, 0};
    EXPECT_EQ(read(fds[0], msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
    close(fds[0]);
    int status = 0;
    waitpid(engine, &status, 0);
    EXPECT_GT(msg[0], 0);
    EXPECT_GT(msg[1], 0);
    return {static_cast<int>(msg[0]), msg[1]};
  }

  std::string bin_;
  std::string dir_;
  std::string exit_path_;
  PosixLauncher launcher_;
  std::set<int> started_;
  std::map<int, ProcessExit> others_;
};

TEST_P(ShimTest, ExitCodeComesFromTheExitFileNotTheShimsSigkill) {
  int64_t before = WallMs();
  int pid = StartOk(Spec({"sh", "-c", "exit 3"}));
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.handle.id, pid);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.signal, 0);
  EXPECT_FALSE(e.lost);
  EXPECT_GE(e.ended_ms, before);
  EXPECT_LE(e.ended_ms, WallMs());
  // The shim's pid and start time first, then the run's end.
  std::string file = ReadFile(exit_path_);
  EXPECT_TRUE(std::regex_match(
      file, std::regex(std::to_string(pid) +
                       R"( [1-9]\d*\n\{"exit_code": 3, "signal": 0, "ended_ms": \d+\}\n)")))
      << file;
  auto start = ReadShimStart(exit_path_);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->pid, pid);
  EXPECT_GT(start->start_ticks, 0);
}

TEST_P(ShimTest, SignalThatKilledTheRun) {
  int pid = StartOk(Spec({"sh", "-c", "kill -USR1 $$"}));
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, SIGUSR1);
  EXPECT_EQ(e.exit_code, -1);
  EXPECT_NE(ReadFile(exit_path_).find("{\"exit_code\": -1, \"signal\": 10, "), std::string::npos);
}

TEST_P(ShimTest, SigtermToTheGroupKillsTheRunAndTheShimRecordsIt) {
  int pid = StartOk(Spec({"sh", "-c", "sleep 100 & sleep 100; wait"}));
  WaitUntilRunning(pid);
  // The shim leads the group and ignores what the engine sends the group; the run does not.
  EXPECT_EQ(getpgid(pid), pid);
  std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("SigIgn:\t");
  ASSERT_NE(at, std::string::npos);
  uint64_t ignored = std::stoull(status.substr(at + 8), nullptr, 16);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    EXPECT_NE(ignored & (1ULL << (sig - 1)), 0u) << "signal " << sig;
  }
  launcher_.SignalGroup(pid, SIGTERM);
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, SIGTERM);
  EXPECT_EQ(e.exit_code, -1);
  EXPECT_TRUE(fs::exists(exit_path_));
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
}

TEST_P(ShimTest, SigkillBeforeTheEndRecordsNoEndAndWaitpidTells) {
  // A file left from an earlier attempt at the same path is not taken for this one.
  std::ofstream(exit_path_) << "1 1\n{\"exit_code\": 0, \"signal\": 0, \"ended_ms\": 1}\n";
  int pid = StartOk(Spec({"sh", "-c", "trap '' TERM; echo ready; sleep 100; sleep 100"}));
  EXPECT_EQ(ReadExitFile(exit_path_).status().code(), Code::kNotFound);
  auto end = steady_clock::now() + milliseconds(5000);
  while (ReadFile(dir_ + "/out.txt").empty() && steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  launcher_.SignalGroup(pid, SIGTERM);
  EXPECT_TRUE(launcher_.Wait(200).exits.empty());  // the run ignores it, the shim too
  launcher_.SignalGroup(pid, SIGKILL);
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_EQ(e.exit_code, -1);
  // Only the shim's start line: no end was recorded.
  EXPECT_EQ(ReadExitFile(exit_path_).status().code(), Code::kNotFound);
  EXPECT_EQ(ReadShimStart(exit_path_)->pid, pid);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
}

TEST_P(ShimTest, OutputEnvCwdAndStdinAsWithoutAShim) {
  fs::create_directory(dir_ + "/work");
  LaunchSpec spec = Spec({"sh", "-c", "echo to-out; echo to-err >&2; echo \"$FOO\"; pwd; cat"});
  spec.env.push_back("FOO=bar baz");
  spec.cwd = dir_ + "/work";
  std::ofstream(dir_ + "/out.txt") << "old content that must be truncated\n";
  EXPECT_EQ(WaitFor(StartOk(spec)).exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "to-out\nbar baz\n" + dir_ + "/work\n");
  EXPECT_EQ(ReadFile(dir_ + "/err.txt"), "to-err\n");
}

TEST_P(ShimTest, RunIsInTheShimsGroupWithCleanSignalsAndNoExtraFds) {
  int leak = open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  ASSERT_GE(leak, 3);
  auto old_pipe = signal(SIGPIPE, SIG_IGN);
  int pid = StartOk(Spec({"sh", "-c",
                          "cat /proc/$$/stat; grep -E '^(SigBlk|SigIgn)' /proc/self/status; echo "
                          "FDS; ls /proc/self/fd"}));
  signal(SIGPIPE, old_pipe);
  close(leak);
  EXPECT_EQ(WaitFor(pid).exit_code, 0);
  std::string out = ReadFile(dir_ + "/out.txt");
  // /proc/<sh>/stat: "pid (sh) state ppid pgrp ...": the shim is its parent and its group.
  int run = 0, ppid = 0, pgrp = 0;
  char state = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%d (sh) %c %d %d", &run, &state, &ppid, &pgrp), 4) << out;
  EXPECT_NE(run, pid);
  EXPECT_EQ(ppid, pid);
  EXPECT_EQ(pgrp, pid);
  auto mask = [&](const std::string& key) {
    size_t at = out.find(key + ":\t");
    return at == std::string::npos ? ~0ULL
                                   : std::stoull(out.substr(at + key.size() + 2), nullptr, 16);
  };
  EXPECT_EQ(mask("SigBlk"), 0u) << out;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT}) {
    EXPECT_EQ(mask("SigIgn") & (1ULL << (sig - 1)), 0u) << "signal " << sig << "\n" << out;
  }
  EXPECT_EQ(out.substr(out.find("FDS\n")), "FDS\n0\n1\n2\n3\n") << out;
}

TEST_P(ShimTest, NoOrphansAfterTheRunExits) {
  int pid = StartOk(Spec({"sh", "-c", "sleep 100 & echo $! > bg.pid; exit 0"}));
  EXPECT_EQ(WaitFor(pid).exit_code, 0);
  int bg = std::atoi(ReadFile(dir_ + "/bg.pid").c_str());
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
}

TEST_P(ShimTest, MissingProgramIsStillRefusedAtStart) {
  Result<int> r = testing::PidOf(launcher_.Start(Spec({"no-such-program-drover"})));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "cannot start 'no-such-program-drover': No such file or directory; check the "
            "command's program name and PATH");
}

TEST_P(ShimTest, ShimThatCannotStartTheProgramWrites127AndTheError) {
  // The shim run by hand (as a plain run, no exit_path): it does its own PATH lookup.
  LaunchSpec spec = Spec({bin_, "__shim", exit_path_, "--", "no-such-program-drover", "x"});
  spec.exit_path.clear();
  ProcessExit shim = WaitFor(StartOk(spec));
  EXPECT_EQ(shim.signal, SIGKILL);  // it killed its group, itself included
  Result<ProcessExit> e = ReadExitFile(exit_path_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->exit_code, 127);
  EXPECT_EQ(e->signal, 0);
  EXPECT_GT(e->ended_ms, 0);
  EXPECT_EQ(e->error, "cannot start 'no-such-program-drover': No such file or directory");
  EXPECT_EQ(ReadFile(dir_ + "/err.txt"),
            "cannot start 'no-such-program-drover': No such file or directory\n");
  EXPECT_TRUE(std::regex_match(
      ReadFile(exit_path_),
      std::regex(
          R"(\d+ \d+\n\{"exit_code": 127, "signal": 0, "ended_ms": \d+, "error": "cannot start )"
          R"('no-such-program-drover': No such file or directory"\}\n)")));
}

TEST_P(ShimTest, ExecFailureInsideTheShimIsReportedAs127) {
  // Executable but not a program (no #! line): the pre-check passes, exec fails in the shim.
  std::ofstream(dir_ + "/junk") << "echo \"quote\"\n";
  chmod((dir_ + "/junk").c_str(), 0755);
  ProcessExit e = WaitFor(StartOk(Spec({"./junk"})));
  EXPECT_EQ(e.exit_code, 127);
  EXPECT_EQ(e.signal, 0);
  EXPECT_EQ(e.error, "cannot start './junk': Exec format error");
  EXPECT_EQ(ReadFile(dir_ + "/err.txt"), "cannot start './junk': Exec format error\n");
}

TEST_P(ShimTest, UnwritableExitFileMirrorsTheRunsStatus) {
  LaunchSpec spec = Spec({"sh", "-c", "exit 4"});
  spec.exit_path = dir_ + "/no/such/dir/attempt.exit";
  EXPECT_EQ(WaitFor(StartOk(spec)).exit_code, 4);
  EXPECT_NE(ReadFile(dir_ + "/err.txt").find("drover shim: cannot write exit file"),
            std::string::npos);
  spec.argv = {"sh", "-c", "kill -USR1 $$"};
  ProcessExit e = WaitFor(StartOk(spec));
  EXPECT_EQ(e.signal, SIGUSR1);
  EXPECT_EQ(e.exit_code, -1);
}

TEST_P(ShimTest, ShimUsageError) {
  LaunchSpec spec = Spec({bin_, "__shim", exit_path_, "true"});
  spec.exit_path.clear();
  EXPECT_EQ(WaitFor(StartOk(spec)).exit_code, 2);
  EXPECT_NE(ReadFile(dir_ + "/err.txt").find("usage: drover __shim"), std::string::npos);
  EXPECT_FALSE(fs::exists(exit_path_));
}

TEST_P(ShimTest, ManyShortRunsAllReported) {
  std::map<int, std::string> pids;
  for (int i = 0; i < 100; ++i) {
    LaunchSpec spec = Spec({"sh", "-c", "exit " + std::to_string(i % 7)});
    spec.exit_path = dir_ + "/exit-" + std::to_string(i);
    int pid = StartOk(spec);
    pids[pid] = std::to_string(i % 7);
  }
  ASSERT_EQ(pids.size(), 100u);
  int collected = 0;
  auto end = steady_clock::now() + milliseconds(30000);
  while (collected < 100 && steady_clock::now() < end) {
    for (const ProcessExit& e : launcher_.Wait(1000).exits) {
      ASSERT_EQ(pids.count(e.handle.id), 1u);
      EXPECT_EQ(std::to_string(e.exit_code), pids[e.handle.id]);
      EXPECT_EQ(e.signal, 0);
      started_.erase(e.handle.id);
      ++collected;
    }
  }
  EXPECT_EQ(collected, 100);
}

TEST_P(ShimTest, StartTicks) {
  int64_t self = launcher_.StartTicks(getpid());
  EXPECT_GT(self, 0);
  EXPECT_EQ(launcher_.StartTicks(getpid()), self);
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(launcher_.StartTicks(child), 0);  // reaped: no such process
  EXPECT_EQ(launcher_.StartTicks(0), 0);
  EXPECT_EQ(launcher_.StartTicks(-1), 0);
}

TEST_P(ShimTest, ReadExitFileErrors) {
  Result<ProcessExit> missing = ReadExitFile(dir_ + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  // A line cut short (the shim died writing it) records no end.
  std::ofstream(dir_ + "/torn") << "12 34\n{\"exit_code\": 1";
  EXPECT_EQ(ReadExitFile(dir_ + "/torn").status().code(), Code::kNotFound);
  std::ofstream(dir_ + "/bad") << "12 34\n{\"exit\": 1}\n";
  Result<ProcessExit> bad = ReadExitFile(dir_ + "/bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a shim's exit record"), std::string::npos);
  std::ofstream(dir_ + "/nostart") << "hello\n";
  EXPECT_EQ(ReadShimStart(dir_ + "/nostart").status().code(), Code::kInternal);
  std::ofstream(dir_ + "/endonly") << "{\"exit_code\": 0, \"signal\": 0}\n";
  EXPECT_EQ(ReadShimStart(dir_ + "/endonly").status().code(), Code::kNotFound);
  std::ofstream(dir_ + "/empty") << "";
  EXPECT_EQ(ReadShimStart(dir_ + "/empty").status().code(), Code::kNotFound);
}

TEST_P(ShimTest, AdoptedShimIsReportedWhenItsRunEnds) {
  auto [pid, ticks] =
      StartInDyingEngine(Spec({"sh", "-c", "while [ ! -e go ]; do sleep 0.01; done; exit 5"}));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(launcher_.StartTicks(pid), ticks);
  launcher_.Adopt(ExecHandle(pid), ticks, {exit_path_});
  EXPECT_TRUE(launcher_.Wait(300).exits.empty());  // still running
  std::ofstream(dir_ + "/go") << "";
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.handle.id, pid);
  EXPECT_EQ(e.exit_code, 5);
  EXPECT_EQ(e.signal, 0);
  EXPECT_FALSE(e.lost);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
  EXPECT_TRUE(launcher_.Wait(0).exits.empty());  // reported once
}

TEST_P(ShimTest, AdoptedGroupCanBeSignalled) {
  auto [pid, ticks] = StartInDyingEngine(Spec({"sleep", "100"}));
  ASSERT_GT(pid, 0);
  WaitUntilRunning(pid);
  launcher_.Adopt(ExecHandle(pid), ticks, {exit_path_});
  launcher_.SignalGroup(pid, SIGTERM);
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.signal, SIGTERM);
  EXPECT_FALSE(e.lost);
  EXPECT_TRUE(GroupGoneWithin(pid, milliseconds(5000)));
}

TEST_P(ShimTest, AdoptedShimKilledBeforeTheEndIsLost) {
  auto [pid, ticks] = StartInDyingEngine(Spec({"sleep", "100"}));
  ASSERT_GT(pid, 0);
  WaitUntilRunning(pid);
  launcher_.Adopt(ExecHandle(pid), ticks, {exit_path_});
  launcher_.SignalGroup(pid, SIGKILL);
  ProcessExit e = WaitFor(pid);
  EXPECT_TRUE(e.lost);
  EXPECT_EQ(e.exit_code, -1);
  EXPECT_EQ(e.signal, 0);
}

TEST_P(ShimTest, AdoptingADeadPidReportsItsExitFile) {
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(dead, &status, 0), dead);
  std::ofstream(exit_path_) << "{\"exit_code\": 2, \"signal\": 0, \"ended_ms\": 1234}\n";
  launcher_.Adopt(ExecHandle(dead), 12345, {exit_path_});
  WaitResult r = launcher_.Wait(0);
  ASSERT_EQ(r.exits.size(), 1u);
  EXPECT_EQ(r.exits[0].handle.id, dead);
  EXPECT_EQ(r.exits[0].exit_code, 2);
  EXPECT_EQ(r.exits[0].ended_ms, 1234);
  EXPECT_FALSE(r.exits[0].lost);
}

TEST_P(ShimTest, AdoptingADeadPidWithoutAFileReportsItLost) {
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(dead, &status, 0), dead);
  launcher_.Adopt(ExecHandle(dead), 12345, {dir_ + "/never-written.exit"});
  WaitResult r = launcher_.Wait(0);
  ASSERT_EQ(r.exits.size(), 1u);
  EXPECT_EQ(r.exits[0].handle.id, dead);
  EXPECT_TRUE(r.exits[0].lost);
  EXPECT_EQ(r.exits[0].exit_code, -1);
  EXPECT_EQ(r.exits[0].signal, 0);
}

TEST_P(ShimTest, ReusedPidIsGoneAtOnceAndLeftAlone) {
  // An unrelated process (its own group's leader) holds the pid; the adopted start time is not
  // its own: the shim is gone, and neither SignalGroup nor Wait may touch the newcomer.
  pid_t other = fork();
  if (other == 0) {
    setpgid(0, 0);
    execlp("sleep", "sleep", "100", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(other, other);
  auto end = steady_clock::now() + milliseconds(5000);
  while (ReadFile("/proc/" + std::to_string(other) + "/comm") != "sleep\n" &&
         steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  int64_t ticks = launcher_.StartTicks(other);
  ASSERT_GT(ticks, 0);
  launcher_.Adopt(ExecHandle(other), ticks + 1, {exit_path_});
  launcher_.SignalGroup(other, SIGKILL);
  WaitResult r = launcher_.Wait(0);
  ASSERT_EQ(r.exits.size(), 1u);
  EXPECT_EQ(r.exits[0].handle.id, other);
  EXPECT_TRUE(r.exits[0].lost);
  int status = 0;
  EXPECT_EQ(waitpid(other, &status, WNOHANG), 0) << "the newcomer was killed";
  kill(other, SIGKILL);
  waitpid(other, &status, 0);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {
TEST_P(ShimTest, TheRunDropsToItsSubmitterWhileTheShimRecordsItsEnd) {
  if (geteuid() != 0) GTEST_SKIP() << "dropping to another user needs root";
  // The run's folder and logs are the user's; the exit file is the shim's.
  fs::permissions(dir_, fs::perms::all);
  LaunchSpec spec = Spec({"sh", "-c", "id -u; id -G; touch /proc/1/drover-x 2>/dev/null || echo denied"});
  spec.run_as.uid = 65534;
  spec.run_as.gid = 65534;
  spec.run_as.groups = {65534};
  const int pid = StartOk(spec);
  ProcessExit e = WaitFor(pid);
  EXPECT_EQ(e.exit_code, 0) << ReadFile(dir_ + "/err.txt");
  EXPECT_EQ(ReadFile(dir_ + "/out.txt"), "65534\n65534\ndenied\n");
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/out.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "the run's log is its user's";
}

INSTANTIATE_TEST_SUITE_P(ForkAndExec, ShimTest, ::testing::Values(ShimMode::kFork, ShimMode::kExec),
                         [](const ::testing::TestParamInfo<ShimMode>& i) {
                           switch (i.param) {
                             case ShimMode::kFork: return std::string("fork");
                             case ShimMode::kExec: return std::string("exec");
                           }
                           return std::string();
                         });
}  // namespace
}  // namespace drover
