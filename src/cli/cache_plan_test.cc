// The dry run's cache plan (cli/cache_plan.h) against a real SQLite store holding what an engine
// records: runs fingerprinted with the engine's functions (spec/expand.h), outputs stored.
#include "cli/cache_plan.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "exec/artifacts.h"
#include "spec/expand.h"
#include "spec/pipeline.h"
#include "spec/spec_parser.h"

namespace drover::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kPipeline[] =
    "name: proj\n"
    "params: {lr: [0.1, 0.2], seed: 1}\n"
    "stages:\n"
    "  prep:  {command: \"sh prep.sh\", outputs: [data/]}\n"
    "  train: {command: \"sh train.sh {lr}\", needs: [prep]}\n"
    "  eval:  {command: \"sh eval.sh\", needs: [train]}\n";

class CachePlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-cache-plan-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = Store::Open(dir_ + "/drover.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    ctx_.snapshot_hash = std::string(64, 'a');
    ctx_.files = {{"train.py", "100644", std::string(64, '1')},
                  {"prep.py", "100644", std::string(64, '2')}};
    ctx_.snapshots_dir = dir_ + "/snapshots";
    ctx_.store_dir = dir_;
    ctx_.user = "alice";
  }
  void TearDown() override { fs::remove_all(dir_); }

  Spec Parse(const std::string& yaml, std::vector<std::string> sets = {}) {
    Result<Spec> spec = ParseSpecString(yaml, "spec.yaml", dir_, sets);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return spec.ok() ? *spec : Spec{};
  }

  // What an engine records for a submit of `spec` whose runs all succeeded (`failed`: those
  // indexes failed), under `snapshot`, by `user`: each run fingerprinted as Commit and
  // NeedsChanged do, a stage's outputs stored. The runs' ids, in expansion order.
  std::vector<int64_t> Record(const Spec& spec, const std::string& snapshot,
                              const std::string& user = "alice", std::set<int> failed = {}) {
    Experiment e;
    e.name = spec.name;
    e.spec = SpecToJson(spec);
    e.snapshot_hash = snapshot;
    e.user = user;
    EXPECT_TRUE(store_->InsertExperiment(e).ok());
    std::vector<int64_t> ids;
    std::vector<std::string> prints;
    auto add = [&](const std::string& stage, const Json& params, const std::string& fingerprint,
                   bool outputs) {
      drover::Run r;
      r.experiment_id = e.id;
      r.index = static_cast<int>(ids.size());
      r.stage = stage;
      r.params = params;
      r.current_params = params;
      r.fingerprint = fingerprint;
      r.state = failed.count(r.index) ? RunState::kFailed : RunState::kSucceeded;
      EXPECT_TRUE(store_->InsertRun(r).ok());
      if (outputs) {
        fs::create_directories(OutputsDir(dir_, r.id) + "/data");
        Artifact a;
        a.run_id = r.id;
        a.path = "data/d.txt";
        a.hash = std::string(64, 'd');
        a.bytes = 1;
        EXPECT_TRUE(store_->PutArtifacts({a}).ok());
      }
      ids.push_back(r.id);
      prints.push_back(fingerprint);
    };
    if (spec.stages.empty()) {
      for (const Json& params : ExpandGrid(spec)) {
        add("", params, Fingerprint(spec, RenderCommand(spec, params).value(), params, snapshot),
            false);
      }
      return ids;
    }
    for (const StageRun& sr : ExpandPipeline(spec)) {
      const StageSpec& st = spec.stages[sr.stage];
      const Spec view = StageView(spec, st);
      std::vector<NeedPrint> needs;
      for (int n : sr.needs) {
        needs.push_back({prints[n], ArtifactsHash(store_->ListArtifacts(ids[n]).value())});
      }
      const std::string base =
          Fingerprint(view, RenderCommand(view, sr.params).value(), sr.params, snapshot);
      add(st.name, sr.params, StageFingerprint(base, st.name, st.input_hashes, needs),
          !st.outputs.empty());
    }
    return ids;
  }

  CachePlan Plan(const Spec& spec, bool with_store = true) {
    Result<CachePlan> plan = PlanCache(spec, with_store ? store_.get() : nullptr, ctx_);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? *plan : CachePlan{};
  }
  std::vector<std::string> Lines(const CachePlan& plan) {
    std::vector<std::string> out;
    for (const StagePlan& s : plan.stages) out.push_back(s.Line(s.stage.empty() ? "runs" : s.stage));
    return out;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  CachePlanContext ctx_;
};

TEST_F(CachePlanTest, WithoutAStoreEveryRunIsNew) {
  CachePlan plan = Plan(Parse(kPipeline), /*with_store=*/false);
  ASSERT_EQ(plan.runs.size(), 5u);  // prep, train x2, eval x2
  EXPECT_EQ(plan.runs[0].reasons, (std::vector<Reason>{{RunReason::kNew, ""}}));
  EXPECT_EQ(plan.runs[1].reasons, (std::vector<Reason>{{RunReason::kNeedReran, "prep"}}));
  EXPECT_EQ(Lines(plan), (std::vector<std::string>{"prep: 1 to run (new: 1)",
                                                    "train: 2 to run (need prep reran: 2)",
                                                    "eval: 2 to run (need train reran: 2)"}));
}

TEST_F(CachePlanTest, AnUnchangedPipelineIsCachedStageByStageFromTheRunsThatDidTheWork) {
  const Spec spec = Parse(kPipeline);
  const std::vector<int64_t> ids = Record(spec, ctx_.snapshot_hash);
  CachePlan plan = Plan(spec);
  ASSERT_EQ(plan.runs.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(plan.runs[i].cached_from, ids[i]) << i;
    EXPECT_TRUE(plan.runs[i].reasons.empty()) << i;
    // The very fingerprint the engine recorded.
    EXPECT_EQ(plan.runs[i].fingerprint, store_->GetRun(ids[i]).value()->fingerprint) << i;
  }
  EXPECT_EQ(Lines(plan), (std::vector<std::string>{"prep: 1 cached", "train: 2 cached",
                                                    "eval: 2 cached"}));
  // Another user's runs are not theirs to be cached from.
  ctx_.user = "bob";
  plan = Plan(spec);
  EXPECT_EQ(Lines(plan)[0], "prep: 1 to run (new: 1)");
}

TEST_F(CachePlanTest, AChangedParamRunsOnlyItsRunsAndWhatNeedsThem) {
  Record(Parse(kPipeline), ctx_.snapshot_hash);
  CachePlan plan = Plan(Parse(kPipeline, {"lr=[0.1, 0.3]"}));
  ASSERT_EQ(plan.runs.size(), 5u);
  EXPECT_FALSE(plan.runs[0].WillRun());  // prep
  // train: lr 0.1 cached, lr 0.3 runs; eval: the one after it runs, its need did.
  int param = 0, need = 0;
  for (const PlannedRun& r : plan.runs) {
    if (!r.WillRun()) continue;
    EXPECT_EQ(r.params["lr"], 0.3) << r.params;
    if (r.stage == "train") {
      EXPECT_EQ(r.reasons, (std::vector<Reason>{{RunReason::kParams, "lr"}}));
      ++param;
    } else {
      EXPECT_EQ(r.reasons, (std::vector<Reason>{{RunReason::kNeedReran, "train"},
                                                {RunReason::kParams, "lr"}}));
      ++need;
    }
  }
  EXPECT_EQ(param, 1);
  EXPECT_EQ(need, 1);
  EXPECT_EQ(Lines(plan),
            (std::vector<std::string>{"prep: 1 cached", "train: 1 cached, 1 to run (param lr: 1)",
                                      "eval: 1 cached, 1 to run (need train reran: 1, param lr: 1)"}));
}

TEST_F(CachePlanTest, ChangedCodeNamesTheFilesThatChangedSinceTheNearestRun) {
  const std::string before(64, 'b');
  Record(Parse(kPipeline), before);
  fs::create_directories(ctx_.snapshots_dir + "/.manifests");
  std::ofstream(ctx_.snapshots_dir + "/.manifests/" + before)
      << "100644 " << std::string(64, '0') << " train.py\n"
      << "100644 " << std::string(64, '2') << " prep.py\n"
      << "100644 " << std::string(64, '3') << " old notes.txt\n";
  CachePlan plan = Plan(Parse(kPipeline));
  EXPECT_EQ(plan.runs[0].reasons,
            (std::vector<Reason>{{RunReason::kCode, "old notes.txt, train.py"}}));
  EXPECT_EQ(plan.runs[0].reasons[0].Label(), "code changed: old notes.txt, train.py");
  EXPECT_EQ(plan.runs[1].reasons,
            (std::vector<Reason>{{RunReason::kNeedReran, "prep"},
                                 {RunReason::kCode, "old notes.txt, train.py"}}));
  // An earlier snapshot without a manifest: the code changed, which files is not known.
  fs::remove_all(ctx_.snapshots_dir);
  plan = Plan(Parse(kPipeline));
  EXPECT_EQ(plan.runs[0].reasons[0].Label(), "code changed");
  EXPECT_EQ(FewNames({"a", "b", "c", "d", "e"}), "a, b, c and 2 more");
}

TEST_F(CachePlanTest, ForcedStagesAndGoneOutputsRunAndSaySo) {
  const std::vector<int64_t> ids = Record(Parse(kPipeline), ctx_.snapshot_hash);
  CachePlan plan = Plan(Parse(kPipeline, {"force=[train]"}));
  EXPECT_FALSE(plan.runs[0].WillRun());
  EXPECT_EQ(plan.runs[1].reasons, (std::vector<Reason>{{RunReason::kForced, "--force train"}}));
  EXPECT_EQ(Lines(plan)[1], "train: 2 to run (forced (--force train): 2)");
  EXPECT_EQ(Lines(plan)[2], "eval: 2 to run (need train reran: 2)");
  plan = Plan(Parse(kPipeline, {"rerun=true"}));
  EXPECT_EQ(plan.runs[0].reasons, (std::vector<Reason>{{RunReason::kForced, "--rerun"}}));
  // prep's stored outputs were removed (a hand, a gc): it runs again.
  fs::remove_all(OutputsDir(dir_, ids[0]));
  plan = Plan(Parse(kPipeline));
  EXPECT_EQ(plan.runs[0].reasons,
            (std::vector<Reason>{{RunReason::kOutputsGone, "run " + std::to_string(ids[0])}}));
}

TEST_F(CachePlanTest, APlainSweepSaysWhichValuesAreNewAndWhatElseChanged) {
  const std::string yaml = "name: sweep\ncommand: \"python train.py {lr} {bs}\"\n"
                           "params: {lr: [0.1, 0.2], bs: 32}\n";
  const std::vector<int64_t> ids = Record(Parse(yaml), ctx_.snapshot_hash, "alice", {1});
  CachePlan plan = Plan(Parse(yaml, {"lr=[0.1, 0.2, 0.3]"}));
  ASSERT_EQ(plan.runs.size(), 3u);
  EXPECT_EQ(plan.runs[0].cached_from, ids[0]);
  // lr 0.2 ran before and failed: same params and code, so that is why.
  EXPECT_EQ(plan.runs[1].reasons,
            (std::vector<Reason>{
                {RunReason::kOther, "run " + std::to_string(ids[1]) + " did not succeed"}}));
  EXPECT_EQ(plan.runs[2].reasons, (std::vector<Reason>{{RunReason::kParams, "lr"}}));
  EXPECT_EQ(Lines(plan), (std::vector<std::string>{
                             "runs: 1 cached, 2 to run (changed: run " + std::to_string(ids[1]) +
                             " did not succeed: 1, param lr: 1)"}));
  // Another value of a fixed param and an env var: both named.
  plan = Plan(Parse(yaml + "env: {A: \"1\"}\n", {"bs=64"}));
  EXPECT_EQ(plan.runs[0].reasons, (std::vector<Reason>{{RunReason::kParams, "bs"}}));
  plan = Plan(Parse(yaml + "env: {A: \"1\"}\n"));
  EXPECT_EQ(plan.runs[0].reasons, (std::vector<Reason>{{RunReason::kOther, "env"}}));
  // A run that reads data: folders is never cached (they are outside its fingerprint).
  plan = Plan(Parse(yaml, {"data={d: .}"}));
  EXPECT_EQ(plan.runs[0].reasons,
            (std::vector<Reason>{{RunReason::kNotCached, "it reads data: folders"}}));
}

}  // namespace
}  // namespace drover::cli
