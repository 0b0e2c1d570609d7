// The search driver on its own, with a real (in-memory) store and a stand-in for the engine: the
// component needs nothing of engine.h to propose, make, observe and prune trials.
#include "engine/search_driver.h"

#include <gtest/gtest.h>

#include <map>

#include "spec/spec_parser.h"
#include "testutil/loop_context.h"

namespace drover {
namespace {

constexpr char kSearch[] = R"(
name: s
command: "./train.sh {x}"
params:
  x: {uniform: [0, 1]}
search: {trials: 5, parallel: 2, seed: 3, sampler: random}
objective: {metric: score, mode: max}
prune: {rule: asha, min_steps: 1, reduction: 2}
)";

// The engine's part: runs recorded in the store, unfinished counted, nothing else.
class Loop : public testing::LoopContext, public SearchHost {
 public:
  explicit Loop(Store& store) : LoopContext(store) {}
  int Unfinished(int64_t) const override { return unfinished; }
  Result<Run> MakeTrial(int64_t experiment_id, Json params, int index,
                        TrialOrigin origin) override {
    Run r;
    r.experiment_id = experiment_id;
    r.origin = origin;
    r.index = index;
    r.params = params;
    r.current_params = params;
    DROVER_RETURN_IF_ERROR(store_.InsertRun(r));
    ++unfinished;
    made.push_back(r);
    return r;
  }

  int unfinished = 0;
  std::vector<Run> made;
};

class SearchDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(Store::Open(":memory:").value());
    spec_ = ParseSpecString(kSearch, "spec.yaml", ".").value();
    exp_.name = "s";
    exp_.user = "u";
    exp_.spec = SpecToJson(spec_);
    ASSERT_TRUE(store_->InsertExperiment(exp_).ok());
  }
  // The trial ends with `score` stored at step 1.
  void End(SearchDriver& d, Loop& loop, drover::Run r, double score, RunState state) {
    ASSERT_TRUE(store_->InsertMetrics({{r.id, 0, 1, "score", score, 0}}).ok());
    r.state = state;
    ASSERT_TRUE(store_->UpdateRun(r).ok());
    --loop.unfinished;
    d.OnFinal(r);
  }

  std::unique_ptr<Store> store_;
  Spec spec_;
  Experiment exp_;
};

TEST_F(SearchDriverTest, TrialsAreMadeAsTheyEndUpToTheBudgetAndAtMostParallelAtOnce) {
  Loop loop(*store_);
  SearchDriver d(loop, loop, /*off_loop=*/false);
  ASSERT_TRUE(d.Load(exp_, spec_, {}).ok());
  ASSERT_TRUE(d.Searches(exp_.id));
  d.TopUp(exp_.id);
  EXPECT_TRUE(d.busy());
  d.TakeProposals();
  ASSERT_EQ(loop.made.size(), 2u);  // parallel: 2
  EXPECT_FALSE(d.busy());
  EXPECT_EQ(loop.made[0].index, 0);
  EXPECT_EQ(loop.made[1].index, 1);
  // While the engine winds down, nothing is asked for; the search stays open for the next pass.
  End(d, loop, loop.made[0], 0.5, RunState::kSucceeded);
  loop.winding = true;
  d.TopUp(exp_.id);
  EXPECT_FALSE(d.busy());
  EXPECT_TRUE(d.KeepsOpen(exp_.id, /*paused=*/true));
  loop.winding = false;
  // Each end makes room for the next trial, until the budget.
  for (size_t ended = 1; ended < loop.made.size(); ++ended) {
    d.TopUp(exp_.id);
    d.TakeProposals();
    End(d, loop, loop.made[ended], 0.1 * static_cast<double>(ended), RunState::kSucceeded);
  }
  EXPECT_EQ(loop.made.size(), 5u);  // the budget, no more
  EXPECT_FALSE(d.KeepsOpen(exp_.id, /*paused=*/true));
  EXPECT_TRUE(loop.failed.ok());
}

TEST_F(SearchDriverTest, ARestartedDriverCountsTheStoredTrialsAndProposesTheSameNext) {
  Loop loop(*store_);
  SearchDriver d(loop, loop, false);
  ASSERT_TRUE(d.Load(exp_, spec_, {}).ok());
  d.TopUp(exp_.id);
  d.TakeProposals();
  End(d, loop, loop.made[0], 0.7, RunState::kSucceeded);
  const ProposalJob before = d.SuggestJob(exp_.id, 1);

  // A new driver over the same store: trial 1 still running, trial 0 ended with its value.
  RunFilter f;
  f.experiment_id = exp_.id;
  auto runs = store_->ListRuns(f).value();
  Loop again(*store_);
  again.unfinished = 1;
  SearchDriver e(again, again, false);
  ASSERT_TRUE(e.Load(exp_, spec_, runs).ok());
  const ProposalJob after = e.SuggestJob(exp_.id, 1);
  EXPECT_EQ(after.first_index, 2);
  ASSERT_EQ(after.history.size(), before.history.size());
  EXPECT_EQ(after.asks.at(0).seed, before.asks.at(0).seed);
  EXPECT_EQ(after.Propose(), before.Propose());
  e.TopUp(exp_.id);
  e.TakeProposals();
  ASSERT_EQ(again.made.size(), 1u);
  EXPECT_EQ(again.made[0].index, 2);  // never a trial number twice
}

TEST_F(SearchDriverTest, ARunBehindAtARungIsToBeStoppedAndItsRungIsStored) {
  Loop loop(*store_);
  SearchDriver d(loop, loop, false);
  ASSERT_TRUE(d.Load(exp_, spec_, {}).ok());
  d.TopUp(exp_.id);
  d.TakeProposals();
  drover::Run good = loop.made.at(0), bad = loop.made.at(1);
  EXPECT_FALSE(d.OnPoints(good, {{good.id, 0, 1, "score", 0.9, 0}}));
  EXPECT_TRUE(d.OnPoints(bad, {{bad.id, 0, 1, "score", 0.1, 0}}));
  EXPECT_NE(d.PrunedWhy(exp_.id, bad.id).find("pruned at rung 0 (step 1): score = 0.1"),
            std::string::npos)
      << d.PrunedWhy(exp_.id, bad.id);
  EXPECT_EQ(d.PrunedWhy(exp_.id, good.id), "");
  EXPECT_EQ(store_->ListRungs(exp_.id).value().size(), 2u);
  // Points of other metrics say nothing.
  EXPECT_FALSE(d.OnPoints(bad, {{bad.id, 0, 2, "loss", 0.0, 0}}));
}

TEST_F(SearchDriverTest, ToldResultsAreCheckedStoredAndBounded) {
  Loop loop(*store_);
  SearchDriver d(loop, loop, false);
  ASSERT_TRUE(d.Load(exp_, spec_, {}).ok());
  cmd::Tell bad{exp_.id, Json{{"x", 3.0}}, 0.5};
  EXPECT_FALSE(d.CheckTell(bad).ok());  // outside the space
  cmd::Tell nan{exp_.id, Json{{"x", 0.5}}, std::nan("")};
  EXPECT_EQ(d.CheckTell(nan).code(), Code::kInvalidArgument);
  cmd::Tell ok{exp_.id, Json{{"x", 0.5}}, 0.9};
  ASSERT_TRUE(d.CheckTell(ok).ok());
  ASSERT_TRUE(d.Told(ok, 5).ok());
  EXPECT_EQ(store_->ListObservations(exp_.id).value().size(), 1u);
  EXPECT_EQ(d.SuggestJob(exp_.id, 1).history.size(), 1u);
  // A trial of the caller's choosing is made with the next number; none once the search is over.
  Result<drover::Run> added = d.AddTrial({exp_.id, Json{{"x", 0.25}}}, /*active=*/true);
  ASSERT_TRUE(added.ok()) << added.status().message();
  EXPECT_EQ(added->index, 0);
  EXPECT_EQ(d.AddTrial({exp_.id, Json{{"x", 0.25}}}, false).status().code(),
            Code::kFailedPrecondition);
}

}  // namespace
}  // namespace drover
