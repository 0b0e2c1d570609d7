// The engine with a scripted launcher and a fake clock: scheduling onto fake GPUs, OOM recovery,
// retries with backoff, timeouts and cancels, all without sleeping or starting processes. The
// store is real SQLite (in memory) and snapshots are real folders.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "spec/spec_parser.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::EnvOf;
using testing::FakeLauncher;
using testing::FakeProcess;

class EngineTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeLauncher& launcher, GpuProbe& probe) {
    return std::make_unique<Engine>(*store_, launcher, probe, clock_, BaseOptions());
  }

  std::vector<Attempt> Attempts(int64_t run_id) { return store_->ListAttempts(run_id).value(); }
};

constexpr int64_t GiB = 1024LL * 1024 * 1024;

// A container run that needs GPUs is refused at submit while the CDI specs name no device for
// them (docs/containers.md, "GPUs"), and taken once they do; a CPU one needs none.
TEST_F(EngineTest, AContainerSpecNeedingGpusIsRefusedUntilTheCdiSpecsNameThem) {
  Spec spec = ParseSpec(R"(
name: c
command: python train.py
resources: {gpus: 1}
container: {image: localhost/digits:latest, runtime: podman}
)");
  // runtime: podman named, so the check holds whether or not podman is installed here.
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{}; });
  FakeGpuProbe probe(
      {{0, "GPU-fake-0", "Fake", 16 * GiB, 0}, {1, "GPU-fake-1", "Fake", 16 * GiB, 0}});
  const fs::path cdi = root_ / "cdi";
  fs::create_directories(cdi);
  EngineOptions o = BaseOptions();
  o.cdi_dirs = {cdi.string()};
  Engine engine(*store_, launcher, probe, clock_, o);
  Status st = engine.CheckSubmit(spec);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("nvidia-ctk cdi generate"), std::string::npos) << st.message();
  spec.resources.gpus = 0;
  EXPECT_TRUE(engine.CheckSubmit(spec).ok());
  spec.resources.gpus = 1;
  std::ofstream(cdi / "gpus.yaml")
      << "kind: nvidia.com/gpu\ndevices:\n- name: GPU-fake-0\n- name: GPU-fake-1\n";
  EXPECT_TRUE(engine.CheckSubmit(spec).ok());
  // pyxis runs through Slurm's srun: not on this machine.
  spec.container->runtime = ContainerRuntime::kPyxis;
  st = engine.CheckSubmit(spec);
  EXPECT_NE(st.message().find("pyxis"), std::string::npos) << st.message();
}

TEST_F(EngineTest, PacksFourRunsTwoPerFakeGpuAndRecordsEverything) {
  Spec spec = ParseSpec(R"(
name: compare
command: python train.py --model {model} --batch-size {batch_size}
params: {model: [mlp, cnn], batch_size: [32, 64]}
resources: {gpus: 1, gpu_memory: 6GiB}
objective: {metric: val_acc, mode: max}
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    FakeProcess p;
    p.duration_ms = 3000;
    p.stdout_text =
        "starting\n{\"epoch\": 1, \"val_acc\": 0.5}\n{\"epoch\": 2, \"val_acc\": 0.9}\n";
    return p;
  });
  FakeGpuProbe probe(
      {{0, "GPU-fake-0", "Fake", 16 * GiB, 0}, {1, "GPU-fake-1", "Fake", 16 * GiB, 0}});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_EQ(sub->runs.size(), 4u);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());

  EXPECT_EQ(launcher.max_running, 4);
  std::map<std::string, int> per_gpu;
  for (const auto& ls : launcher.launches) per_gpu[EnvOf(ls, "CUDA_VISIBLE_DEVICES")]++;
  EXPECT_EQ(per_gpu["0"], 2);
  EXPECT_EQ(per_gpu["1"], 2);
  for (const drover::Run& r : sub->runs) {
    auto run = store_->GetRun(r.id).value();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, RunState::kSucceeded);
    EXPECT_DOUBLE_EQ(run->final_metrics["val_acc"].get<double>(), 0.9);
    auto attempts = Attempts(r.id);
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_TRUE(attempts[0].cuda_visible_devices == "0" || attempts[0].cuda_visible_devices == "1");
    EXPECT_EQ(attempts[0].reason, "succeeded");
    EXPECT_EQ(attempts[0].ended_ms - attempts[0].started_ms, 3000);
    auto points = store_->GetMetrics(r.id, "val_acc").value();
    ASSERT_EQ(points.size(), 2u);
    EXPECT_EQ(points[0].step, 1);
    EXPECT_EQ(points[1].step, 2);
  }
  auto exp = store_->GetExperiment(sub->experiment_id).value();
  EXPECT_EQ(exp->status, ExperimentStatus::kDone);
}

TEST_F(EngineTest, StartsHandedToTheBackgroundEndAsStartsInTheForegroundDo) {
  // The daemon hands its starts to the supervisor and records them when they are reported: a
  // success, a failure that is retried, a timeout and a program that cannot start end the same
  // way, with the same attempts, as when each start is waited for.
  auto outcomes = [&](bool background) {
    // Configs of their own for each way (a config that failed before is not retried as often).
    Spec spec = ParseSpec(std::string("name: mixed\ncommand: \"{kind} --seed ") +
                          (background ? "2" : "1") +
                          "\"\nparams: {kind: [ok, fail, slow, no-such-program]}\n"
                          "retries: 1\nretry_backoff: 1s\ntimeout: 2s\n");
    FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
      FakeProcess p;
      p.duration_ms = ls.argv[0] == "slow" ? 60'000 : 500;
      p.exit_code = ls.argv[0] == "fail" ? 1 : 0;
      return p;
    });
    launcher.background_starts = background;
    FakeGpuProbe probe({});
    Engine engine(*store_, launcher, probe, clock_, BaseOptions());
    auto sub = engine.Submit(spec);
    EXPECT_TRUE(sub.ok());
    EXPECT_TRUE(engine.RunUntilDone(nullptr).ok());
    std::vector<std::string> out;
    for (const drover::Run& r : sub->runs) {
      auto run = store_->GetRun(r.id).value();
      std::string line = r.params.dump() + " " + std::string(ToString(run->state)) + ":";
      for (const Attempt& a : Attempts(r.id)) {
        line += " " + a.reason;
        if (a.reason != "launch_error") {
          EXPECT_GT(a.pid, 0) << line;
          EXPECT_GT(a.pid_start, 0) << line;
        }
        if (a.reason == "timeout") {
          EXPECT_GE(a.ended_ms - a.started_ms, 2000) << line;
        }
      }
      out.push_back(line);
    }
    return out;
  };
  std::vector<std::string> foreground = outcomes(false);
  std::vector<std::string> background = outcomes(true);
  EXPECT_EQ(background, foreground);
  ASSERT_EQ(foreground.size(), 4u);
  EXPECT_EQ(foreground[0], R"({"kind":"ok"} succeeded: succeeded)");
  EXPECT_EQ(foreground[1], R"({"kind":"fail"} failed: exit_code exit_code)");
}

TEST_F(EngineTest, ACtrlCWhileARunIsStartingStopsItOnceItHasStarted) {
  // The interrupt comes before the start is reported: the run has no pid to signal yet. It is
  // stopped as soon as it has one, and recorded as cancelled, never left running.
  Spec spec = ParseSpec("name: one\ncommand: python train.py\n");
  FakeLauncher* self = nullptr;
  FakeLauncher launcher(clock_, [&](const LaunchSpec&) {
    self->pending_interrupt = SIGINT;  // delivered by the next Wait, before the start's report
    FakeProcess p;
    p.duration_ms = 60'000;
    return p;
  });
  self = &launcher;
  launcher.background_starts = true;
  FakeGpuProbe probe({});
  Engine engine(*store_, launcher, probe, clock_, BaseOptions());
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok());
  const Millis start = clock_.Monotonic();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_LT(clock_.Monotonic() - start, 10'000) << "stopped at once, not after its 60 s";
  auto run = store_->GetRun(sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kCancelled);
  auto attempts = Attempts(run->id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_GT(attempts[0].pid, 0);
  EXPECT_EQ(attempts[0].reason, "cancelled");
  ASSERT_FALSE(launcher.signals.empty());
  EXPECT_EQ(launcher.signals[0], std::make_pair(static_cast<int>(attempts[0].pid), SIGTERM));
}

TEST_F(EngineTest, ABurstOfShortRunsIsCommittedOncePerIntervalAndNothingIsLeftUncommitted) {
  // 40 runs of 1 ms, one at a time: with a commit interval of 10 ms their changes land in a few
  // commits (the observer hears after each) instead of one per loop iteration, and at the end
  // every run and attempt is stored.
  std::string values;
  for (int i = 0; i < 40; ++i) values += (i ? ", " : "") + std::to_string(i);
  Spec spec = ParseSpec("name: burst\ncommand: \"true {i}\"\nparams: {i: [" + values +
                        "]}\nmax_parallel: 1\nresources: {gpus: 0, cpus: 1}\n"
                        // run again at each burst, not cached from the last one's
                        "rerun: true\n");
  struct Ticks : EngineObserver {
    int ticks = 0;
    void OnTick() override { ++ticks; }
  };
  auto run_burst = [&](Millis interval) {
    FakeLauncher launcher(clock_, [](const LaunchSpec&) {
      FakeProcess p;
      p.duration_ms = 1;
      return p;
    });
    FakeGpuProbe probe({});
    EngineOptions o = BaseOptions();
    o.commit_interval_ms = interval;
    Engine engine(*store_, launcher, probe, clock_, o);
    auto sub = engine.Submit(spec);
    EXPECT_TRUE(sub.ok());
    const Millis start = clock_.Monotonic();
    Ticks ticks;
    EXPECT_TRUE(engine.RunUntilDone(&ticks).ok());
    EXPECT_EQ(launcher.launches.size(), 40u);
    EXPECT_LE(clock_.Monotonic() - start, 50) << "the interval does not slow the runs down";
    for (const drover::Run& r : sub->runs) {
      EXPECT_EQ(store_->GetRun(r.id).value()->state, RunState::kSucceeded);
      EXPECT_EQ(Attempts(r.id).size(), 1u);
    }
    return ticks.ticks;
  };
  EXPECT_GE(run_burst(0), 40);
  EXPECT_LE(run_burst(10), 8) << "40 ms of runs, one commit per 10 ms";
}

// A pass hands the scheduler only the first runs of each class of alike waiting runs
// (engine/run_queue.h): a run made different afterwards must still be seen wherever it waits.
TEST_F(EngineTest, ARunRaisedInPriorityDeepInALongQueueStartsNext) {
  std::string values;
  for (int i = 0; i < 300; ++i) values += (i ? ", " : "") + std::to_string(i);
  Spec spec = ParseSpec("name: long\ncommand: \"true {i}\"\nparams: {i: [" + values +
                        "]}\nmax_parallel: 1\nresources: {gpus: 0, cpus: 1}\n"
                        // run again at each burst, not cached from the last one's
                        "rerun: true\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 5;
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  const int64_t late = sub->runs[250].id;
  ASSERT_TRUE(engine->SetPriority(late, 5).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 300u);
  EXPECT_EQ(EnvOf(launcher.launches[0], "DROVER_RUN_ID"), std::to_string(late));
  EXPECT_EQ(EnvOf(launcher.launches[1], "DROVER_RUN_ID"), std::to_string(sub->runs[0].id));
  // The rest in submit order.
  for (size_t i = 2; i < 20; ++i) {
    EXPECT_EQ(EnvOf(launcher.launches[i], "DROVER_RUN_ID"), std::to_string(sub->runs[i - 1].id));
  }
}

TEST_F(EngineTest, RunsInBackoffAtTheHeadOfALongQueueDoNotHoldBackTheOthers) {
  // The first 3 runs fail once and wait 10 s; the 200 behind them go on meanwhile, 2 at a time,
  // and the 3 start again once their backoff has ended.
  std::string values;
  for (int i = 0; i < 203; ++i) values += (i ? ", " : "") + std::to_string(i);
  Spec spec = ParseSpec("name: flaky\ncommand: \"true {i}\"\nparams: {i: [" + values +
                        "]}\nretries: 1\nretry_backoff: 10s\nresources: {gpus: 0, cpus: 1}\n");
  std::map<std::string, int> tries;
  FakeLauncher launcher(clock_, [&](const LaunchSpec& ls) {
    FakeProcess p;
    p.duration_ms = 10;
    const std::string i = ls.argv.back();
    if (std::stoi(i) < 3 && tries[i]++ == 0) p.exit_code = 1;
    return p;
  });
  FakeGpuProbe probe({});
  EngineOptions o = BaseOptions();
  o.cpu_slots = 2;
  Engine engine(*store_, launcher, probe, clock_, o);
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok());
  const Millis start = clock_.Monotonic();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 206u);
  // 200 runs of 10 ms two at a time take 1 s; the three retries come at 10 s.
  EXPECT_GE(clock_.Monotonic() - start, 10'000);
  EXPECT_LE(clock_.Monotonic() - start, 10'200);
  for (size_t i = 3; i < 203; ++i) EXPECT_EQ(launcher.launches[i].argv.back(), std::to_string(i));
  for (const drover::Run& r : sub->runs) {
    EXPECT_EQ(store_->GetRun(r.id).value()->state, RunState::kSucceeded) << r.id;
  }
}

TEST_F(EngineTest, TheDigitsComparisonOnTwoCpuSlotsRunsOneRunPerGpuAtATime) {
  // examples/digits/compare.yaml's shape on --fake-gpus 2x16GiB with 2 CPU slots (a 2-core
  // machine), and 6 runs of 5 GiB: no GPU ever holds two runs while the other idles.
  for (const auto& [params, memory] : std::vector<std::pair<std::string, std::string>>{
           {"{model: [mlp, cnn], batch_size: [32, 64]}", "6GiB"},
           {"{i: [1, 2, 3, 4, 5, 6]}", "5GiB"}}) {
    Spec spec = ParseSpec("name: compare\ncommand: python train.py\nparams: " + params +
                          "\nresources: {gpus: 1, gpu_memory: " + memory + "}\n");
    int calls = 0;
    FakeLauncher launcher(clock_, [&](const LaunchSpec&) {
      FakeProcess p;
      p.duration_ms = 1000 + 700 * (++calls % 3);  // uneven, so ends interleave
      return p;
    });
    // While the engine waits, what runs is what the store holds as open attempts (ends are
    // recorded before the next runs start).
    int most_on_one = 0;
    launcher.on_wait = [&](FakeLauncher&) {
      std::map<std::string, int> on_gpu;
      const std::vector<drover::Run> runs = store_->ListRuns(RunFilter{}).value();
      for (const auto& r : runs) {
        const std::vector<Attempt> attempts = store_->ListAttempts(r.id).value();
        for (const auto& a : attempts) {
          if (!a.ended) most_on_one = std::max(most_on_one, ++on_gpu[a.cuda_visible_devices]);
        }
      }
    };
    FakeGpuProbe probe(
        {{0, "GPU-fake-0", "Fake", 16 * GiB, 0}, {1, "GPU-fake-1", "Fake", 16 * GiB, 0}});
    EngineOptions o = BaseOptions();
    o.cpu_slots = 2;
    Engine engine(*store_, launcher, probe, clock_, o);
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok()) << sub.status().message();
    ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
    std::map<std::string, int> per_gpu;
    for (const auto& ls : launcher.launches) per_gpu[EnvOf(ls, "CUDA_VISIBLE_DEVICES")]++;
    EXPECT_EQ(most_on_one, 1) << memory;
    EXPECT_GT(per_gpu["0"], 0) << memory;
    EXPECT_GT(per_gpu["1"], 0) << memory;
    EXPECT_EQ(per_gpu["0"] + per_gpu["1"], static_cast<int>(sub->runs.size()));
  }
}

TEST_F(EngineTest, QueuesWhatDoesNotFitAndStartsItWhenMemoryFrees) {
  Spec spec = ParseSpec(R"(
name: six
command: "true {i}"
params: {i: [1, 2, 3, 4, 5, 6]}
resources: {gpus: 1, gpu_memory: 6GiB}
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{1000}; });
  FakeGpuProbe probe({{0, "a", "Fake", 16 * GiB, 0}, {1, "b", "Fake", 16 * GiB, 0}});
  auto engine = MakeEngine(launcher, probe);
  Millis t0 = clock_.Now();
  ASSERT_TRUE(engine->Submit(spec).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 6u);
  EXPECT_EQ(launcher.max_running, 4);
  EXPECT_EQ(clock_.Now() - t0, 2000);  // two waves of one second
}

TEST_F(EngineTest, CudaOomHalvesBatchUntilItFits) {
  Spec spec = ParseSpec(R"(
name: oom
command: python train.py --batch-size {batch_size} --grad-accum {grad_accum}
params: {batch_size: 512, grad_accum: 1}
oom: {param: batch_size, min: 8, accumulate: grad_accum}
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    Json params = Json::parse(EnvOf(ls, "DROVER_PARAMS"));
    FakeProcess p;
    if (params["batch_size"].get<int>() > 100) {
      p.exit_code = 1;
      p.stderr_text = "Traceback...\ntorch.cuda.OutOfMemoryError: CUDA out of memory.\n";
    } else {
      p.stdout_text = "{\"epoch\": 1, \"val_acc\": 0.93}\n";
    }
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  int64_t id = sub->runs[0].id;
  auto run = store_->GetRun(id).value();
  EXPECT_EQ(run->state, RunState::kSucceeded);
  EXPECT_EQ(run->current_params["batch_size"], 64);
  EXPECT_EQ(run->current_params["grad_accum"], 8);
  EXPECT_EQ(run->params["batch_size"], 512);
  EXPECT_EQ(run->retries_used, 0);
  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 4u);
  std::vector<int> batches;
  std::vector<std::string> reasons;
  for (const auto& a : attempts) {
    batches.push_back(a.params["batch_size"].get<int>());
    reasons.push_back(a.reason);
  }
  EXPECT_EQ(batches, (std::vector<int>{512, 256, 128, 64}));
  EXPECT_EQ(reasons, (std::vector<std::string>{"cuda_oom", "cuda_oom", "cuda_oom", "succeeded"}));
  EXPECT_EQ(attempts[3].argv.back(), "8");  // --grad-accum doubled three times
}

TEST_F(EngineTest, RetriesWithExponentialBackoff) {
  Spec spec = ParseSpec(R"(
name: flaky
command: ./flaky.sh
retries: 3
retry_backoff: 10s
)");
  int calls = 0;
  FakeLauncher launcher(clock_, [&](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 100;
    p.exit_code = ++calls < 3 ? 2 : 0;
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto attempts = Attempts(sub->runs[0].id);
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].reason, "exit_code");
  EXPECT_EQ(attempts[0].exit_code, 2);
  EXPECT_EQ(attempts[1].started_ms - attempts[0].ended_ms, 10'000);
  EXPECT_EQ(attempts[2].started_ms - attempts[1].ended_ms, 20'000);
  auto run = store_->GetRun(sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kSucceeded);
  EXPECT_EQ(run->retries_used, 2);
}

TEST_F(EngineTest, FailsWhenRetriesRunOut) {
  Spec spec = ParseSpec("name: bad\ncommand: ./bad.sh\nretries: 1\nretry_backoff: 1s\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{10, 1}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto run = store_->GetRun(sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kFailed);
  EXPECT_EQ(run->attempts, 2);
}

TEST_F(EngineTest, TimeoutSendsTermThenKillAfterGrace) {
  Spec spec = ParseSpec("name: hang\ncommand: ./hang.sh\ntimeout: 30s\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 3'600'000;
    p.ignores_sigterm = true;
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  Millis t0 = clock_.Now();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.signals.size(), 2u);
  EXPECT_EQ(launcher.signals[0].second, SIGTERM);
  EXPECT_EQ(launcher.signals[1].second, SIGKILL);
  EXPECT_EQ(clock_.Now() - t0, 35'000);  // 30 s timeout + 5 s grace
  auto attempts = Attempts(sub->runs[0].id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "timeout");
  EXPECT_EQ(attempts[0].signal, SIGKILL);
  EXPECT_EQ(store_->GetRun(sub->runs[0].id).value()->state, RunState::kFailed);
}

TEST_F(EngineTest, DeadlinesIgnoreStepsOfTheWallClock) {
  // NTP steps the wall clock back an hour, then forward two, while a run hangs: its 30 s timeout
  // and 5 s grace still take 35 s, and a retry's 10 s backoff still takes 10 s.
  Spec spec = ParseSpec(
      "name: hang\ncommand: ./hang.sh\ntimeout: 30s\nretries: 1\n"
      "retry_backoff: 10s\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 3'600'000;
    p.ignores_sigterm = true;
    return p;
  });
  int waits = 0;
  launcher.on_wait = [&](FakeLauncher&) {
    ++waits;
    if (waits == 2) clock_.StepWall(-3'600'000);
    if (waits == 4) clock_.StepWall(+7'200'000);
  };
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  Millis m0 = clock_.Monotonic();
  std::vector<Millis> kills;  // monotonic time of each SIGKILL, from the start
  auto step = launcher.on_wait;
  size_t seen_signals = 0;
  launcher.on_wait = [&](FakeLauncher& l) {
    step(l);
    for (; seen_signals < l.signals.size(); ++seen_signals) {
      if (l.signals[seen_signals].second == SIGKILL) kills.push_back(clock_.Monotonic() - m0);
    }
  };
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(kills.size(), 2u);
  EXPECT_EQ(kills[0], 35'000);  // timeout + grace, in monotonic time
  // Attempt 2 started 10 s after attempt 1 ended, and was killed 35 s later.
  EXPECT_EQ(kills[1], 35'000 + 10'000 + 35'000);
  auto attempts = Attempts(sub->runs[0].id);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "timeout");
  EXPECT_EQ(attempts[1].reason, "timeout");
}

TEST_F(EngineTest, InterruptCancelsRunningAndQueuedRuns) {
  Spec spec = ParseSpec(R"(
name: long
command: "sleep {i}"
params: {i: [1, 2, 3, 4]}
max_parallel: 2
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{600'000}; });
  int waits = 0;
  launcher.on_wait = [&](FakeLauncher& l) {
    if (++waits == 2) l.pending_interrupt = SIGINT;
  };
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_TRUE(engine->interrupted());
  EXPECT_EQ(launcher.launches.size(), 2u);  // the queued two never started
  int terms = 0;
  for (auto [pid, sig] : launcher.signals) terms += sig == SIGTERM;
  EXPECT_EQ(terms, 2);
  for (const drover::Run& r : sub->runs) {
    EXPECT_EQ(store_->GetRun(r.id).value()->state, RunState::kCancelled);
  }
  EXPECT_EQ(Attempts(sub->runs[0].id)[0].reason, "cancelled");
  EXPECT_TRUE(Attempts(sub->runs[3].id).empty());
}

TEST_F(EngineTest, ExitReportedWithTheInterruptKeepsItsOutcome) {
  Spec spec =
      ParseSpec("name: race\ncommand: \"true {i}\"\nparams: {i: [1, 2, 3]}\nmax_parallel: 1\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  launcher.interrupt_with_next_exit = SIGINT;
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(store_->GetRun(sub->runs[0].id).value()->state, RunState::kSucceeded);
  EXPECT_EQ(store_->GetRun(sub->runs[1].id).value()->state, RunState::kCancelled);
  EXPECT_EQ(store_->GetRun(sub->runs[2].id).value()->state, RunState::kCancelled);
  EXPECT_TRUE(launcher.signals.empty());  // nothing left to signal: run 1 had already ended
}

TEST_F(EngineTest, CtrlCDuringSubmitStartsNothing) {
  Spec spec = ParseSpec("name: early\ncommand: \"true {i}\"\nparams: {i: [1, 2]}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  launcher.pending_interrupt = SIGINT;
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_TRUE(launcher.launches.empty());
  EXPECT_TRUE(engine->interrupted());
  for (const drover::Run& r : sub->runs) {
    EXPECT_EQ(store_->GetRun(r.id).value()->state, RunState::kCancelled);
  }
}

TEST_F(EngineTest, LaunchErrorFailsAtOnceWithoutRetries) {
  Spec spec = ParseSpec("name: typo\ncommand: no-such-program --x\nretries: 3\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto run = store_->GetRun(sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kFailed);
  auto attempts = Attempts(run->id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "launch_error");
  std::ifstream err(attempts[0].stderr_path);
  std::string text((std::istreambuf_iterator<char>(err)), {});
  EXPECT_NE(text.find("cannot start 'no-such-program'"), std::string::npos);
}

TEST_F(EngineTest, RunEnvironmentAndImmutableWorkingCopy) {
  Spec spec = ParseSpec(R"(
name: env
command: python train.py --lr {lr}
params: {lr: 0.01}
env: {OMP_NUM_THREADS: 1}
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(sub.ok());
  // Editing the code after submitting changes nothing queued.
  std::ofstream(root_ / "code" / "train.py") << "print('v2')\n";
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 1u);
  const LaunchSpec& ls = launcher.launches[0];
  EXPECT_EQ(EnvOf(ls, "CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(EnvOf(ls, "OMP_NUM_THREADS"), "1");
  EXPECT_EQ(EnvOf(ls, "DROVER_RUN_ID"), std::to_string(sub->runs[0].id));
  EXPECT_EQ(Json::parse(EnvOf(ls, "DROVER_PARAMS")), Json({{"lr", 0.01}}));
  EXPECT_EQ(EnvOf(ls, "PATH"), "/usr/bin:/bin");
  std::ifstream code(fs::path(ls.cwd) / "train.py");
  std::string text((std::istreambuf_iterator<char>(code)), {});
  EXPECT_EQ(text, "print('v1')\n");
  EXPECT_EQ(ls.argv, (std::vector<std::string>{"python", "train.py", "--lr", "0.01"}));
}

TEST_F(EngineTest, GangRunGetsBothGpusAndNcclDefaults) {
  Spec spec = ParseSpec(R"(
name: ddp
command: "torchrun --nproc-per-node 2 train.py --seed {seed}"
params: {seed: [1, 2]}
resources: {gpus: 2}
env: {NCCL_IB_DISABLE: 0}
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{1000}; });
  FakeGpuProbe probe({{0, "a", "Fake", 16 * GiB, 0}, {1, "b", "Fake", 16 * GiB, 0}});
  auto engine = MakeEngine(launcher, probe);
  Millis t0 = clock_.Now();
  ASSERT_TRUE(engine->Submit(spec).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  ASSERT_EQ(launcher.launches.size(), 2u);
  EXPECT_EQ(launcher.max_running, 1);  // each holds both GPUs whole
  EXPECT_EQ(clock_.Now() - t0, 2000);
  for (const auto& ls : launcher.launches) {
    EXPECT_EQ(EnvOf(ls, "CUDA_VISIBLE_DEVICES"), "0,1");
    EXPECT_EQ(EnvOf(ls, "NCCL_DEBUG"), "INFO");
    EXPECT_EQ(EnvOf(ls, "NCCL_IB_DISABLE"), "0");  // the spec's env wins
  }
}

TEST_F(EngineTest, NaNInAWatchedMetricStopsTheRunAsDiverged) {
  Spec spec = ParseSpec("name: nan\ncommand: ./train\nretries: 2\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 600'000;  // would train for ten minutes more
    p.stdout_text = "{\"step\": 1, \"loss\": 2.3}\n{\"step\": 2, \"loss\": NaN}\n";
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  Millis t0 = clock_.Now();
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_LT(clock_.Now() - t0, 1000);  // stopped at the first look at its output
  ASSERT_FALSE(launcher.signals.empty());
  EXPECT_EQ(launcher.signals[0].second, SIGTERM);
  auto attempts = Attempts(sub->runs[0].id);
  ASSERT_EQ(attempts.size(), 1u);  // a diverged config is not retried
  EXPECT_EQ(attempts[0].reason, "diverged");
  auto run = store_->GetRun(sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kFailed);
  EXPECT_EQ(run->reason, "diverged");
  // The NaN point itself is recorded.
  auto points = store_->GetMetrics(run->id, "loss").value();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_TRUE(std::isnan(points[1].value));
}

TEST_F(EngineTest, NaNOutsideTheWatchListOrWithIgnoreIsKept) {
  Spec spec = ParseSpec("name: nan\ncommand: ./train\nmonitor: {watch: [loss]}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 1000;
    p.stdout_text = "{\"step\": 1, \"loss\": 2.3, \"grad_ratio\": NaN}\n";
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_TRUE(launcher.signals.empty());
  EXPECT_EQ(store_->GetRun(sub->runs[0].id).value()->state, RunState::kSucceeded);
}

TEST_F(EngineTest, StalledRunIsStoppedAndRetried) {
  Spec spec = ParseSpec(
      "name: stall\ncommand: ./train\nretries: 1\nretry_backoff: 1s\nmonitor: {stall: 1m}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 3'600'000;  // hangs after its first line
    p.stdout_text = "{\"step\": 1, \"loss\": 2.3}\n";
    return p;
  });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  auto attempts = Attempts(sub->runs[0].id);
  ASSERT_EQ(attempts.size(), 2u);
  for (const auto& a : attempts) {
    EXPECT_EQ(a.reason, "stalled");
    EXPECT_GE(a.ended_ms - a.started_ms, 60'000);
    EXPECT_LT(a.ended_ms - a.started_ms, 61'000);
  }
  EXPECT_EQ(store_->GetRun(sub->runs[0].id).value()->state, RunState::kFailed);
}

TEST_F(EngineTest, RefusesGpuRunsWithoutGpus) {
  Spec spec = ParseSpec("name: g\ncommand: ./x\nresources: {gpus: 1}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(spec);
  ASSERT_FALSE(sub.ok());
  EXPECT_NE(sub.status().message().find("--fake-gpus"), std::string::npos);
  EXPECT_TRUE(store_->ListExperiments().value().empty());  // nothing half-submitted
}

TEST_F(EngineTest, MaxParallelAndCpuSlots) {
  Spec spec =
      ParseSpec("name: p\ncommand: \"true {i}\"\nparams: {i: [1,2,3,4,5]}\nmax_parallel: 2\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  ASSERT_TRUE(engine->Submit(spec).ok());
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.launches.size(), 5u);
  EXPECT_EQ(launcher.max_running, 2);
}

// Options for the scheduling tests: a preemptive policy that acts at once (las, a one-minute
// switch to the second queue, no minimum run time) and a 30 s preemption grace.
EngineOptions LasOptions(EngineOptions o) {
  o.scheduler.policy = sched::PolicyKind::kLas;
  o.scheduler.las_threshold_gpu_ms = 60'000;
  o.scheduler.min_runtime_ms = 0;
  o.scheduler.grace_ms = 30'000;
  o.tail_interval_ms = 1000;
  return o;
}

TEST_F(EngineTest, PreemptionStopsTheLongRunWithTermThenKillAndRequeuesIt) {
  Spec long_spec = ParseSpec(
      "name: long\ncommand: ./train --long\nresources: {gpus: 1}\ncheckpoint: true\n");
  Spec short_spec = ParseSpec("name: short\ncommand: ./train --short\nresources: {gpus: 1}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    FakeProcess p;
    if (ls.argv.back() == "--short") {
      p.duration_ms = 10'000;
    } else if (EnvOf(ls, "DROVER_ATTEMPT") == "1") {
      p.duration_ms = 3'600'000;
      p.ignores_sigterm = true;  // does not checkpoint: killed after the grace
    } else {
      p.duration_ms = 5'000;  // resumed from its checkpoint
    }
    return p;
  });
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  Engine engine(*store_, launcher, probe, clock_, LasOptions(BaseOptions()));
  auto long_sub = engine.Submit(long_spec);
  auto short_sub = engine.Submit(short_spec);
  ASSERT_TRUE(long_sub.ok() && short_sub.ok());
  Millis t0 = clock_.Now();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());

  int64_t long_id = long_sub->runs[0].id;
  int64_t short_id = short_sub->runs[0].id;
  auto long_attempts = Attempts(long_id);
  auto short_attempts = Attempts(short_id);
  ASSERT_EQ(long_attempts.size(), 2u);
  ASSERT_EQ(short_attempts.size(), 1u);
  // The long run had the GPU first; once past the one-minute switch it ranks below the waiting
  // run: SIGTERM, ignored, then SIGKILL 30 s later.
  ASSERT_EQ(launcher.signals.size(), 2u);
  EXPECT_EQ(launcher.signals[0], std::make_pair(static_cast<int>(long_attempts[0].pid), SIGTERM));
  EXPECT_EQ(launcher.signals[1], std::make_pair(static_cast<int>(long_attempts[0].pid), SIGKILL));
  const Attempt& stopped = long_attempts[0];
  EXPECT_EQ(stopped.reason, "preempted");
  EXPECT_EQ(stopped.signal, SIGKILL);
  EXPECT_GE(stopped.ended_ms - stopped.started_ms, 60'000 + 30'000);
  EXPECT_LE(stopped.ended_ms - stopped.started_ms, 61'000 + 30'000);
  // The waiting run starts on the freed GPU as soon as it is free, then the long run resumes.
  EXPECT_EQ(short_attempts[0].started_ms, stopped.ended_ms);
  EXPECT_EQ(short_attempts[0].cuda_visible_devices, "0");
  EXPECT_EQ(long_attempts[1].started_ms, short_attempts[0].ended_ms);
  EXPECT_EQ(long_attempts[1].reason, "succeeded");
  EXPECT_EQ(clock_.Now() - t0, stopped.ended_ms - stopped.started_ms + 10'000 + 5'000);
  auto run = store_->GetRun(long_id).value();
  EXPECT_EQ(run->state, RunState::kSucceeded);
  EXPECT_EQ(run->retries_used, 0);  // a preemption spends no retry (the spec has none)
  EXPECT_EQ(store_->GetRun(short_id).value()->state, RunState::kSucceeded);
  // The requeue says why, and how much GPU time the run lost.
  std::string note;
  std::vector<Event> events = store_->ListEvents(0).value();
  for (const Event& e : events) {
    if (e.kind == "run_state" && e.run_id == long_id && e.data["state"] == "retrying") {
      note = e.data["note"].get<std::string>();
    }
  }
  EXPECT_NE(note.find("preempted: run " + std::to_string(short_id) +
                      " ranks higher under the las policy"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("on 1 GPU"), std::string::npos) << note;
}

TEST_F(EngineTest, PreemptedRunThatHonoursSigtermStopsAtOnceAndKeepsItsRetries) {
  Spec long_spec =
      ParseSpec("name: long\ncommand: ./train --long\nresources: {gpus: 1}\nretries: 1\n"
                "checkpoint: true\n");
  Spec short_spec = ParseSpec("name: short\ncommand: ./train --short\nresources: {gpus: 1}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    FakeProcess p;
    p.duration_ms = ls.argv.back() == "--short" ? 10'000 : 600'000;
    return p;
  });
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  Engine engine(*store_, launcher, probe, clock_, LasOptions(BaseOptions()));
  auto long_sub = engine.Submit(long_spec);
  auto short_sub = engine.Submit(short_spec);
  ASSERT_TRUE(long_sub.ok() && short_sub.ok());
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  auto attempts = Attempts(long_sub->runs[0].id);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "preempted");
  EXPECT_EQ(attempts[0].signal, SIGTERM);
  EXPECT_LE(attempts[0].ended_ms - attempts[0].started_ms, 61'000);  // no grace needed
  ASSERT_EQ(launcher.signals.size(), 1u);                            // SIGTERM only
  auto run = store_->GetRun(long_sub->runs[0].id).value();
  EXPECT_EQ(run->state, RunState::kSucceeded);
  EXPECT_EQ(run->retries_used, 0);
  // Preempted once, resumed and then run to the end: the second attempt is not preempted again,
  // the queue being empty.
  EXPECT_EQ(attempts[1].reason, "succeeded");
}

TEST_F(EngineTest, NoPreemptionUnderFifoOrForANonPreemptibleSpecOrARunWithoutCheckpoints) {
  // fifo; a checkpointing run whose spec says preemptible: false; a run without checkpoints.
  for (const char* extra : {"checkpoint: true\n", "checkpoint: true\npreemptible: false\n", ""}) {
    const bool fifo = std::string(extra) == "checkpoint: true\n";
    SCOPED_TRACE(extra);
    store_ = std::move(Store::Open(":memory:").value());
    Spec long_spec = ParseSpec(std::string("name: long\ncommand: ./train --long\n") +
                               "resources: {gpus: 1}\n" + extra);
    Spec short_spec = ParseSpec("name: short\ncommand: ./train --short\nresources: {gpus: 1}\n");
    FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
      return FakeProcess{ls.argv.back() == "--short" ? 10'000 : 300'000};
    });
    FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
    EngineOptions o = LasOptions(BaseOptions());
    if (fifo) o.scheduler.policy = sched::PolicyKind::kFifo;
    Engine engine(*store_, launcher, probe, clock_, o);
    auto long_sub = engine.Submit(long_spec);
    auto short_sub = engine.Submit(short_spec);
    ASSERT_TRUE(long_sub.ok() && short_sub.ok());
    ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
    EXPECT_TRUE(launcher.signals.empty());
    auto attempts = Attempts(long_sub->runs[0].id);
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(attempts[0].reason, "succeeded");
    EXPECT_EQ(Attempts(short_sub->runs[0].id)[0].started_ms, attempts[0].ended_ms);
  }
}

TEST_F(EngineTest, SrtfRanksByDurationsLearntFromTheStore) {
  // A first engine runs a long and a short experiment once: the store has their run times.
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    return FakeProcess{ls.argv.back() == "--short" ? 10'000 : 600'000};
  });
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  const std::string long_yaml =
      "name: long\ncommand: ./train --lr {lr} --long\nparams: {lr: 0.1}\nresources: {gpus: 1}\n";
  const std::string short_yaml =
      "name: short\ncommand: ./train --lr {lr} --short\nparams: {lr: 0.1}\nresources: {gpus: 1}\n";
  {
    Engine first(*store_, launcher, probe, clock_, BaseOptions());
    ASSERT_TRUE(first.Submit(ParseSpec(long_yaml)).ok());
    ASSERT_TRUE(first.Submit(ParseSpec(short_yaml)).ok());
    ASSERT_TRUE(first.RunUntilDone(nullptr).ok());
  }
  // A new engine (srtf) learns them at start: submitted long first, the short one runs first.
  EngineOptions o = BaseOptions();
  o.scheduler.policy = sched::PolicyKind::kSrtf;
  Engine engine(*store_, launcher, probe, clock_, o);
  // rerun: the same runs again, not cached from the first engine's.
  auto long_sub = engine.Submit(ParseSpec(long_yaml + "rerun: true\n"));
  auto short_sub = engine.Submit(ParseSpec(short_yaml + "rerun: true\n"));
  ASSERT_TRUE(long_sub.ok() && short_sub.ok());
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  auto long_a = Attempts(long_sub->runs[0].id);
  auto short_a = Attempts(short_sub->runs[0].id);
  ASSERT_EQ(long_a.size(), 1u);
  ASSERT_EQ(short_a.size(), 1u);
  EXPECT_LT(short_a[0].started_ms, long_a[0].started_ms);
  EXPECT_EQ(long_a[0].started_ms, short_a[0].ended_ms);
}

TEST_F(EngineTest, GpuReserveIsKeptFreeAndNamedWhenARunDoesNotFit) {
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{}; });
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * GiB, 0}});
  Spec whole = ParseSpec("name: big\ncommand: ./x\nresources: {gpus: 1, gpu_memory: 16GiB}\n");
  {
    Engine engine(*store_, launcher, probe, clock_, BaseOptions());  // default reserve: 1 GiB
    auto sub = engine.Submit(whole);
    ASSERT_FALSE(sub.ok());
    EXPECT_EQ(sub.status().message(),
              "each run needs 16GiB per GPU but the largest GPU has 15GiB; lower "
              "resources.gpu_memory (drover keeps 1GiB of each GPU free for the driver and "
              "monitoring: scheduler.gpu_reserve in the config)");
    EXPECT_EQ(engine.gpus()[0].capacity, 15 * GiB);
    EXPECT_TRUE(engine
                    .Submit(ParseSpec("name: fits\ncommand: ./x\n"
                                      "resources: {gpus: 1, gpu_memory: 15GiB}\n"))
                    .ok());
  }
  EngineOptions o = BaseOptions();
  o.scheduler.gpu_reserve = 0;
  Engine engine(*store_, launcher, probe, clock_, o);
  ASSERT_TRUE(engine.Submit(whole).ok());
  EXPECT_EQ(engine.gpus()[0].capacity, 16 * GiB);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// A spec that asks for an executor this engine does not run is refused at submit, saying what
// to do; one that says nothing, or the same kind, is taken.
TEST_F(EngineTest, ASpecAskingForAnotherExecutorIsRefusedWithWhatToDo) {
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  Spec slurm = ParseSpec("name: s\ncommand: ./train.sh\nexecutor: {kind: slurm}\n");
  Status st = engine->CheckSubmit(slurm);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("drover run"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("docs/slurm.md"), std::string::npos) << st.message();
  EXPECT_TRUE(engine->CheckSubmit(ParseSpec("name: l\ncommand: ./train.sh\nexecutor: {kind: local}\n")).ok());
  EXPECT_TRUE(engine->CheckSubmit(ParseSpec("name: n\ncommand: ./train.sh\n")).ok());
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// An executor that places runs (Slurm) whose controller does not answer for its first two
// submits: the run is not charged an attempt, no run starts while starts are held, and it runs
// once the controller answers again; the hold is an alert raised and then cleared.
class UnreachableController : public FakeLauncher {
 public:
  using FakeLauncher::FakeLauncher;
  ExecutorKind kind() const override { return ExecutorKind::kSlurm; }
  Result<ExecHandle> Start(const LaunchSpec& spec) override {
    ++tries;
    if (down > 0) {
      --down;
      return Status(Code::kUnavailable, "the Slurm controller did not take job drover-x-1-1: "
                                        "Unable to contact slurm controller (connect failure)");
    }
    return FakeLauncher::Start(spec);
  }
  int down = 2;
  int tries = 0;
};

TEST_F(EngineTest, AnExecutorWhoseControllerDoesNotAnswerHoldsStartsAndChargesNothing) {
  UnreachableController launcher(clock_, [](const LaunchSpec&) { return FakeProcess{1000, 0}; });
  FakeGpuProbe probe({});
  auto engine = MakeEngine(launcher, probe);
  auto sub = engine->Submit(ParseSpec("name: s\ncommand: ./train.sh\nresources: {gpus: 1}\n"));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const int64_t id = sub->runs[0].id;
  ASSERT_TRUE(engine->RunUntilDone(nullptr).ok());
  EXPECT_EQ(launcher.tries, 3);
  const drover::Run run = store_->GetRun(id).value().value();
  EXPECT_EQ(run.state, RunState::kSucceeded);
  EXPECT_EQ(run.attempts, 1);  // the two refused submits were no attempts
  EXPECT_EQ(run.retries_used, 0);
  EXPECT_EQ(Attempts(id).size(), 1u);
  auto alerts = store_->ListAlerts({.kind = "starts_held"}).value();
  ASSERT_FALSE(alerts.empty());
  bool held = false, resumed = false;
  for (const Alert& a : alerts) {
    held = held || a.message.find("Unable to contact slurm controller") != std::string::npos;
    resumed = resumed || a.message.find("they start again now") != std::string::npos;
  }
  EXPECT_TRUE(held && resumed);
}

}  // namespace
}  // namespace drover
