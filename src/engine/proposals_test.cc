// The proposer's thread is every search's (issue 39: another user's 8-trial TPE search made one
// trial in 288 s behind a GP search told 4,000 results): users are served in turn, each user's
// jobs in the order they came. No timing: the first job is held on a gate until the rest wait.
#include "engine/proposals.h"

#include <gtest/gtest.h>

#include <future>

namespace drover {
namespace {

ProposalJob JobOf(const std::string& user, int64_t experiment_id) {
  ProposalJob job;
  job.user = user;
  job.experiment_id = experiment_id;
  return job;
}

TEST(ProposerTest, UsersAreServedInTurnWhateverOneOfThemQueued) {
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  Proposer proposer({}, /*off_loop=*/true, [open](const ProposalJob& job) {
    if (job.experiment_id == 1) open.wait();  // alice's first job holds the thread
    return std::vector<Json>{Json{{"experiment", job.experiment_id}}};
  });
  proposer.Start(JobOf("alice", 1));
  for (int64_t e = 2; e <= 5; ++e) proposer.Start(JobOf("alice", e));  // alice's other searches
  proposer.Start(JobOf("bob", 10));
  proposer.Start(JobOf("carol", 20));
  proposer.Start(JobOf("bob", 11));
  gate.set_value();
  proposer.WaitIdle();
  std::vector<int64_t> order;
  for (const ProposalDone& d : proposer.TakeFinished()) {
    ASSERT_EQ(d.params.size(), 1u);
    EXPECT_EQ(d.params[0]["experiment"], d.experiment_id);
    order.push_back(d.experiment_id);
  }
  // Bob and carol wait for one job of alice's at most, not for all five.
  EXPECT_EQ(order, (std::vector<int64_t>{1, 10, 20, 2, 11, 3, 4, 5}));
}

TEST(ProposerTest, AJobThatThrowsComesBackEmptyAndTheNextIsServed) {
  Proposer proposer({}, /*off_loop=*/false, [](const ProposalJob& job) -> std::vector<Json> {
    if (job.experiment_id == 1) throw std::runtime_error("sampler broke");
    return {Json::object()};
  });
  proposer.Start(JobOf("alice", 1));
  proposer.Start(JobOf("bob", 2));
  std::vector<ProposalDone> done = proposer.TakeFinished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_TRUE(done[0].params.empty());
  EXPECT_EQ(done[1].params.size(), 1u);
}

}  // namespace
}  // namespace drover
