// A full disk under the store costs a run none of its output (issue 39): the run's stdout goes
// through a pipe the daemon's supervisor empties into the log, so while the disk is full the run
// waits instead of its writes failing. A real tmpfs, really filled.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

// Through a daemon (plain `drover run` submits to one) and in the foreground (`--foreground`: the
// engine is the command itself, and its supervisor the same).
class FullDiskOutputTest : public testing::CliFixture,
                           public ::testing::WithParamInterface<bool> {
 protected:
  bool foreground() const { return GetParam(); }
};

// Before: the daemon survived, but the run's own stdout writes failed with ENOSPC while the
// store's tmpfs was full: 25,024 of 60,000 points kept. Now all 60,000 are, each once.
TEST_P(FullDiskOutputTest, ARunPrintingIntoAFullStoreKeepsEveryPoint) {
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no user namespaces here (unshare -rm), so no small file system to fill";
  }
  const std::string go = (dir_ / "go").string();
  // It prints as fast as it can, once the disk is full.
  Write("code/t.sh", "while [ ! -f " + go + " ]; do sleep 0.05; done\n"
                     "i=0\nwhile [ $i -lt 60000 ]; do echo \"{\\\"step\\\": $i, \\\"loss\\\": 1}\"; "
                     "i=$((i+1)); done\n");
  const std::string spec = Write("full.yaml", "name: full\nworkdir: code\ncommand: /bin/sh t.sh\n"
                                              "resources: {gpus: 0}\n");
  const std::string store = (dir_ / "small").string();
  fs::create_directories(store);
  const std::string out = (dir_ / "full.out").string();
  // A daemon on the store (its supervisor starts the run), and `drover run` submitting to it.
  const std::string serve =
      foreground() ? "serve=\n"
                   : testing::DroverBin() + " serve --listen 127.0.0.1:0 --store " + store +
                         " --cpus 2 >" + out + ".serve 2>&1 &\nserve=$!\ni=0; while [ ! -f " +
                         store + "/daemon.json ] && [ $i -lt 400 ]; do sleep 0.05; "
                         "i=$((i+1)); done\n";
  const std::string script = Write(
      "full.sh",
      "mount -t tmpfs -o size=32m tmpfs " + store + " || exit 90\n" + serve +
          testing::DroverBin() + " run " + spec + " --store " + store +
          (foreground() ? " --foreground --cpus 2" : "") + " >" + out + " 2>&1 &\npid=$!\n"
          "i=0; while [ ! -f " + store + "/logs/1/1-1.out ] && [ $i -lt 400 ]; do sleep 0.05; "
          "i=$((i+1)); done\n"
          "dd if=/dev/zero of=" + store + "/filler bs=64k 2>/dev/null\n"
          "dd if=/dev/zero of=" + store + "/filler2 bs=1 2>/dev/null\n"
          "touch " + go + "\nsleep 10\n"
          "echo log while full: $(wc -l < " + store + "/logs/1/1-1.out) >>" + out + "\n"
          "rm " + store + "/filler " + store + "/filler2\nwait $pid\ncode=$?\n"
          "[ -z \"$serve\" ] || { kill $serve; wait $serve; }\n"
          "sqlite3 " + store + "/drover.db 'SELECT count(*), count(DISTINCT step), (SELECT state "
          "FROM runs WHERE id = 1) FROM metrics' >>" + out + "\n"
          "echo lines $(wc -l < " + store + "/logs/1/1-1.out) >>" + out + "\nexit $code\n");
  const int status = std::system(("unshare -rm sh " + script).c_str());
  const std::string said = testing::ReadFile(out);
  ASSERT_TRUE(WIFEXITED(status)) << said;
  ASSERT_NE(WEXITSTATUS(status), 90) << "could not mount a tmpfs: " << said;
  EXPECT_EQ(WEXITSTATUS(status), 0) << said;
  EXPECT_NE(said.find("run 1 succeeded"), std::string::npos)
      << said << testing::ReadFile(out + ".serve");
  EXPECT_NE(said.find("60000|60000|succeeded\nlines 60000"), std::string::npos) << said;
}

INSTANTIATE_TEST_SUITE_P(Paths, FullDiskOutputTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Foreground" : "Daemon"; });

}  // namespace
}  // namespace drover
