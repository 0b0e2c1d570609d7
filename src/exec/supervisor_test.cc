// The supervisor: its request encoding, and the real helper process starting, watching and
// recording real runs.
#include "exec/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testutil/handles.h"
#include <signal.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/file_faults.h"
#include "exec/posix_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

ChildPlan FullPlan() {
  ChildPlan p;
  p.shim = true;
  p.exit_path = "/store/logs/1/2-1.exit";
  p.program = "/usr/bin/python3";
  p.exec_path = "/proc/self/exe";
  p.argv = {"python3", "train.py", "--lr", "0.01", "", std::string("nul\0inside", 10)};
  p.env = {"PATH=/usr/bin", "DROVER_RUN_ID=2", "EMPTY="};
  p.cwd = "/store/runs/2";
  p.mount_overlay = true;
  p.overlay.options = "lowerdir=/a,upperdir=/b,workdir=/c";
  p.overlay.target = "/store/runs/2";
  p.overlay.user_namespace = true;
  p.overlay.uid_map = "1000 1000 1\n";
  p.overlay.gid_map = "1000 1000 1\n";
  p.overlay.binds = {{"/datasets/imagenet", "/store/runs/2/imagenet", true, 6},
                     {"/data/labels.csv", "/store/runs/2/labels.csv", false, 0}};
  p.run_as.uid = 1001;
  p.run_as.gid = 1002;
  p.run_as.groups = {1002, 27, 44};
  return p;
}

TEST(SupervisorEncodingTest, RoundTripsEveryField) {
  ChildPlan p = FullPlan();
  Result<ChildPlan> back = Supervisor::Decode(Supervisor::Encode(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shim, p.shim);
  EXPECT_EQ(back->exit_path, p.exit_path);
  EXPECT_EQ(back->program, p.program);
  EXPECT_EQ(back->exec_path, p.exec_path);
  EXPECT_EQ(back->argv, p.argv);
  EXPECT_EQ(back->env, p.env);
  EXPECT_EQ(back->cwd, p.cwd);
  EXPECT_EQ(back->mount_overlay, p.mount_overlay);
  EXPECT_EQ(back->overlay.options, p.overlay.options);
  EXPECT_EQ(back->overlay.target, p.overlay.target);
  EXPECT_EQ(back->overlay.user_namespace, p.overlay.user_namespace);
  EXPECT_EQ(back->overlay.uid_map, p.overlay.uid_map);
  EXPECT_EQ(back->overlay.gid_map, p.overlay.gid_map);
  ASSERT_EQ(back->overlay.binds.size(), 2u);
  EXPECT_EQ(back->overlay.binds[0].source, "/datasets/imagenet");
  EXPECT_EQ(back->overlay.binds[0].target, "/store/runs/2/imagenet");
  EXPECT_TRUE(back->overlay.binds[0].dir);
  EXPECT_EQ(back->overlay.binds[0].flags, 6u);
  EXPECT_FALSE(back->overlay.binds[1].dir);
  EXPECT_EQ(back->run_as.uid, 1001);
  EXPECT_EQ(back->run_as.gid, 1002);
  EXPECT_EQ(back->run_as.groups, (std::vector<uint32_t>{1002, 27, 44}));
  // Unset stays unset.
  ChildPlan plain = FullPlan();
  plain.run_as = RunAs{};
  Result<ChildPlan> again = Supervisor::Decode(Supervisor::Encode(plain));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->run_as.set());
}

TEST(SupervisorEncodingTest, RefusesEveryTruncationAndTrailingBytes) {
  std::string bytes = Supervisor::Encode(FullPlan());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(Supervisor::Decode(bytes.substr(0, n)).ok()) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(Supervisor::Decode(bytes + "x").ok());
}

TEST(SupervisorEncodingTest, RefusesCountsPastTheRequestAndBadFlags) {
  // A count of 2^32-1 strings in a few bytes must be refused before anything is allocated.
  std::string bytes = Supervisor::Encode(FullPlan());
  std::string huge = bytes;
  // The argv count follows the flag and three strings.
  size_t at = 4;
  for (int i = 0; i < 3; ++i) {
    uint32_t len = 0;
    std::memcpy(&len, huge.data() + at, 4);
    at += 4 + len;
  }
  uint32_t big = 0xffffffffu;
  std::memcpy(huge.data() + at, &big, 4);
  EXPECT_FALSE(Supervisor::Decode(huge).ok());
  std::string bad_flag = bytes;
  bad_flag[0] = 7;
  EXPECT_FALSE(Supervisor::Decode(bad_flag).ok());
  ChildPlan no_argv = FullPlan();
  no_argv.argv.clear();
  EXPECT_FALSE(Supervisor::Decode(Supervisor::Encode(no_argv)).ok());
}

// Field 4 (the parent's pid) of /proc/<pid>/stat, -1 when there is no such process.
int ParentOf(int pid) {
  // Read with read(2): a process that ends meanwhile makes the read fail (ESRCH), which an
  // ifstream would throw from.
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  std::string text(buf, static_cast<size_t>(n));
  size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string state;
  int ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// What the descriptors of `pid` point to (files, sockets, anonymous inodes).
std::set<std::string> OpenFiles(int pid) {
  std::set<std::string> targets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    targets.insert(fs::read_symlink(e.path(), ec).string());
  }
  return targets;
}

// Where the supervisor records a run of `spec`.
ExitRecordAt RecordOf(const LaunchSpec& spec) { return {spec.exit_path, spec.stdout_path}; }

// The end the supervisor records: it tells the daemon first and writes the record right after,
// so a test that has just been told looks for a moment.
Result<ProcessExit> RecordedEnd(const LaunchSpec& spec) {
  Result<ProcessExit> r = ReadExitRecord(RecordOf(spec));
  for (int i = 0; i < 200 && !r.ok(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    r = ReadExitRecord(RecordOf(spec));
  }
  return r;
}

// Whether files in `dir` take user attributes (tmpfs before Linux 6.6 does not): where not, the
// supervisor's records are files, which the other tests cover.
bool TakesAttributes(const std::string& dir) {
  const std::string probe = dir + "/.attribute-probe";
  std::ofstream(probe).put('x');
  const bool ok = setxattr(probe.c_str(), "user.drover.probe", "1", 1, 0) == 0;
  unlink(probe.c_str());
  return ok;
}

// The raw value of the exit record's attribute on `log`, "" when there is none.
std::string RecordAttribute(const std::string& log) {
  char buf[512];
  ssize_t n = getxattr(log.c_str(), ExitAttribute(), buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-supervisor-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = fs::canonical(tmpl).string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  LaunchSpec Spec(std::vector<std::string> argv, int attempt) {
    LaunchSpec spec;
    spec.argv = std::move(argv);
    spec.env = {std::string("PATH=") + getenv("PATH")};
    spec.cwd = dir_;
    spec.stdout_path = dir_ + "/" + std::to_string(attempt) + ".out";
    spec.stderr_path = dir_ + "/" + std::to_string(attempt) + ".err";
    spec.exit_path = dir_ + "/" + std::to_string(attempt) + ".exit";
    return spec;
  }

  static ProcessExit WaitFor(PosixLauncher& launcher, int pid, int seconds = 10) {
    auto end = steady_clock::now() + std::chrono::seconds(seconds);
    while (steady_clock::now() < end) {
      for (const ProcessExit& e : launcher.Wait(1000).exits) {
        if (e.handle.id == pid) return e;
      }
    }
    ADD_FAILURE() << "pid " << pid << " was not reported within " << seconds << " s";
    return ProcessExit{};
  }

  // Reaps a supervisor that was left to finish by itself (it is this test process's child).
  static void ReapWithin(int pid, int seconds) {
    auto end = steady_clock::now() + std::chrono::seconds(seconds);
    int status = 0;
    while (steady_clock::now() < end) {
      if (waitpid(pid, &status, WNOHANG) == pid) return;
      std::this_thread::sleep_for(milliseconds(10));
    }
    ADD_FAILURE() << "supervisor " << pid << " did not exit within " << seconds << " s";
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }

  std::string dir_;
};

TEST_F(SupervisorTest, StartsWatchesAndRecordsRuns) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  const int supervisor = launcher.supervisor_pid();
  ASSERT_GT(supervisor, 0);
  EXPECT_EQ(ParentOf(supervisor), getpid());
  std::map<int, int> attempt_of;  // pid -> attempt
  for (int i = 1; i <= 20; ++i) {
    Result<int> pid = testing::PidOf(launcher.Start(
        Spec({"sh", "-c", "echo out $0; echo err $0 >&2; exit $0", std::to_string(i % 3)}, i)));
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();
    // No shim: the run itself leads its group, a child of the supervisor.
    const pid_t group = getpgid(*pid);
    EXPECT_TRUE(group == *pid || group == -1) << group;  // -1: already ended and reaped
    int parent = ParentOf(*pid);
    // -1: already reaped; 0: being reaped right now (the kernel reports no parent for a task it
    // is releasing).
    EXPECT_TRUE(parent == supervisor || parent <= 0) << parent;
    attempt_of[*pid] = i;
  }
  std::map<int, ProcessExit> ends;
  auto end = steady_clock::now() + milliseconds(10000);
  while (ends.size() < attempt_of.size() && steady_clock::now() < end) {
    for (const ProcessExit& e : launcher.Wait(1000).exits) ends[e.handle.id] = e;
  }
  ASSERT_EQ(ends.size(), attempt_of.size());
  for (const auto& [pid, k] : attempt_of) {
    EXPECT_EQ(ends[pid].exit_code, k % 3) << "attempt " << k;
    EXPECT_EQ(ends[pid].signal, 0);
    EXPECT_GT(ends[pid].ended_ms, 0);
    std::ifstream out(dir_ + "/" + std::to_string(k) + ".out");
    std::string line;
    std::getline(out, line);
    EXPECT_EQ(line, "out " + std::to_string(k % 3));
    std::ifstream err(dir_ + "/" + std::to_string(k) + ".err");
    std::getline(err, line);
    EXPECT_EQ(line, "err " + std::to_string(k % 3));
    // The exit record has the shim's format (the start line names the run, the end follows)
    // and is kept on the stdout log's attribute: no file of its own.
    const LaunchSpec spec = Spec({"sh"}, k);
    Result<ProcessExit> recorded = RecordedEnd(spec);
    ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
    EXPECT_EQ(recorded->exit_code, k % 3);
    Result<ShimStart> start = ReadRecordedStart(RecordOf(spec));
    ASSERT_TRUE(start.ok()) << start.status().ToString();
    EXPECT_EQ(start->pid, pid);
    EXPECT_GT(start->start_ticks, 0);
    if (!TakesAttributes(dir_)) continue;
    EXPECT_FALSE(fs::exists(spec.exit_path));
    EXPECT_EQ(RecordAttribute(spec.stdout_path),
              fmt::format("{} {}\n{{\"exit_code\":{},\"signal\":0,\"ended_ms\":{}}}\n", pid,
                          start->start_ticks, k % 3, recorded->ended_ms));
  }
  // It is still there for the next runs.
  EXPECT_TRUE(launcher.has_supervisor());
  EXPECT_EQ(ParentOf(supervisor), getpid());
}

TEST_F(SupervisorTest, StartTicksAreTheRunsOwn) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  LaunchSpec spec = Spec({"sleep", "5"}, 1);
  Result<int> pid = testing::PidOf(launcher.Start(spec));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  PosixLauncher plain;
  EXPECT_EQ(launcher.StartTicks(*pid), plain.StartTicks(*pid));
  Result<ShimStart> start = ReadRecordedStart(RecordOf(spec));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->start_ticks, launcher.StartTicks(*pid));
  launcher.SignalGroup(*pid, SIGTERM);
  ProcessExit e = WaitFor(launcher, *pid);
  EXPECT_EQ(e.signal, SIGTERM);
  Result<ProcessExit> recorded = RecordedEnd(spec);
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->signal, SIGTERM);
  EXPECT_EQ(recorded->exit_code, -1);
}

// Where the log's file system takes no user attributes (or refuses one), the record is an exit
// file of its own, read the same way; a log that refuses the end after it took the start gets
// the whole record in the file, which is then the record.
TEST_F(SupervisorTest, WhereTheLogTakesNoAttributeTheRecordIsAFileOfItsOwn) {
  if (!TakesAttributes(dir_)) GTEST_SKIP() << dir_ << " takes no user attributes";
  // Armed before the supervisor is forked, so that it holds in the supervisor.
  ArmFileFaults({.error = ENOTSUP, .under = dir_ + "/1.out"});
  {
    PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
    DisarmFileFaults();
    ASSERT_TRUE(launcher.has_supervisor());
    const LaunchSpec refused = Spec({"sh", "-c", "exit 4"}, 1);
    const LaunchSpec taken = Spec({"sh", "-c", "exit 5"}, 2);
    Result<int> a = testing::PidOf(launcher.Start(refused));
    Result<int> b = testing::PidOf(launcher.Start(taken));
    ASSERT_TRUE(a.ok() && b.ok());
    // Both ends may come from one Wait: collected together.
    std::map<int, ProcessExit> ends;
    for (auto until = steady_clock::now() + std::chrono::seconds(10);
         ends.size() < 2 && steady_clock::now() < until;) {
      for (const ProcessExit& e : launcher.Wait(1000).exits) ends[e.handle.id] = e;
    }
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[*a].exit_code, 4);
    EXPECT_EQ(ends[*b].exit_code, 5);
    Result<ProcessExit> first = RecordedEnd(refused);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(first->exit_code, 4);
    EXPECT_TRUE(fs::exists(refused.exit_path));
    EXPECT_EQ(RecordAttribute(refused.stdout_path), "");
    EXPECT_EQ(ReadExitFile(refused.exit_path)->exit_code, 4);  // the file alone says it all
    EXPECT_EQ(ReadRecordedStart(RecordOf(refused))->pid, *a);
    Result<ProcessExit> second = RecordedEnd(taken);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->exit_code, 5);
    EXPECT_FALSE(fs::exists(taken.exit_path));
  }
  // The start on the attribute, the end refused there (a full disk where the attribute needs a
  // block of its own): the file gets start and end.
  ArmFileFaults({.error = ENOSPC, .under = dir_ + "/3.out", .after = 1});
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  DisarmFileFaults();
  const LaunchSpec spec = Spec({"sh", "-c", "sleep 0.2; exit 6"}, 3);
  Result<int> pid = testing::PidOf(launcher.Start(spec));
  ASSERT_TRUE(pid.ok());
  Result<ShimStart> begun = ReadRecordedStart(RecordOf(spec));
  ASSERT_TRUE(begun.ok()) << begun.status().ToString();
  EXPECT_EQ(begun->pid, *pid);
  EXPECT_FALSE(fs::exists(spec.exit_path));
  EXPECT_EQ(WaitFor(launcher, *pid).exit_code, 6);
  Result<ProcessExit> recorded = RecordedEnd(spec);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(recorded->exit_code, 6);
  Result<ShimStart> in_file = ReadShimStart(spec.exit_path);
  ASSERT_TRUE(in_file.ok());
  EXPECT_EQ(in_file->pid, *pid);
}

TEST_F(SupervisorTest, KillsWhatIsLeftOfTheGroupWhenTheLeaderEnds) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  Result<int> pid = testing::PidOf(launcher.Start(Spec({"sh", "-c", "sleep 30 & echo $! > bg; exit 0"}, 1)));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ProcessExit e = WaitFor(launcher, *pid);
  EXPECT_EQ(e.exit_code, 0);
  std::ifstream bg(dir_ + "/bg");
  int child = 0;
  bg >> child;
  ASSERT_GT(child, 0);
  // Killed before the end was reported; reaped by whoever inherited it soon after.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    char state = 0;
    int64_t ticks = 0;
    gone = !ReadProcStat(child, &state, &ticks) || state == 'Z';
    if (!gone) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the run's background child " << child << " outlived it";
}

TEST_F(SupervisorTest, HoldsNoneOfTheLaunchersDescriptors) {
  // Opened before the launcher, as the daemon's store and lock would be.
  int held = open((dir_ + "/held").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(held, 0);
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  std::set<std::string> targets;
  // The supervisor closes them first thing: give it a moment.
  for (int i = 0; i < 100; ++i) {
    targets = OpenFiles(launcher.supervisor_pid());
    if (!targets.count(dir_ + "/held")) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(targets.count(dir_ + "/held"), 0u);
  EXPECT_LE(targets.size(), 5u) << "stdio, its socket and its signalfd only";
  close(held);
}

TEST_F(SupervisorTest, ExitsWithAnIdleLauncher) {
  int supervisor = -1;
  {
    PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
    supervisor = launcher.supervisor_pid();
    ASSERT_GT(supervisor, 0);
  }
  // Reaped by the launcher's destructor: no such process any more, not even a zombie.
  EXPECT_EQ(kill(supervisor, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(SupervisorTest, RunsOutliveTheLauncherAndAreAdoptedFromTheirExitFiles) {
  LaunchSpec spec = Spec({"sh", "-c", "sleep 0.5; echo done; exit 3"}, 1);
  int pid = 0, supervisor = 0;
  int64_t ticks = 0;
  {
    PosixLauncher first(PosixLauncher::Mode::kSupervised);
    supervisor = first.supervisor_pid();
    Result<int> started = testing::PidOf(first.Start(spec));
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    pid = *started;
    ticks = first.StartTicks(pid);
  }
  // The engine is gone; the supervisor still watches the run.
  EXPECT_EQ(kill(supervisor, 0), 0);
  EXPECT_EQ(kill(pid, 0), 0);
  PosixLauncher next;
  next.Adopt(ExecHandle(pid), ticks, RecordOf(spec));
  ProcessExit e = WaitFor(next, pid);
  EXPECT_FALSE(e.lost);
  EXPECT_EQ(e.exit_code, 3);
  std::ifstream out(spec.stdout_path);
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "done");
  // Its last run over, the supervisor exits by itself.
  ReapWithin(supervisor, 5);
}

TEST_F(SupervisorTest, ALostSupervisorsRunsAreWatchedAsAdoptedAndShimsTakeOver) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  const int supervisor = launcher.supervisor_pid();
  ASSERT_GT(supervisor, 0);
  Result<int> pid = testing::PidOf(launcher.Start(Spec({"sh", "-c", "sleep 0.3; exit 6"}, 1)));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);
  // Nobody recorded its end: it is reported lost, not taken for an exit code.
  ProcessExit e = WaitFor(launcher, *pid, 15);
  EXPECT_TRUE(e.lost);
  EXPECT_FALSE(launcher.has_supervisor());
  // The next runs start under shims, and their ends are known.
  LaunchSpec spec = Spec({"sh", "-c", "exit 5"}, 2);
  Result<int> again = testing::PidOf(launcher.Start(spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(WaitFor(launcher, *again).exit_code, 5);
  Result<ProcessExit> recorded = ReadExitFile(spec.exit_path);
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->exit_code, 5);
  // The killed supervisor was reaped when it was found gone.
  EXPECT_EQ(kill(supervisor, 0), -1);
}

TEST_F(SupervisorTest, AProgramThatCannotStartIsAClearError) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  // No execute bit (for root too): the exec fails in the supervisor, and the start says why.
  std::ofstream(dir_ + "/script") << "#!/bin/sh\nexit 0\n";
  fs::permissions(dir_ + "/script", fs::perms::owner_read);
  Result<int> pid = testing::PidOf(launcher.Start(Spec({dir_ + "/script"}, 1)));
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("Permission denied"), std::string::npos)
      << pid.status().message();
  // And the supervisor goes on.
  EXPECT_TRUE(launcher.has_supervisor());
  Result<int> ok = testing::PidOf(launcher.Start(Spec({"true"}, 2)));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(WaitFor(launcher, *ok).exit_code, 0);
}

TEST_F(SupervisorTest, StartsHandedOverAreReportedInOrderEachBeforeItsEnd) {
  // The daemon does not wait for a start: it hands each to the supervisor (BeginStart) and reads
  // how it went from Wait(), as it reads ends.
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.StartsInBackground());
  std::ofstream(dir_ + "/script") << "#!/bin/sh\nexit 0\n";
  fs::permissions(dir_ + "/script", fs::perms::owner_read);  // cannot be executed
  std::vector<int64_t> tickets;
  for (int i = 1; i <= 12; ++i) {
    LaunchSpec spec = i == 7 ? Spec({dir_ + "/script"}, i)
                             : Spec({"sh", "-c", "exit $0", std::to_string(i % 4)}, i);
    Result<int64_t> t = launcher.BeginStart(spec);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tickets.push_back(*t);
  }
  std::vector<int64_t> reported;
  std::map<int64_t, int> pid_of;        // ticket -> pid
  std::map<int, ProcessExit> ended;     // pid -> end
  std::string order_errors;
  auto end = steady_clock::now() + milliseconds(10000);
  while ((reported.size() < tickets.size() || ended.size() < 11) && steady_clock::now() < end) {
    WaitResult w = launcher.Wait(1000);
    for (const StartOutcome& o : w.started) {
      reported.push_back(o.ticket);
      if (o.error.ok()) pid_of[o.ticket] = o.handle.id;
      if (o.ticket == tickets[6]) {
        EXPECT_FALSE(o.error.ok());
        EXPECT_NE(o.error.message().find("Permission denied"), std::string::npos)
            << o.error.message();
      } else {
        EXPECT_TRUE(o.error.ok()) << o.error.ToString();
        EXPECT_GT(o.identity, 0);
      }
    }
    for (const ProcessExit& e : w.exits) {
      bool known = false;
      for (const auto& [t, pid] : pid_of) known = known || pid == e.handle.id;
      if (!known) order_errors += "end of " + std::to_string(e.handle.id) + " before its start; ";
      ended[e.handle.id] = e;
    }
  }
  EXPECT_EQ(reported, tickets);
  EXPECT_EQ(order_errors, "");
  ASSERT_EQ(ended.size(), 11u);
  for (int i = 1; i <= 12; ++i) {
    if (i == 7) continue;
    EXPECT_EQ(ended[pid_of[tickets[i - 1]]].exit_code, i % 4) << "run " << i;
  }
}

TEST_F(SupervisorTest, ARunTooBigToPassIsRefusedAndTheSupervisorGoesOn) {
  // A spec's env can be made as large as a user likes: over 8 MiB the start is refused with a
  // clear error, and the supervisor is neither stopped nor replaced by shims.
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  const int supervisor = launcher.supervisor_pid();
  LaunchSpec big = Spec({"true"}, 1);
  big.env.push_back("HUGE=" + std::string(Supervisor::kMaxRequestBytes, 'x'));
  Result<int64_t> refused = launcher.BeginStart(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("over 8 MiB"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(launcher.StartsInBackground());
  EXPECT_EQ(launcher.supervisor_pid(), supervisor);
  Result<int> ok = testing::PidOf(launcher.Start(Spec({"sh", "-c", "exit 4"}, 2)));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(WaitFor(launcher, *ok).exit_code, 4);
  EXPECT_EQ(kill(supervisor, 0), 0);
}

TEST_F(SupervisorTest, StartsInFlightWhenTheSupervisorDiesAreEachSettled) {
  // Whatever it had begun is taken from the exit file's start line (and watched as adopted);
  // what it had not is a launch error. None is left unreported, none started twice.
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  const int supervisor = launcher.supervisor_pid();
  ASSERT_GT(supervisor, 0);
  std::vector<int64_t> tickets;
  for (int i = 1; i <= 6; ++i) {
    Result<int64_t> t = launcher.BeginStart(Spec({"sh", "-c", "sleep 0.2"}, i));
    ASSERT_TRUE(t.ok());
    tickets.push_back(*t);
  }
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);
  std::vector<int64_t> reported;
  std::set<int> started, ended;
  auto end = steady_clock::now() + milliseconds(15000);
  while (reported.size() < tickets.size() && steady_clock::now() < end) {
    WaitResult w = launcher.Wait(1000);
    for (const ProcessExit& e : w.exits) ended.insert(e.handle.id);
    for (const StartOutcome& o : w.started) {
      reported.push_back(o.ticket);
      if (o.error.ok()) {
        EXPECT_TRUE(started.insert(o.handle.id).second) << "pid " << o.handle.id << " reported twice";
      } else {
        EXPECT_NE(o.error.message().find("supervisor"), std::string::npos) << o.error.message();
      }
    }
  }
  EXPECT_EQ(reported, tickets);
  EXPECT_FALSE(launcher.StartsInBackground());  // shims from now on
  // Those that started end (reported lost or with their code), the group killed either way.
  while (!std::includes(ended.begin(), ended.end(), started.begin(), started.end()) &&
         steady_clock::now() < end) {
    for (const ProcessExit& e : launcher.Wait(1000).exits) ended.insert(e.handle.id);
  }
  for (int pid : started) {
    EXPECT_TRUE(ended.count(pid)) << "pid " << pid << " was not reported";
    EXPECT_EQ(kill(-pid, 0), -1);
  }
}

TEST_F(SupervisorTest, InterruptsStillEndTheWait) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  Result<int> pid = testing::PidOf(launcher.Start(Spec({"sleep", "5"}, 1)));
  ASSERT_TRUE(pid.ok());
  kill(getpid(), SIGTERM);
  WaitResult r = launcher.Wait(5000);
  EXPECT_EQ(r.interrupt_signal, SIGTERM);
  launcher.SignalGroup(*pid, SIGKILL);
  EXPECT_EQ(WaitFor(launcher, *pid).signal, SIGKILL);
}

}  // namespace
}  // namespace drover
