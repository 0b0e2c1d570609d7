// The spawner: its request encoding, and the real helper process forking real shims.
#include "exec/spawner.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

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
  return p;
}

TEST(SpawnerEncodingTest, RoundTripsEveryField) {
  ChildPlan p = FullPlan();
  Result<ChildPlan> back = Spawner::Decode(Spawner::Encode(p));
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
}

TEST(SpawnerEncodingTest, RefusesEveryTruncationAndTrailingBytes) {
  std::string bytes = Spawner::Encode(FullPlan());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(Spawner::Decode(bytes.substr(0, n)).ok()) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(Spawner::Decode(bytes + "x").ok());
}

TEST(SpawnerEncodingTest, RefusesCountsPastTheRequestAndBadFlags) {
  // A count of 2^32-1 strings in a few bytes must be refused before anything is allocated.
  std::string bytes = Spawner::Encode(FullPlan());
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
  EXPECT_FALSE(Spawner::Decode(huge).ok());
  std::string bad_flag = bytes;
  bad_flag[0] = 7;
  EXPECT_FALSE(Spawner::Decode(bad_flag).ok());
  ChildPlan no_argv = FullPlan();
  no_argv.argv.clear();
  EXPECT_FALSE(Spawner::Decode(Spawner::Encode(no_argv)).ok());
}

// Field 4 (the parent's pid) of /proc/<pid>/stat, -1 when there is no such process.
int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string state;
  int ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

std::set<std::string> OpenDescriptors(int pid) {
  std::set<std::string> fds;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    fds.insert(e.path().filename().string());
  }
  return fds;
}

class SpawnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-spawner-XXXXXX").string();
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

  static ProcessExit WaitFor(PosixLauncher& launcher, int pid) {
    auto end = steady_clock::now() + milliseconds(10000);
    while (steady_clock::now() < end) {
      for (const ProcessExit& e : launcher.Wait(1000).exits) {
        if (e.pid == pid) return e;
      }
    }
    ADD_FAILURE() << "pid " << pid << " was not reported within 10 s";
    return ProcessExit{};
  }

  std::string dir_;
};

TEST_F(SpawnerTest, ShimsAreTheLaunchersOwnChildrenAndRunAsUsual) {
  PosixLauncher launcher(PosixLauncher::ForkFrom::kSpawner);
  ASSERT_TRUE(launcher.has_spawner());
  const int spawner = launcher.spawner_pid();
  ASSERT_GT(spawner, 0);
  EXPECT_EQ(ParentOf(spawner), getpid());
  std::set<int> pids;
  for (int i = 1; i <= 20; ++i) {
    Result<int> pid =
        launcher.Start(Spec({"sh", "-c", "echo out $0; echo err $0 >&2; exit $0", std::to_string(i % 3)}, i));
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();
    // CLONE_PARENT: the shim is ours, not the spawner's, so we reap it and get its SIGCHLD.
    EXPECT_EQ(ParentOf(*pid), getpid());
    pids.insert(*pid);
  }
  std::map<int, ProcessExit> ends;
  auto end = steady_clock::now() + milliseconds(10000);
  while (ends.size() < pids.size() && steady_clock::now() < end) {
    for (const ProcessExit& e : launcher.Wait(1000).exits) ends[e.pid] = e;
  }
  ASSERT_EQ(ends.size(), pids.size());
  for (int k = 1; k <= 20; ++k) {
    std::ifstream out(dir_ + "/" + std::to_string(k) + ".out");
    std::string line;
    std::getline(out, line);
    EXPECT_EQ(line, "out " + std::to_string(k % 3));
    Result<ProcessExit> recorded = ReadExitFile(dir_ + "/" + std::to_string(k) + ".exit");
    ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
    EXPECT_EQ(recorded->exit_code, k % 3);
  }
  for (const auto& [pid, e] : ends) EXPECT_GE(e.exit_code, 0) << "pid " << pid;
  // The spawner is still there, and forks nothing of its own.
  EXPECT_EQ(ParentOf(spawner), getpid());
}

TEST_F(SpawnerTest, HoldsNoneOfTheLaunchersDescriptors) {
  // Opened before the launcher, as the daemon's store and lock would be.
  int held = open((dir_ + "/held").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(held, 0);
  PosixLauncher launcher(PosixLauncher::ForkFrom::kSpawner);
  ASSERT_TRUE(launcher.has_spawner());
  std::set<std::string> fds;
  // The spawner closes them first thing: give it a moment.
  for (int i = 0; i < 100; ++i) {
    fds = OpenDescriptors(launcher.spawner_pid());
    if (!fds.count(std::to_string(held))) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(fds.count(std::to_string(held)), 0u);
  EXPECT_LE(fds.size(), 4u) << "stdio and its socket only";
  close(held);
}

TEST_F(SpawnerTest, ExitsWithItsLauncher) {
  int spawner = -1;
  {
    PosixLauncher launcher(PosixLauncher::ForkFrom::kSpawner);
    spawner = launcher.spawner_pid();
    ASSERT_GT(spawner, 0);
  }
  // Reaped by the launcher's destructor: no such process any more, not even a zombie.
  EXPECT_EQ(kill(spawner, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(SpawnerTest, ALostSpawnerFallsBackToForking) {
  PosixLauncher launcher(PosixLauncher::ForkFrom::kSpawner);
  const int spawner = launcher.spawner_pid();
  ASSERT_GT(spawner, 0);
  ASSERT_EQ(kill(spawner, SIGKILL), 0);
  // Its end must not be taken for a run's: only pids the launcher started are reaped.
  Result<int> pid = launcher.Start(Spec({"sh", "-c", "exit 4"}, 1));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_FALSE(launcher.has_spawner());
  ProcessExit e = WaitFor(launcher, *pid);
  EXPECT_EQ(e.exit_code, 4);
  Result<int> again = launcher.Start(Spec({"sh", "-c", "exit 5"}, 2));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(WaitFor(launcher, *again).exit_code, 5);
  // The killed spawner was reaped when it was found gone.
  EXPECT_EQ(kill(spawner, 0), -1);
}

TEST_F(SpawnerTest, AProgramThatCannotStartIsRecordedByItsShim) {
  PosixLauncher launcher(PosixLauncher::ForkFrom::kSpawner);
  ASSERT_TRUE(launcher.has_spawner());
  // A file the shim cannot exec (no execute bit, for root too) reaches the shim, which records
  // why in the exit file.
  std::ofstream(dir_ + "/script") << "#!/bin/sh\nexit 0\n";
  fs::permissions(dir_ + "/script", fs::perms::owner_read);
  LaunchSpec spec = Spec({dir_ + "/script"}, 2);
  Result<int> pid = launcher.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  WaitFor(launcher, *pid);
  Result<ProcessExit> recorded = ReadExitFile(spec.exit_path);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(recorded->exit_code, 127);
  EXPECT_NE(recorded->error.find("cannot start"), std::string::npos) << recorded->error;
}

}  // namespace
}  // namespace drover
