// Researchers' habits (issue 20): TensorBoard logs read as metrics with no code change, derived
// metrics, logged hyper-parameters and checkpoints in the run's record, `drover tensorboard`,
// `drover init`. The real binary, real processes and files, the store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/strings.h"
#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "tfevents/reader.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunDrover;

class HabitsTest : public testing::CliFixture {};

const std::string kCatboost = std::string(DROVER_SOURCE_DIR) + "/tests/data/tfevents/catboost";

// The ground truth of the CatBoost fixture: Logloss by iteration.
std::map<int64_t, double> GroundTruth() {
  std::map<int64_t, double> truth;
  std::ifstream tsv(kCatboost + "/learn_error.tsv");
  std::string header;
  std::getline(tsv, header);
  int64_t iter;
  double v;
  while (tsv >> iter >> v) truth[iter] = v;
  return truth;
}

std::map<std::string, std::vector<MetricPoint>> MetricsOf(Store& store, int64_t run) {
  std::map<std::string, std::vector<MetricPoint>> by;
  const std::vector<MetricPoint> points = store.GetMetrics(run, "").value();
  for (const auto& p : points) by[p.name].push_back(p);
  return by;
}

// A run writes a TensorBoard event file in two pieces (the first ends inside a record, as a
// writer's flush can), with a derived metric over its tag: every scalar is ingested once, equal to
// the ground truth as 32-bit floats; the derived metric follows each step; `drover show` lists the
// file; `drover tensorboard` lays the experiment out as event files that read back the same.
TEST_F(HabitsTest, TensorBoardEventsAreMetricsWithNoCodeChange) {
  const std::string src = kCatboost + "/events.out.tfevents";
  std::string spec = Write(
      "tb.yaml",
      "name: tb\nworkdir: code\nshell: true\n"
      "command: \"mkdir -p logs/run1 && head -c 30001 $SRC > logs/run1/events.out.tfevents.1.host "
      "&& echo '{{\\\"step\\\": 0, \\\"acc\\\": 0.5}}' && sleep 6 && tail -c +30002 $SRC >> "
      "logs/run1/events.out.tfevents.1.host\"\n"
      "env: {SRC: " + src + "}\n"
      "metrics:\n  gain: 1 - Logloss\n"
      "objective: {metric: gain, mode: max}\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto by = MetricsOf(**store, 1);
  auto truth = GroundTruth();
  ASSERT_EQ(by["Logloss"].size(), 1000u);
  for (const auto& p : by["Logloss"]) {
    ASSERT_TRUE(truth.count(p.step));
    EXPECT_EQ(static_cast<float>(p.value), static_cast<float>(truth[p.step])) << p.step;
  }
  ASSERT_EQ(by["gain"].size(), 1000u);
  for (const auto& p : by["gain"]) {
    EXPECT_NEAR(p.value, 1 - static_cast<float>(truth[p.step]), 1e-6) << p.step;
  }
  ASSERT_EQ(by["acc"].size(), 1u);  // the stdout line is read beside the event file
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  ASSERT_EQ(attempts[0].event_files.size(), 1u);
  EXPECT_EQ(attempts[0].event_files.begin()->first, "logs/run1/events.out.tfevents.1.host");
  EXPECT_EQ(attempts[0].event_files.begin()->second.offset, 54870);
  EXPECT_EQ(attempts[0].event_files.begin()->second.corrupt, 0);
  auto show = RunDrover({"show", "1", "--store", store_});
  EXPECT_NE(show.out.find("tensorboard  logs/run1/events.out.tfevents.1.host"), std::string::npos)
      << show.out;
  // The run's final value of the derived objective is what compare ranks by.
  auto cmp = RunDrover({"compare", "tb", "--store", store_, "--json"});
  EXPECT_NE(cmp.out.find("gain"), std::string::npos) << cmp.out << cmp.err;

  const std::string out = (dir_ / "tb-out").string();
  auto tb = RunDrover({"tensorboard", "tb", "--out", out, "--store", store_});
  ASSERT_EQ(tb.exit_code, 0) << tb.err;
  EXPECT_NE(tb.out.find("tensorboard --logdir " + out), std::string::npos) << tb.out;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].parent_path().filename().string().substr(0, 1), "1");
  int fd = open(files[0].c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::map<std::string, int> counts;
  auto read = tfevents::ReadScalars(fd, 0, true, [&](const tfevents::Scalar& s) {
    counts[std::string(s.tag)] += 1;
    if (s.tag == "Logloss") {
      EXPECT_EQ(static_cast<float>(s.value), static_cast<float>(truth[s.step]));
    }
  });
  close(fd);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->corrupt, 0);
  EXPECT_EQ(counts["Logloss"], 1000);
  EXPECT_EQ(counts["gain"], 1000);
  EXPECT_EQ(counts["acc"], 1);
  // Written again in place: still one folder for the run.
  ASSERT_EQ(RunDrover({"tensorboard", "tb", "--out", out, "--store", store_}).exit_code, 0);
  size_t again = 0;
  for (const auto& e : fs::recursive_directory_iterator(out)) again += e.is_regular_file();
  EXPECT_EQ(again, 1u);
}

// A damaged record in a run's event file is skipped and counted; the records after it are read.
TEST_F(HabitsTest, ADamagedEventRecordIsSkippedAndCounted) {
  std::string bytes = ReadFile(kCatboost + "/events.out.tfevents");
  bytes[1000] ^= 0x40;  // inside the data of an early record
  Write("code/events.out.tfevents.9.damaged", bytes);
  std::string spec = Write("d.yaml",
                           "name: damaged\nworkdir: code\nshell: true\n"
                           "command: \"cp events.out.tfevents.9.damaged out.events.tmp && mkdir -p "
                           "tb && mv out.events.tmp tb/events.out.tfevents.2.x\"\n"
                           "tensorboard: tb\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto by = MetricsOf(**store, 1);
  EXPECT_EQ(by["Logloss"].size(), 999u);
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts[0].event_files.size(), 1u);  // only tb/ is read
  EXPECT_EQ(attempts[0].event_files.begin()->second.corrupt, 1);
  auto show = RunDrover({"show", "1", "--store", store_});
  EXPECT_NE(show.out.find("1 damaged record(s) skipped"), std::string::npos) << show.out;
}

// The spec's tensorboard folder is opened beneath the run's folder through no link: a run that
// makes its folder's parent a link to elsewhere gets nothing read from there.
TEST_F(HabitsTest, TheTensorBoardFolderIsNeverReachedThroughALink) {
  fs::create_directories(dir_ / "elsewhere" / "tb");
  fs::copy_file(kCatboost + "/events.out.tfevents", dir_ / "elsewhere/tb/events.out.tfevents.1.x");
  std::string spec = Write("link.yaml",
                           "name: link\nworkdir: code\nshell: true\n"
                           "command: \"ln -s " + (dir_ / "elsewhere").string() + " logs\"\n"
                           "tensorboard: logs/tb\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(MetricsOf(**store, 1).empty());
  EXPECT_TRUE((*store)->ListAttempts(1).value()[0].event_files.empty());
}

// What the run says of itself through the Python client's lines: its hyper-parameters and its
// checkpoints are in its record (drover show), and none of their numbers is taken for a metric.
TEST_F(HabitsTest, LoggedHyperParametersAndCheckpointsAreInTheRunsRecord) {
  Write("code/hp.py",
        "import argparse, drover, drover.torch\n"
        "drover.torch.autolog(modules=False)\n"
        "p = argparse.ArgumentParser(); p.add_argument('--lr', type=float, default=0.01)\n"
        "p.add_argument('--layers', type=int, default=3)\n"
        "args = p.parse_args()\n"
        "drover.log_hparams(optimizer='adamw')\n"
        "drover.log(step=1, loss=0.5)\n"
        "print('{\"drover_checkpoint\": {\"step\": 1, \"path\": \"ckpt-1.pt\", \"t\": 1}}', flush=True)\n");
  std::string spec = Write("hp.yaml",
                           "name: hp\nworkdir: code\ncommand: /usr/bin/python3 hp.py --lr 0.003\n"
                           "checkpoint: true\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].hparams.value("args.lr", 0.0), 0.003) << attempts[0].hparams.dump();
  EXPECT_EQ(attempts[0].hparams.value("args.layers", 0), 3);
  EXPECT_EQ(attempts[0].hparams.value("optimizer", ""), "adamw");
  ASSERT_TRUE(attempts[0].checkpoint.has_value());
  EXPECT_EQ(attempts[0].checkpoint->step, 1);
  auto by = MetricsOf(**store, 1);
  EXPECT_EQ(by.size(), 1u);  // loss only: no drover_hparams.* or drover_checkpoint.* metric
  EXPECT_EQ(by.count("loss"), 1u);
  auto show = RunDrover({"show", "1", "--store", store_});
  EXPECT_NE(show.out.find("hparams      args.layers=3  args.lr=0.003  optimizer=adamw"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("checkpoint   step 1"), std::string::npos) << show.out;
}

// What a run reports is bounded: a metric name over 256 bytes is not recorded, nor more than 500
// new names from one line, nor new names past 1,000 for the run.
TEST_F(HabitsTest, MetricNamesAreBoundedPerRun) {
  Write("code/many.py",
        "import json\n"
        "for step, names in ((1, range(0, 500)), (2, range(500, 1005))):\n"
        "  line = {'m%04d' % i: float(i) for i in names}\n"
        "  line['x' * 300] = 1.0\n"
        "  line['step'] = step\n"
        "  print(json.dumps(line))\n");
  std::string spec = Write("many.yaml", "name: many\nworkdir: code\ncommand: /usr/bin/python3 many.py\n");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto by = MetricsOf(**store, 1);
  EXPECT_EQ(by.size(), 1000u);
  EXPECT_EQ(by.count(std::string(300, 'x')), 0u);
  EXPECT_EQ((*store)->GetRun(1).value()->final_metrics.size(), 1000u);
}

// drover init writes a training script and its recipe; plan works on it at once, the script
// runs on CPU as written and logs its metrics; a second init leaves the files alone.
//
// The python3 first on PATH here cannot import torch (a stand-in: Debian's without its site
// packages, as a pyenv or venv python3 without torch is on many machines): init names a Python
// that can in drover.yaml and says so, the by-hand line it prints works as printed (and a second
// run by hand says it resumes), and a search written with init's command runs on this machine.
TEST_F(HabitsTest, InitWritesAProjectThatPlansAndRuns) {
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  for (const char* name : {"python3", "python"}) {
    std::ofstream(bin / name) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
    fs::permissions(bin / name, fs::perms::owner_all);
  }
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  ::setenv("PATH", (bin.string() + ":" + path).c_str(), 1);
  struct RestorePath {
    std::string path;
    ~RestorePath() { ::setenv("PATH", path.c_str(), 1); }
  } restore{path};

  const std::string project = (dir_ / "proj").string();
  auto init = RunDrover({"init", project});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  ASSERT_TRUE(fs::exists(project + "/train.py"));
  ASSERT_TRUE(fs::exists(project + "/drover.yaml"));
  const std::string script = ReadFile(project + "/train.py");
  for (const char* part : {"manual_seed", "GradScaler", "clip_grad_norm_", "Checkpointer",
                           "drover.log"}) {
    EXPECT_NE(script.find(part), std::string::npos) << part;
  }
  // The command names the Python that imports torch, not PATH's python3; init said which.
  const std::string recipe = ReadFile(project + "/drover.yaml");
  EXPECT_EQ(recipe.find("\ncommand: python3 "), std::string::npos) << recipe;
  const size_t cmd_at = recipe.find("\ncommand: /");
  ASSERT_NE(cmd_at, std::string::npos) << recipe;
  const std::string command_line = recipe.substr(cmd_at + 1, recipe.find('\n', cmd_at + 1) - cmd_at - 1);
  const std::string python = Split(command_line, ' ').at(1);
  EXPECT_NE(init.out.find("train.py runs with " + python + " (torch "), std::string::npos)
      << init.out;
  EXPECT_NE(init.out.find("not python3 (" + (bin / "python3").string()), std::string::npos)
      << init.out;

  auto again = RunDrover({"init", project});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("leaves it alone"), std::string::npos) << again.err;
  auto plan = RunDrover({"plan", "--json", "lr 1e-4 to 1e-2, 3 values"}, project);
  ASSERT_EQ(plan.exit_code, 0) << plan.out << plan.err;
  EXPECT_NE(plan.out.find("train.py"), std::string::npos) << plan.out;

  // The by-hand line init printed, as printed (one epoch instead of two), on CPU, outside drover.
  std::string by_hand;
  for (const std::string& line : Split(init.out, '\n')) {
    if (line.find("train.py --epochs 2") != std::string::npos) by_hand = line;
  }
  ASSERT_FALSE(by_hand.empty()) << init.out;
  by_hand = by_hand.substr(0, by_hand.find("   #"));
  by_hand.replace(by_hand.find("--epochs 2"), 10, "--epochs 1");
  const std::string cmd = "cd " + project + " && " + by_hand + " > out.txt 2>&1";
  ASSERT_EQ(system(cmd.c_str()), 0) << by_hand << "\n" << ReadFile(project + "/out.txt");
  EXPECT_NE(ReadFile(project + "/out.txt").find("\"val_acc\""), std::string::npos)
      << ReadFile(project + "/out.txt");
  // A second run by hand resumes from ./checkpoints, and says so.
  ASSERT_EQ(system(cmd.c_str()), 0) << ReadFile(project + "/out.txt");
  EXPECT_NE(ReadFile(project + "/out.txt").find("resuming at step"), std::string::npos)
      << ReadFile(project + "/out.txt");

  // A search with init's command runs on this machine (one epoch, two trials).
  const std::string lr_at = "--lr {lr}";
  std::string search_cmd = command_line.substr(std::string("command: ").size());
  search_cmd = search_cmd.substr(0, search_cmd.find("train.py") + 8) + " " + lr_at +
               " --epochs 1 --hidden 32";
  std::ofstream(project + "/search.yaml")
      << "name: lr-search\ncommand: " << search_cmd << "\n"
      << "params:\n  lr: {log_uniform: [1e-3, 1e-2]}\n"
      << "search: {trials: 2, parallel: 2, seed: 1}\n"
      << "objective: {metric: val_acc, mode: max}\n";
  auto run = RunDrover({"run", "search.yaml", "--store", store_, "--quiet"}, project);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  RunFilter f;
  auto runs = (*store)->ListRuns(f).value();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& r : runs) {
    EXPECT_EQ(r.state, RunState::kSucceeded) << r.id << " " << r.reason;
    EXPECT_GT(r.final_metrics.value("val_acc", 0.0), 0.5) << r.final_metrics;
  }
}

// Early stopping as docs/search.md documents it, on init's own template: the script reports
// val_acc once an epoch (at optimizer steps 22, 45, ...) with the epoch beside it, so the rungs
// (epochs 1 and 3; 9 is the runs' end) are judged on different reports and values; `drover show` says which; a dry
// run that forces rungs onto steps warns that they fall on one report.
TEST_F(HabitsTest, PruningOnInitsTemplateJudgesRungsOnDifferentEpochs) {
  const std::string project = (dir_ / "proj").string();
  auto init = RunDrover({"init", project});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::string recipe = ReadFile(project + "/drover.yaml");
  const size_t cmd_at = recipe.find("\ncommand: ");
  ASSERT_NE(cmd_at, std::string::npos) << recipe;
  std::string command = recipe.substr(cmd_at + 10, recipe.find('\n', cmd_at + 1) - cmd_at - 10);
  command = command.substr(0, command.find("train.py") + 8) +
            " --lr {lr} --epochs {epochs} --hidden 32 --seed 1";
  const std::string spec = "name: pruned\ncommand: " + command + "\n" +
                           "params:\n  lr: {log_uniform: [1e-5, 0.3]}\n  epochs: 9\n"
                           "search: {trials: 6, parallel: 2, seed: 3}\n"
                           "resources: {gpus: 0}\n"
                           "prune: {rule: asha, min_steps: 1, reduction: 3}\n"
                           "objective: {metric: val_acc, mode: max}\n";
  std::ofstream(project + "/search.yaml") << spec;
  auto run = RunDrover({"run", "search.yaml", "--store", store_, "--quiet"}, project);
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.out << run.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto rungs = (*store)->ListRungs(1).value();
  ASSERT_FALSE(rungs.empty());
  std::map<int64_t, std::vector<RungRecord>> by_run;
  for (const RungRecord& r : rungs) by_run[r.run_id].push_back(r);
  int judged_twice = 0;
  for (const auto& [run_id, list] : by_run) {
    std::set<int64_t> reports;
    for (const RungRecord& r : list) {
      EXPECT_EQ(r.unit, "epoch") << run_id;
      EXPECT_TRUE(r.step == 1 || r.step == 3) << r.step;
      EXPECT_GT(r.report_step, 0);
      EXPECT_TRUE(reports.insert(r.report_step).second) << "run " << run_id << " judged twice on step "
                                                        << r.report_step;
    }
    if (list.size() == 2) {
      ++judged_twice;
      EXPECT_LT(list[0].report_step, list[1].report_step);
      EXPECT_NE(list[0].value, list[1].value) << "run " << run_id;
    }
  }
  EXPECT_GE(judged_twice, 1) << "no run reached epoch 3's rung";
  // No rung sits at a run's end (epoch 9 is its last): every pruned run was judged before it,
  // and every run judged at epoch 3 that went on has a value there.
  RunFilter f;
  const std::vector<drover::Run> all = (*store)->ListRuns(f).value();
  for (const drover::Run& r : all) {
    if (r.state != RunState::kPruned) continue;
    ASSERT_FALSE(by_run[r.id].empty()) << r.id;
    EXPECT_TRUE(by_run[r.id].back().pruned) << r.id;
    EXPECT_LT(by_run[r.id].back().step, 9) << r.id;
  }
  // drover ls shows the objective first, before the metrics that sort ahead of it (epoch,
  // grad_norm, loss, lr), in every row.
  auto ls = RunDrover({"ls", "--store", store_});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  for (const std::string& line : Split(ls.out, '\n')) {
    if (line.find("pruned (") == std::string::npos) continue;
    EXPECT_NE(line.find("  val_acc="), std::string::npos) << line;
  }
  const int64_t shown = by_run.rbegin()->first;
  auto show = RunDrover({"show", std::to_string(shown), "--store", store_});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("epoch 1"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("val_acc"), std::string::npos) << show.out;

  // The dry run of the same spec, rungs forced onto steps: rungs 1, 3 and 9 would all fall on
  // the first report (step 22) of the last run of this name.
  std::string forced = spec;
  forced.replace(forced.find("reduction: 3}"), 13, "reduction: 3, resource: step}");
  std::ofstream(project + "/forced.yaml") << forced;
  auto dry = RunDrover({"run", "forced.yaml", "--store", store_, "--dry-run"}, project);
  ASSERT_EQ(dry.exit_code, 0) << dry.out << dry.err;
  EXPECT_NE(dry.out.find("rungs at step 1, 3, 9"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("warning: rungs at step 1, 3, 9"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("drop resource: step"), std::string::npos) << dry.out;
  auto dry_epochs = RunDrover({"run", "search.yaml", "--store", store_, "--dry-run"}, project);
  ASSERT_EQ(dry_epochs.exit_code, 0) << dry_epochs.err;
  EXPECT_EQ(dry_epochs.out.find("warning:"), std::string::npos) << dry_epochs.out;
}

// Which store am I looking at: a folder's own ./.drover, or, in a folder without one, the default
// store the user's config file names (said on stderr); drover stores lists both, with which one
// this folder uses and why.
TEST_F(HabitsTest, TheStoreInUseIsSaidAndStoresAreListed) {
  struct Env {
    std::string name, old;
    bool had;
    Env(const char* n, const std::string& v) : name(n) {
      const char* o = std::getenv(n);
      had = o != nullptr;
      old = o ? o : "";
      ::setenv(n, v.c_str(), 1);
    }
    ~Env() { had ? ::setenv(name.c_str(), old.c_str(), 1) : ::unsetenv(name.c_str()); }
  };
  Env config("XDG_CONFIG_HOME", (dir_ / "config").string());
  Env state("XDG_STATE_HOME", (dir_ / "state").string());
  const std::string spec = "name: hello\ncommand: /bin/true\n";
  fs::create_directories(dir_ / "a");
  fs::create_directories(dir_ / "b");
  std::ofstream((dir_ / "a" / "spec.yaml").string()) << spec;
  std::ofstream((dir_ / "b" / "spec.yaml").string()) << spec;

  auto in_a = RunDrover({"run", "spec.yaml"}, (dir_ / "a").string());
  ASSERT_EQ(in_a.exit_code, 0) << in_a.out << in_a.err;
  EXPECT_EQ(in_a.err.find("drover: store"), std::string::npos) << in_a.err;  // the obvious one
  ASSERT_TRUE(fs::exists(dir_ / "a" / ".drover" / "drover.db"));

  const std::string shared = (dir_ / "shared").string();
  fs::create_directories(dir_ / "config" / "drover");
  std::ofstream((dir_ / "config" / "drover" / "config.yaml").string()) << "store: " << shared << "\n";
  auto in_b = RunDrover({"run", "spec.yaml"}, (dir_ / "b").string());
  ASSERT_EQ(in_b.exit_code, 0) << in_b.out << in_b.err;
  EXPECT_NE(in_b.err.find("drover: store " + shared + " (the default in " +
                          (dir_ / "config" / "drover" / "config.yaml").string() +
                          "; this folder has no .drover)"),
            std::string::npos)
      << in_b.err;
  EXPECT_FALSE(fs::exists(dir_ / "b" / ".drover"));
  ASSERT_TRUE(fs::exists(shared + "/drover.db"));

  auto stores = RunDrover({"stores"}, (dir_ / "b").string());
  ASSERT_EQ(stores.exit_code, 0) << stores.err;
  EXPECT_NE(stores.out.find("this folder uses " + shared + " (the default in"), std::string::npos)
      << stores.out;
  EXPECT_NE(stores.out.find((dir_ / "a" / ".drover").string()), std::string::npos) << stores.out;
  EXPECT_NE(stores.out.find("*  " + shared), std::string::npos) << stores.out;
  auto json = RunDrover({"stores", "--json"}, (dir_ / "a").string());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_EQ(j["why"], "./.drover of this folder");
  ASSERT_EQ(j["stores"].size(), 2u) << json.out;
  for (const Json& s : j["stores"]) EXPECT_EQ(s["experiments"], 1) << json.out;

  // A config file drover cannot use says why, and the folder's own store is used.
  std::ofstream((dir_ / "config" / "drover" / "config.yaml").string()) << "store: relative/path\n";
  auto bad = RunDrover({"ls"}, (dir_ / "b").string());
  EXPECT_NE(bad.err.find("is relative; write an absolute path"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace drover
