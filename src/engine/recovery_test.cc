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
  EXPECT_EQ(ClassifyExit({0, 0, false, false, ""}), AttemptOutcome::kSucceeded);
  EXPECT_EQ(ClassifyExit({1, 0, false, false, "Traceback"}), AttemptOutcome::kExitCode);
  EXPECT_EQ(ClassifyExit({1, 0, false, false, "CUDA out of memory"}), AttemptOutcome::kCudaOom);
  EXPECT_EQ(ClassifyExit({-1, 9, false, false, ""}), AttemptOutcome::kSignal);
  EXPECT_EQ(ClassifyExit({-1, 15, true, false, ""}), AttemptOutcome::kTimeout);
  EXPECT_EQ(ClassifyExit({-1, 15, true, true, ""}), AttemptOutcome::kCancelled);
}

TEST(Recovery, EngineStopsAreClassifiedByWhy) {
  ExitFacts diverged{-1, 15, false, false, ""};
  diverged.diverged = true;
  EXPECT_EQ(ClassifyExit(diverged), AttemptOutcome::kDiverged);
  ExitFacts stalled{-1, 15, false, false, ""};
  stalled.stalled = true;
  EXPECT_EQ(ClassifyExit(stalled), AttemptOutcome::kStalled);
  Spec s;
  s.retries = 3;
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kDiverged).kind, Recovery::Kind::kFail);
  Recovery r = DecideRecovery(s, {}, 0, AttemptOutcome::kStalled);
  EXPECT_EQ(r.kind, Recovery::Kind::kRetry);
  EXPECT_TRUE(r.counts_as_retry);
}

TEST(Recovery, OomHalvesTheParamAndDoublesAccumulation) {
  Json params = {{"batch_size", 512}, {"grad_accum", 1}, {"lr", 0.1}};
  Recovery r = DecideRecovery(OomSpec(), params, 0, AttemptOutcome::kCudaOom);
  ASSERT_EQ(r.kind, Recovery::Kind::kRetry);
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
  EXPECT_EQ(r.kind, Recovery::Kind::kFail);
  EXPECT_EQ(r.note, "CUDA OOM at batch_size=100, and halving would go below oom.min=64");
}

TEST(Recovery, OomWithoutPolicyIsAnOrdinaryFailure) {
  Spec s;
  s.retries = 1;
  Recovery r = DecideRecovery(s, Json::object(), 0, AttemptOutcome::kCudaOom);
  EXPECT_EQ(r.kind, Recovery::Kind::kRetry);
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
  EXPECT_EQ(last.kind, Recovery::Kind::kFail);
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
  EXPECT_EQ(r.kind, Recovery::Kind::kRetry);
  EXPECT_FALSE(r.counts_as_retry);
  EXPECT_EQ(r.delay_ms, 0);
  EXPECT_EQ(r.next_params, Json({{"lr", 1}}));
}

TEST(Recovery, PreemptedRunsAreRequeuedWhateverTheyExitWith) {
  // A run that checkpoints on SIGTERM and exits 0 is not done: it was preempted.
  ExitFacts clean{0, 0, false, false, ""};
  clean.preempted = true;
  EXPECT_EQ(ClassifyExit(clean), AttemptOutcome::kPreempted);
  ExitFacts killed{-1, 9, false, false, ""};
  killed.preempted = true;
  EXPECT_EQ(ClassifyExit(killed), AttemptOutcome::kPreempted);
  ExitFacts cancelled{-1, 15, false, true, ""};
  cancelled.preempted = true;
  EXPECT_EQ(ClassifyExit(cancelled), AttemptOutcome::kCancelled);  // the user's cancel wins
  // Timing out or going quiet during the grace is the preemption's doing: no retry is spent.
  ExitFacts late{-1, 9, true, false, ""};
  late.preempted = true;
  EXPECT_EQ(ClassifyExit(late), AttemptOutcome::kPreempted);
  ExitFacts quiet{-1, 9, false, false, ""};
  quiet.stalled = true;
  quiet.preempted = true;
  EXPECT_EQ(ClassifyExit(quiet), AttemptOutcome::kPreempted);
  Spec s;
  s.retries = 0;
  Recovery r = DecideRecovery(s, Json{{"lr", 1}}, 0, AttemptOutcome::kPreempted);
  EXPECT_EQ(r.kind, Recovery::Kind::kRetry);
  EXPECT_FALSE(r.counts_as_retry);
  EXPECT_EQ(r.delay_ms, 0);
  EXPECT_EQ(r.next_params, Json({{"lr", 1}}));
  EXPECT_EQ(ToString(AttemptOutcome::kPreempted), "preempted");
  EXPECT_EQ(ParseAttemptOutcome("preempted"), AttemptOutcome::kPreempted);
}

TEST(Recovery, LaunchErrorsAndCancelsAreNotRetried) {
  Spec s;
  s.retries = 5;
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kLaunchError).kind, Recovery::Kind::kFail);
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kCancelled).kind, Recovery::Kind::kCancel);
  EXPECT_EQ(DecideRecovery(s, {}, 0, AttemptOutcome::kSucceeded).kind, Recovery::Kind::kSucceed);
}

}  // namespace
}  // namespace drover
