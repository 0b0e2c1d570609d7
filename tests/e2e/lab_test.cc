// A shared machine (docs/lab-server.md): engines of different stores on one machine coordinate
// through the machine's GPU leases, so together they never hand out more of a GPU than it has.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/users.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/shared_daemon.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;

class LabTest : public testing::CliFixture {
 protected:
  // Each run appends "start|end <ns> <gpu> <store> <run>" to one file shared by both stores.
  std::string SpecFor(const std::string& log, const std::string& tag, int runs) {
    std::string values;
    for (int i = 0; i < runs; ++i) values += (i ? ", " : "") + std::to_string(i);
    fs::create_directories(dir_ / ("code-" + tag));
    Write("code-" + tag + "/mark.sh",
          "echo start $(date +%s%N) $CUDA_VISIBLE_DEVICES $2 $DROVER_RUN_ID >> $1\n"
          "sleep 0.$(( $3 % 3 + 2 ))\n"
          "echo end $(date +%s%N) $CUDA_VISIBLE_DEVICES $2 $DROVER_RUN_ID >> $1\n");
    return "name: share-" + tag + "\n" + "command: sh mark.sh " + log + " " + tag + " {i}\n" +
           "params: {i: [" + values + "]}\n" + "resources: {gpus: 1, gpu_memory: 5GiB}\n";
  }

  // The most GiB of one GPU held at once by runs of both stores, from the runs' own records.
  static int MaxConcurrentGiB(const std::string& log, int* runs_seen) {
    struct Mark {
      long long t;
      int delta;
      std::string gpu;
    };
    std::vector<Mark> marks;
    std::istringstream in(ReadFile(log));
    std::string line;
    *runs_seen = 0;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string what, gpu, tag, run;
      long long t = 0;
      f >> what >> t >> gpu >> tag >> run;
      marks.push_back({t, what == "start" ? 5 : -5, gpu});
      if (what == "start") ++*runs_seen;
    }
    // Ends before starts at the same instant.
    std::sort(marks.begin(), marks.end(),
              [](const Mark& a, const Mark& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
    std::map<std::string, int> held;
    int most = 0;
    for (const Mark& m : marks) {
      held[m.gpu] += m.delta;
      most = std::max(most, held[m.gpu]);
    }
    return most;
  }

  // Runs `drover run` on two stores at once on the same fake GPUs (2 x 16 GiB).
  int RunTwoStores(const std::string& leases_flag, int* runs_seen) {
    const std::string log = (dir_ / "marks.txt").string();
    std::vector<pid_t> pids;
    for (const std::string tag : {"a", "b"}) {
      std::string spec = Write("code-" + tag + "/spec.yaml", SpecFor(log, tag, 12));
      pids.push_back(testing::SpawnDrover(
          {"--store", (dir_ / ("store-" + tag)).string(), "run", spec, "--fake-gpus", "2x16GiB",
           "--gpu-leases", leases_flag, "--cpus", "8", "--quiet"},
          (dir_ / ("out-" + tag)).string(), (dir_ / ("err-" + tag)).string(),
          (dir_ / ("code-" + tag)).string()));
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      const std::string tag = i == 0 ? "a" : "b";
      EXPECT_EQ(testing::WaitExit(pids[i]), 0) << ReadFile((dir_ / ("err-" + tag)).string());
    }
    return MaxConcurrentGiB(log, runs_seen);
  }
};

TEST_F(LabTest, TwoStoresOnTheSameGpusNeverExceedAGpusMemoryTogether) {
  const std::string leases = (dir_ / "leases").string();
  int runs = 0;
  const int most = RunTwoStores(leases, &runs);
  EXPECT_EQ(runs, 24);
  // Three runs of 5 GiB fit a 16 GiB GPU, four do not.
  EXPECT_LE(most, 15) << ReadFile((dir_ / "marks.txt").string());
  EXPECT_GE(most, 10);  // and they did share
  // Both engines have ended: nothing is held any more.
  for (const auto& e : fs::directory_iterator(leases)) {
    EXPECT_NE(e.path().extension(), ".json") << e.path() << " left behind";
  }
}

TEST_F(LabTest, WithoutLeasesTwoStoresDoubleBookAGpu) {
  // The control: each engine alone believes it owns both GPUs, so together they overbook one
  // (what the test above would catch).
  int runs = 0;
  const int most = RunTwoStores("off", &runs);
  EXPECT_EQ(runs, 24);
  EXPECT_GT(most, 15);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

using testing::kAdmin;
using testing::kAdmins;
using testing::kAlice;
using testing::kBob;
using testing::kNlp;
using testing::kSvc;
using testing::kVision;
using testing::Sh;

class SharedDaemonTest : public testing::SharedDaemonFixture {};

// A shared daemon run as a service user rather than root.
class ServiceUserDaemonTest : public SharedDaemonTest {
 protected:
  ServiceUserDaemonTest() { root_daemon_ = false; }
};

TEST_F(SharedDaemonTest, EachUserIsKnownByTheKernelAndActsOnTheirOwnRunsOnly) {
  // Two users submit over the socket, with no token (they cannot read it).
  EXPECT_NE(::access((store_ + "/token").c_str(), F_OK), -1);
  auto a = As(kAlice, {"submit", "long.yaml"}, Home(kAlice));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = As(kBob, {"submit", "long.yaml"}, Home(kBob));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto ls = As(kAlice, {"ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  auto runs = nlohmann::json::parse(ls.out);
  ASSERT_EQ(runs.size(), 2u);
  std::map<std::string, int64_t> run_of;
  for (const auto& r : runs) run_of[r["user"].get<std::string>()] = r["id"].get<int64_t>();
  ASSERT_TRUE(run_of.count(kAlice) && run_of.count(kBob)) << ls.out;
  const std::string bobs = std::to_string(run_of[kBob]);
  const std::string alices = std::to_string(run_of[kAlice]);
  auto only_bob = As(kAlice, {"ls", "--user", kBob, "--json"});
  ASSERT_EQ(nlohmann::json::parse(only_bob.out).size(), 1u) << only_bob.out;
  EXPECT_NE(As(kAlice, {"show", alices}).out.find(std::string("by ") + kAlice), std::string::npos);

  // Alice may not cancel, reprioritise or read the logs of Bob's run.
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"cancel", bobs}, {"priority", "5", bobs}, {"logs", bobs}}) {
    auto r = As(kAlice, cmd);
    EXPECT_NE(r.exit_code, 0) << cmd[0] << ": " << r.out;
    EXPECT_NE(r.err.find("may not"), std::string::npos) << cmd[0] << ": " << r.err;
  }
  // Her own, yes; an admin, any.
  EXPECT_EQ(As(kAlice, {"priority", "3", alices}).exit_code, 0);
  auto admin_cancel = As(kAdmin, {"cancel", bobs});
  EXPECT_EQ(admin_cancel.exit_code, 0) << admin_cancel.err;
  EXPECT_EQ(As(kAlice, {"cancel", alices}).exit_code, 0);

  // Every action is in the audit log, which only admins read.
  auto denied = As(kAlice, {"audit"});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_NE(denied.err.find("may not read the audit log"), std::string::npos) << denied.err;
  auto audit = As(kAdmin, {"audit", "--json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  auto entries = nlohmann::json::parse(audit.out)["entries"];
  auto has = [&](const std::string& user, const std::string& method, const std::string& path,
                 int status) {
    return std::any_of(entries.begin(), entries.end(), [&](const nlohmann::json& e) {
      return e["user"] == user && e["method"] == method &&
             e["path"].get<std::string>().find(path) == 0 && e["status"] == status &&
             e["via"] == "socket" && e["from"].get<std::string>().starts_with("unix pid ");
    });
  };
  EXPECT_TRUE(has(kAlice, "POST", "/api/v1/experiments", 201)) << audit.out;
  EXPECT_TRUE(has(kBob, "POST", "/api/v1/experiments", 201)) << audit.out;
  EXPECT_TRUE(has(kAlice, "POST", "/api/v1/runs/" + bobs + "/cancel", 403)) << audit.out;
  EXPECT_TRUE(has(kAlice, "POST", "/api/v1/runs/" + bobs + "/priority", 403)) << audit.out;
  EXPECT_TRUE(has(kAlice, "GET", "/api/v1/runs/" + bobs + "/logs", 403)) << audit.out;
  EXPECT_TRUE(has(kAdmin, "POST", "/api/v1/runs/" + bobs + "/cancel", 200)) << audit.out;
  EXPECT_TRUE(has(kAlice, "GET", "/api/v1/audit", 403)) << audit.out;

  // What another user is shown of Alice's experiment: its record, not its secrets; her recipe
  // and the store's files are not Bob's to read through the daemon.
  const std::string bobs_view = RawGetAs(kBob, "/api/v1/experiments?limit=10");
  EXPECT_EQ(bobs_view.find("sk-alice-secret"), std::string::npos) << bobs_view;
  EXPECT_NE(bobs_view.find("sk-bob-secret"), std::string::npos) << bobs_view;
  // Nor its command line (a key passed as a flag), in its run's record either.
  EXPECT_EQ(bobs_view.find("cmd-alice-secret"), std::string::npos) << bobs_view;
  const std::string bobs_look = RawGetAs(kBob, "/api/v1/runs/" + alices);
  EXPECT_EQ(bobs_look.find("cmd-alice-secret"), std::string::npos) << bobs_look;
  EXPECT_NE(RawGetAs(kAlice, "/api/v1/runs/" + alices).find("cmd-alice-secret"), std::string::npos);
  const std::string alices_view = RawGetAs(kAlice, "/api/v1/experiments?limit=10");
  EXPECT_NE(alices_view.find("sk-alice-secret"), std::string::npos) << alices_view;
  EXPECT_EQ(alices_view.find("sk-bob-secret"), std::string::npos) << alices_view;
  // A file the daemon may read but Bob may not, named as a recipe: refused, its text not shown.
  const std::string token_text = ReadFile(store_ + "/token");
  const std::string recipe = RawGetAs(kBob, "/api/v1/recipes/show?path=" + store_ + "/token");
  EXPECT_NE(recipe.find("403"), std::string::npos) << recipe;
  EXPECT_EQ(recipe.find(token_text.substr(0, 16)), std::string::npos) << recipe;
  // Bob may not capture a folder only Alice can read: the root daemon reads it as Bob.
  fs::create_directories(Home(kAlice) + "/private");
  Write(std::string(kAlice) + "/private/secret.py", "KEY = 'alice-only'\n");
  Sh("chown -R " + std::string(kAlice) + ": " + Home(kAlice) + "/private && chmod 700 " +
     Home(kAlice) + "/private");
  Write(std::string(kBob) + "/steal.yaml",
        "name: steal\ncommand: cat secret.py\nworkdir: " + Home(kAlice) + "/private\n");
  Sh("chown " + std::string(kBob) + ": " + Home(kBob) + "/steal.yaml");
  auto from_hers = As(kBob, {"submit", "steal.yaml"}, Home(kBob));
  EXPECT_NE(from_hers.exit_code, 0);
  EXPECT_NE(from_hers.err.find("Permission denied"), std::string::npos) << from_hers.err;

  // One user cannot take every event stream and log follow: 24 are allowed, 6 per user.
  EXPECT_EQ(StreamsAs(kBob, 7, kAlice), "200 200 200 200 200 200 503 | 200\n");

  // The store's files are the daemon user's alone: users go through the socket.
  struct stat st {};
  ASSERT_EQ(::stat((store_ + "/drover.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  ASSERT_EQ(::stat((store_ + "/daemon.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

TEST_F(SharedDaemonTest, ADaemonKilledLeavesASocketTheNextOneReplaces) {
  ASSERT_EQ(As(kAlice, {"submit", "who.yaml"}, Home(kAlice)).exit_code, 0);
  ::kill(daemon_, SIGKILL);
  testing::WaitExit(daemon_);
  daemon_ = -1;
  ASSERT_TRUE(fs::exists(store_ + "/daemon.sock"));  // stale: nobody listens
  StartDaemon();
  auto ls = As(kBob, {"ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 1u);
  // The run (adopted or queued again) runs as its submitter.
  const std::string ran_as = (dir_ / "out" / "ran-as.txt").string();
  for (int i = 0; i < 200 && ReadFile(ran_as).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ReadFile(ran_as), std::string(kAlice) + "\n");
}

// What a red-team pass did with a root daemon's rights from inside a run (docs/lab-server.md):
// links planted where the daemon opens logs, mounts data or collects outputs, another user's
// file as data. Each is refused and the machine's files stay as they were.
TEST_F(SharedDaemonTest, ARunCannotTurnTheDaemonsRightsAgainstTheMachine) {
  const std::string victim = (dir_ / "victim").string();
  fs::create_directories(victim);
  Write("victim/secret", "root only\n");
  Write("victim-file", "untouched\n");
  Sh("chown -R root: " + victim + " " + (dir_ / "victim-file").string() + " && chmod 700 " +
     victim + " && chmod 600 " + victim + "/secret " + (dir_ / "victim-file").string());
  const std::string home = Home(kAlice) + "/attack";
  fs::create_directories(home + "/mine");
  Write(std::string(kAlice) + "/attack/mine/ok.txt", "hers\n");
  fs::create_symlink(victim, home + "/x");
  Write(std::string(kAlice) + "/attack/logs.yaml",
        "name: logs\nretries: 1\ncommand: >-\n  sh -c 'ln -s " + (dir_ / "victim-file").string() +
            " \"$DROVER_STORE/logs/$DROVER_EXPERIMENT_ID/$DROVER_RUN_ID-2.out\"; ln -s " + victim +
            " work; touch attempt-1.out; exit 1'\n");
  Write(std::string(kAlice) + "/attack/link.yaml",
        "name: link\ncommand: ls x\ndata: {x: " + home + "/mine}\n");
  Write(std::string(kAlice) + "/attack/theirs.yaml",
        "name: theirs\ncommand: cat n\ndata: {n: " + Home(kBob) + "/private/secret.py}\n");
  Write(std::string(kAlice) + "/attack/outputs.yaml",
        "name: outputs\nstages:\n  a: {command: \"ln -s " + victim +
            " d\", outputs: [d/secret]}\n");
  Write(std::string(kAlice) + "/attack/needlink.yaml",
        "name: needlink\nstages:\n  a: {command: \"ln -s " + victim +
            "/secret s\", outputs: [s]}\n  b: {command: \"cat s\", needs: [a]}\n");
  // Her interpreter's package listing imports what is in her folder: it must run as her.
  fs::create_directories(home + "/email");
  const std::string marks = (dir_ / "out").string();
  for (const char* mod : {"attack/csv.py", "attack/email/__init__.py"}) {
    Write(std::string(kAlice) + "/" + mod,
          "import os\nopen('" + marks + "/imported-by-' + str(os.getuid()), 'w').close()\n");
  }
  Write(std::string(kAlice) + "/attack/py.yaml", "name: py\ncommand: python3 -c pass\n");
  fs::create_directories(Home(kBob) + "/private");
  Write(std::string(kBob) + "/private/secret.py", "KEY = 'bob-only'\n");
  Sh("chown -R " + std::string(kBob) + ": " + Home(kBob) + "/private && chmod 700 " + Home(kBob) +
     "/private");
  Sh("chown -R " + std::string(kAlice) + ": " + home + " && chown -h " + kAlice + ": " + home +
     "/x");
  std::map<std::string, std::string> said;
  for (const char* spec :
       {"logs.yaml", "link.yaml", "theirs.yaml", "outputs.yaml", "needlink.yaml"}) {
    auto r = As(kAlice, {"run", spec}, home);
    EXPECT_NE(r.exit_code, 0) << spec << ": " << r.out << r.err;
    said[spec] = r.out + r.err;
  }
  auto ls = As(kAlice, {"ls", "--json"});
  std::map<std::string, std::string> reason_of;
  for (const auto& r : nlohmann::json::parse(ls.out)) {
    auto shown = nlohmann::json::parse(As(kAlice, {"show", std::to_string(r["id"].get<int64_t>()),
                                                   "--json"}).out);
    std::string why = r.value("reason", "");
    for (const auto& a : shown["attempt_list"]) why += " " + a.value("error", std::string());
    reason_of[shown["experiment"]["name"].get<std::string>()] += why + " ";
  }
  // A link where the logs of the next attempt go: the folder is not the run's to write.
  EXPECT_NE(reason_of["logs"].find("Permission denied"), std::string::npos) << reason_of["logs"];
  // A link where data is bound: refused before the mount.
  EXPECT_NE(reason_of["link"].find("data mount point"), std::string::npos) << reason_of["link"];
  // Another user's private file as data: not hers to give the run.
  EXPECT_EQ(reason_of.count("theirs"), 0u) << said["theirs.yaml"];
  EXPECT_NE(said["theirs.yaml"].find("secret.py"), std::string::npos) << said["theirs.yaml"];
  // An output through a link out of the working copy: not stored.
  EXPECT_NE(reason_of["outputs"].find("missing_output"), std::string::npos) << reason_of["outputs"];
  // An output that is itself a link is not followed into the next stage.
  EXPECT_EQ(said["needlink.yaml"].find("root only"), std::string::npos) << said["needlink.yaml"];
  EXPECT_NE(reason_of["needlink"].find("need's outputs"), std::string::npos)
      << reason_of["needlink"];
  // Her interpreter's packages are listed as her, never as root.
  auto py = As(kAlice, {"run", "py.yaml"}, home);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  auto user = LookupUserByName(kAlice);
  ASSERT_TRUE(user.ok());
  bool listed = false;
  for (int i = 0; i < 100 && !listed; ++i) {
    listed = fs::exists(marks + "/imported-by-" + std::to_string(user->uid));
    if (!listed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(listed) << "the listing should have run (as her)";
  EXPECT_FALSE(fs::exists(marks + "/imported-by-0")) << "her code ran as root";
  // The machine's files are as they were: contents, owners, nothing added.
  EXPECT_EQ(ReadFile((dir_ / "victim-file").string()), "untouched\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "victim-file").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(::stat((victim + "/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(victim), fs::directory_iterator()), 1);
  // Nothing of the secret was stored as an output.
  if (fs::exists(store_ + "/artifacts")) {
    for (const auto& e : fs::recursive_directory_iterator(store_ + "/artifacts")) {
      if (e.is_regular_file()) {
        EXPECT_NE(ReadFile(e.path().string()), "root only\n");
      }
    }
  }
}

TEST_F(SharedDaemonTest, AUsersPipelineReadsItsEarlierStagesOutputs) {
  // Stage b runs as Alice and reads the folder and file stage a declared (bound read-only).
  const std::string home = Home(kAlice) + "/pipe";
  fs::create_directories(home);
  Write(std::string(kAlice) + "/pipe/pipe.yaml",
        "name: pipe\nstages:\n  a: {command: \"sh -c 'mkdir d; echo hi > d/x; echo yo > y'\", "
        "outputs: [d, y]}\n  b: {command: \"sh -c 'cat d/x y'\", needs: [a]}\n");
  Sh("chown -R " + std::string(kAlice) + ": " + home);
  auto r = As(kAlice, {"run", "pipe.yaml"}, home);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto logs = As(kAlice, {"logs", "2"});
  EXPECT_EQ(logs.out, "hi\nyo\n") << logs.err;
}

TEST_F(SharedDaemonTest, PersonalTokensActAsTheirUserOverHttpAndStopWhenRevoked) {
  ASSERT_EQ(As(kBob, {"submit", "long.yaml"}, Home(kBob)).exit_code, 0);
  // Alice makes a token over the socket (the kernel says it is her).
  auto made = As(kAlice, {"token", "create", "--name", "laptop", "--json"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto created = nlohmann::json::parse(made.out);
  const std::string token = created["token"].get<std::string>();
  const std::string id = std::to_string(created["id"].get<int64_t>());
  EXPECT_EQ(created["user"], kAlice);
  // With it, over HTTP (DROVER_TOKEN: no socket), she is herself: her own runs, not Bob's.
  auto with_token = [&](const char* user, std::vector<std::string> args, const std::string& cwd) {
    args.insert(args.begin(), {"/usr/bin/env", "DROVER_TOKEN=" + token, testing::DroverBin(),
                               "--store", store_});
    args.insert(args.begin(), {"/usr/bin/setpriv", std::string("--reuid=") + user,
                               std::string("--regid=") + user, "--init-groups"});
    static int n = 0;
    const std::string base = (dir_ / ("tok-" + std::to_string(n++))).string();
    testing::CliResult r;
    r.exit_code = testing::WaitExit(Spawn(args, base + ".out", base + ".err", cwd));
    r.out = ReadFile(base + ".out");
    r.err = ReadFile(base + ".err");
    return r;
  };
  auto sub = with_token(kAlice, {"submit", "long.yaml"}, Home(kAlice));
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto mine = with_token(kAlice, {"ls", "--mine", "--json"}, "");
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  const auto mine_runs = nlohmann::json::parse(mine.out);
  ASSERT_EQ(mine_runs.size(), 1u) << mine.out;
  EXPECT_EQ(mine_runs[0]["user"], kAlice);
  auto all = As(kAdmin, {"ls", "--json"});
  int64_t bobs = 0;
  for (const auto& r : nlohmann::json::parse(all.out)) {
    if (r["user"] == kBob) bobs = r["id"].get<int64_t>();
  }
  ASSERT_GT(bobs, 0) << all.out;
  auto cancel = with_token(kAlice, {"cancel", std::to_string(bobs)}, "");
  EXPECT_NE(cancel.exit_code, 0);
  EXPECT_NE(cancel.err.find("may not"), std::string::npos) << cancel.err;
  // Anyone holding the token is Alice, even Bob: that is what a token is. It makes no tokens.
  auto more = with_token(kBob, {"token", "create"}, "");
  EXPECT_NE(more.exit_code, 0);
  EXPECT_NE(more.err.find("from a shell on the daemon's machine"), std::string::npos) << more.err;
  // Bob may not revoke her token; an admin lists everyone's.
  auto bob_revokes = As(kBob, {"token", "revoke", id});
  EXPECT_NE(bob_revokes.exit_code, 0);
  EXPECT_NE(bob_revokes.err.find("may not revoke"), std::string::npos) << bob_revokes.err;
  EXPECT_NE(As(kAdmin, {"token", "list"}).out.find("laptop"), std::string::npos);
  EXPECT_EQ(As(kBob, {"token", "list"}).out.find("laptop"), std::string::npos);

  // The web UI signs her in as herself.
  const auto info = nlohmann::json::parse(ReadFile(store_ + "/daemon.json"));
  httplib::Client web("127.0.0.1", info["port"].get<int>());
  auto login = web.Post("/login", "token=" + token, "application/x-www-form-urlencoded");
  ASSERT_TRUE(login);
  ASSERT_EQ(login->status, 303);
  std::string cookie = login->get_header_value("Set-Cookie");
  cookie = cookie.substr(0, cookie.find(';'));
  ASSERT_NE(cookie.find("=p1."), std::string::npos) << cookie;
  httplib::Headers h = {{"Cookie", cookie}};
  auto runs = web.Get("/api/v1/runs?user=" + std::string(kAlice), h);
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200);
  auto audit = web.Get("/api/v1/audit", h);
  ASSERT_TRUE(audit);
  EXPECT_EQ(audit->status, 403) << "she is not an admin";
  EXPECT_NE(audit->body.find(kAlice), std::string::npos) << audit->body;

  // Revoked: the token and its web session stop at once.
  auto revoke = As(kAlice, {"token", "revoke", id});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.err;
  auto after = with_token(kAlice, {"ls"}, "");
  EXPECT_NE(after.exit_code, 0);
  EXPECT_NE(after.err.find("token"), std::string::npos) << after.err;
  auto session_after = web.Get("/api/v1/runs", h);
  ASSERT_TRUE(session_after);
  EXPECT_EQ(session_after->status, 401);
  // And the audit log says who used which way.
  auto log = As(kAdmin, {"audit", "--json"});
  const auto entries = nlohmann::json::parse(log.out)["entries"];
  EXPECT_TRUE(std::any_of(entries.begin(), entries.end(), [&](const nlohmann::json& e) {
    return e["user"] == kAlice && e["via"] == "token" && e["method"] == "POST" &&
           e["status"] == 201;
  })) << log.out;
  EXPECT_TRUE(std::any_of(entries.begin(), entries.end(), [&](const nlohmann::json& e) {
    return e["user"] == kAlice && e["method"] == "DELETE" && e["status"] == 200;
  })) << log.out;
}

TEST_F(ServiceUserDaemonTest, RunsExecuteAsTheServiceUserAndItSaysSo) {
  // A daemon that is not root runs everything as itself (docs/lab-server.md).
  ASSERT_EQ(As(kAlice, {"submit", "who.yaml"}, Home(kAlice)).exit_code, 0);
  const std::string ran_as = (dir_ / "out" / "ran-as.txt").string();
  for (int i = 0; i < 200 && ReadFile(ran_as).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ReadFile(ran_as), std::string(kSvc) + "\n");
  EXPECT_NE(ReadFile((dir_ / "serve.out").string()).find("runs execute as this daemon's user"),
            std::string::npos);
}

TEST_F(SharedDaemonTest, EachRunExecutesAsItsSubmitterAndItsFilesAreTheirs) {
  // The run checks itself: its uid and groups, its HOME and environment, a file it may not read
  // (the store's token) and a folder it may not write (root's home); it writes into a folder of
  // its code and rewrites a file of it. A user's run is always mounted (an overlay of their own
  // snapshot), small or big: Alice's code has a dozen files, Bob's one.
  const std::string probe =
      "name: self\ncommand: >-\n  sh -c 'id -u > uid.txt; id -G > groups.txt; echo \"$HOME\" > "
      "home.txt; env > env.txt; cat \"$DROVER_STORE/token\" > token.txt 2>&1; touch "
      "/root/drover-was-here 2>/dev/null && echo wrote > root.txt; echo more >> src/code.py && "
      "mkdir -p src/out && echo ok > src/out/result.txt && echo done > done.txt'\n";
  for (const char* u : {kAlice, kBob}) {
    fs::create_directories(dir_ / u / "self" / "src");
    Write(std::string(u) + "/self/self.yaml", probe);
    Write(std::string(u) + "/self/src/code.py", "print('hi')\n");
  }
  for (int i = 0; i < 12; ++i) {  // past the copy limit of 8 files: Alice's is an overlay
    Write(std::string(kAlice) + "/self/src/m" + std::to_string(i) + ".py", "x = 1\n");
  }
  for (const char* u : {kAlice, kBob}) {
    Sh("chown -R " + std::string(u) + ": " + Home(u) + "/self && chmod -R go-rwx " + Home(u) +
       "/self");
  }
  std::map<std::string, int64_t> run_of;
  for (const char* u : {kAlice, kBob}) {
    auto r = As(u, {"run", "self.yaml"}, Home(u) + "/self");
    ASSERT_EQ(r.exit_code, 0) << u << ": " << r.out << r.err << ReadFile((dir_ / "serve.err").string());
    auto ls = As(u, {"ls", "--mine", "--json"});
    for (const auto& run : nlohmann::json::parse(ls.out)) {
      if (run["state"] == "succeeded") run_of[u] = run["id"].get<int64_t>();
    }
    ASSERT_TRUE(run_of.count(u)) << ls.out;
  }
  for (const char* u : {kAlice, kBob}) {
    SCOPED_TRACE(u);
    const int64_t id = run_of[u];
    auto user = LookupUserByName(u);
    ASSERT_TRUE(user.ok());
      // A user's run is always mounted: what it wrote is in its overlay's changes/.
    const std::string dir = store_ + "/changes/" + std::to_string(id);
    ASSERT_EQ(ReadFile(dir + "/done.txt"), "done\n") << dir;
    EXPECT_EQ(ReadFile(dir + "/uid.txt"), std::to_string(user->uid) + "\n");
    const std::string groups = ReadFile(dir + "/groups.txt");
    const int64_t team = *LookupGroup(std::string(u) == kAlice ? kVision : kNlp);
    EXPECT_NE((" " + groups).find(" " + std::to_string(team)), std::string::npos) << groups;
    EXPECT_EQ((" " + groups).find(" 0 "), std::string::npos) << groups;  // not root's group
    EXPECT_EQ(ReadFile(dir + "/home.txt"), user->home + "\n");
    const std::string env = ReadFile(dir + "/env.txt");
    EXPECT_EQ(env.find("DROVER_TEST_DAEMONS_OWN"), std::string::npos) << env;
    EXPECT_NE(env.find("USER=" + std::string(u)), std::string::npos) << env;
    EXPECT_NE(ReadFile(dir + "/token.txt").find("Permission denied"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir + "/root.txt"));
    EXPECT_FALSE(fs::exists("/root/drover-was-here"));
    EXPECT_EQ(ReadFile(dir + "/src/out/result.txt"), "ok\n");
    EXPECT_EQ(ReadFile(dir + "/src/code.py"), "print('hi')\nmore\n");
    // Every file it wrote, its folder and its logs are the submitter's.
    for (const std::string& f : {dir, dir + "/done.txt", dir + "/src/out/result.txt",
                                 dir + "/src/code.py"}) {
      struct stat st {};
      ASSERT_EQ(::lstat(f.c_str(), &st), 0) << f;
      EXPECT_EQ(static_cast<int64_t>(st.st_uid), user->uid) << f;
    }
    auto show = As(u, {"show", std::to_string(id), "--json"});
    ASSERT_EQ(show.exit_code, 0) << show.err;
    const auto shown = nlohmann::json::parse(show.out);
    const std::string log = shown["attempt_list"][0]["stdout_path"].get<std::string>();
    struct stat st {};
    ASSERT_EQ(::stat(log.c_str(), &st), 0) << log;
    EXPECT_EQ(static_cast<int64_t>(st.st_uid), user->uid);
    EXPECT_EQ(st.st_mode & 077, 0u) << "a run's logs are its submitter's alone";
    // Their folder stays the daemon's: nobody may put a link where the next logs are opened.
    ASSERT_EQ(::stat(fs::path(log).parent_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 0777, 0711u);
    // Its submitter reads it straight from the store; the other user cannot.
    const char* other = std::string(u) == kAlice ? kBob : kAlice;
    const std::string cat = "/usr/bin/setpriv --reuid=%s --regid=%s --init-groups cat " + log +
                            " >/dev/null 2>&1";
    char cmd[4096];
    std::snprintf(cmd, sizeof cmd, cat.c_str(), u, u);
    EXPECT_EQ(Sh(cmd), 0) << "the submitter reads their own log";
    std::snprintf(cmd, sizeof cmd, cat.c_str(), other, other);
    EXPECT_NE(Sh(cmd), 0) << "another user cannot";
  }
  // Each user's snapshot is theirs, and nobody else may enter it.
  int theirs = 0;
  for (const auto& e : fs::directory_iterator(store_ + "/snapshots")) {
    if (e.path().filename().string().starts_with(".")) continue;
    struct stat st {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    if (st.st_uid != 0) {
      ++theirs;
      EXPECT_EQ(st.st_mode & 077, 0u) << e.path();
    }
  }
  EXPECT_GE(theirs, 2);
}

TEST_F(SharedDaemonTest, TeamsDecideTheShareAForgedGroupIsRefusedAndAFloodKeepsItsQuota) {
  // Alice (vision) may not count her runs against Bob's team.
  auto forged = As(kAlice, {"submit", "forged.yaml"}, Home(kAlice));
  EXPECT_NE(forged.exit_code, 0);
  EXPECT_NE(forged.err.find(std::string("group: ") + kNlp + " is not " + kAlice + "'s"),
            std::string::npos)
      << forged.err;
  // A dry run says so too, before anything is submitted.
  auto dry = As(kAlice, {"run", "forged.yaml", "--dry-run"}, Home(kAlice));
  EXPECT_NE(dry.exit_code, 0) << dry.out;
  EXPECT_NE(dry.err.find("is not " + std::string(kAlice) + "'s"), std::string::npos) << dry.err;
  // Bob may: it is his team.
  EXPECT_EQ(As(kBob, {"submit", "forged.yaml"}, Home(kBob)).exit_code, 0);

  // Alice floods both GPUs (idle quota is borrowed); once Bob's run waits, his team is within
  // its quota of 1 GPU and hers past it: one of hers is stopped and requeued, his starts.
  ASSERT_EQ(As(kAlice, {"submit", "flood.yaml"}, Home(kAlice)).exit_code, 0);
  auto running_of = [&](const std::string& user) {
    auto r = As(kAdmin, {"ls", "--user", user, "--state", "running", "--json"});
    return r.exit_code == 0 ? nlohmann::json::parse(r.out).size() : size_t{99};
  };
  for (int i = 0; i < 100 && running_of(kAlice) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(running_of(kAlice), 2u);  // both GPUs, borrowed
  ASSERT_EQ(As(kBob, {"submit", "flood.yaml"}, Home(kBob)).exit_code, 0);
  size_t bob = 0, alice = 0;
  for (int i = 0; i < 150; ++i) {
    bob = running_of(kBob);
    alice = running_of(kAlice);
    if (bob == 1 && alice == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(bob, 1u) << As(kAdmin, {"ls"}).out << ReadFile((dir_ / "serve.err").string());
  EXPECT_EQ(alice, 1u);
  // And it holds: a second look a moment later finds each team at its quota.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(running_of(kBob), 1u);
  EXPECT_EQ(running_of(kAlice), 1u);

  // GPU time by user and by team.
  auto usage = As(kBob, {"usage", "--since", "1h", "--json"});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  std::map<std::string, std::string> team_of;
  const auto parsed = nlohmann::json::parse(usage.out);
  for (const auto& u : parsed["usage"]) {
    team_of[u["user"].get<std::string>()] = u["group"].get<std::string>();
    EXPECT_GT(u["gpu_hours"].get<double>(), 0.0);
  }
  EXPECT_EQ(team_of[kAlice], kVision) << usage.out;
  EXPECT_EQ(team_of[kBob], kNlp) << usage.out;
}

TEST_F(SharedDaemonTest, ADaemonThatIsNotSharedServesOnlyItsOwnUser) {
  // Alice's own daemon on her own store: Bob is refused (the socket is hers, 0600).
  const std::string own = Home(kAlice) + "/own-store";
  pid_t alices_daemon = Spawn({"/usr/bin/setpriv", "--reuid=" + std::string(kAlice),
                               "--regid=" + std::string(kAlice), "--init-groups",
                               testing::DroverBin(), "--store", own, "serve", "--listen",
                               "127.0.0.1:0", "--gpu-leases", "off"},
                              (dir_ / "own.out").string(), (dir_ / "own.err").string(),
                              Home(kAlice));
  for (int i = 0; i < 200 && !fs::exists(own + "/daemon.json"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(own + "/daemon.json")) << ReadFile((dir_ / "own.err").string());
  struct stat st {};
  ASSERT_EQ(::stat((own + "/daemon.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string saved = store_;
  store_ = own;
  auto bob = As(kBob, {"ls"});
  auto alice = As(kAlice, {"ls"});
  store_ = saved;
  ::kill(alices_daemon, SIGTERM);
  testing::WaitExit(alices_daemon);
  EXPECT_NE(bob.exit_code, 0) << bob.out;
  EXPECT_EQ(alice.exit_code, 0) << alice.err;
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

class OnDemandDaemonTest : public testing::CliFixture {
 protected:
  pid_t Serve(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--store", store_, "serve", "--listen", "127.0.0.1:0",
                                     "--gpu-leases", "off"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_t pid = testing::SpawnDrover(args, (dir_ / "serve.out").string(),
                                     (dir_ / "serve.err").string(), (dir_ / "code").string());
    for (int i = 0; i < 200 && !fs::exists(store_ + "/daemon.json"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(fs::exists(store_ + "/daemon.json")) << ReadFile((dir_ / "serve.err").string());
    return pid;
  }
  // Whether `pid` has exited within `ms` (reaped), and its exit code.
  static bool ExitsWithin(pid_t pid, int ms, int* code) {
    for (int waited = 0; waited < ms; waited += 50) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

TEST_F(OnDemandDaemonTest, AnIdleDaemonExitsOnceItsRunsAreDone) {
  pid_t daemon = Serve({"--idle-exit", "1s"});
  Write("code/spec.yaml", "name: short\ncommand: sleep 3\n");
  auto sub = testing::RunDrover({"--store", store_, "submit", "spec.yaml"}, (dir_ / "code").string());
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  int code = -1;
  // Busy while the run runs (3 s), idle a second after.
  EXPECT_FALSE(ExitsWithin(daemon, 2500, &code));
  ASSERT_TRUE(ExitsWithin(daemon, 8000, &code)) << ReadFile((dir_ / "serve.out").string());
  EXPECT_EQ(code, 0);
  EXPECT_NE(ReadFile((dir_ / "serve.err").string()).find("idle for"), std::string::npos);
  auto ls = testing::RunDrover({"--store", store_, "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0);
  EXPECT_NE(ls.out.find("succeeded"), std::string::npos) << ls.out;
}

TEST_F(OnDemandDaemonTest, ADaemonWhoseStoreIsRemovedStopsItsRunsAndExits) {
  pid_t daemon = Serve({});
  const std::string marker = (dir_ / "still-running").string();
  Write("code/spec.yaml", "name: long\ncommand: sh -c \"sleep 60; touch " + marker + "\"\n");
  auto sub = testing::RunDrover({"--store", store_, "submit", "spec.yaml"}, (dir_ / "code").string());
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  fs::remove_all(store_);
  int code = -1;
  ASSERT_TRUE(ExitsWithin(daemon, 10'000, &code)) << "the daemon outlived its store";
  EXPECT_NE(ReadFile((dir_ / "serve.err").string()).find("is gone"), std::string::npos);
  // Its run was stopped, not left to run for nobody.
  EXPECT_NE(Sh("pgrep -f '[s]leep 60; touch " + marker + "' >/dev/null"), 0);
}

// Issue 40: a first command left a GPU-less daemon behind (started on demand with no GPUs), and
// the next one's --fake-gpus went nowhere: its runs were refused for want of GPUs. Now the joined
// daemon is checked against what the command asks for, and the refusal says what to type.
TEST_F(OnDemandDaemonTest, AGpuLessDaemonIsNotSilentlyJoinedByACommandThatAsksForGpus) {
  Write("code/cpu.yaml", "name: cpu\ncommand: \"true\"\nresources: {gpus: 0}\n");
  Write("code/gpu.yaml", "name: gpu\ncommand: \"true\"\nresources: {gpus: 1}\n");
  const std::string code = (dir_ / "code").string();
  ::unsetenv("DROVER_FOREGROUND");
  // Started for a CPU run with no --fake-gpus: this machine's GPUs (none here, as in CI).
  auto first =
      testing::RunDrover({"--store", store_, "run", "cpu.yaml", "--gpu-leases", "off"}, code);
  auto joined = testing::RunDrover(
      {"--store", store_, "run", "gpu.yaml", "--fake-gpus", "2x16GiB", "--gpu-leases", "off"},
      code);
  auto stop = testing::RunDrover({"--store", store_, "daemon", "stop"});
  auto again = testing::RunDrover({"--store", store_, "run", "gpu.yaml", "--fake-gpus", "2x16GiB",
                                   "--gpu-leases", "off", "--idle-exit", "1s"},
                                  code);
  ::setenv("DROVER_FOREGROUND", "1", 1);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(joined.exit_code, 0) << joined.out;
  EXPECT_NE(joined.err.find(", not the --fake-gpus 2x16GiB asked for"), std::string::npos)
      << joined.err;
  EXPECT_NE(joined.err.find("drover daemon stop"), std::string::npos) << joined.err;
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("run 2 succeeded"), std::string::npos) << again.out;  // none made by the refusal
  for (int i = 0; i < 100 && fs::exists(store_ + "/daemon.json"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the idle daemon goes
  }
}

// Issue 40: a second `drover run` joined the daemon the first one left, and Ctrl-C then
// detached, so `timeout -s INT 8 drover run ...` left the sweep running; `drover serve` refused
// with "another drover (pid N) is running experiments" and no word of the daemon or of how to
// stop it. Now Ctrl-C cancels what the command submitted, started or joined; `drover daemon
// status` says what the daemon runs and how it exits; `drover serve` names it and the command
// that stops it.
TEST_F(OnDemandDaemonTest, AJoinedDaemonIsNamedByServeAndCtrlCCancelsWhatTheRunSubmitted) {
  Write("code/quick.yaml", "name: quick\ncommand: \"true\"\nresources: {gpus: 0}\n");
  Write("code/long.yaml",
        "name: long\nshell: true\ncommand: sleep 300; echo joined-ctrl-c\nresources: {gpus: 0}\n");
  const std::string code = (dir_ / "code").string();
  ::unsetenv("DROVER_FOREGROUND");
  auto first = testing::RunDrover(
      {"--store", store_, "run", "quick.yaml", "--gpu-leases", "off", "--idle-exit", "5m"}, code);
  const std::string out = (dir_ / "long.out").string(), err = (dir_ / "long.err").string();
  pid_t second = testing::SpawnDrover({"--store", store_, "run", "long.yaml"}, out, err, code);
  ::setenv("DROVER_FOREGROUND", "1", 1);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  for (int i = 0; i < 400 && ReadFile(out).find("Ctrl-C cancels") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_NE(ReadFile(out).find("in the daemon serving the store"), std::string::npos) << ReadFile(out);
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 200; ++i) {
    auto r = (*store)->GetRun(2);
    if (r.ok() && *r && (*r)->state == RunState::kRunning) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  auto status = testing::RunDrover({"--store", store_, "daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("1 running, 0 queued"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("it exits after 5m00s with nothing queued or running and no request"),
            std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("drover daemon stop --store " + store_), std::string::npos)
      << status.out;
  auto serve = testing::RunDrover({"--store", store_, "serve", "--fake-gpus", "1x8GiB"});
  EXPECT_NE(serve.exit_code, 0);
  const int pid = nlohmann::json::parse(ReadFile(store_ + "/daemon.json"))["pid"].get<int>();
  EXPECT_NE(serve.err.find("a drover daemon (pid " + std::to_string(pid) + ") already serves"),
            std::string::npos)
      << serve.err;
  EXPECT_NE(serve.err.find("it exits after 5m00s"), std::string::npos) << serve.err;
  EXPECT_NE(serve.err.find("drover daemon stop --store"), std::string::npos) << serve.err;
  ::kill(second, SIGINT);
  EXPECT_EQ(testing::WaitExit(second), 130) << ReadFile(err);
  RunState state = RunState::kRunning;
  for (int i = 0; i < 200 && state != RunState::kCancelled; ++i) {
    state = (*store)->GetRun(2).value()->state;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(state, RunState::kCancelled) << "Ctrl-C of a run that joined the daemon";
  EXPECT_NE(Sh("pgrep -f '[j]oined-ctrl-c' >/dev/null"), 0) << "the cancelled run still runs";
  auto stop = testing::RunDrover({"--store", store_, "daemon", "stop"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  auto none = testing::RunDrover({"--store", store_, "daemon", "status"});
  EXPECT_NE(none.out.find("no drover daemon serves the store"), std::string::npos) << none.out;
}

// Issue 40: plain `drover run` follows the daemon by the runs' counts and lists the runs once at
// the end, and the report it writes then reads every attempt it shows in one request (it asked
// once per run). What it shows is what the same report written from the store shows.
TEST_F(OnDemandDaemonTest, RunFollowsToTheEndAndItsReportIsTheStoresReport) {
  // 20 runs (more than a few: the experiment's attempts in one request), each with a curve;
  // two fail.
  Write("code/spec.yaml",
        "name: twenty\ncommand: sh -c \"echo loss=0.{i}; test {i} -ne 3 && test {i} -ne 17\"\n"
        "params: {i: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]}\n"
        "max_parallel: 4\nresources: {gpus: 0, cpus: 1}\n");
  ::unsetenv("DROVER_FOREGROUND");
  auto run = testing::RunDrover({"--store", store_, "run", "spec.yaml", "--quiet", "--cpus", "4"},
                                (dir_ / "code").string());
  ::setenv("DROVER_FOREGROUND", "1", 1);
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;  // two runs failed
  EXPECT_EQ(run.out, "");                              // --quiet
  ASSERT_TRUE(fs::exists(store_ + "/daemon.json")) << run.err;
  const std::string report = store_ + "/reports/twenty-1.html";
  ASSERT_TRUE(fs::exists(report)) << run.err;
  const std::string through_daemon = ReadFile(report);
  EXPECT_NE(through_daemon.find("2 attempts of 2 runs did not succeed"), std::string::npos);
  auto ls = testing::RunDrover({"--store", store_, "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  const auto runs = nlohmann::json::parse(ls.out);
  ASSERT_EQ(runs.size(), 20u) << ls.out;
  int failed = 0;
  for (const auto& r : runs) failed += r["state"] == "failed";
  EXPECT_EQ(failed, 2) << ls.out;

  auto stop = testing::RunDrover({"--store", store_, "daemon", "stop"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  ASSERT_FALSE(fs::exists(store_ + "/daemon.json"));
  auto again = testing::RunDrover({"--store", store_, "report", "twenty"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::string from_store = ReadFile(report);
  // The same page but for the time it was written.
  auto without_footer = [](std::string html) {
    const size_t at = html.find("<footer>");
    const size_t end = html.find("</footer>", at);
    return at == std::string::npos || end == std::string::npos ? html
                                                               : html.erase(at, end - at);
  };
  EXPECT_EQ(without_footer(through_daemon), without_footer(from_store));
}

TEST_F(OnDemandDaemonTest, RunStartsADaemonForItsStoreThatExitsOnceIdleAndForegroundDoesNot) {
  Write("code/spec.yaml", "name: two\ncommand: sh -c \"echo loss=0.{i}\"\nparams: {i: [1, 2]}\n");
  // With --foreground: the engine runs in this process, and no daemon is left.
  auto fg = testing::RunDrover({"--store", store_, "run", "spec.yaml", "--foreground",
                                "--fake-gpus", "1x8GiB"},
                               (dir_ / "code").string());
  ASSERT_EQ(fg.exit_code, 0) << fg.err;
  EXPECT_EQ(fg.out.find("daemon"), std::string::npos) << fg.out;
  EXPECT_FALSE(fs::exists(store_ + "/daemon.json"));
  // By default (as a user runs it): a daemon is started for the store and followed.
  ::unsetenv("DROVER_FOREGROUND");
  auto run = testing::RunDrover({"--store", store_, "run", "spec.yaml", "--fake-gpus", "1x8GiB",
                                 "--idle-exit", "1s", "--rerun"},
                                (dir_ / "code").string());
  ::setenv("DROVER_FOREGROUND", "1", 1);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("in a daemon started for the store"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Ctrl-C cancels"), std::string::npos) << run.out;
  const auto info = nlohmann::json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
  ASSERT_TRUE(info.is_object());
  const int pid = info["pid"].get<int>();
  EXPECT_EQ(::kill(pid, 0), 0) << "the daemon serves the store after the run";
  auto ls = testing::RunDrover({"--store", store_, "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 4u) << ls.out;
  // Idle, it goes by itself (its parent is gone: it is not ours to reap).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(pid, 0) != 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << ReadFile(store_ + "/serve.log");
  EXPECT_NE(ReadFile(store_ + "/serve.log").find("idle for"), std::string::npos);
}

}  // namespace
}  // namespace drover
