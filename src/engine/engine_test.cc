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
  EXPECT_EQ(exp->status, "done");
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

}  // namespace
}  // namespace drover
