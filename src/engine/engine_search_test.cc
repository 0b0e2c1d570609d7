// Searches and pruning in the engine, with a scripted launcher and a fake clock: trials are made
// as the search goes, at most `parallel` unfinished; a seed proposes the same trials; the prune
// rule stops runs that are behind (state pruned, rungs stored); a restarted engine goes on with
// every trial made once.
#include <gtest/gtest.h>

#include <csignal>
#include <cmath>
#include <random>
#include <set>

#include "engine/engine.h"
#include "search/sampler.h"
#include "spec/spec_parser.h"
#include "testutil/engine_fixture.h"
#include "testutil/fake_launcher.h"

namespace drover {
namespace {

// Ask/tell as the daemon sends them: commands through Dispatch.
Result<std::shared_ptr<const ProposalJob>> SuggestJob(Engine& e, cmd::Suggest c) {
  Command command = c;
  DROVER_ASSIGN_OR_RETURN(CommandReply reply, e.Dispatch(command));
  return std::get<std::shared_ptr<const ProposalJob>>(reply);
}
Result<std::vector<Json>> Suggest(Engine& e, cmd::Suggest c) {
  DROVER_ASSIGN_OR_RETURN(auto job, SuggestJob(e, c));
  return job->Propose();
}
Status Tell(Engine& e, cmd::Tell c) {
  Command command = std::move(c);
  return e.Dispatch(command).status();
}
Result<Run> AddTrial(Engine& e, cmd::AddTrial c) {
  Command command = std::move(c);
  DROVER_ASSIGN_OR_RETURN(CommandReply reply, e.Dispatch(command));
  return std::get<std::vector<Run>>(reply).at(0);
}

using testing::FakeLauncher;
using testing::FakeProcess;

constexpr char kSearch[] = R"(
name: s
command: "./train.sh {x} {n}"
params:
  x: {uniform: [0, 1]}
  n: {int: [1, 4]}
search: {trials: 14, parallel: 3, seed: 7, sampler: tpe}
objective: {metric: score, mode: max}
)";

// score = -(x - 0.3)^2 - 0.1 (n - 2)^2, printed once; each run takes 100 ms.
FakeProcess Scored(const LaunchSpec& ls) {
  const double x = std::stod(ls.argv.at(1));
  const double n = std::stod(ls.argv.at(2));
  const double score = -(x - 0.3) * (x - 0.3) - 0.1 * (n - 2) * (n - 2);
  FakeProcess p;
  p.duration_ms = 100;
  p.stdout_text = "{\"step\": 1, \"score\": " + std::to_string(score) + "}\n";
  return p;
}

class EngineSearchTest : public testing::EngineFixture {
 protected:
  std::vector<drover::Run> Runs(int64_t experiment_id, Store& store) {
    RunFilter f;
    f.experiment_id = experiment_id;
    auto runs = store.ListRuns(f).value();
    std::sort(runs.begin(), runs.end(),
              [](const drover::Run& a, const drover::Run& b) { return a.index < b.index; });
    return runs;
  }
};

TEST_F(EngineSearchTest, TrialsAreMadeAsTheSearchGoesAtMostParallelUnfinished) {
  Spec spec = ParseSpec(kSearch);
  int unfinished_max = 0;
  FakeLauncher launcher(clock_, Scored);
  FakeGpuProbe probe({});
  Engine engine(*store_, launcher, probe, clock_, BaseOptions());
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_EQ(sub->runs.size(), 3u);  // the first `parallel` trials come with the submit
  launcher.on_wait = [&](FakeLauncher&) {
    RunFilter f;
    f.experiment_id = sub->experiment_id;
    int unfinished = 0;
    const std::vector<drover::Run> runs = store_->ListRuns(f).value();
    for (const drover::Run& r : runs) unfinished += !IsFinal(r.state);
    unfinished_max = std::max(unfinished_max, unfinished);
  };
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  std::vector<drover::Run> runs = Runs(sub->experiment_id, *store_);
  ASSERT_EQ(runs.size(), 14u);
  std::set<std::string> configs;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].index, static_cast<int>(i));
    EXPECT_EQ(runs[i].state, RunState::kSucceeded);
    const double x = runs[i].params["x"].get<double>();
    const int64_t n = runs[i].params["n"].get<int64_t>();
    EXPECT_GE(x, 0);
    EXPECT_LE(x, 1);
    EXPECT_GE(n, 1);
    EXPECT_LE(n, 4);
    configs.insert(runs[i].params.dump());
  }
  EXPECT_EQ(configs.size(), runs.size());  // no config proposed twice
  // Each trial records how it was proposed: the random start (the first ones, a quarter of the
  // budget), then the model; the same counts as the sampler's rule gives.
  int start = 0, model = 0;
  for (const drover::Run& r : runs) {
    start += r.origin == TrialOrigin::kRandomStart;
    model += ModelBased(r.origin);
  }
  EXPECT_EQ(runs.front().origin, TrialOrigin::kRandomStart);
  EXPECT_TRUE(ModelBased(runs.back().origin));
  EXPECT_EQ(start + model, 14);
  EXPECT_GE(start, search::StartupTrials(search::SamplerOptionsOf(spec, false),
                                         search::SpaceOf(spec).value()));
  EXPECT_LE(unfinished_max, 3);
  EXPECT_LE(launcher.max_running, 3);
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kDone);
  // The seed is stored with the experiment's spec.
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->spec["search"]["seed"], 7);
}

// Proposals made on the proposer's thread (as in drover run and the daemon) come back and make
// the same trials as proposals made on the loop: one at a time (parallel 1) the history at each
// proposal is the same either way. The loop keeps going while they are made.
TEST_F(EngineSearchTest, ProposalsOffTheLoopMakeTheSameTrials) {
  std::string text = kSearch;
  text.replace(text.find("parallel: 3"), 11, "parallel: 1");
  text.replace(text.find("sampler: tpe"), 12, "sampler: gp");
  std::vector<std::vector<std::string>> seen;
  for (bool off_loop : {false, true}) {
    auto store = std::move(Store::Open(":memory:").value());
    FakeLauncher launcher(clock_, Scored);
    FakeGpuProbe probe({});
    EngineOptions o = BaseOptions();
    o.proposals_off_loop = off_loop;
    Engine engine(*store, launcher, probe, clock_, o);
    auto sub = engine.Submit(ParseSpec(text));
    ASSERT_TRUE(sub.ok()) << sub.status().message();
    ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
    std::vector<drover::Run> runs = Runs(sub->experiment_id, *store);
    ASSERT_EQ(runs.size(), 14u) << "off the loop: " << off_loop;
    std::vector<std::string> params;
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(runs[i].index, static_cast<int>(i));
      EXPECT_EQ(runs[i].state, RunState::kSucceeded);
      params.push_back(runs[i].params.dump());
    }
    EXPECT_EQ(store->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kDone);
    EXPECT_LE(launcher.max_running, 1);
    seen.push_back(params);
  }
  EXPECT_EQ(seen[0], seen[1]);
}

TEST_F(EngineSearchTest, TheSameSeedAndResultsProposeTheSameTrials) {
  std::vector<std::vector<std::string>> seen;
  for (int i = 0; i < 2; ++i) {
    auto store = std::move(Store::Open(":memory:").value());
    FakeLauncher launcher(clock_, Scored);
    FakeGpuProbe probe({});
    Engine engine(*store, launcher, probe, clock_, BaseOptions());
    auto sub = engine.Submit(ParseSpec(kSearch));
    ASSERT_TRUE(sub.ok()) << sub.status().message();
    ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
    std::vector<std::string> params;
    for (const drover::Run& r : Runs(sub->experiment_id, *store)) params.push_back(r.params.dump());
    seen.push_back(params);
  }
  EXPECT_EQ(seen[0], seen[1]);
}

TEST_F(EngineSearchTest, AshaStopsRunsThatAreBehindAndTheyEndPrunedNotFailed) {
  // One at a time, so each run meets the ones before it at each rung (steps 1, 3, 9).
  Spec spec = ParseSpec(R"(
name: p
command: "./train.sh {q}"
params: {q: [0.9, 0.95, 0.5, 0.2]}
max_parallel: 1
prune: {rule: asha, metric: acc, min_steps: 1, reduction: 3, max_steps: 10}
)");
  FakeLauncher launcher(clock_, [](const LaunchSpec& ls) {
    const double q = std::stod(ls.argv.at(1));
    FakeProcess p;
    p.duration_ms = 1000;
    for (int step = 1; step <= 10; ++step) {
      p.stdout_text += "{\"step\": " + std::to_string(step) +
                       ", \"acc\": " + std::to_string(q * step / 10.0) + "}\n";
    }
    return p;
  });
  FakeGpuProbe probe({});
  Engine engine(*store_, launcher, probe, clock_, BaseOptions());
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  std::vector<drover::Run> runs = Runs(sub->experiment_id, *store_);
  ASSERT_EQ(runs.size(), 4u);
  // The first two at a rung go on (under `reduction` values there); q=0.5 is then the worst of
  // three at rung 0, and q=0.2 the worst of four.
  EXPECT_EQ(runs[0].state, RunState::kSucceeded);
  EXPECT_EQ(runs[1].state, RunState::kSucceeded);
  EXPECT_EQ(runs[2].state, RunState::kPruned);
  EXPECT_EQ(runs[3].state, RunState::kPruned);
  auto attempts = store_->ListAttempts(runs[2].id).value();
  ASSERT_EQ(attempts.size(), 1u);  // not retried
  EXPECT_EQ(attempts[0].reason, "pruned");
  EXPECT_EQ(attempts[0].signal, SIGTERM);
  EXPECT_EQ(runs[2].retries_used, 0);
  // The rungs and decisions are stored: run 1 reached rungs 0 (step 1) and 1 (step 3).
  std::vector<RungRecord> rungs = store_->ListRungs(sub->experiment_id).value();
  int of_first = 0, pruned = 0;
  for (const RungRecord& r : rungs) {
    of_first += r.run_id == runs[0].id;
    pruned += r.pruned;
    if (r.run_id == runs[2].id) {
      EXPECT_EQ(r.rung, 0);
      EXPECT_EQ(r.step, 1);
      EXPECT_TRUE(r.pruned);
    }
  }
  EXPECT_EQ(of_first, 2);  // no rung 2: step 9 is 90% of max_steps (10)
  EXPECT_EQ(pruned, 2);
  // The note says where and why.
  bool noted = false;
  const std::vector<Event> events = store_->ListEvents(0).value();
  for (const Event& e : events) {
    const auto note = e.data.find("note");
    if (e.run_id == runs[2].id && note != e.data.end() && note->is_string() &&
        note->get<std::string>().find("pruned at rung 0 (step 1): acc = 0.05") !=
            std::string::npos) {
      noted = true;
    }
  }
  EXPECT_TRUE(noted);
  EXPECT_EQ(store_->GetExperiment(sub->experiment_id).value()->status, ExperimentStatus::kDone);
}

TEST_F(EngineSearchTest, ARestartedEngineGoesOnWithEveryTrialMadeOnce) {
  Spec spec = ParseSpec(kSearch);
  int64_t experiment_id = 0;
  {
    FakeLauncher first(clock_, Scored);
    FakeGpuProbe probe({});
    EngineOptions o = BaseOptions();
    o.use_shim = false;
    Engine engine(*store_, first, probe, clock_, o);
    auto sub = engine.Submit(spec);
    ASSERT_TRUE(sub.ok()) << sub.status().message();
    experiment_id = sub->experiment_id;
    first.on_wait = [&](FakeLauncher& l) {
      if (l.launches.size() == 6) l.pending_interrupt = SIGTERM;  // the daemon goes away
    };
    ASSERT_TRUE(engine.Serve(nullptr).ok());
  }
  const size_t made_before = Runs(experiment_id, *store_).size();
  EXPECT_GE(made_before, 6u);
  EXPECT_LT(made_before, 14u);

  FakeLauncher next(clock_, Scored);
  FakeGpuProbe probe({});
  Engine engine(*store_, next, probe, clock_, BaseOptions());
  ASSERT_TRUE(engine.Recover().ok());
  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  std::vector<drover::Run> runs = Runs(experiment_id, *store_);
  ASSERT_EQ(runs.size(), 14u);  // the same total
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].index, static_cast<int>(i));  // each trial once
    EXPECT_EQ(runs[i].state, RunState::kSucceeded) << i;
  }
  EXPECT_EQ(store_->GetExperiment(experiment_id).value()->status, ExperimentStatus::kDone);
}

TEST_F(EngineSearchTest, AskTellSuggestionsAccountForWhatAnAgentTold) {
  Spec spec = ParseSpec(R"(
name: agent
command: "./train.sh {x} {n}"
params:
  x: {uniform: [0, 1]}
  n: {int: [1, 4]}
search: {trials: 30, parallel: 1, seed: 5, sampler: tpe}
objective: {metric: score, mode: max}
)");
  FakeLauncher launcher(clock_, Scored);
  FakeGpuProbe probe({});
  Engine engine(*store_, launcher, probe, clock_, BaseOptions());
  auto sub = engine.Submit(spec);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  const int64_t id = sub->experiment_id;

  auto three = Suggest(engine, {id, 3});
  ASSERT_TRUE(three.ok()) << three.status().message();
  ASSERT_EQ(three->size(), 3u);
  EXPECT_NE((*three)[0], (*three)[1]);  // each suggestion is a liar for the next
  EXPECT_EQ(Suggest(engine, {id, 3}).value(), *three);  // nothing was recorded

  // Bad configs are refused with what is wrong.
  EXPECT_EQ(Tell(engine, {id, Json{{"x", 2.0}, {"n", 1}}, 1.0}).message(),
            "x = 2.0 is outside the search: it must be a number from 0 to 1");
  EXPECT_EQ(Tell(engine, {id, Json{{"x", 0.5}}, 1.0}).message(), "'n' is missing");
  EXPECT_EQ(Tell(engine, {id, Json{{"x", 0.5}, {"n", 2}, {"y", 1}}, 1.0}).message(),
            "'y' is not a parameter of the search");

  // The agent's own results: the best near x = 0.8, n = 3 (the opposite of Scored's optimum).
  for (int i = 0; i < 12; ++i) {
    const double x = i / 11.0;
    const int n = 1 + i % 4;
    const double value = -(x - 0.8) * (x - 0.8) - 0.1 * (n - 3) * (n - 3);
    ASSERT_TRUE(Tell(engine, {id, Json{{"x", x}, {"n", n}}, value}).ok());
  }
  ASSERT_TRUE(Tell(engine, {id, Json{{"x", 0.1}, {"n", 1}}, std::nullopt}).ok());  // failed
  auto next = Suggest(engine, {id, 8}).value();
  double mean_x = 0;
  for (const Json& c : next) mean_x += c["x"].get<double>() / next.size();
  EXPECT_GT(mean_x, 0.55) << Json(next).dump();  // drawn towards what the agent found

  // A config of the agent's choosing runs as the next trial.
  auto run = AddTrial(engine, {id, Json{{"x", 0.8}, {"n", 3}}});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->params, (Json{{"x", 0.8}, {"n", 3}}));
  EXPECT_EQ(run->index, 1);
  EXPECT_EQ(store_->ListObservations(id).value().size(), 13u);

  // A restarted engine has the told results too: the same suggestions.
  FakeLauncher other(clock_, Scored);
  Engine restarted(*store_, other, probe, clock_, BaseOptions());
  ASSERT_TRUE(restarted.Recover().ok());
  auto again = Suggest(restarted, {id, 8}).value();
  auto here = Suggest(engine, {id, 8}).value();
  EXPECT_EQ(again, here);
}

// Issue 39: a search told 4,000 results made each GP proposal cost 12 s on the thread every
// search shares. Told results are bounded per search (with what to do), non-finite ones
// refused, and the proposal jobs the engine makes for a huge history fit a bounded set; another
// user's search is served meanwhile and makes every trial.
TEST_F(EngineSearchTest, AHugeToldHistoryCostsABoundedProposalAndOthersAreServed) {
  FakeLauncher launcher(clock_, Scored);
  FakeGpuProbe probe({});
  EngineOptions o = BaseOptions();
  o.proposals_off_loop = true;  // the daemon's proposer: one thread for every search
  Engine engine(*store_, launcher, probe, clock_, o);
  auto submit_as = [&](const std::string& yaml, int64_t uid, const std::string& name) {
    auto prepared = PrepareSubmit(ParseSpec(yaml), o.store_dir, clock_.Now());
    EXPECT_TRUE(prepared.ok()) << prepared.status().message();
    prepared->submitter.uid = uid;
    prepared->submitter.gid = uid;
    prepared->submitter.name = name;
    auto sub = engine.Commit(std::move(*prepared));
    EXPECT_TRUE(sub.ok()) << sub.status().message();
    return sub->experiment_id;
  };
  std::string gp = kSearch;
  gp.replace(gp.find("trials: 14, parallel: 3"), 23, "trials: 4, parallel: 1");
  gp.replace(gp.find("sampler: tpe"), 12, "sampler: gp");
  const int64_t alice = submit_as(gp, 60001, "alice-t");
  std::string tpe = kSearch;
  tpe.replace(tpe.find("trials: 14, parallel: 3"), 23, "trials: 8, parallel: 1");
  const int64_t bob = submit_as(tpe, 60002, "bob-t");

  // Non-finite values are refused; told results stop at kMaxTold with what to do.
  EXPECT_EQ(Tell(engine, {alice, Json{{"x", 0.5}, {"n", 2}}, std::nan("")}).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Tell(engine, {alice, Json{{"x", 0.5}, {"n", 2}}, HUGE_VAL}).code(),
            Code::kInvalidArgument);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 4000; ++i) {
    const double x = unit(rng);
    const int n = 1 + i % 4;
    const double value = i == 17 ? -1e308 : -(x - 0.3) * (x - 0.3) - 0.1 * (n - 2) * (n - 2);
    ASSERT_TRUE(Tell(engine, {alice, Json{{"x", x}, {"n", n}}, value}).ok()) << i;
  }
  auto asked = SuggestJob(engine, {alice, 1});
  ASSERT_TRUE(asked.ok()) << asked.status().message();
  const ProposalJob& job = **asked;
  EXPECT_EQ(job.user, "alice-t");
  EXPECT_GE(job.history.size(), 4000u);
  EXPECT_EQ(search::GpFittedPoints(job.space, job.history), search::kGpMaxFitted);
  // The proposal still finds the good region, the -1e308 told notwithstanding.
  const std::vector<Json> next = job.Propose();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_NEAR(next[0]["x"].get<double>(), 0.3, 0.2) << next[0].dump();

  ASSERT_TRUE(engine.RunUntilDone(nullptr).ok());
  for (auto [id, trials] : {std::pair{alice, 4u}, std::pair{bob, 8u}}) {
    std::vector<drover::Run> runs = Runs(id, *store_);
    ASSERT_EQ(runs.size(), trials) << "experiment " << id;
    for (const drover::Run& r : runs) EXPECT_EQ(r.state, RunState::kSucceeded);
  }

  // The bound on told results, with what to do.
  for (int64_t i = 4000; i < kMaxTold; ++i) {
    ASSERT_TRUE(Tell(engine, {alice, Json{{"x", 0.5}, {"n", 2}}, -1.0}).ok()) << i;
  }
  Status full = Tell(engine, {alice, Json{{"x", 0.5}, {"n", 2}}, -1.0});
  EXPECT_EQ(full.code(), Code::kFailedPrecondition);
  EXPECT_NE(full.message().find("the most one search takes; submit a new search"),
            std::string::npos)
      << full.message();
}

}  // namespace
}  // namespace drover
