// Engine::Recover with scripted shims: an engine that went away (drained, or killed) leaves runs
// whose shims still live, runs that ended meanwhile, runs whose end is unknown, a run whose pid
// was never stored, and a run being cancelled; the next engine adopts, reads, requeues and goes
// on stopping each as it should, without sleeping or starting a process.
#include <gtest/gtest.h>
#include <sys/xattr.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "engine/engine.h"
#include "exec/process_launcher.h"
#include "exec/working_copy.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::FakeLauncher;
using testing::FakeProcess;

class AdoptionTest : public testing::EngineFixture {
 protected:
  EngineOptions ShimOptions() const {
    EngineOptions o = BaseOptions();
    o.use_shim = true;  // as the daemon: runs outlive their engine
    return o;
  }
  drover::Run RunOf(int64_t id) { return store_->GetRun(id).value().value(); }
  // Submits a one-run spec through an engine that goes away before starting anything: the
  // experiment's id and its run's (0, 0 when the submit failed).
  std::pair<int64_t, int64_t> SubmitAndLeave(const Spec& spec, FakeLauncher& launcher,
                                             FakeGpuProbe& probe) {
    Engine engine(*store_, launcher, probe, clock_, ShimOptions());
    auto sub = engine.Submit(spec);
    if (!sub.ok() || sub->runs.empty()) return {0, 0};
    return {sub->experiment_id, sub->runs[0].id};
  }
  // The run's files, its log folder made (where a last engine's exit files would be).
  RunFiles LogsOf(int64_t experiment, int64_t id) {
    RunFiles files = RunFiles::In(ShimOptions().store_dir, experiment, id);
    fs::create_directories(files.logs);
    return files;
  }
  // One long run started by an engine that then drains, leaving it running: its id.
  int64_t StartOneAndDrain(FakeGpuProbe& probe) {
    Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 0, cpus: 1}\n");
    FakeLauncher first(clock_, [](const LaunchSpec&) {
      FakeProcess p;
      p.duration_ms = 3'600'000;
      return p;
    });
    Engine engine(*store_, first, probe, clock_, ShimOptions());
    auto sub = engine.Submit(spec);
    if (!sub.ok()) return 0;
    int waits = 0;
    first.on_wait = [&](FakeLauncher& l) {
      if (++waits == 3) l.pending_interrupt = SIGTERM;  // drains: the run is left running
    };
    if (!engine.Serve(nullptr).ok()) return 0;
    return sub->runs[0].id;
  }
  std::vector<Attempt> Attempts(int64_t id) { return store_->ListAttempts(id).value(); }
};

TEST_F(AdoptionTest, TheNextEngineAdoptsReadsRequeuesAndGoesOnStopping) {
  Spec spec = ParseSpec(
      "name: sweep\ncommand: ./train.sh {i}\nparams: {i: [1, 2, 3, 4, 5]}\n"
      "resources: {gpus: 0, cpus: 1}\n");
  // Engine 1 starts all five (long runs that ignore SIGTERM), is asked to cancel run 5, then
  // drains on SIGTERM, leaving the runs to the next engine.
  FakeLauncher first(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 3'600'000;
    p.ignores_sigterm = true;
    return p;
  });
  FakeGpuProbe probe({});
  std::vector<int64_t> ids;
  {
    Engine engine(*store_, first, probe, clock_, ShimOptions());
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    for (const auto& r : sub->runs) ids.push_back(r.id);
    int waits = 0;
    first.on_wait = [&](FakeLauncher& l) {
      // Wait 1 is the loop's look for a pending interrupt, before anything starts.
      if (++waits == 2) {
        auto reply = engine.Post(cmd::CancelRun{ids[4]});
        (void)reply;
      }
      if (waits == 4) l.pending_interrupt = SIGTERM;
    };
    ASSERT_TRUE(engine.Serve(nullptr).ok());
  }
  ASSERT_EQ(first.launches.size(), 5u);
  std::vector<Attempt> a;
  for (int64_t id : ids) {
    auto list = Attempts(id);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_FALSE(list[0].ended);
    a.push_back(list[0]);
  }
  // The cancel was recorded with the attempt, so the next engine knows it.
  EXPECT_EQ(a[4].stopping, StopReason::kCancel);
  EXPECT_EQ(RunOf(ids[4]).state, RunState::kRunning);

  // What the next engine finds: run 1's shim lives; run 2 ended meanwhile (its exit record, on
  // its stdout log's attribute as the supervisor keeps it, says exit 0); run 3's shim is gone
  // without a word; run 4's pid never reached the store, but its shim's start line (in an exit
  // file) names it, alive; run 5 lives and is still being cancelled.
  FakeLauncher next(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  next.set_next_pid(5000);
  next.foreign[static_cast<int>(a[0].pid)] = {1, 2000, 0};
  const std::string record = std::to_string(a[1].pid) + " 1\n{\"exit_code\":0,\"signal\":0," +
                             "\"ended_ms\":" + std::to_string(clock_.Now()) + "}\n";
  std::ofstream(a[1].stdout_path).flush();
  if (setxattr(a[1].stdout_path.c_str(), ExitAttribute(), record.data(), record.size(), 0) != 0) {
    std::ofstream(a[1].exit_path) << record;  // a file system without user attributes
  }
  const int64_t pid4 = a[3].pid;
  a[3].pid = 0;
  ASSERT_TRUE(store_->UpdateAttempt(a[3]).ok());
  std::ofstream(a[3].exit_path) << pid4 << " 1\n";
  next.foreign[static_cast<int>(pid4)] = {1, 3000, 0};
  next.foreign[static_cast<int>(a[4].pid)] = {1, 3'600'000, 0, /*ignores_sigterm=*/true};

  Engine engine(*store_, next, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->experiments, 1);
  EXPECT_EQ(summary->adopted, 3);   // runs 1, 4 and 5
  EXPECT_EQ(summary->finished, 1);  // run 2
  EXPECT_EQ(summary->requeued, 1);  // run 3
  ASSERT_EQ(next.adopted.size(), 3u);
  EXPECT_EQ(RunOf(ids[1]).state, RunState::kSucceeded);
  EXPECT_EQ(RunOf(ids[2]).state, RunState::kRetrying);
  EXPECT_EQ(Attempts(ids[2])[0].reason, "interrupted");
  EXPECT_EQ(Attempts(ids[3])[0].pid, pid4);  // learnt from the exit file

  Millis m0 = clock_.Monotonic();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  // Adopted runs end as their shims report; the lost one ran again, without spending a retry;
  // the cancelled one got SIGKILL one grace after the restart and ended cancelled.
  EXPECT_EQ(RunOf(ids[0]).state, RunState::kSucceeded);
  EXPECT_EQ(RunOf(ids[2]).state, RunState::kSucceeded);
  EXPECT_EQ(RunOf(ids[2]).retries_used, 0);
  EXPECT_EQ(Attempts(ids[2]).size(), 2u);
  EXPECT_EQ(RunOf(ids[3]).state, RunState::kSucceeded);
  EXPECT_EQ(RunOf(ids[4]).state, RunState::kCancelled);
  auto last = Attempts(ids[4]);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].reason, "cancelled");
  EXPECT_EQ(last[0].signal, SIGKILL);
  EXPECT_FALSE(last[0].stopping.has_value());
  EXPECT_EQ(clock_.Monotonic() - m0, 5000);  // the kill grace, not the hour the run had left
  // Nothing started twice: one launch, for the lost run.
  ASSERT_EQ(next.launches.size(), 1u);
  EXPECT_EQ(next.launches[0].argv.back(), "3");
}

// A run that ended while no engine watched it (the daemon was down an hour) took the time its
// exit record says, not the downtime: its attempt, its run and what the duration predictor
// learns end when it ended (a 10 s run was recorded as taking 10 s plus the time until the
// next daemon started).
TEST_F(AdoptionTest, ARunThatEndedWhileNoEngineWatchedEndsWhenItsRecordSays) {
  FakeGpuProbe probe({});
  const int64_t id = StartOneAndDrain(probe);
  ASSERT_GT(id, 0);
  Attempt a = Attempts(id).at(0);
  ASSERT_FALSE(a.ended);
  const Millis ended_ms = a.started_ms + 10'000;
  std::ofstream(a.exit_path) << a.pid << " 1\n{\"exit_code\":0,\"signal\":0,\"ended_ms\":"
                             << ended_ms << "}\n";
  clock_.Advance(3'600'000);  // an hour without a daemon

  FakeLauncher next(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  Engine engine(*store_, next, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->finished, 1);
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  EXPECT_EQ(Attempts(id).at(0).ended_ms, ended_ms);
  EXPECT_EQ(RunOf(id).ended_ms, ended_ms);
}

TEST_F(AdoptionTest, ARunRecordedRunningWithNoLiveAttemptIsRequeuedThroughTheStateMachine) {
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 0}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  int64_t id = 0;
  {
    Engine engine(*store_, launcher, probe, clock_, ShimOptions());
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok());
    id = sub->runs[0].id;
  }
  // An engine died between marking the run running and recording its attempt.
  drover::Run r = RunOf(id);
  r.state = RunState::kRunning;
  ASSERT_TRUE(store_->UpdateRun(r).ok());
  Engine engine(*store_, launcher, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->requeued, 1);
  EXPECT_EQ(RunOf(id).state, RunState::kRetrying);
  // The change is an event like any other.
  auto events = store_->ListEvents(0).value();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, "run_state");
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
}

TEST_F(AdoptionTest, AStartTheLastEngineDidNotRecordIsStoppedAndRunsAgainAsANewAttempt) {
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 0}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  auto [experiment, id] = SubmitAndLeave(spec, launcher, probe);
  ASSERT_GT(id, 0);
  // An engine started attempt 1 (its supervisor wrote the exit file's start line) and died
  // before committing it: the store still has the run queued with no attempt.
  const RunFiles files = LogsOf(experiment, id);
  std::ofstream(files.Exit(1)) << "7777 42\n";
  launcher.foreign[7777] = {42, 3'600'000, 0};
  Engine engine(*store_, launcher, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->unrecorded, 1);
  EXPECT_EQ(summary->queued, 1);
  // Its process was stopped (its GPUs were never recorded), and the attempt kept as interrupted.
  ASSERT_EQ(launcher.signals.size(), 1u);
  EXPECT_EQ(launcher.signals[0], std::make_pair(7777, SIGKILL));
  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].number, 1);
  EXPECT_EQ(attempts[0].pid, 7777);
  EXPECT_TRUE(attempts[0].ended);
  EXPECT_EQ(attempts[0].reason, "interrupted");
  EXPECT_EQ(RunOf(id).attempts, 1);
  // It runs again as attempt 2, with files of its own, without spending a retry.
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  EXPECT_EQ(RunOf(id).retries_used, 0);
  ASSERT_EQ(launcher.launches.size(), 1u);
  EXPECT_EQ(launcher.launches[0].exit_path, files.Exit(2));
  EXPECT_EQ(Attempts(id).size(), 2u);
}

TEST_F(AdoptionTest, AStartTheLastEngineDidNotRecordIsTakenOverWithTheGpusItWasGiven) {
  // As above, but the process can be read: it is the run's attempt 1, on the GPU its
  // environment names, and nothing runs twice.
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 1}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({{0, "GPU-a", "Fake", 16LL << 30, 0}, {1, "GPU-b", "Fake", 16LL << 30, 0}});
  auto [experiment, id] = SubmitAndLeave(spec, launcher, probe);
  ASSERT_GT(id, 0);
  const RunFiles files = LogsOf(experiment, id);
  std::ofstream(files.Exit(1)) << "7777 42\n";
  launcher.foreign[7777] = {42, 5'000, 0, false, {{"CUDA_VISIBLE_DEVICES", "1"}}};
  Engine engine(*store_, launcher, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->unrecorded_adopted, 1);
  EXPECT_EQ(summary->unrecorded, 0);
  EXPECT_TRUE(launcher.signals.empty()) << "the process was stopped";
  EXPECT_EQ(RunOf(id).state, RunState::kRunning);
  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].pid, 7777);
  EXPECT_EQ(attempts[0].pid_start, 42);
  EXPECT_EQ(attempts[0].gpus, std::vector<int>{1});
  EXPECT_FALSE(attempts[0].ended);
  // Its GPU is booked: the scheduler sees GPU 1 taken.
  bool gpu1_taken = false;
  for (const auto& g : engine.gpus()) gpu1_taken = gpu1_taken || (g.index == 1 && g.runs == 1);
  EXPECT_TRUE(gpu1_taken);
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  EXPECT_TRUE(launcher.launches.empty()) << "it ran again";
  attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "succeeded");
}

// The unrecorded start had ended by the time the next engine looked: its exit file holds its
// end, while its pid is still a zombie of the same start time with nothing left to read (its
// parent had not reaped it). It is taken over as ended, not stopped and run again (a pipeline's
// gather stage ran twice when the daemon was killed just after starting it).
TEST_F(AdoptionTest, AnUnrecordedStartThatEndedIsTakenOverThoughItsPidIsNotReapedYet) {
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 0}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  auto [experiment, id] = SubmitAndLeave(spec, launcher, probe);
  ASSERT_GT(id, 0);
  const RunFiles files = LogsOf(experiment, id);
  std::ofstream(files.Exit(1)) << "7777 42\n{\"exit_code\": 0, \"signal\": 0, \"ended_ms\": "
                               << clock_.Now() << "}\n";
  launcher.foreign[7777] = {42, 0, 0};  // same start time, no environment to read
  Engine engine(*store_, launcher, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->unrecorded_adopted, 1);
  EXPECT_EQ(summary->unrecorded, 0);
  EXPECT_TRUE(launcher.signals.empty()) << "an ended process was signalled";
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  EXPECT_TRUE(launcher.launches.empty()) << "it ran again";
  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].pid, 7777);
  EXPECT_EQ(attempts[0].reason, "succeeded");
}

// The daemon hands a start to its supervisor and records the run running at once, its attempt
// when the supervisor answers: killed in between, it leaves a run recorded running with no
// attempt while the exit file names the process. That process is taken over, not stopped and
// run again (a pipeline's gather stage ran twice in DaemonTest's SIGKILL test).
TEST_F(AdoptionTest, ARunRecordedRunningWhoseStartWasNotRecordedIsTakenOverNotRunTwice) {
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 0}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  auto [experiment, id] = SubmitAndLeave(spec, launcher, probe);
  ASSERT_GT(id, 0);
  drover::Run r = RunOf(id);
  r.state = RunState::kRunning;
  ASSERT_TRUE(store_->UpdateRun(r).ok());
  const RunFiles files = LogsOf(experiment, id);
  std::ofstream(files.Exit(1)) << "7777 42\n";
  // Running, with the environment every attempt gets (no GPUs: an empty list).
  launcher.foreign[7777] = {42, 2'000, 0, false, {{"CUDA_VISIBLE_DEVICES", ""}}};
  Engine engine(*store_, launcher, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->unrecorded_adopted, 1);
  EXPECT_EQ(summary->unrecorded, 0);
  EXPECT_EQ(summary->requeued, 0);
  EXPECT_TRUE(launcher.signals.empty()) << "the process was stopped";
  EXPECT_EQ(RunOf(id).state, RunState::kRunning);
  EXPECT_EQ(RunOf(id).attempts, 1);
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  EXPECT_TRUE(launcher.launches.empty()) << "it ran again";
  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].pid, 7777);
  EXPECT_EQ(attempts[0].reason, "succeeded");
}

// A pipeline stage's run gets its fingerprint when its needs are met, just before it starts;
// an engine killed before committing either leaves it queued with no fingerprint, as if its
// needs were still to be looked at, while its exit file names the process it started. It is
// taken over, not held for its needs and started a second time.
TEST_F(AdoptionTest, AStageStartedButNotRecordedIsTakenOverNotHeldForItsNeeds) {
  Spec spec = ParseSpec(
      "name: pipe\nresources: {gpus: 0}\nstages:\n"
      "  prep: {command: ./prep.sh}\n"
      "  sum: {command: ./sum.sh, needs: [prep]}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  int64_t prep = 0, sum = 0, experiment = 0;
  {
    Engine engine(*store_, launcher, probe, clock_, ShimOptions());
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    experiment = sub->experiment_id;
    for (const auto& r : sub->runs) (r.stage == "prep" ? prep : sum) = r.id;
  }
  drover::Run p = RunOf(prep);
  p.state = RunState::kSucceeded;
  ASSERT_TRUE(store_->UpdateRun(p).ok());
  ASSERT_TRUE(RunOf(sum).fingerprint.empty());
  const RunFiles files = RunFiles::In(ShimOptions().store_dir, experiment, sum);
  fs::create_directories(files.logs);
  std::ofstream(files.Exit(1)) << "7777 42\n{\"exit_code\": 0, \"signal\": 0, \"ended_ms\": "
                               << clock_.Now() << "}\n";
  launcher.foreign[7777] = {42, 0, 0};
  Engine engine(*store_, launcher, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->unrecorded_adopted, 1);
  EXPECT_EQ(summary->unrecorded, 0);
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(sum).state, RunState::kSucceeded);
  EXPECT_TRUE(launcher.launches.empty()) << "the stage ran again";
  auto attempts = Attempts(sum);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "succeeded");
  // It got the fingerprint its start would have recorded: the same pipeline submitted again is
  // cached from it, stage by stage (its fingerprint used to stay empty, so its stage ran again).
  EXPECT_FALSE(RunOf(sum).fingerprint.empty());
  auto again = engine.Submit(spec);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_TRUE(launcher.launches.empty()) << "a stage ran again";
  for (const auto& r : again->runs) {
    EXPECT_EQ(RunOf(r.id).cached_from, r.stage == "prep" ? prep : sum) << r.stage;
  }
}

TEST_F(AdoptionTest, AStartAfterAnEndThatWasNotRecordedIsStoppedWhenTheRunStartsAgain) {
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nretries: 1\nresources: {gpus: 0}\n");
  FakeLauncher first(clock_, [](const LaunchSpec&) {
    FakeProcess p;
    p.duration_ms = 3'600'000;
    return p;
  });
  FakeGpuProbe probe({});
  int64_t id = 0, experiment = 0;
  {
    Engine engine(*store_, first, probe, clock_, ShimOptions());
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok());
    id = sub->runs[0].id;
    experiment = sub->experiment_id;
    int waits = 0;
    first.on_wait = [&](FakeLauncher& l) {
      if (++waits == 3) l.pending_interrupt = SIGTERM;  // drain: the run is left running
    };
    ASSERT_TRUE(engine.Serve(nullptr).ok());
  }
  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 1u);
  ASSERT_FALSE(attempts[0].ended);
  // Meanwhile attempt 1 failed, its retry (attempt 2) was started by an engine that died before
  // it committed either: attempt 1's exit file has its end, attempt 2's a start line.
  const RunFiles files = RunFiles::In(ShimOptions().store_dir, experiment, id);
  std::ofstream(attempts[0].exit_path) << attempts[0].pid << " 1\n{\"exit_code\": 1, \"signal\": 0, "
                                       << "\"ended_ms\": " << clock_.Now() << "}\n";
  std::ofstream(files.Exit(2)) << "7777 42\n";
  FakeLauncher next(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  next.foreign[7777] = {42, 3'600'000, 0};
  Engine engine(*store_, next, probe, clock_, ShimOptions());
  ASSERT_TRUE(engine.Recover().ok());
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  // The retry did not reuse attempt 2's files: that process was stopped and kept as interrupted,
  // and the retry ran as attempt 3.
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  ASSERT_EQ(next.launches.size(), 1u);
  EXPECT_EQ(next.launches[0].exit_path, files.Exit(3));
  ASSERT_FALSE(next.signals.empty());
  EXPECT_EQ(next.signals[0], std::make_pair(7777, SIGKILL));
  attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].reason, "exit_code");
  EXPECT_EQ(attempts[1].reason, "interrupted");
  EXPECT_EQ(attempts[1].pid, 7777);
  EXPECT_EQ(attempts[2].reason, "succeeded");
}

TEST_F(AdoptionTest, AnEngineWithoutShimsLooksForNoUnrecordedStart) {
  Spec spec = ParseSpec("name: one\ncommand: ./train.sh\nresources: {gpus: 0}\n");
  FakeLauncher launcher(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  FakeGpuProbe probe({});
  EngineOptions o = BaseOptions();
  o.use_shim = false;
  int64_t id = 0, experiment = 0;
  {
    Engine engine(*store_, launcher, probe, clock_, o);
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok());
    id = sub->runs[0].id;
    experiment = sub->experiment_id;
  }
  const RunFiles files = RunFiles::In(o.store_dir, experiment, id);
  fs::create_directories(files.logs);
  std::ofstream(files.Exit(1)) << "7777 42\n";
  launcher.foreign[7777] = {42, 3'600'000, 0};
  Engine engine(*store_, launcher, probe, clock_, o);
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->unrecorded, 0);
  EXPECT_TRUE(launcher.signals.empty());
  EXPECT_TRUE(Attempts(id).empty());
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// An adopted run that ends before the next engine's loop first looks (the loop's first Wait,
// which looks for an interrupt) is recorded from that look: it does not stay running for ever.
TEST_F(AdoptionTest, AnAdoptedRunThatEndsBeforeTheLoopsFirstLookIsRecorded) {
  FakeGpuProbe probe({});
  const int64_t id = StartOneAndDrain(probe);
  ASSERT_GT(id, 0);
  const Attempt a = Attempts(id).at(0);
  ASSERT_FALSE(a.ended);
  FakeLauncher next(clock_, [](const LaunchSpec&) { return FakeProcess{100, 0}; });
  next.foreign[static_cast<int>(a.pid)] = {1, /*remaining_ms=*/0, 0};
  Engine engine(*store_, next, probe, clock_, ShimOptions());
  auto summary = engine.Recover();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->adopted, 1);
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  EXPECT_EQ(RunOf(id).state, RunState::kSucceeded);
  EXPECT_TRUE(next.launches.empty());  // not run again
}

}  // namespace
}  // namespace drover
