#include "engine/pipeline_gate.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

using Wait = PipelineGate::Wait;

drover::Run RunWith(int64_t id, std::string user, std::string fingerprint) {
  drover::Run r;
  r.id = id;
  r.user = std::move(user);
  r.fingerprint = std::move(fingerprint);
  return r;
}

// A gather needs three runs: it is looked at once, when the last of them ends.
TEST(PipelineGate, ARunIsWokenOnceWhenItsLastUnfinishedNeedEnds) {
  PipelineGate gate;
  EXPECT_TRUE(gate.AwaitNeeds(10, {1, 2, 3}));
  EXPECT_EQ(gate.WaitOf(10), Wait::kNeeds);
  EXPECT_TRUE(gate.Ended(2).empty());
  EXPECT_TRUE(gate.Ended(1).empty());
  auto woken = gate.Ended(3);
  ASSERT_EQ(woken.size(), 1u);
  EXPECT_EQ(woken[0].run_id, 10);
  EXPECT_EQ(woken[0].was, Wait::kNeeds);
  EXPECT_TRUE(gate.Holds(10));  // until the engine has looked at it
  gate.Release(10);
  EXPECT_FALSE(gate.Holds(10));
  EXPECT_TRUE(gate.Ended(3).empty());  // told once
}

TEST(PipelineGate, ARunWhoseNeedsHaveAllEndedIsHeldUntilLookedAt) {
  PipelineGate gate;
  EXPECT_FALSE(gate.AwaitNeeds(5, {}));
  EXPECT_EQ(gate.WaitOf(5), Wait::kNeeds);
  gate.Hold(6);  // a restarted engine: counted later
  EXPECT_TRUE(gate.Holds(6));
  EXPECT_TRUE(gate.AwaitNeeds(6, {4}));
  ASSERT_EQ(gate.Ended(4).size(), 1u);
}

// Duplicates: the first run with a fingerprint stands for it; the next waits for it and is told
// when it ends; a final run stands for nothing, and another submitter's run is never its twin.
TEST(PipelineGate, DuplicatesWaitForTheirTwinOfTheSameSubmitter) {
  PipelineGate gate;
  const drover::Run first = RunWith(1, "ada", "f"), second = RunWith(2, "ada", "f");
  const drover::Run other = RunWith(3, "bob", "f");
  EXPECT_EQ(gate.TwinOf(PipelineGate::TwinKey(first)), 0);
  gate.SetTwin(PipelineGate::TwinKey(first), 1);
  EXPECT_EQ(gate.TwinOf(PipelineGate::TwinKey(second)), 1);
  EXPECT_EQ(gate.TwinOf(PipelineGate::TwinKey(other)), 0);
  gate.AwaitTwin(2, 1);
  EXPECT_EQ(gate.WaitOf(2), Wait::kTwin);
  gate.ClaimTwin(PipelineGate::TwinKey(second), 2);  // taken already: no change
  EXPECT_EQ(gate.TwinOf(PipelineGate::TwinKey(first)), 1);
  gate.OnFinal(first);
  EXPECT_EQ(gate.TwinOf(PipelineGate::TwinKey(first)), 0);
  auto woken = gate.Ended(1);
  ASSERT_EQ(woken.size(), 1u);
  EXPECT_EQ(woken[0].run_id, 2);
  EXPECT_EQ(woken[0].was, Wait::kTwin);
}

// A run cancelled while it waited is final: it is not woken when its need ends.
TEST(PipelineGate, AFinalRunIsNotWoken) {
  PipelineGate gate;
  gate.AwaitNeeds(7, {1});
  gate.OnFinal(RunWith(7, "ada", ""));
  EXPECT_FALSE(gate.Holds(7));
  EXPECT_TRUE(gate.Ended(1).empty());
  EXPECT_EQ(gate.held(), 0u);
}

}  // namespace
}  // namespace drover
