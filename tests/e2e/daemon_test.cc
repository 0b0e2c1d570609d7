// The daemon for real: `drover serve` on a free loopback port, the CLI as its client, raw HTTP
// for the security checks, SSE, and a crash test that SIGKILLs the daemon mid-sweep.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <regex>
#include <thread>

#include "store/store.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunDrover;
using Json = nlohmann::json;

class DaemonTest : public ::testing::Test {
 protected:
  // SIGKILLs the daemon twice at random points 0.3-2.5 s apart, restarting it each time. The
  // points come from a seed printed here (and returned): DROVER_TEST_SEED=<seed> replays a failure.
  unsigned KillTwiceAtSeededPoints() {
    const char* given = getenv("DROVER_TEST_SEED");
    const unsigned seed = given ? static_cast<unsigned>(std::stoul(given)) : std::random_device{}();
    std::cout << "kill points from DROVER_TEST_SEED=" << seed << std::endl;
    RecordProperty("seed", std::to_string(seed));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> delay(300, 2500);
    for (int kill_round = 0; kill_round < 2; ++kill_round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay(rng)));
      StopDaemon(SIGKILL);
      StartDaemon();
    }
    return seed;
  }
  // The store's runs once there are `count` and all have ended (or what there is after 60 s).
  static std::vector<drover::Run> WaitForFinalRuns(Store& store, size_t count) {
    std::vector<drover::Run> runs;
    for (int i = 0; i < 600; ++i) {
      runs = store.ListRuns(RunFilter{}).value();
      if (runs.size() == count && std::all_of(runs.begin(), runs.end(), [](const drover::Run& r) {
            return IsFinal(r.state);
          }))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return runs;
  }

  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("drover-daemon-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "code");
    store_ = (dir_ / "store").string();
  }
  void TearDown() override {
    StopDaemon(SIGKILL);
    // Runs outlive a killed daemon by design: end what the tests left running.
    if (auto store = Store::Open(store_ + "/drover.db"); store.ok()) {
      auto runs = (*store)->ListRuns(RunFilter{});
      for (const auto& r : runs.ok() ? *runs : std::vector<drover::Run>{}) {
        auto attempts = (*store)->ListAttempts(r.id);
        if (!attempts.ok()) continue;
        for (const auto& a : *attempts) {
          if (!a.ended && a.pid > 1) kill(-static_cast<pid_t>(a.pid), SIGKILL);
        }
      }
    }
    if (!getenv("DROVER_KEEP_TEST_DIR")) fs::remove_all(dir_);  // kept to look at a failure
  }

  // A spec whose run saves a checkpoint on SIGTERM (after `save` more shell commands) and exits
  // 0, and on its next attempt prints "resumed" and ends; `extra` adds top-level keys.
  std::string CheckpointingSpec(const std::string& name, const std::string& extra = "",
                                const std::string& save = "") {
    return Write(name + ".yaml",
                 "name: " + name + "\n" + extra +
                     "workdir: code\nshell: true\nresources: {gpus: 1}\ncheckpoint: true\n"
                     "command: \"ck=$DROVER_CHECKPOINT_DIR/ck; if [ -f $ck ]; then echo resumed; "
                     "exit 0; fi; mkdir -p $DROVER_CHECKPOINT_DIR; trap '" +
                     save + "touch $ck; exit 0' TERM; echo started; sleep 60 & wait\"\n");
  }

  // Waits (up to 15 s) until the store holds `n` runs, all finished.
  static bool WaitAllFinal(Store& store, size_t n) {
    auto done = [&] {
      auto runs = store.ListRuns(RunFilter{}).value();
      return runs.size() == n && std::all_of(runs.begin(), runs.end(),
                                             [](const drover::Run& r) { return IsFinal(r.state); });
    };
    for (int i = 0; i < 300 && !done(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  // Starts `drover serve` and waits until it has written daemon.json.
  // Two fake 16 GiB GPUs and 2 CPU slots unless `extra` declares its own.
  void StartDaemon(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0", "--store", store_};
    if (std::find(extra.begin(), extra.end(), "--cpus") == extra.end()) {
      args.insert(args.end(), {"--cpus", "2"});
    }
    if (std::find(extra.begin(), extra.end(), "--fake-gpus") == extra.end()) {
      args.insert(args.end(), {"--fake-gpus", "2x16GiB"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    fs::remove(store_ + "/daemon.json");
    pid_ = testing::SpawnDrover(args, (dir_ / "serve.out").string(), (dir_ / "serve.err").string());
    // Up to 30 s: a daemon starts in tens of milliseconds, but a machine busy with a build
    // beside the tests has been seen to take longer than the 10 s this waited before.
    std::string exited;
    for (int i = 0; i < 1200; ++i) {
      Json j = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
      if (j.is_object() && j.value("pid", 0) == pid_) {
        port_ = j["port"];
        token_ = ReadFile(store_ + "/token");
        token_.erase(token_.find_last_not_of("\n") + 1);
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited = WIFEXITED(status) ? "it exited with " + std::to_string(WEXITSTATUS(status))
                                   : "it was killed by signal " + std::to_string(WTERMSIG(status));
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    FAIL() << "daemon did not start (" << (exited.empty() ? "still running after 30 s" : exited)
           << "); its stderr: " << ReadFile((dir_ / "serve.err").string())
           << "; its stdout: " << ReadFile((dir_ / "serve.out").string());
  }
  int StopDaemon(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int code = testing::WaitExit(pid_);
    pid_ = -1;
    return code;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  httplib::Client Http() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }
  httplib::Headers Auth() { return {{"Authorization", "Bearer " + token_}}; }

  fs::path dir_;
  std::string store_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string token_;
};

TEST_F(DaemonTest, DaemonStopEndsItAndItsRunsAreAdoptedByTheNext) {
  auto none = RunDrover({"daemon", "stop", "--store", store_});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("nothing to stop"), std::string::npos) << none.out;
  StartDaemon();
  std::string slow = Write("slow.yaml",
                           "name: slow\nworkdir: code\nshell: true\n"
                           "command: \"sleep 2; echo done\"\n");
  auto sub = RunDrover({"submit", slow, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 200; ++i) {
    auto runs = (*store)->ListRuns(RunFilter{});
    if (runs.ok() && !runs->empty() && (*runs)[0].state == RunState::kRunning) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const pid_t old = pid_;
  auto stop = RunDrover({"daemon", "stop", "--store", store_});
  ASSERT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_NE(stop.out.find("stopped the drover daemon (pid " + std::to_string(old) + ")"),
            std::string::npos)
      << stop.out;
  EXPECT_NE(stop.out.find("1 running run it had keep running"), std::string::npos) << stop.out;
  EXPECT_EQ(testing::WaitExit(old), 0);  // it exited cleanly
  pid_ = -1;
  // The next daemon adopts the run, which succeeds.
  StartDaemon();
  EXPECT_TRUE(WaitAllFinal(**store, 1));
  EXPECT_EQ((*store)->ListRuns(RunFilter{})->at(0).state, RunState::kSucceeded);
}

TEST_F(DaemonTest, SubmitFollowCancelAndLogsFromTheCli) {
  StartDaemon();
  std::string quick = Write("quick.yaml",
                            "name: quick\nworkdir: code\nshell: true\n"
                            "command: \"echo '{{\\\"step\\\": 1, \\\"acc\\\": {a}}}'\"\n"
                            "params: {a: [0.5, 0.9]}\nresources: {gpus: 1, gpu_memory: 4GiB}\n"
                            "objective: {metric: acc}\n");
  auto run = RunDrover({"run", quick, "--store", store_});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("queued in the daemon"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("* best: run 2 by acc"), std::string::npos) << run.out;

  // The read commands go through the daemon's API while it serves the store.
  auto cmp = RunDrover({"compare", "quick", "--json", "--store", store_});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  EXPECT_EQ(Json::parse(cmp.out)["best_run"], 2);
  auto show = RunDrover({"show", "1", "--json", "--store", store_});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(Json::parse(show.out)["attempt_list"].size(), 1u);
  auto ls = RunDrover({"ls", "--store", store_});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("quick (1)"), std::string::npos) << ls.out;
  // Every experiment as JSON (no limit: the client pages through the API, which takes at most
  // 1,000 at a time; it used to ask for limit=0 and get a 400).
  auto exps = RunDrover({"ls", "--experiments", "--json", "--store", store_});
  ASSERT_EQ(exps.exit_code, 0) << exps.err;
  ASSERT_EQ(Json::parse(exps.out).size(), 1u) << exps.out;
  EXPECT_EQ(Json::parse(exps.out)[0]["name"], "quick");
  auto human = RunDrover({"show", "2", "--store", store_});
  EXPECT_NE(human.out.find("run 2  succeeded"), std::string::npos) << human.out;
  EXPECT_EQ(RunDrover({"show", "99", "--store", store_}).exit_code, 2);

  std::string slow = Write("slow.yaml",
                           "name: slow\nworkdir: code\nshell: true\n"
                           "command: \"echo started {i}; sleep 300\"\n"
                           "params: {i: [1, 2, 3]}\n");
  auto sub = RunDrover({"submit", slow, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  std::string exp_id = sub.out.substr(0, sub.out.find('\n'));
  // logs -f through the daemon shows the first line of run 3 (the first run of `slow`) while it
  // runs, and keeps following until stopped.
  std::string out = (dir_ / "logs.out").string(), err = (dir_ / "logs.err").string();
  pid_t logs = testing::SpawnDrover({"logs", "3", "-f", "--store", store_}, out, err);
  for (int i = 0; i < 100 && ReadFile(out).find("started 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(ReadFile(out).find("started 1"), std::string::npos) << ReadFile(err);
  EXPECT_EQ(waitpid(logs, nullptr, WNOHANG), 0);  // still following

  // top shows the fake GPUs and the queue: two runs of `slow` on the two CPU slots, one queued.
  auto top = RunDrover({"top", "--once", "--store", store_});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("2 running, 1 queued"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("Fake GPU"), std::string::npos) << top.out;

  // Priorities order the daemon's queue: one run by id, then every queued run of the experiment
  // (the running ones are left as they are).
  auto prio = RunDrover({"priority", "7", "5", "--store", store_});
  ASSERT_EQ(prio.exit_code, 0) << prio.err;
  EXPECT_EQ(prio.out, "run 5: priority 7\n");
  prio = RunDrover({"priority", "3", "--experiment", exp_id, "--store", store_});
  ASSERT_EQ(prio.exit_code, 0) << prio.err;
  EXPECT_EQ(prio.out, "run 5: priority 3\n");
  {
    auto view = Store::Open(store_ + "/drover.db");
    ASSERT_TRUE(view.ok());
    EXPECT_EQ((*view)->GetRun(5).value()->priority, 3);
    EXPECT_EQ((*view)->GetRun(3).value()->priority, 0);
  }
  EXPECT_EQ(RunDrover({"priority", "1", "--store", store_}).exit_code, 2);
  EXPECT_EQ(RunDrover({"priority", "1", "999", "--store", store_}).exit_code, 2);

  auto cancel = RunDrover({"cancel", "--experiment", exp_id, "--store", store_});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  // The follower ends by itself once the run is cancelled.
  EXPECT_EQ(testing::WaitExit(logs), 0) << ReadFile(err);
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 200; ++i) {
    RunFilter f;
    f.experiment_id = std::stoll(exp_id);
    auto runs = (*store)->ListRuns(f).value();
    bool all = std::all_of(runs.begin(), runs.end(),
                           [](const drover::Run& r) { return r.state == RunState::kCancelled; });
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  RunFilter f;
  f.experiment_id = std::stoll(exp_id);
  std::vector<drover::Run> cancelled = (*store)->ListRuns(f).value();
  for (const auto& r : cancelled) EXPECT_EQ(r.state, RunState::kCancelled) << r.id;
  // A spec piped in: `drover submit -`, its workdir taken from the current folder.
  auto piped = testing::RunDroverWithInput(
      {"submit", "-", "--store", store_},
      "name: piped\ncommand: \"echo {x}\"\nparams: {x: [7]}\nresources: {gpus: 0}\n",
      (dir_ / "code").string());
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_NE(piped.err.find("queued experiment 3 with 1 run;"), std::string::npos) << piped.err;
  auto empty = testing::RunDroverWithInput({"submit", "-", "--store", store_}, "");
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_EQ(StopDaemon(SIGTERM), 0) << ReadFile((dir_ / "serve.err").string());
}

TEST_F(DaemonTest, RefusesWhatItMust) {
  StartDaemon();
  auto c = Http();
  auto no_token = c.Get("/api/v1/runs");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  EXPECT_EQ(Json::parse(no_token->body)["error"]["code"], "unauthenticated");
  httplib::Headers foreign = Auth();
  foreign.emplace("Origin", "http://evil.example");
  auto origin = c.Get("/api/v1/runs", foreign);
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->status, 403);
  auto big = c.Post("/api/v1/experiments", Auth(), std::string(10 << 20, 'x'), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto bad = c.Post("/api/v1/experiments", Auth(), "{\"spec_yaml\": ", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_FALSE(Json::parse(bad->body)["error"]["message"].get<std::string>().empty());
  auto ok = c.Get("/api/v1/runs", Auth());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  // A second daemon on the same store names the daemon that serves it and how to stop it.
  auto second = RunDrover({"serve", "--listen", "127.0.0.1:0", "--store", store_});
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_NE(second.err.find("a drover daemon (pid " + std::to_string(pid_) + ") already serves"),
            std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("it runs until stopped"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("drover daemon stop"), std::string::npos) << second.err;
}

TEST_F(DaemonTest, EventsStreamRunStates) {
  StartDaemon();
  std::string spec = Write("e.yaml", "name: e\nworkdir: code\ncommand: \"true\"\n");
  std::string stream;
  std::thread reader([&] {
    auto c = Http();
    // after=0: every buffered event, so nothing published before the connection is missed.
    c.Get("/api/v1/events?after=0", Auth(), [&](const char* data, size_t n) {
      stream.append(data, n);
      return stream.find("\"succeeded\"") == std::string::npos;  // stop once we saw the end
    });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto r = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  reader.join();
  EXPECT_NE(stream.find("event: run_state"), std::string::npos) << stream;
  EXPECT_NE(stream.find("\"running\""), std::string::npos) << stream;
  EXPECT_NE(stream.find("id: "), std::string::npos) << stream;
}

// Runs started by the daemon with their processes found by a marker in their environment.
int CountMarked(const std::string& marker) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile(e.path() / "stat");
    if (stat.find(") Z ") != std::string::npos) continue;
    if (ReadFile(e.path() / "environ").find(marker) != std::string::npos) ++n;
  }
  return n;
}

TEST_F(DaemonTest, SigtermLeavesRunsForTheNextDaemonOrStopsThemWithStopRuns) {
  std::string marker = "drover-drain-" + std::to_string(getpid());
  std::string spec = Write("d.yaml",
                           "name: d\nworkdir: code\ncommand: sleep 2\n"
                           "env: {TEST_MARKER: " +
                               marker + "}\n");
  StartDaemon();
  ASSERT_EQ(RunDrover({"submit", spec, "--store", store_}).exit_code, 0);
  for (int i = 0; i < 200 && CountMarked(marker) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(CountMarked(marker), 1);
  // Default drain: the daemon leaves, the run goes on, and the next daemon adopts it.
  EXPECT_EQ(StopDaemon(SIGTERM), 0) << ReadFile((dir_ / "serve.err").string());
  EXPECT_EQ(CountMarked(marker), 1);
  StartDaemon();
  EXPECT_NE(ReadFile((dir_ / "serve.out").string()).find("1 adopted"), std::string::npos)
      << ReadFile((dir_ / "serve.out").string());
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 200 && (*store)->GetRun(1).value()->state != RunState::kSucceeded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*store)->GetRun(1).value()->state, RunState::kSucceeded);
  EXPECT_EQ((*store)->ListAttempts(1).value().size(), 1u);  // adopted, not run again

  // --stop-runs: the run is stopped and requeued, and runs again under the next daemon.
  StopDaemon(SIGTERM);
  StartDaemon({"--stop-runs"});
  // --rerun: the same run again, not cached from the first one's success.
  ASSERT_EQ(RunDrover({"submit", spec, "--rerun", "--store", store_}).exit_code, 0);
  for (int i = 0; i < 200 && CountMarked(marker) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(CountMarked(marker), 1);
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
  EXPECT_EQ(CountMarked(marker), 0);
  auto run = (*store)->GetRun(2).value();
  EXPECT_EQ(run->state, RunState::kRetrying);
  EXPECT_EQ((*store)->ListAttempts(2).value().at(0).reason, "interrupted");
  StartDaemon();
  for (int i = 0; i < 200 && (*store)->GetRun(2).value()->state != RunState::kSucceeded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*store)->GetRun(2).value()->state, RunState::kSucceeded);
  EXPECT_EQ((*store)->ListAttempts(2).value().size(), 2u);
}

// Ctrl-C does one thing for the experiment a `drover run` submitted to a daemon it joined: it
// cancels it, as in the foreground (with --cancel-on-exit, still accepted, the same).
TEST_F(DaemonTest, CtrlCCancelsTheExperimentARunSubmittedToADaemonItJoined) {
  std::string spec = Write("s.yaml", "name: s\nworkdir: code\ncommand: sleep 300\n");
  StartDaemon();
  for (bool flag : {false, true}) {
    std::string out = (dir_ / "run.out").string(), err = (dir_ / "run.err").string();
    std::vector<std::string> args = {"run", spec, "--store", store_};
    if (flag) args.push_back("--cancel-on-exit");
    pid_t pid = testing::SpawnDrover(args, out, err);
    for (int i = 0; i < 200 && ReadFile(out).find("Ctrl-C cancels") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    EXPECT_NE(ReadFile(out).find("in the daemon serving the store"), std::string::npos) << ReadFile(out);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGINT);
    EXPECT_EQ(testing::WaitExit(pid), 130) << ReadFile(err);
    auto store = Store::Open(store_ + "/drover.db");
    int64_t id = flag ? 2 : 1;
    for (int i = 0; i < 200 && (*store)->GetRun(id).value()->state != RunState::kCancelled; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ((*store)->GetRun(id).value()->state, RunState::kCancelled)
        << (flag ? "--cancel-on-exit" : "plain");
  }
}

// A 12-run sweep of short sleeping runs; the daemon is SIGKILLed twice at random points and
// restarted. Every run must end succeeded, and each must have run exactly once.
TEST_F(DaemonTest, SurvivesSigkillTwiceWithoutLosingOrRepeatingRuns) {
  fs::create_directories(dir_ / "marks");
  std::string spec = Write("sweep.yaml",
                           "name: sweep\nworkdir: code\nshell: true\n"
                           "command: \"echo {i} >> " +
                               (dir_ / "marks").string() +
                               "/ran-{i}; sleep 1.5; "
                               "echo '{{\\\"step\\\": 1, \\\"i\\\": {i}}}'\"\n"
                               "params: {i: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}\n"
                               "resources: {gpus: 1, gpu_memory: 8GiB}\n");
  StartDaemon();
  auto sub = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const unsigned seed = KillTwiceAtSeededPoints();
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  std::vector<drover::Run> runs = WaitForFinalRuns(**store, 12);
  ASSERT_EQ(runs.size(), 12u);
  const bool all_succeeded = std::all_of(runs.begin(), runs.end(), [](const drover::Run& r) {
    return r.state == RunState::kSucceeded;
  });
  EXPECT_TRUE(all_succeeded) << "seed " << seed << "; the last daemon said:\n"
                             << ReadFile((dir_ / "serve.err").string());
  for (const auto& r : runs) {
    EXPECT_EQ(r.state, RunState::kSucceeded) << "run " << r.id << " " << r.reason;
    int i = r.params["i"];
    std::string marks = ReadFile((dir_ / "marks" / ("ran-" + std::to_string(i))).string());
    EXPECT_EQ(marks, std::to_string(i) + "\n") << "run " << r.id << " ran more than once";
    EXPECT_EQ(r.final_metrics.value("i", 0.0), i);
    auto attempts = (*store)->ListAttempts(r.id).value();
    int succeeded = 0;
    for (const auto& a : attempts) succeeded += a.reason == "succeeded";
    EXPECT_EQ(succeeded, 1) << "run " << r.id;
  }
  EXPECT_TRUE((*store)->IntegrityOk().value());
}

// A pipeline (docs/pipelines.md): prepare, four runs of work on its output, one gather over
// them; the daemon is SIGKILLed twice at random points and restarted. Every stage's run ends
// succeeded having run once, and the gather saw all four results.
TEST_F(DaemonTest, APipelineSurvivesSigkillWithEachStageRunOnce) {
  fs::create_directories(dir_ / "marks");
  const std::string marks = (dir_ / "marks").string();
  std::string spec = Write(
      "pipe.yaml",
      "name: pipe\nworkdir: code\nshell: true\nparams: {i: [1, 2, 3, 4]}\n"
      "stages:\n"
      "  prep: {command: \"echo x >> " + marks + "/prep; sleep 1; mkdir -p data; echo 10 > "
      "data/base\", outputs: [data/]}\n"
      "  work: {command: \"echo x >> " + marks + "/work-{i}; sleep 1.5; mkdir -p res; "
      "echo $(( $(cat data/base) + {i} )) > res/v; echo '{{\\\"step\\\": 1, \\\"v\\\": '$(cat res/v)'}}'\", "
      "needs: [prep], outputs: [res/], resources: {gpus: 1, gpu_memory: 8GiB}}\n"
      "  sum:  {command: \"echo x >> " + marks + "/sum; grep -o '\\\"run\\\": [0-9]*' "
      "$DROVER_INPUTS | wc -l > count.txt; echo '{{\\\"step\\\": 1, \\\"n\\\": '$(cat count.txt)'}}'\", "
      "needs: [work], gather: true}\n");
  StartDaemon();
  auto sub = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const unsigned seed = KillTwiceAtSeededPoints();
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  std::vector<drover::Run> runs = WaitForFinalRuns(**store, 6);
  ASSERT_EQ(runs.size(), 6u);
  for (const auto& r : runs) {
    EXPECT_EQ(r.state, RunState::kSucceeded)
        << "seed " << seed << ": run " << r.id << " (" << r.stage << ") " << r.reason
        << "; the last daemon said:\n"
        << ReadFile((dir_ / "serve.err").string());
    auto attempts = (*store)->ListAttempts(r.id).value();
    int succeeded = 0;
    for (const auto& a : attempts) succeeded += a.reason == "succeeded";
    EXPECT_EQ(succeeded, 1) << "seed " << seed << ": run " << r.id;
    if (r.stage == "work") {
      const int i = r.params["i"];
      EXPECT_EQ(r.final_metrics.value("v", 0.0), 10 + i) << r.final_metrics;
      EXPECT_EQ(ReadFile(marks + "/work-" + std::to_string(i)), "x\n") << "seed " << seed;
    }
    if (r.stage == "sum") {
      EXPECT_EQ(r.final_metrics.value("n", 0.0), 4) << r.final_metrics;
    }
  }
  EXPECT_EQ(ReadFile(marks + "/prep"), "x\n") << "seed " << seed;
  EXPECT_EQ(ReadFile(marks + "/sum"), "x\n") << "seed " << seed;
  EXPECT_TRUE((*store)->IntegrityOk().value());
}

// A search of 10 trials, 3 at a time; the daemon is SIGKILLed twice at random points and
// restarted. The search goes on to the same total: 10 trials, each made once and run once.
TEST_F(DaemonTest, ASearchSurvivesSigkillWithEveryTrialMadeAndRunOnce) {
  fs::create_directories(dir_ / "marks");
  std::string spec = Write("search.yaml",
                           "name: search\nworkdir: code\nshell: true\n"
                           "command: \"echo x >> " +
                               (dir_ / "marks").string() +
                               "/ran-$DROVER_RUN_ID; sleep 1; "
                               "echo '{{\\\"step\\\": 1, \\\"score\\\": {x}}}'\"\n"
                               "params: {x: {uniform: [0, 1]}}\n"
                               "search: {trials: 10, parallel: 3, seed: 2, sampler: tpe}\n"
                               "objective: {metric: score, mode: max}\n"
                               "resources: {gpus: 1, gpu_memory: 8GiB}\n");
  StartDaemon();
  auto sub = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const unsigned seed = KillTwiceAtSeededPoints();
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  std::vector<drover::Run> runs = WaitForFinalRuns(**store, 10);
  ASSERT_EQ(runs.size(), 10u) << "seed " << seed << "\n" << ReadFile((dir_ / "serve.err").string());
  std::set<int> indexes;
  // What the last daemon said, for a failure to be read from CI's log.
  const std::string said = ReadFile((dir_ / "serve.out").string()) + "\n--- stderr:\n" +
                           ReadFile((dir_ / "serve.err").string());
  for (const auto& r : runs) {
    EXPECT_EQ(r.state, RunState::kSucceeded)
        << "run " << r.id << " " << r.reason << "; seed " << seed << "; the last daemon said:\n"
        << said;
    indexes.insert(r.index);
    std::string marks = ReadFile((dir_ / "marks" / ("ran-" + std::to_string(r.id))).string());
    EXPECT_EQ(marks, "x\n") << "run " << r.id << " ran more than once; seed " << seed
                            << "; the last daemon said:\n"
                            << said;
    EXPECT_DOUBLE_EQ(r.final_metrics.value("score", -1.0), r.params["x"].get<double>());
  }
  EXPECT_EQ(indexes.size(), 10u);  // trials 0..9, each once
  EXPECT_EQ(*indexes.rbegin(), 9);
  auto exp = (*store)->FindExperiment("search").value();
  ASSERT_TRUE(exp);
  for (int i = 0; i < 100 && (*store)->FindExperiment("search").value()->status != ExperimentStatus::kDone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*store)->FindExperiment("search").value()->status, ExperimentStatus::kDone);
  EXPECT_TRUE((*store)->IntegrityOk().value());
}

// A submit whose interpreter hangs when asked for its package list holds nothing up: the list is
// taken off the loop and given up after environment.package_list_timeout, the API answers, and
// another run's timeout fires on time.
TEST_F(DaemonTest, AHungInterpreterAtSubmitBlocksNothing) {
  fs::create_directories(dir_ / "bin");
  // The package listing (python3 -c ...) never returns; a script is run by sh.
  std::string python = Write("bin/python3",
                             "#!/bin/sh\n"
                             "if [ \"$1\" = -c ]; then exec sleep 600; fi\n"
                             "exec /bin/sh \"$@\"\n");
  fs::permissions(python, fs::perms::owner_all);
  Write("code/job.py", "echo job done\n");
  std::string config = Write("config.yaml", "environment: {package_list_timeout: 3s}\n");
  StartDaemon({"--config", config});
  std::string hung =
      Write("hung.yaml", "name: hung\nworkdir: code\ncommand: \"" + python + " job.py\"\n");
  std::string slow = Write("slow.yaml",
                           "name: slow\nworkdir: code\nshell: true\ncommand: \"sleep 60\"\n"
                           "timeout: 2s\n");
  auto t0 = std::chrono::steady_clock::now();
  auto sub = RunDrover({"submit", hung, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto sub2 = RunDrover({"submit", slow, "--store", store_});
  ASSERT_EQ(sub2.exit_code, 0) << sub2.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // The API answers while the listing hangs.
  auto c = Http();
  c.set_read_timeout(2, 0);
  for (int i = 0; i < 3; ++i) {
    auto gpus = c.Get("/api/v1/gpus", Auth());
    ASSERT_TRUE(gpus) << "GET /api/v1/gpus did not answer within 2 s";
    EXPECT_EQ(gpus->status, 200);
  }
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(WaitAllFinal(**store, 2));
  auto runs = (*store)->ListRuns(RunFilter{}).value();
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  EXPECT_EQ(runs[0].state, RunState::kSucceeded) << runs[0].reason;
  EXPECT_EQ(runs[1].state, RunState::kFailed);
  EXPECT_EQ(runs[1].reason, "timeout");
  // The 2 s timeout fired on time: the run ended within a few seconds of its start.
  auto attempts = (*store)->ListAttempts(runs[1].id).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_LT(attempts[0].ended_ms - attempts[0].started_ms, 4000);
  // The listing was given up after its timeout and recorded as such.
  std::vector<Environment> envs;
  for (int i = 0; i < 100; ++i) {
    envs = (*store)->ListEnvironments(runs[0].experiment_id).value();
    if (!envs.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(envs.size(), 1u);
  EXPECT_EQ(envs[0].interpreter, python);
  EXPECT_NE(envs[0].packages.find("did not finish within 3000 ms"), std::string::npos)
      << envs[0].packages;
  // No listing helper is left behind.
  EXPECT_NE(system("pgrep -f '^sleep 600$' >/dev/null"), 0);
}

// A real preemption: under las with a one-second switch, a long run holding the only GPU is
// stopped (SIGTERM) for a new short run; it checkpoints and exits 0, is requeued without spending
// a retry (it has none), resumes from its checkpoint after the short run and finishes.
TEST_F(DaemonTest, LasPreemptsALongRunThatCheckpointsAndResumes) {
  std::string config = Write("config.yaml",
                             "scheduler: {policy: las, las_threshold: 1s, min_runtime: 0s, "
                             "grace: 10s}\n");
  StartDaemon({"--fake-gpus", "1x16GiB", "--config", config});
  std::string long_spec = CheckpointingSpec("long");
  std::string short_spec = Write("short.yaml",
                                 "name: short\nworkdir: code\ncommand: sleep 0.3\n"
                                 "resources: {gpus: 1}\n");
  ASSERT_EQ(RunDrover({"submit", long_spec, "--store", store_}).exit_code, 0);
  auto sub = RunDrover({"submit", short_spec, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(WaitAllFinal(**store, 2)) << ReadFile((dir_ / "serve.err").string());
  auto long_run = (*store)->GetRun(1).value();
  auto short_run = (*store)->GetRun(2).value();
  EXPECT_EQ(long_run->state, RunState::kSucceeded) << long_run->reason;
  EXPECT_EQ(short_run->state, RunState::kSucceeded) << short_run->reason;
  EXPECT_EQ(long_run->retries_used, 0);
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "preempted");
  EXPECT_EQ(attempts[0].exit_code, 0);  // it checkpointed and exited cleanly: still preempted
  EXPECT_EQ(attempts[1].reason, "succeeded");
  EXPECT_EQ(ReadFile(attempts[0].stdout_path), "started\n");
  EXPECT_EQ(ReadFile(attempts[1].stdout_path), "resumed\n");
  auto short_attempts = (*store)->ListAttempts(2).value();
  ASSERT_EQ(short_attempts.size(), 1u);
  EXPECT_GE(short_attempts[0].started_ms, attempts[0].ended_ms);
  EXPECT_LE(short_attempts[0].ended_ms, attempts[1].started_ms);
  EXPECT_NE(ReadFile((dir_ / "serve.out").string()).find("scheduling policy: las"),
            std::string::npos);
  // The run's page says why it was stopped.
  auto show = RunDrover({"show", "1", "--store", store_});
  EXPECT_NE(show.out.find("preempted"), std::string::npos) << show.out << show.err;
}

// A daemon killed while a run is in its preemption grace: the restarted daemon adopts the run,
// still knows it is being preempted, and when it checkpoints and exits 0 records it as preempted
// (not succeeded) and resumes it later.
TEST_F(DaemonTest, APreemptionSurvivesADaemonRestart) {
  std::string config = Write("config.yaml",
                             "scheduler: {policy: las, las_threshold: 1s, min_runtime: 0s, "
                             "grace: 20s}\n");
  StartDaemon({"--fake-gpus", "1x16GiB", "--config", config});
  // On SIGTERM it takes 2 s to save its checkpoint, then exits 0.
  std::string long_spec = CheckpointingSpec("long", "", "sleep 2; ");
  std::string short_spec = Write("short.yaml",
                                 "name: short\nworkdir: code\ncommand: sleep 0.3\n"
                                 "resources: {gpus: 1}\n");
  ASSERT_EQ(RunDrover({"submit", long_spec, "--store", store_}).exit_code, 0);
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 100 && (*store)->GetRun(1).value()->state != RunState::kRunning; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past las_threshold
  ASSERT_EQ(RunDrover({"submit", short_spec, "--store", store_}).exit_code, 0);
  bool preempting = false;
  for (int i = 0; i < 100 && !preempting; ++i) {
    auto attempts = (*store)->ListAttempts(1).value();
    preempting = !attempts.empty() && attempts[0].stopping == StopReason::kPreempt;
    if (!preempting) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(preempting) << ReadFile((dir_ / "serve.err").string());
  StopDaemon(SIGKILL);  // in the 2 s the run takes to checkpoint
  // Restarted under fifo, so only the stored preemption can say what the run's exit means.
  StartDaemon({"--fake-gpus", "1x16GiB", "--config", config, "--policy", "fifo"});
  ASSERT_TRUE(WaitAllFinal(**store, 2)) << ReadFile((dir_ / "serve.err").string());
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "preempted");
  EXPECT_EQ(attempts[0].exit_code, 0);
  EXPECT_EQ(ReadFile(attempts[1].stdout_path), "resumed\n");
  EXPECT_EQ((*store)->GetRun(1).value()->retries_used, 0);
}

// Quotas through the daemon: team a borrows the GPU that team b's quota promises; when b's run
// arrives, a's borrowed run (the one started last) is preempted and requeued, b's runs, and a's
// resumes from its checkpoint once a GPU is free. Under fifo: reclaim does not need a preemptive
// policy.
TEST_F(DaemonTest, QuotaIsReclaimedFromABorrowingGroup) {
  std::string config = Write("config.yaml",
                             "scheduler:\n  policy: fifo\n  grace: 10s\n  groups:\n"
                             "    a: {quota: 1}\n    b: {quota: 1}\n");
  // CPU slots to spare: the GPUs, not the CPU slots (the machine's cores), are what b waits for.
  StartDaemon({"--fake-gpus", "2x16GiB", "--cpus", "8", "--config", config});
  std::string first = Write("a1.yaml",
                            "name: a1\ngroup: a\nworkdir: code\ncommand: sleep 2\n"
                            "resources: {gpus: 1}\n");
  std::string borrower = CheckpointingSpec("a2", "group: a\n");
  std::string owner = Write("b.yaml",
                            "name: b\ngroup: b\nworkdir: code\ncommand: sleep 0.3\n"
                            "resources: {gpus: 1}\n");
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto wait_running = [&](int64_t id) {
    for (int i = 0; i < 200; ++i) {
      auto r = (*store)->GetRun(id).value();
      if (r && r->state == RunState::kRunning) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  };
  ASSERT_EQ(RunDrover({"submit", first, "--store", store_}).exit_code, 0);
  ASSERT_TRUE(wait_running(1));
  ASSERT_EQ(RunDrover({"submit", borrower, "--store", store_}).exit_code, 0);
  ASSERT_TRUE(wait_running(2));  // a holds 2 GPUs, past its quota of 1: the second is borrowed
  auto sub = RunDrover({"submit", owner, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  ASSERT_TRUE(WaitAllFinal(**store, 3))
      << ReadFile((dir_ / "serve.err").string()) << RunDrover({"ls", "--store", store_}).out
      << RunDrover({"show", "2", "--store", store_}).out << ReadFile((dir_ / "serve.out").string());
  for (int64_t id : {1, 2, 3}) {
    auto r = (*store)->GetRun(id).value();
    EXPECT_EQ(r->state, RunState::kSucceeded) << id << " " << r->reason;
    EXPECT_EQ(r->retries_used, 0) << id;
  }
  EXPECT_EQ((*store)->ListAttempts(1).value().size(), 1u);  // within a's quota: untouched
  auto borrowed = (*store)->ListAttempts(2).value();
  ASSERT_EQ(borrowed.size(), 2u);
  EXPECT_EQ(borrowed[0].reason, "preempted");
  EXPECT_EQ(ReadFile(borrowed[1].stdout_path), "resumed\n");
  auto b = (*store)->ListAttempts(3).value();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_GE(b[0].started_ms, borrowed[0].ended_ms);
  // The event log says why it was stopped.
  bool said = false;
  auto events = (*store)->ListEvents(0);
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) {
    if (e.run_id != 2 || !e.data.is_object() || !e.data.contains("reason")) continue;
    if (e.data["reason"] == "preempted" && e.data.contains("note")) {
      said = said || e.data["note"].dump().find("quota") != std::string::npos;
    }
  }
  EXPECT_TRUE(said);
}

// Scripted telemetry through the daemon: the idle GPU under a run alerts once (the repeats are
// counted on it), the API shows live telemetry and the alert, and /metrics passes promtool.
TEST_F(DaemonTest, IdleGpuAlertsOnceAndMetricsPassPromtool) {
  std::string telemetry = Write("idle.jsonl",
                                "{\"at\": \"0s\", \"gpu\": 0, \"utilization\": 3, "
                                "\"memory_used\": \"2GiB\", \"temperature\": 41, \"power\": 80}\n"
                                "{\"at\": \"0s\", \"gpu\": 1, \"utilization\": 99, "
                                "\"temperature\": 70, \"power\": 300}\n");
  std::string config = Write("config.yaml",
                             "telemetry: {period: 100ms, store_every: 1s}\n"
                             "alerts: {silence: 1h}\n"
                             "detectors:\n  idle_gpu: {utilization: 30, for: 1s}\n");
  StartDaemon({"--fake-telemetry", telemetry, "--config", config});
  std::string spec = Write("hold.yaml",
                           "name: hold\nworkdir: code\ncommand: sleep 3\n"
                           "resources: {gpus: 1, gpu_memory: 15GiB}\n");
  auto sub = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto store = Store::Open(store_ + "/drover.db");
  for (int i = 0; i < 200 && (*store)->GetRun(1).value()->state != RunState::kSucceeded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ((*store)->GetRun(1).value()->state, RunState::kSucceeded);
  auto http = Http();
  auto alerts = http.Get("/api/v1/alerts?kind=idle_gpu", Auth());
  ASSERT_TRUE(alerts);
  ASSERT_EQ(alerts->status, 200) << alerts->body;
  Json list = Json::parse(alerts->body)["alerts"];
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["gpu"], 0);  // the run got GPU 0 (best fit, lowest index)
  EXPECT_EQ(list[0]["run_id"], 1);
  EXPECT_GT(list[0]["count"].get<int>(), 5);  // ~2 s of 100 ms samples past the first second
  auto cli = RunDrover({"alerts", "--store", store_});
  EXPECT_NE(cli.out.find("idle_gpu"), std::string::npos) << cli.out << cli.err;
  auto top = RunDrover({"top", "--once", "--store", store_});
  EXPECT_NE(top.out.find("99%"), std::string::npos) << top.out << top.err;
  EXPECT_NE(top.out.find("70C"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("recent alerts"), std::string::npos) << top.out;

  auto gpus = http.Get("/api/v1/gpus", Auth());
  ASSERT_TRUE(gpus);
  Json g = Json::parse(gpus->body)["gpus"];
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1]["telemetry"]["utilization"], 99.0);
  EXPECT_EQ(g[0]["telemetry"]["memory_used"], 2LL << 30);
  auto samples = http.Get("/api/v1/gpus/samples?gpu=1", Auth());
  ASSERT_TRUE(samples);
  EXPECT_GE(Json::parse(samples->body)["samples"].size(), 1u) << samples->body;

  auto metrics = http.Get("/metrics", Auth());
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("drover_gpu_utilization_ratio{gpu=\"1\""), std::string::npos);
  EXPECT_NE(metrics->body.find("drover_runs{state=\"succeeded\"} 1"), std::string::npos);
  // Every state of the enum, pruned included, with 0 when none (issue 40).
  for (RunState s : kAllRunStates) {
    EXPECT_NE(metrics->body.find("drover_runs{state=\"" + std::string(ToString(s)) + "\"}"),
              std::string::npos)
        << ToString(s);
  }
  EXPECT_NE(metrics->body.find("drover_alerts_total{kind=\"idle_gpu\"} 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("drover_queue_wait_seconds_count 1"), std::string::npos);
  EXPECT_EQ(http.Get("/metrics")->status, 401);  // the token is needed here too
  std::string scrape = Write("scrape.txt", metrics->body);
  std::string report = (dir_ / "promtool.out").string();
  int rc = std::system(("promtool check metrics < " + scrape + " > " + report + " 2>&1").c_str());
  EXPECT_EQ(rc, 0) << ReadFile(report) << "\n" << metrics->body;

  // Every series the Grafana dashboard queries is one this scrape has.
  Json dashboard =
      Json::parse(ReadFile(std::string(DROVER_SOURCE_DIR) + "/deploy/grafana/drover.json"));
  int queries = 0;
  for (const auto& panel : dashboard["panels"]) {
    for (const auto& target : panel["targets"]) {
      std::string expr = target["expr"];
      std::smatch m;
      for (auto it = expr.cbegin();
           std::regex_search(it, expr.cend(), m, std::regex("drover_[a-z_]+")); it = m[0].second) {
        ++queries;
        std::string family = std::regex_replace(m[0].str(), std::regex("_bucket$"), "");
        EXPECT_NE(metrics->body.find("# TYPE " + family + " "), std::string::npos) << family;
      }
    }
  }
  EXPECT_GT(queries, 10);
}

// MCP over streamable HTTP at /mcp: a session from initialize, tools listed and called, a
// notification accepted with 202, GET refused with 405, the session ended by DELETE; and the
// same checks as the API (token, Host).
TEST_F(DaemonTest, McpOverStreamableHttp) {
  // The daemon offers a recipe of its own (serve --recipe): /mcp's plan uses it.
  fs::create_directories(dir_ / "proj");
  Write("proj/drover.yaml",
        "command: /usr/bin/python3 train.py --model {model}\n"
        "params:\n  model: {choices: [mlp, cnn]}\n"
        "metrics:\n  val_acc: {mode: max}\n");
  StartDaemon({"--recipe", (dir_ / "proj").string()});
  auto http = Http();
  auto post = [&](const Json& body, const std::string& session) {
    httplib::Headers h = Auth();
    h.emplace("Accept", "application/json, text/event-stream");
    if (!session.empty()) {
      h.emplace("Mcp-Session-Id", session);
      h.emplace("MCP-Protocol-Version", "2025-11-25");
    }
    return http.Post("/mcp", h, body.dump(), "application/json");
  };
  auto init = post({{"jsonrpc", "2.0"},
                    {"id", 0},
                    {"method", "initialize"},
                    {"params",
                     {{"protocolVersion", "2025-11-25"},
                      {"capabilities", Json::object()},
                      {"clientInfo", {{"name", "e2e"}, {"version", "1"}}}}}},
                   "");
  ASSERT_TRUE(init);
  ASSERT_EQ(init->status, 200) << init->body;
  std::string session = init->get_header_value("Mcp-Session-Id");
  ASSERT_EQ(session.size(), 32u);
  EXPECT_EQ(Json::parse(init->body)["result"]["protocolVersion"], "2025-11-25");

  auto note = post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->status, 202);
  EXPECT_TRUE(note->body.empty());
  auto list = post({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}}, session);
  ASSERT_TRUE(list);
  EXPECT_EQ(Json::parse(list->body)["result"]["tools"].size(), 15u);
  auto gpus = post({{"jsonrpc", "2.0"},
                    {"id", "g"},
                    {"method", "tools/call"},
                    {"params", {{"name", "gpu_status"}, {"arguments", Json::object()}}}},
                   session);
  ASSERT_TRUE(gpus);
  Json g = Json::parse(gpus->body);
  EXPECT_EQ(g["id"], "g");
  EXPECT_EQ(g["result"]["structuredContent"]["gpus"].size(), 2u) << gpus->body;
  auto plan = post({{"jsonrpc", "2.0"},
                    {"id", "p"},
                    {"method", "tools/call"},
                    {"params",
                     {{"name", "plan"}, {"arguments", {{"instruction", "compare mlp and cnn"}}}}}},
                   session);
  ASSERT_TRUE(plan);
  Json planned = Json::parse(plan->body)["result"]["structuredContent"];
  EXPECT_EQ(planned["base_dir"], fs::weakly_canonical(dir_ / "proj").string()) << plan->body;
  EXPECT_EQ(planned["runs"], 2) << plan->body;
  EXPECT_EQ(planned["spec"]["objective"]["metric"], "val_acc") << plan->body;
  auto bad = post({{"jsonrpc", "2.0"},
                   {"id", 2},
                   {"method", "tools/call"},
                   {"params", {{"name", "get_run"}, {"arguments", {{"run_id", 0}}}}}},
                  session);
  EXPECT_TRUE(Json::parse(bad->body)["result"]["isError"].get<bool>()) << bad->body;

  // Without a session, with an unknown one, with a bad version header, GET, and no token.
  EXPECT_EQ(post({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}}, "")->status, 400);
  EXPECT_EQ(post({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}}, std::string(32, 'a'))->status,
            404);
  httplib::Headers old = Auth();
  old.emplace("Mcp-Session-Id", session);
  old.emplace("MCP-Protocol-Version", "1999-01-01");
  EXPECT_EQ(
      http.Post("/mcp", old, R"({"jsonrpc":"2.0","id":4,"method":"ping"})", "application/json")
          ->status,
      400);
  EXPECT_EQ(http.Get("/mcp", Auth())->status, 405);
  EXPECT_EQ(
      http.Post("/mcp", R"({"jsonrpc":"2.0","id":5,"method":"ping"})", "application/json")->status,
      401);
  httplib::Headers rebound = Auth();
  rebound.emplace("Host", "evil.example:80");
  EXPECT_EQ(http.Post("/mcp", rebound, "{}", "application/json")->status, 403);

  // A client that can only be given a URL carries the token in it (on /mcp only).
  EXPECT_EQ(http.Post("/mcp?token=" + token_, R"({"jsonrpc":"2.0","id":7,"method":"ping"})",
                      "application/json")
                ->status,
            400);  // authenticated: refused only for having no session
  EXPECT_EQ(http.Get("/api/v1/gpus?token=" + token_)->status, 401);
  httplib::Headers del = Auth();
  del.emplace("Mcp-Session-Id", session);
  EXPECT_EQ(http.Delete("/mcp", del)->status, 200);
  EXPECT_EQ(post({{"jsonrpc", "2.0"}, {"id", 6}, {"method", "ping"}}, session)->status, 404);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// The daemon's default policy preempts a run that checkpoints (drover.Checkpointer) for a
// better-ranked one; the run resumes from its checkpoint and its curve goes on from the saved
// step; the note says what the stop cost. A run without checkpoints is never preempted: the
// better-ranked run waits, and `drover why` says why in the scheduler's words.
TEST_F(DaemonTest, DefaultPolicyPreemptsOnlyRunsThatCheckpointAndTheCurveGoesOn) {
  std::string config = Write("config.yaml", "scheduler: {min_runtime: 0s, grace: 10s}\n");
  StartDaemon({"--fake-gpus", "1x16GiB", "--config", config});
  Write("code/train.py",
        "import time, drover\n"
        "state = {'w': 0.0}\n"
        "ckpt = drover.Checkpointer(extra=state, every=1)\n"
        "start = ckpt.resume()\n"
        "for step in range(start, 40):\n"
        "    state['w'] += 1.0\n"
        "    drover.log(step=step, loss=1.0 / (1 + state['w']))\n"
        "    ckpt.step(step)\n"
        "    time.sleep(0.1)\n");
  std::string long_spec = Write("long.yaml",
                                "name: long\nworkdir: code\ncommand: /usr/bin/python3 train.py\n"
                                "resources: {gpus: 1}\ncheckpoint: true\n");
  ASSERT_EQ(RunDrover({"submit", long_spec, "--store", store_}).exit_code, 0);
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  // Once it has logged a few steps, a run of higher priority arrives.
  for (int i = 0; i < 300 && (*store)->GetMetrics(1, "loss").value().size() < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string urgent = Write("urgent.yaml", "name: urgent\nworkdir: code\ncommand: sleep 0.3\n"
                                            "resources: {gpus: 1}\npriority: 10\n");
  ASSERT_EQ(RunDrover({"submit", urgent, "--store", store_}).exit_code, 0);
  ASSERT_TRUE(WaitAllFinal(**store, 2)) << ReadFile((dir_ / "serve.err").string());
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 2u) << ReadFile((dir_ / "serve.err").string());
  EXPECT_EQ(attempts[0].reason, "preempted");
  ASSERT_TRUE(attempts[0].checkpoint.has_value());
  const int64_t saved = attempts[0].checkpoint->step;
  EXPECT_EQ(attempts[1].reason, "succeeded");
  // The second attempt's curve starts right after the saved step and goes on to the end.
  std::vector<int64_t> second;
  const std::vector<MetricPoint> loss = (*store)->GetMetrics(1, "loss").value();
  for (const auto& p : loss) {
    if (p.attempt_id == attempts[1].id) second.push_back(p.step);
  }
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second.front(), saved + 1);
  EXPECT_EQ(second.back(), 39);
  EXPECT_EQ(static_cast<int64_t>(second.size()), 39 - saved);
  // The preemption's note says what the stop cost.
  std::string notes;
  const std::vector<Event> events = (*store)->ListEvents(0).value();
  for (const auto& e : events) {
    if (e.run_id == 1) notes += e.data.value("note", std::string()) + "\n";
  }
  EXPECT_NE(notes.find("its checkpoint of step " + std::to_string(saved) + " was saved"),
            std::string::npos)
      << notes;
  auto show = RunDrover({"show", "1", "--store", store_});
  EXPECT_NE(show.out.find("checkpoint   step "), std::string::npos) << show.out;
  EXPECT_NE(ReadFile((dir_ / "serve.out").string()).find("scheduling policy: default"),
            std::string::npos)
      << ReadFile((dir_ / "serve.out").string());

  // A run without checkpoints holds the GPU; a better-ranked run waits for it, and says why.
  std::string plain = Write("plain.yaml", "name: plain\nworkdir: code\ncommand: sleep 4\n"
                                          "resources: {gpus: 1}\n");
  ASSERT_EQ(RunDrover({"submit", plain, "--store", store_}).exit_code, 0);
  for (int i = 0; i < 100 && (*store)->GetRun(3).value()->state != RunState::kRunning; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string urgent2 = Write("urgent2.yaml", "name: urgent2\nworkdir: code\ncommand: sleep 0.2\n"
                                              "resources: {gpus: 1}\npriority: 10\n");
  ASSERT_EQ(RunDrover({"submit", urgent2, "--store", store_}).exit_code, 0);
  std::string why;
  for (int i = 0; i < 60; ++i) {
    why = RunDrover({"why", "4", "--store", store_}).out;
    if (why.find("whole GPU") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(why, "run 4 (queued): it needs 1 whole GPU; 0 are idle\n");
  auto res = Http().Get("/api/v1/runs/4", Auth());
  ASSERT_TRUE(res);
  Json j = Json::parse(res->body);
  EXPECT_EQ(j["waiting"]["code"], "whole_gpus") << res->body;
  ASSERT_TRUE(WaitAllFinal(**store, 4));
  EXPECT_EQ((*store)->ListAttempts(3).value().size(), 1u);  // never preempted
  EXPECT_EQ((*store)->GetRun(3).value()->state, RunState::kSucceeded);
}

// A run that asks for more memory than any GPU has free waits, and `drover why` names the freest.
TEST_F(DaemonTest, WhySaysNoGpuHasTheMemoryAndNamesTheFreest) {
  StartDaemon({"--fake-gpus", "1x16GiB"});
  std::string big = Write("big.yaml", "name: big\nworkdir: code\ncommand: sleep 5\n"
                                      "resources: {gpus: 1, gpu_memory: 12GiB}\n");
  std::string small = Write("small.yaml", "name: small\nworkdir: code\ncommand: sleep 0.1\n"
                                          "resources: {gpus: 1, gpu_memory: 6GiB}\n");
  ASSERT_EQ(RunDrover({"submit", big, "--store", store_}).exit_code, 0);
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 100 && (*store)->GetRun(1).value()->state != RunState::kRunning; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(RunDrover({"submit", small, "--store", store_}).exit_code, 0);
  std::string why;
  for (int i = 0; i < 60; ++i) {
    why = RunDrover({"why", "2", "--store", store_}).out;
    if (why.find("GiB") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(why, "run 2 (queued): no GPU has 6.0 GiB free (the freest has 3.0 GiB)\n");
  auto show = RunDrover({"show", "2", "--store", store_});
  EXPECT_NE(show.out.find("waiting      no GPU has 6.0 GiB free"), std::string::npos) << show.out;
  auto json = RunDrover({"why", "2", "--json", "--store", store_});
  EXPECT_NE(json.out.find("\"code\":\"gpu_memory\""), std::string::npos) << json.out;
  ASSERT_TRUE(WaitAllFinal(**store, 2));
  auto done = RunDrover({"why", "2", "--store", store_});
  EXPECT_NE(done.out.find("it has ended: succeeded"), std::string::npos) << done.out;
}

}  // namespace
}  // namespace drover
