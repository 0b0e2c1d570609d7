// A full disk under a run's logs costs the run nothing (exec/supervisor.cc, Drain): the run's
// output goes through a pipe the supervisor empties into the log, so while the disk is full the
// bytes wait (and the run blocks once the pipe is full) instead of the run's write failing. On a
// real tmpfs, filled for real; needs root to mount it.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "testutil/handles.h"
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "exec/posix_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using std::chrono::steady_clock;

class SupervisorFullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
    std::string tmpl = (fs::temp_directory_path() / "drover-full-disk-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    logs_ = dir_ + "/logs";
    fs::create_directories(logs_);
    ASSERT_EQ(mount("tmpfs", logs_.c_str(), "tmpfs", 0, "size=4m"), 0) << std::strerror(errno);
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) umount2(logs_.c_str(), MNT_DETACH);
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // Writes a file until the file system refuses with ENOSPC.
  void Fill() {
    int fd = open((logs_ + "/ballast").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    std::string block(1 << 16, 'x');
    for (;;) {
      ssize_t w = write(fd, block.data(), block.size());
      if (w < 0) {
        ASSERT_EQ(errno, ENOSPC);
        break;
      }
    }
    for (;;) {  // the last partial block
      if (write(fd, "x", 1) < 0) break;
    }
    close(fd);
  }
  std::string dir_, logs_;
  bool mounted_ = false;
};

// Issue 39: a run's own stdout write failed with ENOSPC while the store's disk was full, so the
// run lost the lines it printed meanwhile (25,024 of 60,000 points kept) or failed. Now it prints
// 60,000 metric lines into a full disk, waits while it is full, and every line is in its log,
// once and in order, when the disk has room again.
TEST_F(SupervisorFullDiskTest, ARunPrintingIntoAFullDiskLosesNoLine) {
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  ASSERT_TRUE(launcher.has_supervisor());
  Fill();
  LaunchSpec spec;
  spec.argv = {"sh", "-c",
               "i=0; while [ $i -lt 60000 ]; do echo \"{\\\"step\\\": $i, \\\"loss\\\": 1}\"; "
               "i=$((i+1)); done; echo done >&2"};
  spec.env = {std::string("PATH=") + getenv("PATH")};
  spec.cwd = dir_;
  spec.stdout_path = logs_ + "/1-1.out";
  spec.stderr_path = logs_ + "/1-1.err";
  spec.exit_path = dir_ + "/1-1.exit";  // off the full disk: the record is not what is tested
  Result<int> pid = testing::PidOf(launcher.Start(spec));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();

  // While the disk is full the run waits: it neither ends nor fails.
  ProcessExit end;
  bool ended = false;
  const auto full_until = steady_clock::now() + std::chrono::seconds(3);
  while (steady_clock::now() < full_until) {
    for (const ProcessExit& e : launcher.Wait(200).exits) {
      ADD_FAILURE() << "the run ended while the disk was full: exit " << e.exit_code << " signal "
                    << e.signal;
      end = e;
      ended = true;
    }
  }
  EXPECT_EQ(fs::file_size(spec.stdout_path), 0u);
  fs::remove(logs_ + "/ballast");

  const auto deadline = steady_clock::now() + std::chrono::seconds(60);
  while (!ended && steady_clock::now() < deadline) {
    for (const ProcessExit& e : launcher.Wait(1000).exits) {
      if (e.handle.id == *pid) {
        end = e;
        ended = true;
      }
    }
  }
  ASSERT_TRUE(ended) << "the run did not end within 60 s of the disk having room";
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(end.signal, 0);
  std::ifstream out(spec.stdout_path);
  std::string line;
  int n = 0;
  bool in_order = true;
  while (std::getline(out, line)) {
    if (line != "{\"step\": " + std::to_string(n) + ", \"loss\": 1}") in_order = false;
    ++n;
  }
  EXPECT_EQ(n, 60000);
  EXPECT_TRUE(in_order);
  std::ifstream err(spec.stderr_path);
  std::getline(err, line);
  EXPECT_EQ(line, "done");
}

}  // namespace
}  // namespace drover
