// End to end: pipelines (docs/pipelines.md). The digits pipeline runs for real (PyTorch on CPU, on
// fake GPUs, into a real SQLite store): each stage as many times as it fans out, then not at all
// when nothing changed, then only what a change reaches. A failing stage stops what needs it.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::RunDrover;
using Json = nlohmann::json;

class PipelineTest : public testing::CliFixture {
 protected:
  // The runs of the newest experiment, by stage: how many ran (an attempt) and how many were
  // cached from an earlier run.
  struct Tally {
    std::map<std::string, int> ran, cached, total;
    std::vector<drover::Run> runs;
  };
  Tally Newest() {
    Tally t;
    auto store = Store::Open(store_ + "/drover.db");
    EXPECT_TRUE(store.ok());
    if (!store.ok()) return t;
    auto exps = (*store)->ListExperiments().value();
    EXPECT_FALSE(exps.empty());
    if (exps.empty()) return t;
    RunFilter f;
    f.experiment_id = exps.front().id;  // newest first
    t.runs = (*store)->ListRuns(f).value();
    for (const drover::Run& r : t.runs) {
      EXPECT_EQ(r.state, RunState::kSucceeded) << r.id << " " << r.stage << " " << r.reason;
      t.total[r.stage] += 1;
      if (r.cached_from != 0) {
        EXPECT_EQ(r.attempts, 0) << r.id;
        EXPECT_EQ(r.reason, "cached");
        t.cached[r.stage] += 1;
      } else {
        EXPECT_EQ(r.attempts, 1) << r.id;
        t.ran[r.stage] += 1;
      }
    }
    return t;
  }
  testing::CliResult Go(const std::string& spec, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"run", spec, "--fake-gpus", "2x16GiB", "--store", store_};
    args.insert(args.end(), more.begin(), more.end());
    return RunDrover(args);
  }
};

TEST_F(PipelineTest, TheDigitsPipelineRunsEachStageOnceAndAgainOnlyWhereSomethingChanged) {
  // A copy of the example, so its code can be touched.
  const fs::path project = dir_ / "digits";
  fs::copy(std::string(DROVER_SOURCE_DIR) + "/examples/digits", project,
           fs::copy_options::recursive);
  const std::string spec = (project / "pipeline.yaml").string();

  // First submit: prepare once, train and validate per config, analyze once over them all.
  auto r = Go(spec);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Tally t = Newest();
  EXPECT_EQ(t.ran, (std::map<std::string, int>{
                       {"prepare", 1}, {"train", 4}, {"validate", 4}, {"analyze", 1}}));
  EXPECT_TRUE(t.cached.empty());
  const drover::Run* analyze = nullptr;
  const drover::Run* train = nullptr;
  for (const auto& run : t.runs) {
    if (run.stage == "analyze") analyze = &run;
    if (run.stage == "train" && !train) train = &run;
    if (run.stage == "validate") {
      ASSERT_TRUE(run.final_metrics.contains("test_acc")) << run.final_metrics;
      EXPECT_GT(run.final_metrics["test_acc"].get<double>(), 0.5);
      ASSERT_EQ(run.needs.size(), 2u);  // its own train run and the one prepare
    }
  }
  ASSERT_TRUE(analyze && train);
  EXPECT_EQ(analyze->needs.size(), 4u);
  // analyze read every validate run through $DROVER_INPUTS; its plot is an artifact.
  std::string out = testing::ReadFile(store_ + "/logs/" + std::to_string(analyze->experiment_id) +
                                      "/" + std::to_string(analyze->id) + "-1.out");
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 5) << out;
  auto arts = RunDrover({"artifacts", std::to_string(analyze->id), "--json", "--store", store_});
  ASSERT_EQ(arts.exit_code, 0) << arts.err;
  Json a = Json::parse(arts.out);
  ASSERT_EQ(a["files"].size(), 1u) << a;
  EXPECT_EQ(a["files"][0]["path"], "report/comparison.svg");
  EXPECT_NE(testing::ReadFile(a["dir"].get<std::string>() + "/report/comparison.svg").find("<svg"),
            std::string::npos);
  arts = RunDrover({"artifacts", std::to_string(train->id), "--store", store_});
  ASSERT_EQ(arts.exit_code, 0) << arts.err;
  EXPECT_NE(arts.out.find("ckpt/model.pt"), std::string::npos) << arts.out;
  const int64_t first_train = train->id;

  // Unchanged: nothing runs, every stage says where it comes from.
  r = Go(spec);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(cached from run " + std::to_string(first_train) + ")"), std::string::npos)
      << r.out;
  t = Newest();
  EXPECT_TRUE(t.ran.empty());
  EXPECT_EQ(t.cached, (std::map<std::string, int>{
                          {"prepare", 1}, {"train", 4}, {"validate", 4}, {"analyze", 1}}));
  // A cached run is ranked by its source's curve.
  EXPECT_NE(r.out.find("* best: run"), std::string::npos) << r.out;
  arts = RunDrover({"artifacts", std::to_string(t.runs[1].id), "--store", store_});
  EXPECT_NE(arts.out.find("cached from run"), std::string::npos) << arts.out;
  // ... and drawn with its source's curve.
  const std::string plot = (dir_ / "cached.svg").string();
  auto cmp = RunDrover({"compare", std::to_string(t.runs[0].experiment_id), "--plot", plot,
                        "--store", store_});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.out << cmp.err;
  const std::string svg = testing::ReadFile(plot);
  EXPECT_EQ(svg.find("nodata"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<path"), std::string::npos);

  // One lr changed: only its branch (train, validate for both models) and analyze run.
  r = Go(spec, {"--set", "lr=[0.01, 0.003]"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  t = Newest();
  EXPECT_EQ(t.ran, (std::map<std::string, int>{{"train", 2}, {"validate", 2}, {"analyze", 1}}));
  EXPECT_EQ(t.cached, (std::map<std::string, int>{{"prepare", 1}, {"train", 2}, {"validate", 2}}));

  // --force train: the four train runs again; prepare still cached.
  r = Go(spec, {"--force", "train"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  t = Newest();
  EXPECT_EQ(t.ran["train"], 4);
  EXPECT_EQ(t.cached["prepare"], 1);

  // prepare's code touched: everything downstream of it (the whole pipeline) runs again.
  std::ofstream(project / "pipeline" / "prepare.py", std::ios::app) << "# touched\n";
  r = Go(spec);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  t = Newest();
  EXPECT_EQ(t.ran, (std::map<std::string, int>{
                       {"prepare", 1}, {"train", 4}, {"validate", 4}, {"analyze", 1}}));
}

TEST_F(PipelineTest, AFailedStageStopsWhatNeedsItAndADeclaredOutputMustBeWritten) {
  Write("code/ok.sh", "mkdir -p out && echo $1 > out/v.txt\n");
  const std::string spec = Write(
      "p.yaml",
      "name: fails\nworkdir: code\nparams: {x: [1, 2]}\n"
      "stages:\n"
      "  make:  {command: \"/bin/sh ok.sh {x}\", outputs: [out/]}\n"
      "  check: {command: \"/bin/sh -c 'test $(cat out/v.txt) = 1'\", needs: [make]}\n"
      "  after: {command: \"true\", needs: [check]}\n"
      "  lost:  {command: \"true\", needs: [make], outputs: [never/]}\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  EXPECT_NE(r.exit_code, 0) << r.out;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  std::map<std::string, std::vector<drover::Run>> by_stage;
  const std::vector<drover::Run> runs = (*store)->ListRuns(RunFilter{}).value();
  for (const drover::Run& run : runs) by_stage[run.stage].push_back(run);
  ASSERT_EQ(by_stage["make"].size(), 2u);
  ASSERT_EQ(by_stage["check"].size(), 2u);
  ASSERT_EQ(by_stage["after"].size(), 2u);
  // x=1 passes the check; x=2 fails it, and what needs that check is not run, with the reason.
  EXPECT_EQ(by_stage["check"][0].state, RunState::kSucceeded);
  EXPECT_EQ(by_stage["check"][1].state, RunState::kFailed);
  EXPECT_EQ(by_stage["after"][0].state, RunState::kSucceeded);
  EXPECT_EQ(by_stage["after"][1].state, RunState::kCancelled);
  EXPECT_EQ(by_stage["after"][1].reason, "upstream_failed");
  EXPECT_EQ(by_stage["after"][1].attempts, 0);
  auto events = (*store)->ListEvents(0, 10000).value();
  bool said = false;
  for (const Event& e : events) {
    if (e.run_id == by_stage["after"][1].id && e.data.value("note", "").find(
            "not run: it needs run " + std::to_string(by_stage["check"][1].id) +
            " (stage check), which failed") != std::string::npos) {
      said = true;
    }
  }
  EXPECT_TRUE(said);
  // A stage that exits 0 without writing its declared output has failed, and says which.
  for (const drover::Run& lost : by_stage["lost"]) {
    EXPECT_EQ(lost.state, RunState::kFailed);
    EXPECT_EQ(lost.reason, "missing_output");
  }
  EXPECT_NE(r.out.find("did not write its declared output 'never'"), std::string::npos) << r.out;
}

// Issue 40: the spec file sits in the project folder (the workdir), as every real user's does.
// It was captured with the code, so changing one lr reran every stage. Now it is kept out of the
// snapshot (it is stored with the experiment): only the changed runs run, in the foreground and
// through a daemon started on demand.
TEST_F(PipelineTest, EditingTheSpecInTheProjectFolderRerunsOnlyTheRunsItChanged) {
  std::filesystem::create_directories(dir_ / "proj");
  Write("proj/prep.sh", "mkdir -p data && echo prepared > data/d.txt\n");
  Write("proj/train.sh", "test -f data/d.txt && echo \"{\\\"step\\\": 1, \\\"loss\\\": $1}\"\n");
  const std::string text =
      "name: proj\nworkdir: .\nparams: {lr: [0.1, 0.2]}\n"
      "stages:\n"
      "  prep:  {command: \"/bin/sh prep.sh\", outputs: [data/]}\n"
      "  train: {command: \"/bin/sh train.sh {lr}\", needs: [prep]}\n";
  const std::string spec = Write("proj/pipeline.yaml", text);
  const std::string proj = (dir_ / "proj").string();
  auto first = RunDrover({"run", "pipeline.yaml", "--store", store_}, proj);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  Tally t = Newest();
  EXPECT_EQ(t.ran["prep"], 1);
  EXPECT_EQ(t.ran["train"], 2);
  // One value changed in the file: prep and lr=0.1 are cached, lr=0.3 runs.
  std::string edited = text;
  edited.replace(edited.find("0.2]"), 4, "0.3]");
  Write("proj/pipeline.yaml", edited);
  auto second = RunDrover({"run", "pipeline.yaml", "--store", store_}, proj);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  t = Newest();
  EXPECT_EQ(t.cached["prep"], 1) << second.out;
  EXPECT_EQ(t.cached["train"], 1) << second.out;
  EXPECT_EQ(t.ran["train"], 1) << second.out;
  // The same through the daemon plain `drover run` starts: the spec's text is the file's, so
  // the file is known and left out there too.
  edited.replace(edited.find("0.3]"), 4, "0.4]");
  Write("proj/pipeline.yaml", edited);
  ::unsetenv("DROVER_FOREGROUND");
  auto third = RunDrover({"run", "pipeline.yaml", "--store", store_, "--idle-exit", "1s"}, proj);
  ::setenv("DROVER_FOREGROUND", "1", 1);
  ASSERT_EQ(third.exit_code, 0) << third.out << third.err;
  EXPECT_NE(third.out.find("daemon started for the store"), std::string::npos) << third.out;
  t = Newest();
  EXPECT_EQ(t.cached["prep"], 1) << third.out;
  EXPECT_EQ(t.cached["train"], 1) << third.out;
  EXPECT_EQ(t.ran["train"], 1) << third.out;
  for (int i = 0; i < 100 && std::filesystem::exists(store_ + "/daemon.json"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the idle daemon goes
  }
}

// Issue 40: `drover run --dry-run` says, stage by stage, how many runs an earlier success would
// stand for and why each other run would run (a param, the code, a need that reran), and the
// submit that follows does what it said. It records nothing and stores no snapshot.
TEST_F(PipelineTest, DryRunSaysWhichRunsWouldBeCachedAndWhyTheOthersWouldRun) {
  std::filesystem::create_directories(dir_ / "proj");
  Write("proj/prep.sh", "mkdir -p data && echo prepared > data/d.txt\n");
  Write("proj/train.sh", "test -f data/d.txt && echo \"{\\\"step\\\": 1, \\\"loss\\\": $1}\"\n");
  Write("proj/eval.sh", "echo '{\"acc\": 1}'\n");
  const std::string text =
      "name: proj\nworkdir: .\nparams: {lr: [0.1, 0.2]}\n"
      "stages:\n"
      "  prep:  {command: \"/bin/sh prep.sh\", outputs: [data/]}\n"
      "  train: {command: \"/bin/sh train.sh {lr}\", needs: [prep]}\n"
      "  check: {command: \"/bin/sh eval.sh\", needs: [train]}\n";
  Write("proj/pipeline.yaml", text);
  const std::string proj = (dir_ / "proj").string();
  auto dry = [&](std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"run", "pipeline.yaml", "--dry-run", "--store", store_};
    args.insert(args.end(), more.begin(), more.end());
    auto r = RunDrover(args, proj);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r;
  };
  // No store yet: every run is new, and the dry run makes none.
  auto r = dry();
  EXPECT_NE(r.out.find("proj: 5 runs in 3 stages (dry run: nothing was submitted"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prep: 1 to run (new: 1)"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(store_ + "/drover.db"));
  auto first = RunDrover({"run", "pipeline.yaml", "--store", store_}, proj);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto snapshots = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(store_ + "/snapshots")) {
      n += e.is_directory() && e.path().filename().string()[0] != '.';
    }
    return n;
  };
  const int stored = snapshots();

  // Unchanged: every stage cached, each run from the run that did the work.
  r = dry();
  EXPECT_NE(r.out.find("prep: 1 cached\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train: 2 cached\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check: 2 cached\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cached from run 1"), std::string::npos) << r.out;

  // One lr edited in the spec file: prep and lr=0.1 cached; lr=0.3's train runs for its param,
  // and the check after it for its need (and its param).
  std::string edited = text;
  edited.replace(edited.find("0.2]"), 4, "0.3]");
  Write("proj/pipeline.yaml", edited);
  r = dry();
  EXPECT_NE(r.out.find("prep: 1 cached\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train: 1 cached, 1 to run (param lr: 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check: 1 cached, 1 to run (need train reran: 1, param lr: 1)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("run: param lr"), std::string::npos) << r.out;
  r = dry({"--json"});
  Json j = Json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 5u) << j;
  std::map<std::string, int> cached, to_run;
  for (const Json& run : j["runs"]) {
    if (run["will"] == "cached") {
      EXPECT_TRUE(run["cached_from"].is_number()) << run;
      EXPECT_TRUE(run["reasons"].empty()) << run;
      ++cached[run["stage"]];
      continue;
    }
    ++to_run[run["stage"]];
    EXPECT_EQ(run["params"]["lr"], 0.3) << run;
    EXPECT_TRUE(run["cached_from"].is_null()) << run;
    const Json& why = run["reasons"];
    if (run["stage"] == "train") {
      ASSERT_EQ(why.size(), 1u) << run;
      EXPECT_EQ(why[0]["kind"], "params");
      EXPECT_EQ(why[0]["detail"], "lr");
    } else {
      ASSERT_EQ(why.size(), 2u) << run;
      EXPECT_EQ(why[0]["kind"], "need_reran");
      EXPECT_EQ(why[0]["detail"], "train");
      EXPECT_EQ(why[0]["text"], "need train reran");
    }
  }
  EXPECT_EQ(j["cache"][0], Json({{"stage", "prep"}, {"cached", 1}, {"to_run", 0},
                                 {"reasons", Json::object()}}));
  EXPECT_EQ(j["cache"][1]["reasons"], Json({{"param lr", 1}}));
  // Nothing recorded, no snapshot stored.
  {
    auto store = Store::Open(store_ + "/drover.db");
    ASSERT_TRUE(store.ok());
    EXPECT_EQ((*store)->ListExperiments().value().size(), 1u);
  }
  EXPECT_EQ(snapshots(), stored);
  // ... and the submit does what the dry run said.
  auto second = RunDrover({"run", "pipeline.yaml", "--store", store_}, proj);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  Tally t = Newest();
  EXPECT_EQ(t.cached, cached);
  EXPECT_EQ(t.ran, to_run);

  // A code file edited: every stage's fingerprint changes (the snapshot is in each), and the
  // file is named.
  Write("proj/train.sh", "echo '{\"loss\": 0.5}'\n");
  r = dry();
  EXPECT_NE(r.out.find("prep: 1 to run (code changed: train.sh: 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train: 2 to run (need prep reran: 2, code changed: train.sh: 2)"),
            std::string::npos) << r.out;
  EXPECT_EQ(snapshots(), stored + 0);  // the edited tree is hashed, not stored

  // With a daemon serving the store, the dry run reads the store as `drover show` does.
  Write("proj/train.sh", "test -f data/d.txt && echo \"{\\\"step\\\": 1, \\\"loss\\\": $1}\"\n");
  pid_t daemon = testing::StartDaemon(store_, dir_.string());
  r = dry();
  EXPECT_NE(r.out.find("prep: 1 cached\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train: 2 cached\n"), std::string::npos) << r.out;
  kill(daemon, SIGTERM);
  EXPECT_EQ(testing::WaitExit(daemon), 0);
}

// A plain sweep says the same: which values ran before, which are new.
TEST_F(PipelineTest, APlainSweepsDryRunSaysWhichValuesWouldRun) {
  const std::string spec =
      Write("sweep.yaml", "name: sweep\nworkdir: code\ncommand: \"echo {{\\\"loss\\\": {x}}}\"\n"
                          "params: {x: [1, 2]}\nresources: {gpus: 0}\n");
  auto r = RunDrover({"run", spec, "--store", store_, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = RunDrover({"run", spec, "--dry-run", "--store", store_, "--set", "x=[1, 2, 3]"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sweep: 3 runs (dry run: nothing was submitted)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("runs: 2 cached, 1 to run (param x: 1)"), std::string::npos) << r.out;
  r = RunDrover({"run", spec, "--dry-run", "--store", store_, "--rerun"});
  EXPECT_NE(r.out.find("runs: 2 to run (forced (--rerun): 2)"), std::string::npos) << r.out;
}

TEST_F(PipelineTest, VerifyNamesAFileChangedInTheSnapshotOrAnArtifact) {
  Write("code/make.sh", "mkdir -p out && echo made > out/a.txt && echo kept > out/b.txt\n");
  Write("code/other.sh", "true\n");
  const std::string spec =
      Write("v.yaml", "name: v\nworkdir: code\nstages:\n"
                      "  make: {command: \"/bin/sh make.sh\", outputs: [out/]}\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto ok = RunDrover({"verify", "1", "--store", store_});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("artifacts  2 files: intact"), std::string::npos) << ok.out;

  // Exported: the outputs, the code and the record, in the documented layout.
  const std::string archive = (dir_ / "run1.tar.gz").string();
  auto ex = RunDrover({"export", "1", "-o", archive, "--store", store_});
  ASSERT_EQ(ex.exit_code, 0) << ex.out << ex.err;
  fs::create_directories(dir_ / "unpacked");
  ASSERT_EQ(std::system(("tar -C " + (dir_ / "unpacked").string() + " -xzf " + archive).c_str()), 0);
  const fs::path unpacked = dir_ / "unpacked" / "run-1";
  EXPECT_EQ(testing::ReadFile((unpacked / "artifacts/out/a.txt").string()), "made\n");
  EXPECT_TRUE(fs::exists(unpacked / "code/make.sh"));
  Json record = Json::parse(testing::ReadFile((unpacked / "record.json").string()));
  EXPECT_EQ(record["format"], "drover-export/1");
  EXPECT_EQ(record["run"]["id"], 1);
  EXPECT_EQ(record["artifacts"].size(), 2u);
  EXPECT_EQ(record["command"], "/bin/sh make.sh");

  // One file of the snapshot and one stored output changed behind drover's back.
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto exp = (*store)->GetExperiment(1).value();
  ASSERT_TRUE(exp);
  const std::string snap = store_ + "/snapshots/" + exp->snapshot_hash;
  fs::permissions(snap + "/other.sh", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(snap + "/other.sh", std::ios::app) << "rm -rf /\n";
  const std::string out_b = store_ + "/outputs/1/out/b.txt";
  fs::permissions(out_b, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(out_b, std::ios::app) << "changed\n";

  auto bad = RunDrover({"verify", "1", "--json", "--store", store_});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  Json j = Json::parse(bad.out);
  EXPECT_FALSE(j["intact"].get<bool>());
  ASSERT_EQ(j["code"].size(), 1u) << j;
  EXPECT_EQ(j["code"][0].get<std::string>().rfind("other.sh: its content changed", 0), 0u) << j;
  ASSERT_EQ(j["artifacts"]["changed"].size(), 1u) << j;
  EXPECT_EQ(j["artifacts"]["changed"][0].get<std::string>().rfind("out/b.txt: its content changed",
                                                                  0),
            0u)
      << j;
}

TEST_F(PipelineTest, ReproduceRunsARunAgainFromItsRecordAndComparesItsMetrics) {
  // A deterministic run: its metric comes from its parameter and a file of its code.
  Write("code/base.txt", "7\n");
  const std::string spec =
      Write("det.yaml", "name: det\nworkdir: code\nshell: true\nparams: {x: [3]}\n"
                        "command: \"echo '{{\\\"step\\\": 1, \\\"v\\\": '$(( {x} * $(cat base.txt) ))'}}'\"\n"
                        "objective: {metric: v}\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The code changes after the run: reproduce runs the recorded snapshot, not the folder.
  Write("code/base.txt", "8\n");
  auto rep = RunDrover({"reproduce", "1", "--json", "--store", store_});
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  Json j = Json::parse(rep.out);
  EXPECT_TRUE(j["same"].get<bool>()) << j;
  EXPECT_EQ(j["metrics"]["v"]["original"], 21);
  EXPECT_EQ(j["metrics"]["v"]["reproduced"], 21);
  EXPECT_EQ(j["reproduced_as"], 2);

  // A run whose metric is random is not reproduced, and says so.
  const std::string rnd =
      Write("rnd.yaml", "name: rnd\nworkdir: code\nshell: true\n"
                        "command: \"echo '{{\\\"step\\\": 1, \\\"v\\\": '$(od -An -N4 -tu4 /dev/urandom)'}}'\"\n");
  r = RunDrover({"run", rnd, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  rep = RunDrover({"reproduce", "3", "--store", store_});
  EXPECT_EQ(rep.exit_code, 1) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("DIFFERENT"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("not reproduced"), std::string::npos) << rep.out;
}

// A stage that needs another's outputs is reproduced with them: the pipeline up to it, its needs
// cached from the runs that made its inputs (shown to it read-only, as in the pipeline), itself run.
TEST_F(PipelineTest, ReproducingAStageThatNeedsOthersRunsItOnItsNeedsStoredOutputs) {
  Write("code/prep.sh", "mkdir -p data && cat base.txt > data/n.txt\n");
  Write("code/base.txt", "7\n");
  Write("code/fit.sh", "echo \"{\\\"step\\\": 1, \\\"v\\\": $(( $1 * $(cat data/n.txt) ))}\"\n");
  Write("code/report.sh", "echo done\n");
  const std::string spec = Write(
      "p.yaml", "name: p\nworkdir: code\nparams: {x: [2, 3]}\nobjective: {metric: v}\n"
                "stages:\n  prep: {command: sh prep.sh, outputs: [data]}\n"
                "  fit: {command: \"sh fit.sh {x}\", needs: [prep]}\n"
                "  report: {command: sh report.sh, needs: [fit], gather: true}\n");
  ASSERT_EQ(Go(spec).exit_code, 0);
  Tally first = Newest();
  const drover::Run* fit = nullptr;
  for (const drover::Run& r : first.runs) {
    if (r.stage == "fit" && r.params["x"] == 3) fit = &r;
  }
  ASSERT_NE(fit, nullptr);
  ASSERT_EQ(fit->final_metrics["v"], 21);
  // The code changes after the run: the recorded snapshot and prep's stored data are used.
  Write("code/base.txt", "8\n");
  auto rep = RunDrover({"reproduce", std::to_string(fit->id), "--json", "--store", store_});
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  Json j = Json::parse(rep.out);
  EXPECT_TRUE(j["same"].get<bool>()) << j;
  EXPECT_EQ(j["metrics"]["v"]["reproduced"], 21);
  Tally again = Newest();
  EXPECT_EQ(again.cached, (std::map<std::string, int>{{"prep", 1}}));
  EXPECT_EQ(again.ran, (std::map<std::string, int>{{"fit", 1}}));  // one fit, no report
  EXPECT_EQ(again.runs.size(), 2u);

  // A stage that needs nothing is reproduced as a stage: its outputs are stored again.
  const drover::Run* prep = nullptr;
  for (const drover::Run& r : first.runs) {
    if (r.stage == "prep") prep = &r;
  }
  ASSERT_NE(prep, nullptr);
  auto rep_prep = RunDrover({"reproduce", std::to_string(prep->id), "--store", store_});
  EXPECT_EQ(rep_prep.exit_code, 0) << rep_prep.out << rep_prep.err;
  EXPECT_NE(rep_prep.out.find("reproduced"), std::string::npos) << rep_prep.out;
  // prep does not report v, the pipeline's objective: that is said, not read as a failure.
  EXPECT_NE(rep_prep.out.find("no run here reports v (the objective): the stages run here (prep) "
                              "do not report it"),
            std::string::npos)
      << rep_prep.out;
  EXPECT_EQ(rep_prep.out.find("no succeeded run has a finite"), std::string::npos) << rep_prep.out;
  Tally prep_again = Newest();
  ASSERT_EQ(prep_again.runs.size(), 1u);
  EXPECT_EQ(prep_again.runs[0].stage, "prep");
  EXPECT_EQ(prep_again.runs[0].fingerprint, prep->fingerprint);
  {
    auto st = Store::Open(store_ + "/drover.db");
    ASSERT_TRUE(st.ok());
    EXPECT_EQ((*st)->ListArtifacts(prep_again.runs[0].id).value().size(), 1u);
  }

  // Through the store's daemon: it makes the same spec from the records and runs it; this
  // process follows it and compares.
  pid_t daemon = testing::StartDaemon(store_, dir_.string());
  rep = RunDrover({"reproduce", std::to_string(fit->id), "--store", store_});
  EXPECT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  EXPECT_NE(rep.err.find("in the daemon"), std::string::npos) << rep.err;
  EXPECT_NE(rep.out.find("reproduced: the same metrics"), std::string::npos) << rep.out;
  kill(daemon, SIGTERM);
  EXPECT_EQ(testing::WaitExit(daemon), 0);
  Tally third = Newest();
  EXPECT_EQ(third.cached, (std::map<std::string, int>{{"prep", 1}}));
  EXPECT_EQ(third.ran, (std::map<std::string, int>{{"fit", 1}}));
}

// A plain run that succeeded before with the same command, params, env and code is not run
// again: it is recorded as cached from that run (drover ls says so) unless --rerun. Removing runs
// that cached runs stand on is refused, naming them; removed together, their stored outputs are
// collected by the next gc.
TEST_F(PipelineTest, APlainDuplicateIsCachedUnlessRerunAndWhatCachedRunsStandOnIsKept) {
  Write("code/fit.sh", "echo '{\"step\": 1, \"v\": 3}'\n");
  const std::string plain =
      Write("plain.yaml", "name: plain\nworkdir: code\ncommand: sh fit.sh {x}\nparams: {x: [1]}\n");
  ASSERT_EQ(Go(plain).exit_code, 0);
  auto again = Go(plain);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  Tally t = Newest();
  ASSERT_EQ(t.runs.size(), 1u);
  EXPECT_EQ(t.runs[0].cached_from, 1);
  EXPECT_EQ(t.runs[0].final_metrics["v"], 3);
  auto ls = RunDrover({"ls", "-e", "plain", "--store", store_});
  EXPECT_NE(ls.out.find("cached from run 1"), std::string::npos) << ls.out;
  // Exported, the cached run's record names the command that made its results.
  const std::string archive = (dir_ / "cached.tar.gz").string();
  auto ex = RunDrover({"export", "2", "-o", archive, "--no-code", "--store", store_});
  ASSERT_EQ(ex.exit_code, 0) << ex.out << ex.err;
  fs::create_directories(dir_ / "cached");
  ASSERT_EQ(std::system(("tar -C " + (dir_ / "cached").string() + " -xzf " + archive).c_str()), 0);
  Json record = Json::parse(testing::ReadFile((dir_ / "cached/run-2/record.json").string()));
  EXPECT_EQ(record["command"], "sh fit.sh 1");
  EXPECT_EQ(record["command_of_run"], 1);
  // diff: the cached run's command is its source's, and it says so.
  auto diff = RunDrover({"diff", "1", "2", "--store", store_});
  EXPECT_NE(diff.out.find("command      the same"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("run 2 was cached from run 1"), std::string::npos) << diff.out;
  ASSERT_EQ(Go(plain, {"--rerun"}).exit_code, 0);
  t = Newest();
  EXPECT_EQ(t.ran[""], 1);

  // A stage with an output, run then cached (experiments 4 and 5).
  Write("code/make.sh", "mkdir -p out && echo made > out/a.txt\n");
  const std::string pipe = Write(
      "pipe.yaml", "name: pipe\nworkdir: code\nstages:\n  make: {command: sh make.sh, outputs: [out]}\n");
  ASSERT_EQ(Go(pipe).exit_code, 0);
  ASSERT_EQ(Go(pipe).exit_code, 0);
  t = Newest();
  ASSERT_EQ(t.cached["make"], 1);
  const int64_t source = t.runs[0].cached_from;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  const std::vector<Artifact> stored = (*store)->ListArtifacts(source).value();
  ASSERT_EQ(stored.size(), 1u);
  const std::string object =
      store_ + "/artifacts/" + stored[0].hash.substr(0, 2) + "/" + stored[0].hash;
  ASSERT_TRUE(fs::exists(object));
  const int64_t source_exp = (*store)->GetRun(source).value()->experiment_id;
  const int64_t cached_exp = t.runs[0].experiment_id;

  auto refused = RunDrover({"rm", std::to_string(source_exp), "--yes", "--store", store_});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("experiment " + std::to_string(cached_exp) + ": run " +
                             std::to_string(t.runs[0].id) + " (cached from run " +
                             std::to_string(source) + ")"),
            std::string::npos)
      << refused.err;
  EXPECT_TRUE(fs::exists(store_ + "/outputs/" + std::to_string(source) + "/out/a.txt"));
  // The run's artifacts still read through the cached run.
  auto listed = RunDrover({"artifacts", std::to_string(t.runs[0].id), "--store", store_});
  EXPECT_NE(listed.out.find("out/a.txt"), std::string::npos) << listed.out << listed.err;

  // Both removed: the object stays until a gc, which finds no run linking it.
  auto rm = RunDrover({"rm", std::to_string(source_exp), std::to_string(cached_exp), "--yes",
                       "--store", store_});
  ASSERT_EQ(rm.exit_code, 0) << rm.out << rm.err;
  EXPECT_TRUE(fs::exists(object));
  auto plan = RunDrover({"gc", "--dry-run", "--store", store_});
  EXPECT_NE(plan.out.find(object + "  (stored output " + stored[0].hash.substr(0, 12) +
                          " (no run has it any more))"),
            std::string::npos)
      << plan.out;
  ASSERT_EQ(RunDrover({"gc", "--yes", "--store", store_}).exit_code, 0);
  EXPECT_FALSE(fs::exists(object));
}

}  // namespace
}  // namespace drover
