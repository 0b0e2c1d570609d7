// A full disk under the store, with the real SQLite store on a file and the fault VFS failing
// its writes as ENOSPC would (SQLITE_FULL): the engine keeps running what runs, starts nothing,
// refuses writes with the reason, says so to its observer and sinks, retries the commit with
// backoff, and when there is room again lands everything, with no metric point lost or stored
// twice.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "engine/engine.h"
#include "store/fault_vfs.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

using testing::FakeLauncher;
using testing::FakeProcess;

class Recorder : public EngineObserver {
 public:
  void OnStoreStalled(const Status& why, Millis retry_in_ms) override {
    stalls.push_back(why.message());
    retries_in.push_back(retry_in_ms);
  }
  void OnStoreRecovered(Millis stalled_ms) override { recovered.push_back(stalled_ms); }
  void OnAlert(const Alert& a) override { alerts.push_back(a); }
  std::vector<std::string> stalls;
  std::vector<Millis> retries_in;
  std::vector<Millis> recovered;
  std::vector<Alert> alerts;
};

class StoreFullTest : public testing::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    auto s = Store::Open((root_ / "store" / "drover.db").string(), {.vfs = store::FaultVfsName()});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store::DisarmWriteFaults();
    EngineFixture::TearDown();
  }
};

TEST_F(StoreFullTest, TheEngineHoldsOnWhileTheDiskIsFullAndLosesNothing) {
  Spec spec = ParseSpec("name: full\ncommand: ./train {x}\nparams: {x: [1, 2]}\nmax_parallel: 1\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 20'000;
    p.stdout_text = "{\"step\": 0, \"loss\": 1.0}\n";
    return p;
  });
  FakeGpuProbe probe({});
  Recorder observer;
  EngineOptions options = BaseOptions();
  auto engine = std::make_unique<Engine>(*store_, launcher, probe, clock_, options);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();

  const Millis t0 = clock_.Monotonic();
  constexpr Millis kFullAt = 3000, kRoomAt = 12'000;
  std::map<std::string, int> written;  // lines printed per log file
  std::optional<std::future<Result<CommandReply>>> refused;
  bool armed = false, disarmed = false;
  int launches_when_full = -1;
  launcher.on_wait = [&](FakeLauncher& l) {
    const Millis t = clock_.Monotonic() - t0;
    // The running run prints a metric line on every wait: what it prints while the disk is full
    // must be stored once there is room, and none of it twice.
    if (l.running_now > 0 && !l.launches.empty()) {
      const std::string& out = l.launches.back().stdout_path;
      int& n = written[out];
      std::ofstream(out, std::ios::app) << "{\"step\": " << ++n << ", \"loss\": " << 1.0 / (n + 1)
                                         << "}\n";
    }
    if (!armed && t >= kFullAt) {
      armed = true;
      store::ArmWriteFaults({.code = SQLITE_FULL});
      launches_when_full = static_cast<int>(l.launches.size());
    }
    if (armed && !disarmed && !observer.stalls.empty() && !refused) {
      refused = engine->Post(cmd::SetPriority{sub->runs[1].id, 5});
    }
    if (armed && !disarmed && t >= kRoomAt) {
      disarmed = true;
      store::DisarmWriteFaults();
    }
  };
  Status done = engine->RunUntilDone(&observer);
  ASSERT_TRUE(done.ok()) << done.ToString();
  ASSERT_TRUE(disarmed);

  // It said so, and retried with a growing backoff.
  ASSERT_GE(observer.stalls.size(), 3u);
  EXPECT_NE(observer.stalls[0].find("database or disk is full"), std::string::npos)
      << observer.stalls[0];
  EXPECT_EQ(observer.retries_in[0], 1000);
  EXPECT_EQ(observer.retries_in[1], 2000);
  ASSERT_EQ(observer.recovered.size(), 1u);
  EXPECT_GE(observer.recovered[0], kRoomAt - kFullAt - 1000);
  ASSERT_FALSE(observer.alerts.empty());
  EXPECT_EQ(observer.alerts[0].kind, "store_unavailable");
  EXPECT_NE(observer.alerts[0].message.find("Running runs keep running"), std::string::npos);
  // A write asked for meanwhile was refused with the reason.
  ASSERT_TRUE(refused.has_value());
  Result<CommandReply> reply = refused->get();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), Code::kUnavailable);
  EXPECT_NE(reply.status().message().find("free space on the disk that holds the store"),
            std::string::npos)
      << reply.status().message();

  // The first run kept running; the second started only once the store had room.
  EXPECT_EQ(launches_when_full, 1);
  ASSERT_EQ(launcher.launches.size(), 2u);
  auto second = store_->ListAttempts(sub->runs[1].id).value();
  ASSERT_EQ(second.size(), 1u);
  for (const drover::Run& r : sub->runs) {
    auto run = store_->GetRun(r.id).value();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, RunState::kSucceeded) << r.id;
    auto attempts = store_->ListAttempts(r.id).value();
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(attempts[0].ended_ms - attempts[0].started_ms, 20'000);
    // Every line the run printed, each once, in order.
    auto points = store_->GetMetrics(r.id, "loss").value();
    const int lines = written[attempts[0].stdout_path] + 1;
    ASSERT_EQ(static_cast<int>(points.size()), lines) << r.id;
    for (int i = 0; i < lines; ++i) EXPECT_EQ(points[i].step, i);
  }
  // The stall is on record.
  auto alerts = store_->ListAlerts({.kind = "store_unavailable"}).value();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_NE(alerts[0].message.find("nothing was lost"), std::string::npos) << alerts[0].message;
  EXPECT_GE(alerts[0].data["retries"].get<int>(), 3);
  auto ok = store_->IntegrityOk();
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(*ok);
}

}  // namespace
}  // namespace drover
