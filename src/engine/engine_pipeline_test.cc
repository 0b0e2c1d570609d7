// Pipelines in the engine (engine/pipelines.h, docs/pipelines.md), with a fake launcher and a
// fake clock: runs wait for their needs, see their outputs, are cached from an earlier success,
// and are not run when a need fails.
#include <gtest/gtest.h>

#include <cerrno>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/file_faults.h"
#include "engine/engine.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::EnvOf;
using testing::FakeLauncher;
using testing::FakeProcess;

constexpr const char* kPipeline = R"(
name: pipe
command_unused: 0
stages:
  make:   {command: "make {seed}", outputs: [out]}
  use:    {command: "use {x}", needs: [make]}
  gather: {command: "gather", needs: [use], gather: true}
params: {x: [1, 2], seed: 0}
)";

class EnginePipelineTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeLauncher& launcher, GpuProbe& probe) {
    EngineOptions o = BaseOptions();
    o.overlay_working_copies = false;  // the fake launcher mounts nothing: copies and links
    return std::make_unique<Engine>(*store_, launcher, probe, clock_, o);
  }
  Spec Pipeline(const std::string& make_exit = "0") {
    std::string yaml = kPipeline;
    yaml.replace(yaml.find("command_unused: 0\n"), 18, "");
    Spec s = ParseSpec(yaml);
    if (make_exit != "0") s.stages[0].command = {"fail"};
    return s;
  }
  // make writes out/made.txt into its working copy; use checks that it sees it there.
  static FakeLauncher::Script Script() {
    return [](const LaunchSpec& ls) {
      FakeProcess p;
      p.duration_ms = 1000;
      const std::string& what = ls.argv[0];
      if (what == "make") {
        fs::create_directories(ls.cwd + "/out");
        std::ofstream(ls.cwd + "/out/made.txt") << "made\n";
      } else if (what == "use") {
        std::ifstream in(ls.cwd + "/out/made.txt");
        std::string text((std::istreambuf_iterator<char>(in)), {});
        p.exit_code = text == "made\n" ? 0 : 3;
        p.stdout_text = "{\"step\": 1, \"score\": " + ls.argv[1] + "}\n";
      } else if (what == "fail") {
        p.exit_code = 1;
      }
      return p;
    };
  }
  std::map<std::string, std::vector<drover::Run>> ByStage(int64_t experiment_id) {
    RunFilter f;
    f.experiment_id = experiment_id;
    std::map<std::string, std::vector<drover::Run>> out;
    const std::vector<drover::Run> runs = store_->ListRuns(f).value();
    for (const drover::Run& r : runs) out[r.stage].push_back(r);
    return out;
  }
};

TEST_F(EnginePipelineTest, RunsWaitForTheirNeedsSeeTheirOutputsAndAreCachedTheNextTime) {
  FakeLauncher launcher(clock_, Script());
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(Pipeline());
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_EQ(sub->runs.size(), 4u);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  // make first, then the two use runs (together), then gather.
  ASSERT_EQ(launcher.launches.size(), 4u);
  EXPECT_EQ(launcher.launches[0].argv[0], "make");
  EXPECT_EQ(launcher.launches[1].argv[0], "use");
  EXPECT_EQ(launcher.launches[2].argv[0], "use");
  EXPECT_EQ(launcher.launches[3].argv[0], "gather");
  EXPECT_EQ(EnvOf(launcher.launches[1], "DROVER_STAGE"), "use");
  // A run's parameters are its stage's: make fans out over nothing.
  EXPECT_EQ(EnvOf(launcher.launches[0], "DROVER_PARAMS"), "{\"seed\":0}");
  const std::string inputs = EnvOf(launcher.launches[3], "DROVER_INPUTS");
  ASSERT_FALSE(inputs.empty());
  std::ifstream in(inputs);
  Json listed = Json::parse(in);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]["stage"], "use");
  EXPECT_EQ(listed[1]["metrics"]["score"], 2);

  auto first = ByStage(sub->experiment_id);
  ASSERT_EQ(first["make"].size(), 1u);
  ASSERT_EQ(first["use"].size(), 2u);
  for (const auto& [stage, runs] : first) {
    for (const drover::Run& r : runs) {
      EXPECT_EQ(r.state, RunState::kSucceeded) << stage << " " << r.reason;
      EXPECT_EQ(r.cached_from, 0);
      EXPECT_EQ(r.fingerprint.size(), 64u);
    }
  }
  const std::vector<Artifact> made = store_->ListArtifacts(first["make"][0].id).value();
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].path, "out/made.txt");
  EXPECT_EQ(first["use"][0].needs, std::vector<int64_t>{first["make"][0].id});

  // Again, unchanged: nothing is launched; each run names the run that did the work.
  auto again = engine->Submit(Pipeline());
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 4u);
  auto second = ByStage(again->experiment_id);
  for (const auto& [stage, runs] : second) {
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(runs[i].state, RunState::kSucceeded);
      EXPECT_EQ(runs[i].reason, "cached");
      EXPECT_EQ(runs[i].cached_from, first[stage][i].id) << stage;
      EXPECT_EQ(runs[i].fingerprint, first[stage][i].fingerprint);
      EXPECT_EQ(runs[i].attempts, 0);
    }
  }
  EXPECT_EQ(second["use"][1].final_metrics["score"], 2);
  EXPECT_EQ(store_->GetExperiment(again->experiment_id).value()->status, ExperimentStatus::kDone);

  // force: use runs again (make stays cached); gather's needs gave the same, but they are
  // other runs with the same fingerprints: it is cached too.
  Spec forced = Pipeline();
  forced.force = {"use"};
  auto third = engine->Submit(forced);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 6u);
  EXPECT_EQ(launcher.launches[4].argv[0], "use");
  EXPECT_EQ(launcher.launches[5].argv[0], "use");
  auto forced_runs = ByStage(third->experiment_id);
  EXPECT_NE(forced_runs["make"][0].cached_from, 0);
  EXPECT_NE(forced_runs["gather"][0].cached_from, 0);
}

// Issue 39, item 14: a stage that exited 0 failed `outputs_not_stored` when the store's disk was
// full for a moment, against docs/security.md's promise that a full disk costs no run. Now its
// outputs are held and stored again (1 s, doubling) until there is room, and what needs it runs.
TEST_F(EnginePipelineTest, OutputsThatCannotBeStoredForWantOfRoomAreHeldNotFailed) {
  FakeLauncher launcher(clock_, Script());
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(Pipeline());
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  const std::string artifacts = (fs::path(BaseOptions().store_dir) / "artifacts").string();
  const int64_t injected_before = InjectedFileFaults();
  ArmFileFaults({.error = ENOSPC, .under = artifacts});
  const Millis t0 = clock_.Monotonic();
  size_t launched_while_full = 99;
  launcher.on_wait = [&](FakeLauncher& l) {
    if (launched_while_full == 99 && clock_.Monotonic() - t0 >= 10'000) {
      launched_while_full = l.launches.size();
      DisarmFileFaults();
    }
  };
  Status done = engine->RunUntilDone(nullptr);
  DisarmFileFaults();
  ASSERT_TRUE(done.ok()) << done.ToString();
  // Only make ran while the disk was full: use waited for make's outputs, never charged.
  EXPECT_EQ(launched_while_full, 1u);
  EXPECT_GE(InjectedFileFaults() - injected_before, 3) << "stored again, more than once";
  auto runs = ByStage(sub->experiment_id);
  ASSERT_EQ(runs["make"].size(), 1u);
  const drover::Run& make = runs["make"][0];
  EXPECT_EQ(make.state, RunState::kSucceeded) << make.reason;
  EXPECT_EQ(make.attempts, 1);
  EXPECT_EQ(store_->ListArtifacts(make.id).value().size(), 1u);
  for (const drover::Run& r : runs["use"]) EXPECT_EQ(r.state, RunState::kSucceeded) << r.reason;
  EXPECT_EQ(launcher.launches.size(), 4u);
}

// "No room" is told by the errno, not the words: a failing disk (EIO) under an output the run
// named "No space left on device" fails the stage at once instead of holding it for ever.
TEST_F(EnginePipelineTest, AnOutputNamedLikeAFullDiskFailsOnARealErrorAndIsNotHeld) {
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    FakeProcess p;
    p.duration_ms = 1000;
    if (ls.argv[0] == "make") {
      fs::create_directories(ls.cwd + "/out");
      std::ofstream(ls.cwd + "/out/No space left on device") << "made\n";
    }
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(Pipeline());
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  const std::string artifacts = (fs::path(BaseOptions().store_dir) / "artifacts").string();
  ArmFileFaults({.error = EIO, .under = artifacts});
  const Millis t0 = clock_.Monotonic();
  Status done = engine->RunUntilDone(nullptr);
  DisarmFileFaults();
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_LT(clock_.Monotonic() - t0, 10'000);  // no waiting for room that will never come
  auto runs = ByStage(sub->experiment_id);
  ASSERT_EQ(runs["make"].size(), 1u);
  EXPECT_EQ(runs["make"][0].state, RunState::kFailed);
  EXPECT_EQ(runs["make"][0].reason, "outputs_not_stored");
  EXPECT_EQ(launcher.launches.size(), 1u);
}

TEST_F(EnginePipelineTest, AFailedNeedStopsWhatDependsOnItWithTheReason) {
  FakeLauncher launcher(clock_, Script());
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(Pipeline("1"));
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 1u);  // only make ran
  auto runs = ByStage(sub->experiment_id);
  EXPECT_EQ(runs["make"][0].state, RunState::kFailed);
  for (const char* stage : {"use", "gather"}) {
    for (const drover::Run& r : runs[stage]) {
      EXPECT_EQ(r.state, RunState::kCancelled) << stage;
      EXPECT_EQ(r.reason, "upstream_failed");
      EXPECT_EQ(r.attempts, 0);
    }
  }
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kDone);
}

// A plain run whose fingerprint (command, params, env, code) succeeded before is cached from it,
// unless the spec says rerun; two such runs queued at once run once: the second waits for the
// first and is cached from it; a duplicate whose twin fails runs itself.
TEST_F(EnginePipelineTest, APlainDuplicateIsCachedUnlessRerunAndTwinsQueuedAtOnceRunOnce) {
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    FakeProcess p;
    p.duration_ms = 1000;
    p.exit_code = ls.argv[1] == "bad" ? 1 : 0;
    p.stdout_text = "{\"step\": 1, \"acc\": 0.5}\n";
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  const std::string yaml = "name: plain\ncommand: train {x}\nparams: {x: [a, b]}\n";
  auto first = engine->Submit(ParseSpec(yaml));
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 2u);

  // The same spec again: nothing runs; each run names the one that did the work.
  auto again = engine->Submit(ParseSpec(yaml));
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 2u);
  RunFilter f;
  f.experiment_id = again->experiment_id;
  std::vector<drover::Run> cached = store_->ListRuns(f).value();
  ASSERT_EQ(cached.size(), 2u);
  for (size_t i = 0; i < cached.size(); ++i) {
    EXPECT_EQ(cached[i].state, RunState::kSucceeded);
    EXPECT_EQ(cached[i].reason, "cached");
    EXPECT_EQ(cached[i].cached_from, first->runs[i].id);
    EXPECT_EQ(cached[i].final_metrics["acc"], 0.5);
    EXPECT_EQ(cached[i].attempts, 0);
  }

  // rerun: both run again.
  Spec rerun = ParseSpec(yaml);
  rerun.rerun = true;
  ASSERT_TRUE(engine->Submit(rerun).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 4u);

  // Two experiments of a new config queued before either starts: run once.
  const std::string twin = "name: twin\ncommand: train c\n";
  auto t1 = engine->Submit(ParseSpec(twin));
  auto t2 = engine->Submit(ParseSpec(twin));
  ASSERT_TRUE(t1.ok() && t2.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 5u);
  const drover::Run second = store_->GetRun(t2->runs[0].id).value().value();
  EXPECT_EQ(second.state, RunState::kSucceeded);
  EXPECT_EQ(second.cached_from, t1->runs[0].id);

  // Retrying a cached run runs it for real: it stands on its own results from then on.
  cmd::Retry retry{.experiment_id = t2->experiment_id, .run_ids = {t2->runs[0].id}};
  ASSERT_TRUE(engine->Retry(retry).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 6u);
  const drover::Run retried = store_->GetRun(t2->runs[0].id).value().value();
  EXPECT_EQ(retried.state, RunState::kSucceeded);
  EXPECT_EQ(retried.cached_from, 0);
  EXPECT_EQ(retried.attempts, 1);

  // A twin that fails: the one waiting for it runs itself (and fails the same way).
  const std::string bad = "name: bad\ncommand: train bad\n";
  auto b1 = engine->Submit(ParseSpec(bad));
  auto b2 = engine->Submit(ParseSpec(bad));
  ASSERT_TRUE(b1.ok() && b2.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 8u);
  EXPECT_EQ(store_->GetRun(b2->runs[0].id).value()->state, RunState::kFailed);
  EXPECT_EQ(store_->GetRun(b2->runs[0].id).value()->cached_from, 0);
}

// Twins left queued by an engine that went away: the next one runs one of them and caches the
// other from it.
TEST_F(EnginePipelineTest, TwinsLeftQueuedAtARestartRunOnce) {
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 1000;
    p.stdout_text = "{\"step\": 1, \"acc\": 0.5}\n";
    return p;
  });
  FakeGpuProbe probe({});
  const std::string twin = "name: twin\ncommand: train c\n";
  int64_t first = 0, second = 0;
  {
    auto gone = MakeEngine(launcher, probe);  // submits, then goes away before running them
    auto a = gone->Submit(ParseSpec(twin));
    auto b = gone->Submit(ParseSpec(twin));
    ASSERT_TRUE(a.ok() && b.ok());
    first = a->runs[0].id;
    second = b->runs[0].id;
  }
  auto engine = MakeEngine(launcher, probe);
  ASSERT_TRUE(engine->Recover().ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 1u);
  EXPECT_EQ(store_->GetRun(first).value()->state, RunState::kSucceeded);
  const drover::Run b = store_->GetRun(second).value().value();
  EXPECT_EQ(b.state, RunState::kSucceeded);
  EXPECT_EQ(b.cached_from, first);
}

}  // namespace
}  // namespace drover
