#include "engine/recovery.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

Spec OomSpec() {
  Spec s;
  s.oom.param = "batch_size";
  s.oom.min = 64;
  s.oom.accumulate = "grad_accum";
  s.retries = 0;
  return s;
}

TEST(Recovery, RecognisesCudaOomMessages) {
  EXPECT_TRUE(
      LooksLikeCudaOom("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"));
  EXPECT_TRUE(
      LooksLikeCudaOom("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling"));
  EXPECT_TRUE(LooksLikeCudaOom("RuntimeError: CUDA out of memory."));
  EXPECT_FALSE(LooksLikeCudaOom("ValueError: bad shape"));
  EXPECT_FALSE(LooksLikeCudaOom(""));
}

TEST(Recovery, ClassifiesExits) {
  EXPECT_EQ(ClassifyExit({0, 0, ""}), AttemptOutcome::kSucceeded);
  EXPECT_EQ(ClassifyExit({1, 0, "Traceback"}), AttemptOutcome::kExitCode);
  EXPECT_EQ(ClassifyExit({1, 0, "CUDA out of memory"}), AttemptOutcome::kCudaOom);
  EXPECT_EQ(ClassifyExit({-1, 9, ""}), AttemptOutcome::kSignal);
}

TEST(Recovery, EngineStopsEndForTheirReason) {
  EXPECT_EQ(OutcomeOf(StopReason::kCancel, true), AttemptOutcome::kCancelled);
  EXPECT_EQ(OutcomeOf(StopReason::kTimeout, false), AttemptOutcome::kTimeout);
  EXPECT_EQ(OutcomeOf(StopReason::kStall, false), AttemptOutcome::kStalled);
  EXPECT_EQ(OutcomeOf(StopReason::kDiverged, false), AttemptOutcome::kDiverged);
  // A preempted run that checkpoints and exits 0 has not finished.
  EXPECT_EQ(OutcomeOf(StopReason::kPreempt, true), AttemptOutcome::kPreempted);
  // Stopped for the daemon's shutdown: done if it exited 0, else requeued.
  EXPECT_EQ(OutcomeOf(StopReason::kDrain, true), AttemptOutcome::kSucceeded);
  EXPECT_EQ(OutcomeOf(StopReason::kDrain, false), AttemptOutcome::kInterrupted);
  for (auto r : {StopReason::kCancel, StopReason::kTimeout, StopReason::kStall,
                 StopReason::kDiverged, StopReason::kPreempt, StopReason::kDrain}) {
    EXPECT_EQ(ParseStopReason(ToString(r)), r);
  }
  EXPECT_EQ(ParseStopReason("nope"), std::nullopt);
  Spec s;
  s.retries = 3;
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kDiverged).event, RunEvent::kFail);
  Recovery r = DecideRecovery(s, {}, 0, AttemptOutcome::kStalled);
  EXPECT_EQ(r.event, RunEvent::kRetry);
  EXPECT_TRUE(r.counts_as_retry);
}

TEST(Recovery, OomHalvesTheParamAndDoublesAccumulation) {
  Json params = {{"batch_size", 512}, {"grad_accum", 1}, {"lr", 0.1}};
  Recovery r = DecideRecovery(OomSpec(), params, 0, AttemptOutcome::kCudaOom);
  ASSERT_EQ(r.event, RunEvent::kRetry);
  EXPECT_EQ(r.next_params["batch_size"], 256);
  EXPECT_EQ(r.next_params["grad_accum"], 2);
  EXPECT_EQ(r.next_params["lr"], 0.1);
  EXPECT_EQ(r.delay_ms, 0);
  EXPECT_FALSE(r.counts_as_retry);
  EXPECT_EQ(r.note, "CUDA OOM: batch_size 512 -> 256, grad_accum 1 -> 2");
}

TEST(Recovery, OomStopsAtTheMinimum) {
  Json params = {{"batch_size", 100}, {"grad_accum", 1}};
  Recovery r = DecideRecovery(OomSpec(), params, 0, AttemptOutcome::kCudaOom);
  EXPECT_EQ(r.event, RunEvent::kFail);
  EXPECT_EQ(r.note, "CUDA OOM at batch_size=100, and halving would go below oom.min=64");
}

TEST(Recovery, OomWithoutPolicyIsAnOrdinaryFailure) {
  Spec s;
  s.retries = 1;
  Recovery r = DecideRecovery(s, Json::object(), 0, AttemptOutcome::kCudaOom);
  EXPECT_EQ(r.event, RunEvent::kRetry);
  EXPECT_TRUE(r.counts_as_retry);
}

TEST(Recovery, RetriesBackOffExponentiallyThenFail) {
  Spec s;
  s.retries = 3;
  s.retry_backoff_ms = 1000;
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kExitCode).delay_ms, 1000);
  EXPECT_EQ(DecideRecovery(s, {}, 1, AttemptOutcome::kSignal).delay_ms, 2000);
  EXPECT_EQ(DecideRecovery(s, {}, 2, AttemptOutcome::kTimeout).delay_ms, 4000);
  Recovery last = DecideRecovery(s, {}, 3, AttemptOutcome::kExitCode);
  EXPECT_EQ(last.event, RunEvent::kFail);
  EXPECT_EQ(last.note, "all 3 retries used");
}

TEST(Recovery, BackoffIsCapped) {
  Spec s;
  s.retries = 100;
  s.retry_backoff_ms = 60'000;
  EXPECT_EQ(DecideRecovery(s, {}, 50, AttemptOutcome::kExitCode).delay_ms, 5 * 60 * 1000);
}

TEST(Recovery, InterruptedRunsAreRequeuedWithoutSpendingRetries) {
  Spec s;
  s.retries = 0;
  Recovery r = DecideRecovery(s, Json{{"lr", 1}}, 0, AttemptOutcome::kInterrupted);
  EXPECT_EQ(r.event, RunEvent::kRetry);
  EXPECT_FALSE(r.counts_as_retry);
  EXPECT_EQ(r.delay_ms, 0);
  EXPECT_EQ(r.next_params, Json({{"lr", 1}}));
}

TEST(Recovery, PreemptedRunsAreRequeuedWhateverTheyExitWith) {
  // A run that checkpoints on SIGTERM and exits 0 is not done: it was preempted. (A timeout or
  // a stall during the grace cannot take over: the first reason to stop is the attempt's, and
  // the user's cancel decides the run's end in the engine: engine_test.)
  EXPECT_EQ(OutcomeOf(StopReason::kPreempt, true), AttemptOutcome::kPreempted);
  EXPECT_EQ(OutcomeOf(StopReason::kPreempt, false), AttemptOutcome::kPreempted);
  Spec s;
  s.retries = 0;
  Recovery r = DecideRecovery(s, Json{{"lr", 1}}, 0, AttemptOutcome::kPreempted);
  EXPECT_EQ(r.event, RunEvent::kRetry);
  EXPECT_FALSE(r.counts_as_retry);
  EXPECT_EQ(r.delay_ms, 0);
  EXPECT_EQ(r.next_params, Json({{"lr", 1}}));
  EXPECT_EQ(ToString(AttemptOutcome::kPreempted), "preempted");
  EXPECT_EQ(ParseAttemptOutcome("preempted"), AttemptOutcome::kPreempted);
}

TEST(Recovery, LaunchErrorsAndCancelsAreNotRetried) {
  Spec s;
  s.retries = 5;
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kLaunchError).event, RunEvent::kFail);
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kCancelled).event, RunEvent::kCancel);
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kSucceeded).event, RunEvent::kSucceed);
}

}  // namespace
}  // namespace drover
