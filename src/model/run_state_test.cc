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
