// Fail fast on its own, over a real (in-memory) store and a stand-in for the engine: what counts
// as one error, when the watch stops the experiment, and what ends it without a stop.
#include "engine/fail_fast.h"

#include <gtest/gtest.h>

#include <vector>

#include "testutil/loop_context.h"

namespace drover {
namespace {

class Host : public FailFastHost {
 public:
  int StopExperiment(int64_t experiment_id, const std::string& note, Instant) override {
    stopped.push_back(experiment_id);
    notes.push_back(note);
    return 5;
  }
  std::vector<int64_t> stopped;
  std::vector<std::string> notes;
};

class FailFastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(Store::Open(":memory:").value());
    ctx_ = std::make_unique<testing::LoopContext>(*store_);
    exp_.name = "sweep";
    exp_.user = "u";
    exp_.spec = Json::object();
    ASSERT_TRUE(store_->InsertExperiment(exp_).ok());
    fail_fast_ = std::make_unique<FailFast>(*ctx_, host_);
    fail_fast_->Watch(exp_, spec_);
  }
  // A run of the experiment that ended in `state` for `outcome`, its one attempt's stderr `error`.
  drover::Run End(RunState state, AttemptOutcome outcome, const std::string& error) {
    drover::Run r;
    r.experiment_id = exp_.id;
    r.user = "u";
    r.params = Json::object();
    EXPECT_TRUE(store_->InsertRun(r).ok());
    Attempt a;
    a.run_id = r.id;
    a.number = 1;
    a.error = error;
    a.reason = std::string(ToString(outcome));
    a.ended = true;
    EXPECT_TRUE(store_->InsertAttempt(a).ok());
    r.state = state;
    r.reason = std::string(ToString(outcome));
    fail_fast_->OnFinal(r);
    return r;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<testing::LoopContext> ctx_;
  Experiment exp_;
  Spec spec_;  // fail_fast: 3, the default
  Host host_;
  std::unique_ptr<FailFast> fail_fast_;
};

constexpr char kTrace[] =
    "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
    "    import torch\nModuleNotFoundError: No module named 'torch'\n\n";

TEST_F(FailFastTest, TheFirstThreeRunsFailingTheSameWayStopTheExperimentWithTheError) {
  EXPECT_EQ(FailFast::LastLine(kTrace), "ModuleNotFoundError: No module named 'torch'");
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  End(RunState::kCancelled, AttemptOutcome::kCancelled, "");  // not counted, not an end
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  fail_fast_->Apply({1000, 1000});
  EXPECT_TRUE(host_.stopped.empty());  // two of three
  const drover::Run third = End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  EXPECT_TRUE(host_.stopped.empty());  // the stop waits for Apply (OnFinal runs mid-retire)
  fail_fast_->Apply({1000, 1000});
  ASSERT_EQ(host_.stopped, std::vector<int64_t>{exp_.id});
  EXPECT_NE(host_.notes[0].find("first 3 runs failed the same way"), std::string::npos);
  ASSERT_EQ(ctx_->alerts.size(), 1u);
  const Alert& a = ctx_->alerts[0];
  EXPECT_EQ(a.kind, "experiment_stopped");
  EXPECT_EQ(a.severity, "error");
  EXPECT_EQ(a.run_id, third.id);
  EXPECT_NE(a.message.find("ModuleNotFoundError: No module named 'torch'"), std::string::npos)
      << a.message;
  EXPECT_NE(a.message.find("5 waiting runs were cancelled"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("drover logs 1 --stderr"), std::string::npos) << a.message;
  // Once: a fourth failure stops nothing more.
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  fail_fast_->Apply({2000, 2000});
  EXPECT_EQ(host_.stopped.size(), 1u);
}

TEST_F(FailFastTest, NumbersInTheErrorDoNotMakeItAnotherError) {
  End(RunState::kFailed, AttemptOutcome::kExitCode, "ValueError: lr 0.1 is too high\n");
  End(RunState::kFailed, AttemptOutcome::kExitCode, "ValueError: lr 0.3 is too high\n");
  End(RunState::kFailed, AttemptOutcome::kExitCode, "ValueError: lr 1 is too high\n");
  fail_fast_->Apply({1000, 1000});
  EXPECT_EQ(host_.stopped.size(), 1u);
}

TEST_F(FailFastTest, ASuccessAnotherErrorOrAnotherKindOfFailureEndsTheWatch) {
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  End(RunState::kSucceeded, AttemptOutcome::kSucceeded, "");
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  fail_fast_->Apply({1000, 1000});
  EXPECT_TRUE(host_.stopped.empty());

  fail_fast_->Watch(exp_, spec_);  // watched afresh (a retry)
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  End(RunState::kFailed, AttemptOutcome::kExitCode, "KeyError: 'x'\n");
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  fail_fast_->Apply({1000, 1000});
  EXPECT_TRUE(host_.stopped.empty());

  // A run that diverged (NaN) ran: the lrs that fail that way end first in a sweep over lr, and
  // the rest of the sweep is what the user asked for.
  fail_fast_->Watch(exp_, spec_);
  End(RunState::kFailed, AttemptOutcome::kDiverged, "");
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  fail_fast_->Apply({1000, 1000});
  EXPECT_TRUE(host_.stopped.empty());

  // fail_fast: 0 watches nothing.
  Spec off;
  off.fail_fast = 0;
  fail_fast_->Watch(exp_, off);
  for (int i = 0; i < 4; ++i) End(RunState::kFailed, AttemptOutcome::kExitCode, kTrace);
  fail_fast_->Apply({1000, 1000});
  EXPECT_TRUE(host_.stopped.empty());
}

}  // namespace
}  // namespace drover
