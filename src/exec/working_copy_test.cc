// Working copies against the real kernel: overlays mounted in the run's own mount namespace by the
// real launcher, runs that rewrite, append to, truncate, chmod and delete their files, as root and
// (in a child that drops to nobody) as an ordinary user.
#include "exec/working_copy.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <sstream>

#include "exec/posix_launcher.h"
#include "exec/snapshot.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// What a careless run does to its working copy.
constexpr const char* kVandal =
    "set -e\n"
    "echo rewritten > train.py\n"
    "echo appended >> data.txt\n"
    ": > big.bin\n"
    "chmod 600 config.yaml\n"
    "rm notes.txt\n"
    "echo new > outputs.txt\n"
    "truncate -s 3 lib/util.py\n";

// Runs `script` with sh in the working copy of run `n`, waits, and returns its stdout.
std::string RunIn(PosixLauncher& launcher, WorkingCopies& copies, const Snapshot& snap,
                  const fs::path& store, int n, const std::string& script, std::string* error,
                  const std::map<std::string, std::string>& data = {}) {
  RunFiles files = RunFiles::In(store.string(), 1, n);
  fs::create_directories(files.logs);
  fs::path out = files.Stdout(n), err = files.Stderr(n);
  std::vector<DataMount> mounts;
  for (const auto& [name, source] : data) mounts.push_back({source, files.work + "/" + name});
  auto wc = copies.Prepare(snap, files, false, mounts);
  if (!wc.ok()) {
    *error = wc.status().ToString();
    return "";
  }
  LaunchSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.env = {std::string("PATH=") + getenv("PATH")};
  spec.cwd = wc->path;
  spec.overlay = wc->overlay;
  if (!wc->overlay.empty()) spec.data = mounts;
  spec.stdout_path = out.string();
  spec.stderr_path = err.string();
  auto pid = launcher.Start(spec);
  if (!pid.ok()) {
    *error = pid.status().ToString();
    return "";
  }
  for (int i = 0; i < 200; ++i) {
    for (const ProcessExit& e : launcher.Wait(100).exits) {
      if (e.handle != *pid) continue;
      if (e.exit_code != 0) *error = "exit " + std::to_string(e.exit_code) + ": " + Read(err);
      return Read(out);
    }
  }
  *error = "the run did not end";
  return "";
}

// Everything the test checks, as a list of failures (empty: all good), so the ordinary-user case
// can run it in a child process and report back.
std::string CheckIsolation(const fs::path& dir, bool expect_overlay) {
  std::string failures;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) failures += what + "\n";
  };
  fs::path work = dir / "code";
  Write(work / "train.py", "print('train')\n");
  Write(work / "data.txt", "data\n");
  Write(work / "big.bin", std::string(2 << 20, 'b'));  // over the copy limit: an overlay
  Write(work / "config.yaml", "lr: 0.1\n");
  Write(work / "notes.txt", "notes\n");
  Write(work / "lib" / "util.py", "def util(): pass\n");
  for (int i = 0; i < 8; ++i) Write(work / "pad" / std::to_string(i), "x\n");
  auto snap = TakeSnapshot(work.string(), (dir / "snapshots").string());
  if (!snap.ok()) return "snapshot: " + snap.status().ToString();
  WorkingCopies copies = WorkingCopies::Probe((dir / "runs").string());
  // A kernel or container that refuses overlays (no user namespaces, no CAP_SYS_ADMIN) gets
  // copies: the engine's fallback, tested below; here the test is skipped, saying why.
  if (expect_overlay && !copies.overlay()) return "SKIP: " + copies.why_not();
  expect(copies.overlay() == expect_overlay,
         "overlay() is " + std::to_string(copies.overlay()) + " (" + copies.why_not() + ")");
  PosixLauncher launcher;
  std::string error;
  RunIn(launcher, copies, *snap, dir, 1, kVandal, &error);
  expect(error.empty(), "run 1: " + error);
  // The snapshot is untouched: content and modes.
  fs::path s = snap->path;
  expect(Read(s / "train.py") == "print('train')\n", "snapshot train.py changed");
  expect(Read(s / "data.txt") == "data\n", "snapshot data.txt changed");
  expect(fs::file_size(s / "big.bin") == (2u << 20), "snapshot big.bin truncated");
  expect((fs::status(s / "config.yaml").permissions() & fs::perms::all) ==
             (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
              fs::perms::others_read),
         "snapshot config.yaml chmodded");
  expect(fs::exists(s / "notes.txt"), "snapshot notes.txt deleted");
  expect(Read(s / "lib" / "util.py") == "def util(): pass\n", "snapshot lib/util.py truncated");
  expect(!fs::exists(s / "outputs.txt"), "the run's output landed in the snapshot");
  if (expect_overlay) {
    // What the run wrote is kept in its changes/, and the code is not copied.
    fs::path changes = dir / "changes" / "1";
    expect(Read(changes / "train.py") == "rewritten\n", "changes/train.py");
    expect(Read(changes / "outputs.txt") == "new\n", "changes/outputs.txt");
    expect(!fs::exists(changes / "pad"), "untouched files were copied into changes/");
  }
  // A second run sees the snapshot as it was, and a retry of the first sees its own changes.
  std::string seen = RunIn(launcher, copies, *snap, dir, 2,
                           "cat train.py data.txt notes.txt; wc -c < big.bin; ls", &error);
  expect(error.empty(), "run 2: " + error);
  expect(seen ==
             "print('train')\ndata\nnotes\n2097152\nbig.bin\nconfig.yaml\ndata.txt\nlib\n"
             "notes.txt\npad\ntrain.py\n",
         "run 2 saw: " + seen);
  std::string again = RunIn(launcher, copies, *snap, dir, 1,
                            "cat train.py data.txt; test ! -e notes.txt && echo gone", &error);
  expect(error.empty(), "run 1, attempt 2: " + error);
  expect(again == "rewritten\ndata\nappended\ngone\n", "run 1's retry saw: " + again);
  return failures;
}

// A spec's data: a folder and a file outside the code, shown in the working copy of a small
// snapshot (which gets an overlay for it), readable and, with a mount namespace, read-only.
std::string CheckData(const fs::path& dir, bool expect_read_only) {
  std::string failures;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) failures += what + "\n";
  };
  Write(dir / "code" / "train.sh", "echo train\n");
  Write(dir / "datasets" / "set" / "a.txt", "a\n");
  Write(dir / "labels.csv", "l\n");
  auto snap = TakeSnapshot((dir / "code").string(), (dir / "snapshots").string());
  if (!snap.ok()) return "snapshot: " + snap.status().ToString();
  WorkingCopies copies = WorkingCopies::Deferred((dir / "runs").string());
  PosixLauncher launcher;
  std::string error;
  const std::map<std::string, std::string> data = {
      {"set", (dir / "datasets" / "set").string()}, {"labels.csv", (dir / "labels.csv").string()}};
  std::string seen = RunIn(launcher, copies, *snap, dir, 1,
                           "cat set/a.txt labels.csv; "
                           "(echo x > set/new.txt) 2>/dev/null && echo wrote || echo refused; "
                           "(echo y >> labels.csv) 2>/dev/null && echo wrote || echo refused; "
                           "(rm set/a.txt) 2>/dev/null && echo wrote || echo refused",
                           &error, data);
  expect(error.empty(), "run: " + error);
  if (expect_read_only && !copies.overlay()) return "SKIP: " + copies.why_not();
  const std::string want = expect_read_only ? "a\nl\nrefused\nrefused\nrefused\n"
                                            : "a\nl\nwrote\nwrote\nwrote\n";
  expect(seen == want, "the run saw: " + seen);
  if (expect_read_only) {
    expect(Read(dir / "datasets" / "set" / "a.txt") == "a\n", "the data's a.txt changed");
    expect(!fs::exists(dir / "datasets" / "set" / "new.txt"), "the run wrote into the data");
    expect(Read(dir / "labels.csv") == "l\n", "labels.csv changed");
  }
  return failures;
}

// Runs `check` on a folder of its own in a child that dropped to nobody; its failures, or
// "SKIP: why" when this machine cannot (not root, a parent folder others cannot search).
std::string AsNobody(const fs::path& dir, const std::function<std::string(const fs::path&)>& check) {
  if (geteuid() != 0) return "SKIP: needs root to drop to nobody";
  // nobody must be able to reach its folder.
  chmod(dir.c_str(), 0777);
  for (fs::path p = dir.parent_path(); p != p.root_path(); p = p.parent_path()) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      return "SKIP: " + p.string() + " is not searchable by other users";
    }
  }
  fs::path mine = dir / "nobody";
  fs::create_directory(mine);
  if (chown(mine.c_str(), 65534, 65534) != 0) return "cannot chown to nobody";
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string failures;
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      failures = "cannot become nobody";
    } else {
      // A process that dropped root in place is not dumpable, so its /proc/self files stay
      // root's; a user's own login or `runuser` execs, which makes it dumpable again.
      prctl(PR_SET_DUMPABLE, 1);
      failures = check(mine);
    }
    (void)!write(fds[1], failures.data(), failures.size());
    _exit(0);
  }
  close(fds[1]);
  std::string failures;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) failures.append(buf, n);
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    failures += "the child did not exit cleanly\n";
  }
  return failures;
}

class WorkingCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-wc-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = fs::canonical(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(WorkingCopyTest, ARunChangesNeitherTheSnapshotNorAnotherRun) {
  // As whoever runs the tests (root on CI): a private mount namespace.
  std::string failures = CheckIsolation(dir_, /*expect_overlay=*/true);
  if (failures.starts_with("SKIP: ")) GTEST_SKIP() << "overlays cannot be mounted: " << failures;
  EXPECT_EQ(failures, "");
}

TEST_F(WorkingCopyTest, AsAnOrdinaryUserToo) {
  std::string failures =
      AsNobody(dir_, [](const fs::path& d) { return CheckIsolation(d, /*expect_overlay=*/true); });
  if (failures.starts_with("SKIP: ")) GTEST_SKIP() << failures;
  EXPECT_EQ(failures, "");
}

TEST_F(WorkingCopyTest, DataIsShownReadOnly) {
  std::string failures = CheckData(dir_, /*expect_read_only=*/true);
  if (failures.starts_with("SKIP: ")) GTEST_SKIP() << "overlays cannot be mounted: " << failures;
  EXPECT_EQ(failures, "");
}

TEST_F(WorkingCopyTest, DataIsShownReadOnlyToAnOrdinaryUserToo) {
  std::string failures =
      AsNobody(dir_, [](const fs::path& d) { return CheckData(d, /*expect_read_only=*/true); });
  if (failures.starts_with("SKIP: ")) GTEST_SKIP() << failures;
  EXPECT_EQ(failures, "");
}

TEST_F(WorkingCopyTest, DataIsLinkedIntoACopy) {
  // No mount namespace (copies): the data is there, as links (writable through: docs/spec.md).
  setenv("DROVER_WORKING_COPY", "copy", 1);
  std::string failures = CheckData(dir_, /*expect_read_only=*/false);
  unsetenv("DROVER_WORKING_COPY");
  EXPECT_EQ(failures, "");
}

TEST_F(WorkingCopyTest, CopiesIsolateToo) {
  setenv("DROVER_WORKING_COPY", "copy", 1);
  std::string failures = CheckIsolation(dir_, /*expect_overlay=*/false);
  unsetenv("DROVER_WORKING_COPY");
  EXPECT_EQ(failures, "");
}

TEST_F(WorkingCopyTest, ASmallSnapshotIsCopiedNotMounted) {
  Write(dir_ / "code" / "run.sh", "echo hi\n");
  auto snap = TakeSnapshot((dir_ / "code").string(), (dir_ / "snapshots").string());
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  WorkingCopies copies = WorkingCopies::Probe((dir_ / "runs").string());
  auto wc = copies.Prepare(*snap, RunFiles::In(dir_.string(), 1, 1));
  ASSERT_TRUE(wc.ok()) << wc.status().ToString();
  EXPECT_TRUE(wc->overlay.empty());
  EXPECT_EQ(wc->path, (dir_ / "runs" / "1").string());
  EXPECT_EQ(Read(dir_ / "runs" / "1" / "run.sh"), "echo hi\n");
  EXPECT_FALSE(fs::exists(dir_ / "changes" / "1"));
  // The probe cleaned up after itself.
  for (const auto& e : fs::directory_iterator(dir_ / "runs")) {
    EXPECT_EQ(e.path().filename(), "1");
  }
}

TEST_F(WorkingCopyTest, TheOverlayProbeWaitsForASnapshotTooBigToCopy) {
  // An engine whose snapshots are all small never forks the probe (a fork and a mount per
  // engine: a tenth of a second, most of what 1,000 short runs cost).
  Write(dir_ / "small" / "run.sh", "echo hi\n");
  for (int i = 0; i <= kCopyMaxFiles; ++i) {
    Write(dir_ / "big" / ("f" + std::to_string(i) + ".txt"), std::to_string(i) + "\n");
  }
  auto small = TakeSnapshot((dir_ / "small").string(), (dir_ / "snapshots").string());
  auto big = TakeSnapshot((dir_ / "big").string(), (dir_ / "snapshots").string());
  ASSERT_TRUE(small.ok() && big.ok());
  WorkingCopies copies = WorkingCopies::Deferred((dir_ / "runs").string());
  EXPECT_FALSE(copies.probed());
  ASSERT_TRUE(copies.Prepare(*small, RunFiles::In(dir_.string(), 1, 1)).ok());
  EXPECT_FALSE(copies.probed());
  EXPECT_FALSE(copies.overlay());
  auto wc = copies.Prepare(*big, RunFiles::In(dir_.string(), 1, 2));
  ASSERT_TRUE(wc.ok()) << wc.status().ToString();
  EXPECT_TRUE(copies.probed());
  // The same answer as probing up front, and the run's copy is made the way it says.
  WorkingCopies eager = WorkingCopies::Probe((dir_ / "runs").string());
  EXPECT_EQ(copies.overlay(), eager.overlay()) << copies.why_not() << " / " << eager.why_not();
  EXPECT_EQ(wc->overlay.empty(), !copies.overlay());
  if (wc->overlay.empty()) {
    EXPECT_EQ(Read(dir_ / "runs" / "2" / "f3.txt"), "3\n");
  }
}

TEST(RunFiles, NewRunsUseFewFoldersAndOldRunsKeepTheirs) {
  RunFiles f = RunFiles::In("/s", 3, 42);
  EXPECT_EQ(f.work, "/s/runs/42");
  EXPECT_EQ(f.changes, "/s/changes/42");
  EXPECT_EQ(f.overlay_scratch, "/s/changes/.42");
  EXPECT_EQ(f.Stdout(2), "/s/logs/3/42-2.out");
  EXPECT_EQ(f.Stderr(2), "/s/logs/3/42-2.err");
  EXPECT_EQ(f.Exit(1), "/s/logs/3/42-1.exit");
  EXPECT_EQ(f.checkpoints, "/s/checkpoints/42");
  // A run begun by an older drover: runs/<id>/ held its logs beside work/.
  std::string tmpl = (fs::temp_directory_path() / "drover-rf-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  Write(fs::path(tmpl) / "runs" / "7" / "attempt-1.out", "old\n");
  fs::create_directories(fs::path(tmpl) / "runs" / "7" / "work");
  RunFiles old = RunFiles::In(tmpl, 1, 7);
  EXPECT_EQ(old.work, tmpl + "/runs/7/work");
  EXPECT_EQ(old.Stdout(2), tmpl + "/runs/7/attempt-2.out");
  EXPECT_EQ(old.checkpoints, tmpl + "/runs/7/checkpoints");
  fs::remove_all(tmpl);
}

TEST(RunFilesTest, AnotherUsersRunFolderNeverPassesForTheOldLayout) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make another user's folder";
  std::string tmpl = (fs::temp_directory_path() / "drover-layout-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string run = tmpl + "/runs/6";
  fs::create_directories(run + "/work");
  std::ofstream(run + "/attempt-1.out") << "";
  // The daemon's own folder with the old files: the old layout.
  EXPECT_EQ(RunFiles::In(tmpl, 1, 6).work, run + "/work");
  // The same, but a user's (a root daemon's run as its submitter): what they put there decides
  // nothing.
  ASSERT_EQ(lchown(run.c_str(), 65534, 65534), 0);
  EXPECT_EQ(RunFiles::In(tmpl, 1, 6).work, run);
  EXPECT_EQ(RunFiles::In(tmpl, 1, 6).Exit(2), tmpl + "/logs/1/6-2.exit");
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace drover
