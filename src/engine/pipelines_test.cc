// The pipelines component on its own, with a real (in-memory) store and a stand-in for the
// engine's run table: needs, fingerprints over them, the cache and twins need nothing of
// engine.h.
#include "engine/pipelines.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "spec/spec_parser.h"
#include "testutil/loop_context.h"

namespace drover {
namespace {

constexpr char kPipeline[] = R"(
name: pipe
stages:
  make: {command: "make {seed}"}
  use:  {command: "use {x}", needs: [make]}
params: {x: [1], seed: 0}
)";

constexpr char kPlain[] = R"(
name: plain
command: "train {x}"
params: {x: [1]}
)";

// The engine's part: the store and its transaction, and a run table that records what the
// component asked of it.
class Table : public testing::LoopContext, public RunTable {
 public:
  Table(Store& store, std::string dir) : LoopContext(store), dir_(std::move(dir)) {}

  LiveRun* Find(int64_t run_id) override {
    auto it = runs.find(run_id);
    return it == runs.end() ? nullptr : &it->second;
  }
  void Queue(LiveRun& live) override { queued.insert(live.run.id); }
  void SetState(LiveRun& live, RunEvent event, const std::string& note, Instant) override {
    events[live.run.id] = event;
    notes[live.run.id] = note;
    Result<RunState> next = Transition(live.run.state, event);
    if (next.ok()) live.run.state = *next;
    (void)store_.UpdateRun(live.run);
  }
  void Retire(int64_t run_id) override {
    retired.insert(run_id);
    runs.erase(run_id);
  }
  const RunFiles& FilesOf(LiveRun& live) override {
    if (!live.files) live.files = RunFiles::In(dir_, live.run.experiment_id, live.run.id);
    return *live.files;
  }

  std::string dir_;
  std::map<int64_t, LiveRun> runs;
  std::set<int64_t> queued, retired;
  std::map<int64_t, RunEvent> events;
  std::map<int64_t, std::string> notes;
};

class PipelinesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "pipelines_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = std::move(Store::Open(":memory:").value());
    table_ = std::make_unique<Table>(*store_, dir_);
    pipelines_ = std::make_unique<Pipelines>(*table_, *table_, dir_, [] {}, /*off_loop=*/false);
  }
  void Load(const char* yaml) {
    entry_.spec = ParseSpecString(yaml, "spec.yaml", ".").value();
    entry_.experiment.name = entry_.spec.name;
    entry_.experiment.user = "u";
    entry_.experiment.spec = SpecToJson(entry_.spec);
    ASSERT_TRUE(store_->InsertExperiment(entry_.experiment).ok());
    entry_.snapshot.hash = "snap";
    Pipelines::InitStages(entry_);
  }
  // A run of the experiment, stored and in the table.
  LiveRun& Add(const std::string& stage, std::vector<int64_t> needs, std::string fingerprint) {
    LiveRun live;
    live.exp = &entry_;
    live.run.experiment_id = entry_.experiment.id;
    live.run.user = "u";
    live.run.stage = stage;
    live.run.needs = std::move(needs);
    live.run.fingerprint = std::move(fingerprint);
    live.run.params = Json{{"x", 1}, {"seed", 0}};
    live.run.current_params = live.run.params;
    EXPECT_TRUE(store_->InsertRun(live.run).ok());
    return table_->runs[live.run.id] = live;
  }
  // The run ends in `state` and leaves the table, as the engine retires a final run.
  void End(int64_t run_id, RunState state) {
    drover::Run r = table_->runs.at(run_id).run;
    r.state = state;
    ASSERT_TRUE(store_->UpdateRun(r).ok());
    table_->runs.erase(run_id);
    pipelines_->OnFinal(r);
    pipelines_->WakeDependents(run_id, {2000, 2000});
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Table> table_;
  std::unique_ptr<Pipelines> pipelines_;
  ExperimentEntry entry_;
};

TEST_F(PipelinesTest, AStageWaitsForItsNeedAndIsFingerprintedOverItWhenItSucceeded) {
  Load(kPipeline);
  const int64_t make = Add("make", {}, "").run.id;
  const int64_t use = Add("use", {make}, "").run.id;
  EXPECT_FALSE(pipelines_->AwaitNeeds(table_->runs.at(make)));
  EXPECT_TRUE(pipelines_->AwaitNeeds(table_->runs.at(use)));
  EXPECT_TRUE(pipelines_->Holds(use));
  pipelines_->NeedsChanged(table_->runs.at(make), {1000, 1000});  // no needs: fingerprinted
  EXPECT_TRUE(table_->queued.count(make));
  EXPECT_FALSE(table_->queued.count(use));

  const std::string make_print = table_->runs.at(make).run.fingerprint;
  ASSERT_FALSE(make_print.empty());
  End(make, RunState::kSucceeded);
  ASSERT_TRUE(table_->failed.ok()) << table_->failed.message();
  EXPECT_FALSE(pipelines_->Holds(use));
  EXPECT_TRUE(table_->queued.count(use));
  const LiveRun& u = table_->runs.at(use);
  EXPECT_FALSE(u.run.fingerprint.empty());
  EXPECT_NE(u.run.fingerprint, make_print);
  // Stored with the run, so the next submit of the same pipeline finds it.
  EXPECT_EQ(store_->GetRun(use).value()->fingerprint, u.run.fingerprint);
}

TEST_F(PipelinesTest, AStageWhoseNeedFailedIsCancelledNotRun) {
  Load(kPipeline);
  const int64_t make = Add("make", {}, "").run.id;
  const int64_t use = Add("use", {make}, "").run.id;
  EXPECT_TRUE(pipelines_->AwaitNeeds(table_->runs.at(use)));
  End(make, RunState::kFailed);
  EXPECT_FALSE(table_->queued.count(use));
  EXPECT_TRUE(table_->retired.count(use));
  ASSERT_TRUE(table_->events.count(use));
  EXPECT_EQ(table_->events.at(use), RunEvent::kCancel);
  EXPECT_NE(table_->notes.at(use).find("needs run " + std::to_string(make)), std::string::npos)
      << table_->notes.at(use);
}

TEST_F(PipelinesTest, ARunIsCachedFromAnEarlierSuccessOrWaitsForItsUnfinishedTwin) {
  Load(kPlain);
  // An earlier success with fingerprint F: a new run with F is cached from it, never queued.
  const int64_t earlier = Add("", {}, "F").run.id;
  End(earlier, RunState::kSucceeded);
  LiveRun& again = Add("", {}, "F");
  const int64_t again_id = again.run.id;
  pipelines_->Admit(again, {3000, 3000});
  EXPECT_FALSE(table_->queued.count(again_id));
  EXPECT_TRUE(table_->retired.count(again_id));
  EXPECT_EQ(table_->events.at(again_id), RunEvent::kCached);
  EXPECT_EQ(store_->GetRun(again_id).value()->cached_from, earlier);

  // Two runs with G, nothing done yet: the first runs, the second waits for it (its twin) and
  // runs itself when the first did not succeed.
  const int64_t first = Add("", {}, "G").run.id;
  const int64_t second = Add("", {}, "G").run.id;
  pipelines_->Admit(table_->runs.at(first), {3000, 3000});
  pipelines_->Admit(table_->runs.at(second), {3000, 3000});
  EXPECT_TRUE(table_->queued.count(first));
  EXPECT_FALSE(table_->queued.count(second));
  EXPECT_EQ(pipelines_->gate().WaitOf(second), PipelineGate::Wait::kTwin);
  End(first, RunState::kFailed);
  EXPECT_TRUE(table_->queued.count(second));
  EXPECT_EQ(pipelines_->gate().WaitOf(second), PipelineGate::Wait::kNone);
}

}  // namespace
}  // namespace drover
