// StartChild's own tests: real children (true, sleep), compared with what the kernel says of them.
#include "exec/child.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace drover {
namespace {

ChildPlan Plan(std::vector<std::string> argv) {
  ChildPlan plan;
  plan.exec_path = argv[0];
  plan.argv = std::move(argv);
  return plan;
}

void Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// The start time taken from the boot clock around the start is the one /proc gives, for every
// child: a wrong one would make a later engine take a live run for a dead one (or adopt a
// stranger that reused its pid).
TEST(ChildTest, TheStartTimeOfEveryChildIsTheOneTheKernelRecorded) {
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  int compared = 0;
  for (int i = 0; i < 300; ++i) {
    ForkOutcome o = StartChild(Plan({"/bin/true"}), devnull, devnull);
    ASSERT_EQ(o.err, 0);
    ASSERT_GT(o.pid, 0);
    // Not reaped yet: a zombie keeps its /proc entry, so the kernel's figure is still there.
    char state = 0;
    int64_t ticks = 0;
    ASSERT_TRUE(ReadProcStat(o.pid, &state, &ticks));
    EXPECT_EQ(o.start_ticks, ticks) << "child " << i << " (pid " << o.pid << ")";
    ++compared;
    Reap(o.pid);
  }
  close(devnull);
  EXPECT_EQ(compared, 300);
}

TEST(ChildTest, BootTicksFollowTheKernelsClockOfProcessStarts) {
  // This process started before now, at most as long ago as the boot clock says it is.
  char state = 0;
  int64_t self = 0;
  ASSERT_TRUE(ReadProcStat(getpid(), &state, &self));
  const int64_t now = BootTicks();
  ASSERT_GE(now, 0);
  EXPECT_LE(self, now);
  EXPECT_EQ(state, 'R');
}

TEST(ChildTest, AFailedStartHasNoStartTime) {
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  ForkOutcome o = StartChild(Plan({"/nonexistent/program"}), devnull, devnull);
  close(devnull);
  EXPECT_EQ(o.err, ENOENT);
  EXPECT_EQ(o.start_ticks, 0);
  if (o.pid > 0) Reap(o.pid);
}

// A step that fails before exec is named, with its errno, and leaves no process behind.
TEST(ChildTest, AChildThatCannotEnterItsFolderSaysSoAndLeavesNoProcess) {
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  ChildPlan plan = Plan({"/bin/true"});
  plan.cwd = "/nonexistent/folder";
  ForkOutcome o = StartChild(plan, devnull, devnull);
  close(devnull);
  EXPECT_EQ(o.err, ENOENT);
  EXPECT_EQ(o.failed_step, "entering the working directory");
  EXPECT_EQ(o.pid, 0);
  siginfo_t info{};
  const int r = waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
  EXPECT_TRUE((r < 0 && errno == ECHILD) || (r == 0 && info.si_pid == 0))
      << "a child was left to reap: " << info.si_pid;
}

std::string Slurp(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[256];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

// A caller whose own stdio is closed gets 0 to 2 from open: the child's streams must still land
// in the files they were given, here even crossed (stdout's file on 2, stderr's on 1).
TEST(ChildTest, OutputFilesOnTheCallersStdioDescriptorsReachTheRightStreams) {
  char dir[] = "/tmp/drover-child-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  const int saved_out = dup(1), saved_err = dup(2);
  ASSERT_GE(saved_out, 0);
  ASSERT_GE(saved_err, 0);
  int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  dup2(out_fd, 2);
  dup2(err_fd, 1);
  close(out_fd);
  close(err_fd);
  ForkOutcome o = StartChild(Plan({"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2"}), 2, 1);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  ASSERT_EQ(o.err, 0) << o.failed_step;
  int status = 0;
  ASSERT_EQ(waitpid(o.pid, &status, 0), o.pid);
  EXPECT_EQ(Slurp(out), "to-stdout\n");
  EXPECT_EQ(Slurp(err), "to-stderr\n");
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace drover
