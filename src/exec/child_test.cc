// StartChild's own tests: real children (true, sleep), compared with what the kernel says of them.
#include "exec/child.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace
}  // namespace drover
