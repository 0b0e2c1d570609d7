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
      const int n = ++written[out];
      std::ofstream(out, std::ios::app) << "{\"step\": " << n << ", \"loss\": " << 1.0 / (n + 1)
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

TEST_F(StoreFullTest, ARunIsStoppedAtItsTimeoutWhileTheStoreIsFull) {
  // Two runs of 60 s: one with a 5 s timeout, one that prints all along under a 4 s stall monitor.
  // The disk fills at 2 s and frees at 30 s: the first is stopped at 5 s, not at 30 s, and the
  // second, which printed throughout, is not taken for stalled when the store comes back.
  Spec timed = ParseSpec("name: timed\ncommand: ./train\ntimeout: 5s\nretries: 0\n");
  Spec printer = ParseSpec("name: printer\ncommand: ./print\nmonitor: {stall: 4s}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 60'000;
    return p;
  });
  FakeGpuProbe probe({});
  Recorder observer;
  auto engine = std::make_unique<Engine>(*store_, launcher, probe, clock_, BaseOptions());
  auto a = engine->Submit(timed);
  auto b = engine->Submit(printer);
  ASSERT_TRUE(a.ok() && b.ok());
  const Millis t0 = clock_.Monotonic();
  bool armed = false, disarmed = false;
  Millis term_at = 0;
  launcher.on_wait = [&](FakeLauncher& l) {
    const Millis t = clock_.Monotonic() - t0;
    for (const LaunchSpec& ls : l.launches) {
      if (ls.argv[0] == "./print") std::ofstream(ls.stdout_path, std::ios::app) << "tick\n";
    }
    if (term_at == 0 && !l.signals.empty()) term_at = t;
    if (!armed && t >= 2000) {
      armed = true;
      store::ArmWriteFaults({.code = SQLITE_FULL});
    }
    if (armed && !disarmed && t >= 30'000) {
      disarmed = true;
      store::DisarmWriteFaults();
    }
  };
  Status done = engine->RunUntilDone(&observer);
  ASSERT_TRUE(done.ok()) << done.ToString();
  ASSERT_TRUE(disarmed);
  ASSERT_EQ(observer.recovered.size(), 1u);
  // Signalled at its deadline, while the store was still full.
  EXPECT_GE(term_at, 5000);
  EXPECT_LT(term_at, 6000);
  auto timed_attempts = store_->ListAttempts(a->runs[0].id).value();
  ASSERT_EQ(timed_attempts.size(), 1u);
  EXPECT_EQ(timed_attempts[0].reason, "timeout");
  EXPECT_LT(timed_attempts[0].ended_ms - timed_attempts[0].started_ms, 6000);
  EXPECT_EQ(store_->GetRun(a->runs[0].id).value()->state, RunState::kFailed);
  auto printed = store_->ListAttempts(b->runs[0].id).value();
  ASSERT_EQ(printed.size(), 1u);
  EXPECT_EQ(printed[0].reason, ToString(AttemptOutcome::kSucceeded)) << "a run that printed all along was stopped";
  EXPECT_EQ(printed[0].ended_ms - printed[0].started_ms, 60'000);
}

TEST_F(StoreFullTest, ASubmitOnTopOfAStalledCommitIsRefusedAndLandsNothing) {
  // The loop's transaction is kept open between commits (a long commit interval); the disk is
  // full when a submit arrives, so the commit before the submit's own fails. The submit is
  // refused with the reason, and once there is room the loop's writes land and the submit does
  // not (its caller was told it failed).
  Spec spec = ParseSpec("name: running\ncommand: ./train\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 10'000;
    p.stdout_text = "{\"step\": 0, \"loss\": 1.0}\n";
    return p;
  });
  FakeGpuProbe probe({});
  Recorder observer;
  EngineOptions options = BaseOptions();
  options.commit_interval_ms = 60'000;
  auto engine = std::make_unique<Engine>(*store_, launcher, probe, clock_, options);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  auto prepared = PrepareSubmit(ParseSpec("name: late\ncommand: ./late\n"), options.store_dir,
                                clock_.Now());
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  std::optional<std::future<Result<CommandReply>>> reply;
  const Millis t0 = clock_.Monotonic();
  bool disarmed = false;
  launcher.on_wait = [&](FakeLauncher&) {
    const Millis t = clock_.Monotonic() - t0;
    if (!reply && t >= 1000) {
      store::ArmWriteFaults({.code = SQLITE_FULL});
      reply = engine->Post(cmd::Commit{std::make_shared<PreparedSubmit>(*prepared)});
    }
    if (reply && !disarmed && t >= 8000) {
      disarmed = true;
      store::DisarmWriteFaults();
    }
  };
  Status done = engine->RunUntilDone(&observer);
  ASSERT_TRUE(done.ok()) << done.ToString();
  ASSERT_TRUE(reply.has_value());
  Result<CommandReply> r = reply->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("submit waits until the store has room"), std::string::npos)
      << r.status().message();
  auto experiments = store_->ListExperiments().value();
  ASSERT_EQ(experiments.size(), 1u);
  EXPECT_EQ(experiments[0].name, "running");
  // What the loop held when the submit came landed: the run's start, its point, its end.
  auto run = store_->GetRun(sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kSucceeded);
  EXPECT_EQ(store_->GetMetrics(sub->runs[0].id, "loss").value().size(), 1u);
}

}  // namespace
}  // namespace drover
