// Working copies end to end: a sweep over a big workdir stores the code about once, and every run
// still has a private, writable copy of it (docs/execution.md, "Working copies").
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::RunDrover;

// Bytes a folder takes on disk: allocated blocks, each inode once (hard links are not counted
// twice), as `du` counts them.
int64_t DiskUsage(const fs::path& dir) {
  int64_t bytes = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) continue;
    if (!seen.insert({st.st_dev, st.st_ino}).second) continue;
    bytes += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

class IsolationTest : public testing::CliFixture {};

TEST_F(IsolationTest, SixtyRunsOfA48MiBWorkdirStoreTheCodeAboutOnce) {
  constexpr int64_t kCode = 48LL << 20;
  // Real bytes (not a sparse file), in a few files, as a repository with a model file would be.
  {
    std::ofstream big(dir_ / "code" / "weights.bin", std::ios::binary);
    std::string block(1 << 20, '\0');
    for (int64_t i = 0; i < kCode / static_cast<int64_t>(block.size()); ++i) {
      for (size_t j = 0; j < block.size(); j += 4096) block[j] = static_cast<char>(i + j);
      big << block;
    }
  }
  Write("code/data.txt", "original\n");
  Write("code/train.sh", "echo training\n");
  const int64_t code = DiskUsage(dir_ / "code");
  // Each run checks that it sees the code as submitted (no other run's changes), then rewrites,
  // appends to, truncates, chmods and deletes its files.
  std::string spec = Write(
      "sweep.yaml",
      "name: sweep\nworkdir: code\nshell: true\n"
      "params: {i: [" +
          [] {
            std::string s;
            for (int i = 0; i < 60; ++i) s += (i ? ", " : "") + std::to_string(i);
            return s;
          }() +
          "]}\n"
          "resources: {cpus: 1}\n"
          "command: \"test \\\"$(cat data.txt)\\\" = original && test $(wc -c < weights.bin) = " +
          std::to_string(kCode) +
          " && echo run {i} >> data.txt && : > weights.bin && chmod 700 train.sh && rm train.sh "
          "&& echo out {i} > out.txt && cat data.txt\"\n");
  auto run = RunDrover({"run", spec, "--store", store_, "--cpus", "2", "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto runs = (*store)->ListRuns(RunFilter{}).value();
  ASSERT_EQ(runs.size(), 60u);
  for (const auto& r : runs) EXPECT_EQ(r.state, RunState::kSucceeded) << "run " << r.id;
  // Each run's output says it saw only its own change.
  for (const auto& r : runs) {
    auto attempts = (*store)->ListAttempts(r.id).value();
    ASSERT_EQ(attempts.size(), 1u);
    std::string out = testing::ReadFile(attempts[0].stdout_path);
    EXPECT_EQ(out, "original\nrun " + std::to_string(r.index) + "\n") << "run " << r.id;
  }
  // The snapshot is as submitted.
  auto exp = (*store)->ListExperiments().value();
  ASSERT_EQ(exp.size(), 1u);
  auto snap = (*store)->GetSnapshot(exp[0].snapshot_hash).value();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(testing::ReadFile(snap->path + "/data.txt"), "original\n");
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(snap->path + "/weights.bin")), kCode);
  EXPECT_TRUE(fs::exists(snap->path + "/train.sh"));

  // Where overlays cannot be mounted (no user namespaces, a container without CAP_SYS_ADMIN)
  // every run gets a copy: isolated, as checked above, but not cheap; the engine logged why.
  if (!fs::exists(fs::path(store_) / "changes")) {
    GTEST_SKIP() << "overlays cannot be mounted here, so the runs' working copies were copies: "
                 << run.err;
  }
  const int64_t grown = DiskUsage(store_);
  RecordProperty("store_bytes", std::to_string(grown));
  RecordProperty("code_bytes", std::to_string(code));
  EXPECT_LT(grown, 2 * code) << "the store grew by " << (grown >> 20) << " MiB for 60 runs of "
                             << (code >> 20) << " MiB of code";
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// A spec's data: a folder the snapshot leaves out (.gitignore) is in every run's working copy,
// read-only, and named by $DROVER_DATA_<NAME>, in the foreground and through the daemon's
// supervisor; a path that does not exist is an error at its place in the spec.
class DataTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    testing::StopDaemonOf(store_);
    CliFixture::TearDown();
  }
};

TEST_F(DataTest, DataLeftOutOfTheSnapshotIsReadOnlyInEveryRun) {
  Write("code/.gitignore", "data/\n");
  fs::create_directories(dir_ / "code" / "data");
  Write("code/data/train.txt", "rows\n");
  Write("code/train.sh",
        "cat train/train.txt\n"
        "test \"$DROVER_DATA_TRAIN\" = \"$PWD/train\" && echo named\n"
        "(echo x > train/new.txt) 2>/dev/null && echo wrote || echo refused\n");
  std::string spec = Write("d.yaml", "name: d\nworkdir: code\ncommand: sh train.sh\n"
                                     "data: {train: code/data}\n");
  auto run = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto check = [&](int64_t run_id) {
    auto store = Store::Open(store_ + "/drover.db");
    auto attempts = (*store)->ListAttempts(run_id).value();
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(testing::ReadFile(attempts[0].stdout_path), "rows\nnamed\nrefused\n")
        << testing::ReadFile(attempts[0].stderr_path);
    auto exp = (*store)->GetExperiment(1).value();
    auto snap = (*store)->GetSnapshot(exp->snapshot_hash).value();
    EXPECT_FALSE(fs::exists(fs::path(snap->path) / "data")) << "the data went into the snapshot";
  };
  check(1);
  EXPECT_FALSE(fs::exists(dir_ / "code" / "data" / "new.txt"));

  // The daemon's runs start from its supervisor: the mounts travel with the start.
  pid_t daemon = testing::StartDaemon(store_, dir_.string());
  auto second = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  check(2);
  kill(daemon, SIGTERM);
  EXPECT_EQ(testing::WaitExit(daemon), 0);

  std::string missing = Write("m.yaml", "name: m\nworkdir: code\ncommand: sh train.sh\n"
                                        "data: {train: code/nowhere}\n");
  auto bad = RunDrover({"run", missing, "--dry-run", "--store", store_});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("m.yaml:4:15: data.train 'code/nowhere' does not exist"),
            std::string::npos)
      << bad.err;
  std::string named = Write("n.yaml", "name: n\nworkdir: code\ncommand: sh train.sh\n"
                                      "data: {../up: code/data}\n");
  bad = RunDrover({"run", named, "--dry-run", "--store", store_});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'../up' cannot name data"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace drover
