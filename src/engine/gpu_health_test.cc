// GPU health through the engine, with scripted fake telemetry, a scripted launcher and a fake
// clock: an uncorrectable error drains its GPU (no new run starts on it, the running one goes on,
// alerts say so) until an admin clears it; drains survive a restart; an admin drains too; MIG
// instances are GPUs of their own (their UUIDs in CUDA_VISIBLE_DEVICES) and a fault of their GPU
// drains them all; sustained throttling warns with the clocks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "engine/engine.h"
#include "gpu/drain_book.h"
#include "spec/spec_parser.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

using testing::FakeLauncher;
using testing::FakeProcess;

constexpr int64_t GiB = 1024LL * 1024 * 1024;

class GpuHealthTest : public testing::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    config_.telemetry_period_ms = 5000;
    t0_ = clock_.Now();
  }

  std::unique_ptr<Engine> MakeEngine(FakeLauncher& launcher, GpuProbe& probe) {
    EngineOptions o = BaseOptions();
    o.watch = config_;
    return std::make_unique<Engine>(*store_, launcher, probe, clock_, o);
  }

  std::string BookPath() const { return DrainBookPath(BaseOptions().store_dir); }

  std::vector<Alert> AlertsOf(const std::string& kind) {
    AlertFilter f;
    f.kind = kind;
    f.newest_first = false;
    return store_->ListAlerts(f).value();
  }

  Attempt FirstAttempt(int64_t run_id) {
    auto attempts = store_->ListAttempts(run_id);
    EXPECT_TRUE(attempts.ok());
    EXPECT_FALSE(attempts->empty());
    return attempts->empty() ? Attempt{} : attempts->front();
  }

  watch::WatchConfig config_;
  Millis t0_ = 0;
};

TEST_F(GpuHealthTest, AnUncorrectableErrorDrainsTheGpuUntilAnAdminClearsIt) {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  probe.SetScript(*ParseTelemetryScript(
      R"({"at": "0s", "gpu": 0, "utilization": 90, "ecc_uncorrected": 0}
{"at": "30s", "gpu": 0, "ecc_uncorrected": 1}
)"));
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{120'000}; });
  bool cleared = false;
  launcher.on_wait = [&](FakeLauncher&) {
    if (!cleared && clock_.Now() >= t0_ + 300'000) {
      // The admin's `drover gpu clear 0`, as it lands in the book.
      auto c = ClearGpus(BookPath(), {{"GPU-0", 0}}, "alice", clock_.Now());
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_EQ(*c, std::vector<int>{0});
      cleared = true;
    }
  };
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: h\ncommand: sleep {i}\nparams: {i: [1, 2]}\n"
                                      "resources: {gpus: 1}\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_TRUE(cleared);

  const int64_t first = sub->runs[0].id;
  const int64_t second = sub->runs[1].id;
  // The running run was left alone: never signalled, it ran its two minutes and succeeded.
  EXPECT_TRUE(launcher.signals.empty());
  ASSERT_EQ(launcher.launches.size(), 2u);
  EXPECT_EQ(store_->GetRun(first).value()->state, RunState::kSucceeded);
  EXPECT_EQ(store_->GetRun(second).value()->state, RunState::kSucceeded);
  // No new run started on the drained GPU: the second waited for the clear (read back within a
  // second), not for the first to end at 2 minutes.
  const Attempt a1 = FirstAttempt(first);
  const Attempt a2 = FirstAttempt(second);
  EXPECT_LT(a1.started_ms, t0_ + 30'000);
  EXPECT_GE(a2.started_ms, t0_ + 300'000);
  EXPECT_LE(a2.started_ms, t0_ + 310'000);
  EXPECT_EQ(a2.cuda_visible_devices, "0");

  auto drained = AlertsOf("gpu_drained");
  ASSERT_EQ(drained.size(), 2u);
  const Alert& gpu = drained[0];
  EXPECT_EQ(gpu.severity, "error");
  EXPECT_EQ(gpu.gpu, 0);
  EXPECT_EQ(gpu.run_id, 0);
  EXPECT_EQ(gpu.message,
            fmt::format("GPU 0 reported an uncorrectable memory error (1 since the driver "
                        "loaded): drained, no new runs start on it; its running run {} is left "
                        "alone. An admin clears it with `drover gpu clear 0` after a GPU reset "
                        "(nvidia-smi -r -i 0, or a reboot).",
                        first));
  EXPECT_EQ(gpu.data["runs"], nlohmann::json({first}));
  const Alert& run = drained[1];
  EXPECT_EQ(run.run_id, first);
  EXPECT_EQ(run.severity, "warning");
  EXPECT_NE(run.message.find(fmt::format("run {} is on GPU 0, which reported an uncorrectable "
                                         "memory error",
                                         first)),
            std::string::npos)
      << run.message;
  auto clear = AlertsOf("gpu_cleared");
  ASSERT_EQ(clear.size(), 1u);
  EXPECT_EQ(clear[0].message, "GPU 0 cleared by alice: new runs may start on it again.");
  EXPECT_EQ(clear[0].severity, "info");

  // The book: nothing drained now, the error count seen (so the same count is not news again).
  auto book = ReadDrainBook(BookPath());
  ASSERT_TRUE(book.ok());
  EXPECT_TRUE(book->drained.empty());
  EXPECT_EQ(book->seen.at("GPU-0").ecc_uncorrected, 1);
  EXPECT_EQ(book->cleared.at("GPU-0").by, "alice");
}

TEST_F(GpuHealthTest, ADrainSurvivesARestartAndAnErrorSeenBeforeIsNotNews) {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}, {1, "GPU-1", "Fake", 16 * GiB, 0}});
  probe.SetScript(*ParseTelemetryScript(
      R"({"at": "0s", "gpu": 1, "xid": 79, "ecc_uncorrected": 2})"));
  {
    FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{30'000}; });
    auto engine = MakeEngine(launcher, probe);
    ASSERT_TRUE(engine->Submit(ParseSpec("name: a\ncommand: sleep 1\nresources: {gpus: 1}\n")).ok());
    ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
    ASSERT_EQ(launcher.launches.size(), 1u);
    EXPECT_EQ(testing::EnvOf(launcher.launches[0], "CUDA_VISIBLE_DEVICES"), "0");
  }
  auto drained = AlertsOf("gpu_drained");
  ASSERT_EQ(drained.size(), 2u);  // the XID and the error count, both about GPU 1
  EXPECT_NE(drained[0].message.find("GPU 1 reported that it fell off the bus (XID 79): the driver "
                                    "lost contact with it: drained, no new runs start on it; "
                                    "nothing runs on it now."),
            std::string::npos)
      << drained[0].message;
  auto book = ReadDrainBook(BookPath());
  ASSERT_TRUE(book.ok());
  ASSERT_EQ(book->drained.size(), 1u);
  EXPECT_EQ(book->drained[0].uuid, "GPU-1");
  EXPECT_EQ(book->drained[0].by, "drover");
  EXPECT_EQ(book->drained[0].kind, "xid:79");

  // A new engine (the daemon restarted): the same count of errors, no XID. GPU 1 stays drained,
  // so two runs take turns on GPU 0, and nothing new is raised.
  FakeGpuProbe again({{0, "GPU-0", "Fake", 16 * GiB, 0}, {1, "GPU-1", "Fake", 16 * GiB, 0}});
  again.SetScript(*ParseTelemetryScript(R"({"at": "0s", "gpu": 1, "ecc_uncorrected": 2})"));
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{30'000}; });
  auto engine = MakeEngine(launcher, again);
  ASSERT_TRUE(engine->Submit(ParseSpec("name: b\ncommand: sleep {i}\nparams: {i: [1, 2]}\n"
                                       "resources: {gpus: 1}\n"))
                  .ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 2u);
  EXPECT_EQ(launcher.max_running, 1);
  for (const LaunchSpec& l : launcher.launches) {
    EXPECT_EQ(testing::EnvOf(l, "CUDA_VISIBLE_DEVICES"), "0");
  }
  EXPECT_EQ(AlertsOf("gpu_drained").size(), 2u);
}

TEST_F(GpuHealthTest, AnAdminDrainsAGpuAndTheRunOnItGoesOn) {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{60'000}; });
  int step = 0;
  launcher.on_wait = [&](FakeLauncher&) {
    if (step == 0 && clock_.Now() >= t0_ + 10'000) {
      ASSERT_TRUE(DrainGpus(BookPath(), {{"GPU-0", 0}}, "fan noise", "alice", clock_.Now()).ok());
      step = 1;
    } else if (step == 1 && clock_.Now() >= t0_ + 200'000) {
      ASSERT_TRUE(ClearGpus(BookPath(), {{"GPU-0", 0}}, "alice", clock_.Now()).ok());
      step = 2;
    }
  };
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: d\ncommand: sleep {i}\nparams: {i: [1, 2]}\n"
                                      "resources: {gpus: 1}\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_TRUE(launcher.signals.empty());
  EXPECT_EQ(store_->GetRun(sub->runs[0].id).value()->state, RunState::kSucceeded);
  EXPECT_GE(FirstAttempt(sub->runs[1].id).started_ms, t0_ + 200'000);
  auto drained = AlertsOf("gpu_drained");
  ASSERT_EQ(drained.size(), 1u);
  EXPECT_EQ(drained[0].message,
            "GPU 0 drained by alice (fan noise): no new runs start on it; runs on it are left "
            "alone. `drover gpu clear 0` returns it.");
  EXPECT_EQ(AlertsOf("gpu_cleared").size(), 1u);
}

TEST_F(GpuHealthTest, MigInstancesAreGpusOfTheirOwnAndTheirGpusFaultDrainsThemAll) {
  auto devices = ParseFakeGpus("1x80GiB:mig=3g.40gb+3g.40gb");
  ASSERT_TRUE(devices.ok());
  FakeGpuProbe probe(*devices);
  // GPU 0 is in MIG mode: its instances are devices 1 and 2. A step for GPU 0 is each instance's.
  probe.SetScript(*ParseTelemetryScript(R"({"at": "30s", "gpu": 0, "xid": 79})"));
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{60'000}; });
  bool cleared = false;
  launcher.on_wait = [&](FakeLauncher&) {
    if (!cleared && clock_.Now() >= t0_ + 200'000) {
      auto c = ClearGpus(BookPath(), {{"MIG-fake-0-0", 1}, {"MIG-fake-0-1", 2}}, "alice",
                         clock_.Now());
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->size(), 2u);
      cleared = true;
    }
  };
  auto engine = MakeEngine(launcher, probe);
  // 30 GiB each: one run fits an instance, not two.
  auto sub = engine->Submit(ParseSpec("name: m\ncommand: sleep {i}\nparams: {i: [1, 2, 3]}\n"
                                      "resources: {gpus: 1, gpu_memory: 30GiB}\n"));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 3u);
  EXPECT_EQ(launcher.max_running, 2);
  std::set<std::string> visible;
  for (int i = 0; i < 2; ++i) visible.insert(testing::EnvOf(launcher.launches[i], "CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(visible, (std::set<std::string>{"MIG-fake-0-0", "MIG-fake-0-1"}));
  // The third waited for the clear: both instances were drained with their GPU.
  EXPECT_GE(FirstAttempt(sub->runs[2].id).started_ms, t0_ + 200'000);
  EXPECT_TRUE(launcher.signals.empty());
  auto drained = AlertsOf("gpu_drained");
  ASSERT_GE(drained.size(), 1u);
  EXPECT_EQ(drained[0].gpu, 0);
  EXPECT_NE(drained[0].message.find("GPU 0 (MIG instances 1, 2) reported that it fell off the bus "
                                    "(XID 79)"),
            std::string::npos)
      << drained[0].message;
  EXPECT_NE(drained[0].message.find(fmt::format("its running runs {}, {} are left alone",
                                                sub->runs[0].id, sub->runs[1].id)),
            std::string::npos)
      << drained[0].message;
  // A run alert for each run on it.
  EXPECT_EQ(drained.size(), 3u);
  const Attempt a = FirstAttempt(sub->runs[0].id);
  EXPECT_TRUE(a.cuda_visible_devices.rfind("MIG-fake-0-", 0) == 0) << a.cuda_visible_devices;
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_TRUE(a.gpus[0] == 1 || a.gpus[0] == 2);
}

TEST_F(GpuHealthTest, SustainedThermalThrottlingWarnsWithTheClocks) {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  probe.SetScript(*ParseTelemetryScript(
      R"({"at": "0s", "gpu": 0, "utilization": 95, "temperature": 88, "throttle": ["thermal"], "sm_clock_mhz": 1095, "sm_clock_max_mhz": 1980})"));
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{180'000}; });
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: t\ncommand: sleep 1\nresources: {gpus: 1}\n"));
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto t = AlertsOf("gpu_throttle");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].severity, "warning");
  EXPECT_EQ(t[0].gpu, 0);
  EXPECT_NE(t[0].message.find("GPU 0 has slowed its clocks for heat for 1m"), std::string::npos)
      << t[0].message;
  EXPECT_NE(t[0].message.find("(SM 1095 of 1980 MHz, 88 °C)"), std::string::npos) << t[0].message;
  EXPECT_NE(t[0].message.find(fmt::format("(on it: run {})", sub->runs[0].id)), std::string::npos)
      << t[0].message;
  EXPECT_TRUE(AlertsOf("gpu_drained").empty());
  // Nothing to keep in the book for a GPU that reports no error counters.
  EXPECT_FALSE(std::filesystem::exists(BookPath()));
}

}  // namespace
}  // namespace drover
