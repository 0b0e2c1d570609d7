#include "model/run_state.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

TEST(RunState, HappyPath) {
  auto s = Transition(RunState::kQueued, RunEvent::kStart);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, RunState::kRunning);
  auto done = Transition(*s, RunEvent::kSucceed);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(*done, RunState::kSucceeded);
}

TEST(RunState, RetryLoopsBackToRunning) {
  EXPECT_EQ(*Transition(RunState::kRunning, RunEvent::kRetry), RunState::kRetrying);
  EXPECT_EQ(*Transition(RunState::kRetrying, RunEvent::kStart), RunState::kRunning);
  EXPECT_EQ(*Transition(RunState::kRunning, RunEvent::kFail), RunState::kFailed);
}

TEST(RunState, CancelFromEveryLiveState) {
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying}) {
    auto r = Transition(s, RunEvent::kCancel);
    ASSERT_TRUE(r.ok()) << ToString(s);
    EXPECT_EQ(*r, RunState::kCancelled);
  }
}

TEST(RunState, FinalStatesAreFinal) {
  for (RunState s : {RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    EXPECT_TRUE(IsFinal(s));
    for (RunEvent e : {RunEvent::kStart, RunEvent::kSucceed, RunEvent::kRetry, RunEvent::kFail,
                       RunEvent::kCancel}) {
      auto r = Transition(s, e);
      EXPECT_FALSE(r.ok()) << ToString(s) << " " << ToString(e);
    }
  }
}

TEST(RunState, OnlyFinishedRunsAreRequeued) {
  // drover retry / run --resume: a finished run goes back to the queue for a new attempt.
  for (RunState s : {RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    auto r = Transition(s, RunEvent::kRequeue);
    ASSERT_TRUE(r.ok()) << ToString(s);
    EXPECT_EQ(*r, RunState::kQueued);
  }
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying}) {
    auto r = Transition(s, RunEvent::kRequeue);
    ASSERT_FALSE(r.ok()) << ToString(s);
    EXPECT_EQ(r.status().message(),
              "a run that is " + std::string(ToString(s)) + " cannot requeue");
  }
}

TEST(RunState, IllegalTransitionSaysWhy) {
  auto r = Transition(RunState::kQueued, RunEvent::kSucceed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "a run that is queued cannot succeed");
}

TEST(RunState, NamesRoundTrip) {
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying,
                     RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    EXPECT_EQ(ParseRunState(ToString(s)), s);
  }
  EXPECT_EQ(ParseAttemptOutcome("cuda_oom"), AttemptOutcome::kCudaOom);
  EXPECT_FALSE(ParseRunState("bogus").has_value());
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(SpecJson, RoundTripsEveryField) {
  Spec s;
  s.name = "x";
  s.command = {"python", "t.py", "--lr={lr}"};
  s.shell = false;
  s.workdir = "/w";
  s.params = OrderedJson::parse(R"({"lr": [0.1, 0.01], "m": "mlp"})");
  s.resources = {2, 6LL << 30, 3};
  s.priority = 5;
  s.max_parallel = 2;
  s.retries = 3;
  s.retry_backoff_ms = 2500;
  s.timeout_ms = 60000;
  s.env = {{"A", "1"}};
  s.objective = Objective{"val_acc", false};
  s.oom = {"batch_size", 8, "accum"};
  s.group = "vision";
  s.preemptible = false;
  auto back = SpecFromJson(SpecToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(SpecToJson(*back), SpecToJson(s));
  EXPECT_EQ(back->group, "vision");
  EXPECT_FALSE(back->preemptible);
  EXPECT_FALSE(SpecFromJson(Json{{"name", "x"}}).ok());
}

}  // namespace
}  // namespace drover
