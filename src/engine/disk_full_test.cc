// A full or failing disk under the files the engine writes itself (the snapshot at submit, the
// working copy and log folder at each start), through the file fault seam (common/file_faults.h)
// failing those writes with ENOSPC or EIO: a submit says why and leaves nothing; a start that
// cannot be prepared charges the run nothing, holds every start with backoff, raises an alert,
// and the runs start once the disk takes writes again, from a whole working copy.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/file_faults.h"
#include "engine/engine.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::FakeLauncher;
using testing::FakeProcess;

class Alerts : public EngineObserver {
 public:
  void OnAlert(const Alert& a) override { seen.push_back(a); }
  std::vector<Alert> seen;
};

class DiskFaultTest : public testing::EngineFixture, public ::testing::WithParamInterface<int> {
 protected:
  void TearDown() override {
    DisarmFileFaults();
    EngineFixture::TearDown();
  }
  std::string Under(const char* folder) const { return (root_ / "store" / folder).string(); }
  std::vector<std::string> Entries(const fs::path& dir) const {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    return names;
  }
};

TEST_P(DiskFaultTest, AStartThatCannotBePreparedChargesNoAttemptAndHoldsStarts) {
  Spec spec = ParseSpec("name: disk\ncommand: python3 train.py {x}\nparams: {x: [1, 2]}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 1000;
    p.stdout_text = "{\"step\": 0, \"loss\": 1.0}\n";
    return p;
  });
  FakeGpuProbe probe({});
  Alerts observer;
  Engine engine(*store_, launcher, probe, clock_, BaseOptions());
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();

  // The working copies' folder takes no write for ten seconds.
  const int64_t injected_before = InjectedFileFaults();
  ArmFileFaults({.error = GetParam(), .under = Under("runs")});
  const Millis t0 = clock_.Monotonic();
  const Millis wall0 = clock_.Now();
  size_t launches_while_held = 99;
  Millis released_at = 0;
  launcher.on_wait = [&](FakeLauncher& l) {
    const Millis t = clock_.Monotonic() - t0;
    if (released_at == 0 && t >= 10'000) {
      launches_while_held = l.launches.size();
      released_at = t;
      DisarmFileFaults();
    }
  };
  Status done = engine.RunUntilDone(&observer);
  ASSERT_TRUE(done.ok()) << done.ToString();

  // Nothing started while the disk refused; tries backed off (0, 1, 3, 7 s: four in ten).
  EXPECT_EQ(launches_while_held, 0u);
  EXPECT_EQ(InjectedFileFaults() - injected_before, 4);
  ASSERT_EQ(launcher.launches.size(), 2u);
  for (const drover::Run& r : sub->runs) {
    auto run = store_->GetRun(r.id).value();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, RunState::kSucceeded) << r.id;
    EXPECT_EQ(run->attempts, 1) << "the held tries cost run " << r.id << " no attempt";
    auto attempts = store_->ListAttempts(r.id).value();
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(attempts[0].number, 1);
    EXPECT_GE(attempts[0].started_ms - wall0, 10'000) << "started while the disk refused";
    // A whole working copy, and nothing half-made beside it.
    std::ifstream in(fs::path(attempts[0].workdir) / "train.py");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "print('v1')\n");
  }
  for (const std::string& name : Entries(Under("runs"))) {
    EXPECT_EQ(name.find(".partial"), std::string::npos) << name;
  }
  // Said at once, with the system's words, and on record with how it ended.
  ASSERT_FALSE(observer.seen.empty());
  EXPECT_EQ(observer.seen[0].kind, "starts_held");
  EXPECT_NE(observer.seen[0].message.find(std::strerror(GetParam())), std::string::npos)
      << observer.seen[0].message;
  EXPECT_NE(observer.seen[0].message.find("charged nothing"), std::string::npos);
  auto stored = store_->ListAlerts({.kind = "starts_held"}).value();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_NE(stored[0].message.find("none was charged an attempt"), std::string::npos)
      << stored[0].message;
  EXPECT_EQ(stored[0].data["tries"].get<int>(), 4);
  EXPECT_GE(stored[0].data["held_ms"].get<Millis>(), 10'000);
}

TEST_P(DiskFaultTest, ASnapshotThatCannotBeWrittenIsASubmitErrorThatLeavesNothing) {
  Spec spec = ParseSpec("name: snap\ncommand: python3 train.py\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{}; });
  FakeGpuProbe probe({});
  Engine engine(*store_, launcher, probe, clock_, BaseOptions());
  // The snapshot's temp folder cannot be made; then the first file copied into it cannot be.
  for (int64_t after : {0, 1}) {
    ArmFileFaults({.error = GetParam(), .under = Under("snapshots"), .after = after});
    auto sub = engine.Submit(spec);
    ASSERT_FALSE(sub.ok());
    EXPECT_EQ(sub.status().code(), Code::kIo);
    EXPECT_NE(sub.status().message().find(std::strerror(GetParam())), std::string::npos)
        << sub.status().message();
    EXPECT_TRUE(store_->ListExperiments().value().empty());
    EXPECT_TRUE(Entries(Under("snapshots")).empty()) << "a half-written snapshot was left";
    DisarmFileFaults();
  }
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  EXPECT_EQ(store_->ListExperiments().value().size(), 1u);
}

std::string ErrnoName(const ::testing::TestParamInfo<int>& info) {
  return info.param == ENOSPC ? "ENOSPC" : info.param == EIO ? "EIO" : std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(Errors, DiskFaultTest, ::testing::Values(ENOSPC, EIO), ErrnoName);

}  // namespace
}  // namespace drover
