// End to end with real processes: bad specs, literal argv words, timeouts and Ctrl-C with no
// process left behind.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::RunDrover;
using Json = nlohmann::json;

class CliTest : public testing::CliFixture {
 protected:
  // Live processes whose environment holds `marker` (from /proc): every descendant of a run
  // inherits the spec's env, so this finds leftovers however they were started.
  // Shims (drover's small supervisor per run) are counted only with `with_shims`.
  static int CountProcesses(const std::string& marker, bool with_shims = false) {
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmd = testing::ReadFile(e.path() / "environ");
      std::string stat = testing::ReadFile(e.path() / "stat");
      bool zombie = stat.find(") Z ") != std::string::npos;
      std::string argv = testing::ReadFile(e.path() / "cmdline");
      bool shim = argv.find("__shim") != std::string::npos;
      if (!zombie && cmd.find(marker) != std::string::npos && (with_shims || !shim)) ++n;
    }
    return n;
  }
};

// A spec that leaves resources.gpus out, on a machine with GPUs, is told at the submit that its
// runs will see none, through the foreground, plain `drover run` (a daemon started for the
// store) and `drover submit`; `gpus: 0` written says the CPU is meant and is not told.
TEST_F(CliTest, RunsThatWillSeeNoGpuOnAMachineWithGpusAreToldAtTheSubmit) {
  const std::string spec = Write("cpu.yaml", "name: cpu\ncommand: \"true {i}\"\nparams: {i: [1, 2]}\n");
  const std::string said = "drover: note: the runs ask for no GPU (the spec does not set "
                           "resources.gpus), so they see none (CUDA_VISIBLE_DEVICES is empty) "
                           "though this machine has 2: write resources: {gpus: 1}";
  auto fg = RunDrover({"run", spec, "--store", store_, "--fake-gpus", "2x16GiB"});
  ASSERT_EQ(fg.exit_code, 0) << fg.out << fg.err;
  EXPECT_NE(fg.err.find(said), std::string::npos) << fg.err;
  auto meant = RunDrover({"run", spec, "--store", store_, "--fake-gpus", "2x16GiB", "--rerun",
                          "--set", "resources.gpus=0"});
  ASSERT_EQ(meant.exit_code, 0) << meant.out << meant.err;
  EXPECT_EQ(meant.err.find("drover: note:"), std::string::npos) << meant.err;

  // Plain `drover run`, then `drover submit` to the daemon it started.
  const std::string daemon_store = (dir_ / "daemon-store").string();
  ::unsetenv("DROVER_FOREGROUND");
  auto plain = RunDrover({"run", spec, "--store", daemon_store, "--fake-gpus", "2x16GiB"});
  auto submit = RunDrover({"submit", spec, "--store", daemon_store, "--rerun", "--json"});
  ::setenv("DROVER_FOREGROUND", "1", 1);
  testing::StopDaemonOf(daemon_store);
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_NE(plain.err.find(said), std::string::npos) << plain.err;
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  EXPECT_NE(submit.err.find(said), std::string::npos) << submit.err;
  const Json reply = Json::parse(submit.out, nullptr, false);
  ASSERT_TRUE(reply.is_object()) << submit.out;
  ASSERT_EQ(reply["notes"].size(), 1u) << submit.out;
}

TEST_F(CliTest, BadSpecsGiveDocumentedErrors) {
  struct Case {
    std::string yaml, expect;
  };
  std::vector<Case> cases = {
      {"name: x\ncommand: [echo\n", "bad.yaml:3:1: YAML syntax error"},
      {"name: x\ncommand: echo {lr}\nprams: {lr: 1}\n",
       "bad.yaml:3:1: unknown key 'prams'; did you mean 'params'?"},
      {"name: x\ncommand: echo {lrr}\nparams: {lr: 1}\n",
       "command uses {lrr} but params has no 'lrr'"},
      {"name: x\ncommand: echo\nretries: three\n", "bad.yaml:3:10: retries must be"},
  };
  for (const auto& c : cases) {
    std::string path = Write("bad.yaml", c.yaml);
    auto r = RunDrover({"run", path, "--store", store_});
    EXPECT_EQ(r.exit_code, 2) << c.yaml;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << "got: " << r.err;
  }
  EXPECT_FALSE(fs::exists(store_ + "/drover.db"));  // nothing was stored for a bad spec
}

TEST_F(CliTest, HostileInputIsRefusedOrShownNeverAnAbort) {
  // Ten axes of ten values: an error from the count, at once, not 10^10 runs in memory.
  std::string yaml = "name: huge\nworkdir: code\ncommand: echo {a0}\nparams:\n";
  for (int i = 0; i < 10; ++i) yaml += "  a" + std::to_string(i) + ": [0,1,2,3,4,5,6,7,8,9]\n";
  auto huge = RunDrover({"run", Write("huge.yaml", yaml), "--dry-run"});
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_NE(huge.err.find("params expand to 10000000000 runs"), std::string::npos) << huge.err;
  // A device given as the spec is refused before it is read.
  auto zero = RunDrover({"run", "/dev/zero", "--dry-run"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("'/dev/zero' is not a regular file"), std::string::npos) << zero.err;
  // Bytes that are not UTF-8: refused in a --set (they could not be stored), shown with
  // replacement characters in logs (they are only displayed).
  std::string path = Write("u.yaml", "name: u\nworkdir: code\ncommand: echo {lr}\nparams: {lr: [1]}\n");
  auto set = RunDrover({"run", path, "--dry-run", "--json", "--set", "lr=\xff"});
  EXPECT_EQ(set.exit_code, 2);
  EXPECT_NE(set.err.find("is not UTF-8 text"), std::string::npos) << set.err;
  std::string printer = Write("p.yaml",
                              "name: p\nworkdir: code\ncommand: [sh, -c, 'printf \"\\377ok\\n\"']\n");
  auto run = RunDrover({"run", printer, "--store", store_, "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto logs = RunDrover({"logs", "1", "--json", "--store", store_});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  Json j = Json::parse(logs.out);
  ASSERT_EQ(j["lines"].size(), 1u);
  EXPECT_EQ(j["lines"][0], "\xef\xbf\xbdok");
}

TEST_F(CliTest, AStoreOnAReadOnlyFileSystemCanBeRead) {
  // The store mounted read-only (a bind mount in a user and mount namespace of its own, where
  // root's rights do not help either): ls, show, compare and report read it; a run says why not.
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no user namespaces here (unshare -rm), so no read-only mount to test on";
  }
  std::string spec = Write("ro.yaml", "name: ro\nworkdir: code\ncommand: \"echo {i}\"\n"
                                      "params: {i: [1, 2]}\nresources: {gpus: 0}\n");
  ASSERT_EQ(RunDrover({"run", spec, "--store", store_, "--quiet"}).exit_code, 0);
  const std::string out = Write("ro.out", ""), err = Write("ro.err", "");
  auto read_only = [&](const std::string& args) {
    const std::string cmd = "unshare -rm sh -c 'mount --bind -o ro " + store_ + " " + store_ +
                            " && exec " + testing::DroverBin() + " --store " + store_ + " " +
                            args + "' >" + out + " 2>" + err;
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(read_only("ls"), 0) << testing::ReadFile(err);
  EXPECT_NE(testing::ReadFile(out).find("succeeded"), std::string::npos);
  EXPECT_EQ(read_only("show 2"), 0) << testing::ReadFile(err);
  EXPECT_EQ(read_only("compare 1"), 0) << testing::ReadFile(err);
  EXPECT_EQ(read_only("report 1 -o " + (dir_ / "ro.html").string()), 0) << testing::ReadFile(err);
  EXPECT_TRUE(fs::exists(dir_ / "ro.html"));
  EXPECT_NE(read_only("run " + spec), 0);
  EXPECT_NE(testing::ReadFile(err).find("Read-only file system"), std::string::npos)
      << testing::ReadFile(err);
}

TEST_F(CliTest, AFullDiskUnderTheStoreCostsNoRunAndNoPoint) {
  // The store on a 3 MiB tmpfs of its own (a user and mount namespace), filled up while a run
  // prints a metric line every 0.1 s, and freed 3 s later: a real ENOSPC, so SQLITE_FULL at the
  // commit. drover run says so, keeps the run, and stores every line that reached the log once.
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no user namespaces here (unshare -rm), so no small file system to fill";
  }
  Write("code/t.sh",
        "i=0\nwhile [ $i -lt 60 ]; do echo \"{\\\"step\\\": $i, \\\"loss\\\": 0.$i}\" || true; "
        "i=$((i+1)); sleep 0.1; done\n");
  const std::string spec = Write("full.yaml", "name: full\nworkdir: code\ncommand: /bin/sh t.sh\n"
                                              "resources: {gpus: 0}\n");
  const std::string store = (dir_ / "small").string();
  fs::create_directories(store);
  const std::string out = (dir_ / "full.out").string();
  const std::string script = Write(
      "full.sh", "mount -t tmpfs -o size=3m tmpfs " + store + " || exit 90\n" +
                     testing::DroverBin() + " run " + spec + " --store " + store + " >" + out +
                     " 2>&1 &\npid=$!\nsleep 1.5\n"
                     "dd if=/dev/zero of=" + store + "/filler bs=64k 2>/dev/null\n"
                     "sleep 3\nrm " + store + "/filler\nwait $pid\ncode=$?\n"
                     "sqlite3 " + store + "/drover.db 'SELECT count(*), count(DISTINCT step), "
                     "(SELECT state FROM runs WHERE id = 1), (SELECT count(*) FROM alerts WHERE "
                     "kind = \"store_unavailable\") FROM metrics' >>" + out + "\n"
                     "echo lines $(wc -l < " + store + "/logs/1/1-1.out) >>" + out + "\n"
                     "exit $code\n");
  const int status = std::system(("unshare -rm sh " + script).c_str());
  const std::string said = testing::ReadFile(out);
  ASSERT_TRUE(WIFEXITED(status)) << said;
  ASSERT_NE(WEXITSTATUS(status), 90) << "could not mount a tmpfs: " << said;
  EXPECT_EQ(WEXITSTATUS(status), 0) << said;
  EXPECT_NE(said.find("drover: cannot write to the store: committing a transaction: database or "
                      "disk is full"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("the store commits again after"), std::string::npos) << said;
  EXPECT_NE(said.find("run 1 succeeded"), std::string::npos) << said;
  // Every line in the log is one point, none twice; the stall is on record.
  EXPECT_NE(said.find("60|60|succeeded|1\nlines 60"), std::string::npos) << said;
}

TEST_F(CliTest, AFullDiskBeforeARunStartsChargesItNothing) {
  // The store on a 4 MiB tmpfs of its own; the code holds a 900 KiB file, so each working copy
  // takes 900 KiB. Once run 1 runs, the disk is filled to 300 KiB short of full: the store still
  // commits (small writes), but run 2's working copy cannot be made (a real ENOSPC). It waits,
  // charged nothing, and starts once the filler is gone.
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no user namespaces here (unshare -rm), so no small file system to fill";
  }
  Write("code/data.bin", std::string(900 * 1024, 'x'));
  Write("code/t.sh", "sleep 2\n");
  const std::string spec = Write("hold.yaml", "name: hold\nworkdir: code\n"
                                              "command: /bin/sh t.sh {i}\nparams: {i: [1, 2]}\n"
                                              "max_parallel: 1\nresources: {gpus: 0}\n");
  const std::string store = (dir_ / "small").string();
  fs::create_directories(store);
  const std::string out = (dir_ / "hold.out").string();
  const std::string script = Write(
      "hold.sh", "mount -t tmpfs -o size=4m tmpfs " + store + " || exit 90\n" +
                     testing::DroverBin() + " run " + spec + " --store " + store + " >" + out +
                     " 2>&1 &\npid=$!\n"
                     "i=0; while [ ! -f " + store + "/runs/1/data.bin ] && [ $i -lt 400 ]; do "
                     "sleep 0.05; i=$((i+1)); done\n"
                     // 300 KiB set aside, the rest filled to ENOSPC, the 300 KiB freed: no
                     // arithmetic on df's figures, which a busy machine can make stale.
                     "dd if=/dev/zero of=" + store + "/reserve bs=1k count=300 2>/dev/null\n"
                     "dd if=/dev/zero of=" + store + "/filler bs=4k 2>/dev/null\n"
                     "rm " + store + "/reserve\n"
                     "echo free after the fill: $(df --output=avail -k " + store +
                     " | tail -1) KiB >>" + out + ".df\n"
                     "sleep 5\nrm " + store + "/filler\nwait $pid\ncode=$?\n"
                     "cat " + out + ".df >>" + out + "\n"
                     "sqlite3 " + store + "/drover.db 'SELECT group_concat(attempts), "
                     "group_concat(state), (SELECT count(*) FROM alerts WHERE kind = "
                     "\"starts_held\") FROM runs' >>" + out + "\n"
                     "ls " + store + "/runs >>" + out + "\nexit $code\n");
  const int status = std::system(("unshare -rm sh " + script).c_str());
  const std::string said = testing::ReadFile(out);
  ASSERT_TRUE(WIFEXITED(status)) << said;
  ASSERT_NE(WEXITSTATUS(status), 90) << "could not mount a tmpfs: " << said;
  EXPECT_EQ(WEXITSTATUS(status), 0) << said;
  // The premise: less room than one working copy once the disk was filled.
  const size_t free_at = said.find("free after the fill: ");
  ASSERT_NE(free_at, std::string::npos) << said;
  EXPECT_LT(std::atoi(said.c_str() + free_at + 21), 900) << said;
  EXPECT_NE(said.find("drover: cannot prepare run 2 to start: cannot copy snapshot"),
            std::string::npos)
      << said;
  // The system's words: std::filesystem::copy reports a full tmpfs as an I/O error here.
  EXPECT_TRUE(said.find("No space left on device") != std::string::npos ||
              said.find("Input/output error") != std::string::npos)
      << said;
  EXPECT_NE(said.find("drover: runs start again after"), std::string::npos) << said;
  // One attempt each, both succeeded, the hold on record, no half copy left.
  EXPECT_NE(said.find("1,1|succeeded,succeeded|1\n"), std::string::npos) << said;
  EXPECT_EQ(said.find(".partial"), std::string::npos) << said;
}

TEST_F(CliTest, ValuesArePassedLiterallyWithoutAShell) {
  std::string path = Write("lit.yaml",
                           "name: lit\nworkdir: code\ncommand: printf '%s|' {x}\n"
                           "params: {x: '; touch pwned; echo $HOME'}\n");
  auto r = RunDrover({"run", path, "--store", store_, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(testing::ReadFile(attempts[0].stdout_path), "; touch pwned; echo $HOME|");
  EXPECT_FALSE(fs::exists(fs::path(attempts[0].workdir) / "pwned"));
}

TEST_F(CliTest, DryRunAndSetOverrides) {
  std::string path = Write("g.yaml",
                           "name: g\nworkdir: code\ncommand: echo {a} {b}\n"
                           "params: {a: [1, 2], b: [x, y, z]}\n");
  auto r = RunDrover({"run", path, "--dry-run", "--json", "--set", "b=[q]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["argv"], Json({"echo", "2", "q"}));
  auto bad = RunDrover({"run", path, "--dry-run", "--set", "nope"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--set 'nope'"), std::string::npos) << bad.err;
}

// A dry run says whether the runs could ever start here, as the submit would, and submits
// nothing either way.
TEST_F(CliTest, DryRunChecksThatRunsFit) {
  std::string nine = Write("nine.yaml", "name: nine\nworkdir: code\ncommand: \"true\"\n"
                                        "resources: {gpus: 9}\n");
  auto r = RunDrover({"run", nine, "--dry-run", "--fake-gpus", "2x16GiB", "--store", store_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("each run needs 9 GPUs but this machine has 2; lower resources.gpus"),
            std::string::npos)
      << r.err;
  std::string big = Write("big.yaml", "name: big\nworkdir: code\ncommand: \"true\"\n"
                                      "resources: {gpus: 1, gpu_memory: 15.5GiB}\n");
  r = RunDrover({"run", big, "--dry-run", "--fake-gpus", "2x16GiB", "--store", store_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("scheduler.gpu_reserve"), std::string::npos) << r.err;
  r = RunDrover({"run", big, "--dry-run", "--fake-gpus", "2x24GiB", "--store", store_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("big: 1 run"), std::string::npos) << r.out;
  std::string cpus = Write("cpus.yaml", "name: cpus\nworkdir: code\ncommand: \"true\"\n"
                                        "resources: {gpus: 0, cpus: 4}\n");
  r = RunDrover({"run", cpus, "--dry-run", "--cpus", "2", "--store", store_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("each run needs 4 CPU slots but drover has 2"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(store_ + "/drover.db"));

  // With a daemon serving the store, its pool decides (2 fake GPUs of 24 GiB), and nothing is
  // recorded either way.
  pid_t daemon = testing::StartDaemon(store_, dir_.string(), {"--fake-gpus", "2x24GiB"});
  r = RunDrover({"run", nine, "--dry-run", "--store", store_});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("each run needs 9 GPUs but this machine has 2"), std::string::npos) << r.err;
  r = RunDrover({"run", big, "--dry-run", "--store", store_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("big: 1 run (dry run: nothing was submitted)"), std::string::npos) << r.out;
  auto ls = RunDrover({"ls", "--experiments", "--json", "--store", store_});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out.find("\"big\""), std::string::npos) << ls.out;
  kill(daemon, SIGTERM);
  EXPECT_EQ(testing::WaitExit(daemon), 0);
}

// `-` reads the spec from standard input: a generated spec needs no file.
TEST_F(CliTest, ASpecPipedIn) {
  auto r = testing::RunDroverWithInput(
      {"run", "-", "--dry-run", "--json"},
      "name: piped\ncommand: echo {a}\nparams: {a: [1, 2]}\nresources: {gpus: 0}\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["runs"].size(), 2u);
  r = testing::RunDroverWithInput({"run", "-", "--store", store_, "--quiet"},
                                  "name: piped\nworkdir: code\ncommand: \"true\"\n"
                                  "resources: {gpus: 0}\n",
                                  dir_.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = testing::RunDroverWithInput({"run", "-", "--dry-run"}, "name: x\n\tcommand: y\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("<stdin>:2:"), std::string::npos) << r.err;
}

// A run finds the folder its spec came from in $DROVER_PROJECT_DIR: data the snapshot left out
// (ignored by .gitignore) is read from there, not from the working copy.
TEST_F(CliTest, ARunKnowsTheProjectFolder) {
  fs::create_directories(dir_ / "proj" / "data");
  std::ofstream(dir_ / "proj" / "data" / "big.bin") << "data\n";
  std::ofstream(dir_ / "proj" / ".gitignore") << "data/\n";
  std::string spec = Write("proj/p.yaml",
                           "name: p\nshell: true\nresources: {gpus: 0}\n"
                           "command: \"echo $DROVER_PROJECT_DIR; cat $DROVER_PROJECT_DIR/data/big.bin;"
                           " test -e data/big.bin || echo not-in-the-copy\"\n");
  auto r = RunDrover({"run", spec, "--store", store_, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(testing::ReadFile(attempts[0].stdout_path),
            fs::canonical(dir_ / "proj").string() + "\ndata\nnot-in-the-copy\n");
}

// drover show RUN shows the environment of the run's own interpreter, not every one the
// experiment recorded.
TEST_F(CliTest, ShowGivesTheRunsOwnEnvironment) {
  std::string spec = Write("envs.yaml", "name: envs\nworkdir: code\nresources: {gpus: 0}\n"
                                        "command: \"{prog} -c exit\"\n"
                                        "params: {prog: [/usr/bin/python3, /bin/sh]}\n");
  auto r = RunDrover({"run", spec, "--store", store_, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto py = RunDrover({"show", "1", "--json", "--store", store_});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  Json envs = Json::parse(py.out)["environments"];
  ASSERT_EQ(envs.size(), 1u) << envs.dump();
  EXPECT_EQ(envs[0]["interpreter"], "/usr/bin/python3");
  auto sh = RunDrover({"show", "2", "--json", "--store", store_});
  ASSERT_EQ(sh.exit_code, 0) << sh.err;
  envs = Json::parse(sh.out)["environments"];
  ASSERT_EQ(envs.size(), 1u) << envs.dump();
  EXPECT_EQ(envs[0]["interpreter"], "");
  auto text = RunDrover({"show", "2", "--store", store_});
  EXPECT_EQ(text.out.find("interpreter"), std::string::npos) << text.out;
  EXPECT_NE(RunDrover({"show", "1", "--store", store_}).out.find("interpreter  /usr/bin/python3"),
            std::string::npos);
}

TEST_F(CliTest, TimeoutKillsTheWholeGroup) {
  std::string marker = "drover-timeout-" + std::to_string(getpid());
  std::string path = Write("t.yaml",
                           "name: t\nworkdir: code\ntimeout: 1s\nshell: true\n"
                           "command: \"sleep 300 & sleep 301 & wait\"\n"
                           "env: {TEST_MARKER: " +
                               marker + "}\n");
  auto r = RunDrover({"run", path, "--store", store_, "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto store = Store::Open(store_ + "/drover.db");
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "timeout");
  EXPECT_EQ(CountProcesses(marker, /*with_shims=*/true), 0);
  auto run = (*store)->GetRun(1).value();
  EXPECT_EQ(run->state, RunState::kFailed);
}

TEST_F(CliTest, ARunThatPrintsNaNIsStoppedAsDiverged) {
  std::string marker = "drover-nan-" + std::to_string(getpid());
  // json.dumps-style NaN, then it would go on for five minutes.
  std::string path = Write("nan.yaml",
                           "name: nan\nworkdir: code\nshell: true\nretries: 2\n"
                           "command: \"echo '{{\\\"step\\\": 1, \\\"loss\\\": NaN}}'; "
                           "exec sleep 300\"\n"
                           "env: {TEST_MARKER: " +
                               marker + "}\n");
  auto start = std::chrono::steady_clock::now();
  auto r = RunDrover({"run", path, "--store", store_});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(r.out.find("diverged"), std::string::npos) << r.out;
  EXPECT_EQ(CountProcesses(marker, /*with_shims=*/true), 0);
  auto store = Store::Open(store_ + "/drover.db");
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "diverged");
}

TEST_F(CliTest, CtrlCCancelsEveryRunAndLeavesNoOrphans) {
  std::string marker = "drover-ctrlc-" + std::to_string(getpid());
  // Each run starts a child of its own in the background: the whole group must go.
  std::string path = Write("c.yaml",
                           "name: c\nworkdir: code\nshell: true\n"
                           "command: \"sleep 300 & exec sleep 30{i}\"\n"
                           "env: {TEST_MARKER: " +
                               marker +
                               "}\n"
                               "params: {i: [1, 2, 3, 4]}\n"
                               "max_parallel: 2\n");
  std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  pid_t pid = testing::SpawnDrover({"run", path, "--store", store_}, out, err);
  // Wait until both parallel runs have started their processes.
  for (int i = 0; i < 200 && CountProcesses(marker) < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(CountProcesses(marker), 4) << testing::ReadFile(err);
  kill(pid, SIGINT);
  int code = testing::WaitExit(pid);
  EXPECT_EQ(code, 130) << testing::ReadFile(err);
  EXPECT_EQ(CountProcesses(marker, /*with_shims=*/true), 0);
  auto store = Store::Open(store_ + "/drover.db");
  RunFilter f;
  auto runs = (*store)->ListRuns(f).value();
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& r : runs) EXPECT_EQ(r.state, RunState::kCancelled) << r.id;
  EXPECT_TRUE((*store)->IntegrityOk().value());
}

TEST_F(CliTest, OneEnginePerStore) {
  std::string marker = "drover-lock-" + std::to_string(getpid());
  std::string path = Write("l.yaml",
                           "name: l\nworkdir: code\ncommand: sleep 300\n"
                           "env: {TEST_MARKER: " +
                               marker + "}\n");
  std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  pid_t pid = testing::SpawnDrover({"run", path, "--store", store_}, out, err);
  for (int i = 0; i < 200 && CountProcesses(marker) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(CountProcesses(marker), 1) << testing::ReadFile(err);
  auto second = RunDrover({"run", path, "--store", store_});
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_NE(second.err.find("another drover (pid " + std::to_string(pid) + ")"), std::string::npos)
      << second.err;
  // Reading the store while it runs is fine.
  auto ls = RunDrover({"ls", "--store", store_});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("running"), std::string::npos) << ls.out;
  kill(pid, SIGHUP);  // a closed terminal stops the runs like Ctrl-C
  EXPECT_EQ(testing::WaitExit(pid), 130);
  EXPECT_EQ(CountProcesses(marker, /*with_shims=*/true), 0);
}

TEST_F(CliTest, AKilledForegroundRunsRunIsAdoptedByTheNextOne) {
  std::string marker = "drover-resume-" + std::to_string(getpid());
  std::string slow = Write("slow.yaml",
                           "name: slow\nworkdir: code\ncommand: sleep 2\n"
                           "env: {TEST_MARKER: " +
                               marker + "}\n");
  std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  pid_t pid = testing::SpawnDrover({"run", slow, "--store", store_}, out, err);
  for (int i = 0; i < 200 && CountProcesses(marker) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(CountProcesses(marker), 1) << testing::ReadFile(err);
  kill(pid, SIGKILL);
  testing::WaitExit(pid);
  // Its run went on under the supervisor, which records its end beside its log: the next drover
  // run on the store adopts it (nothing run twice) and waits for it along with its own.
  std::string quick = Write("quick.yaml", "name: quick\nworkdir: code\ncommand: \"true\"\n");
  auto r = RunDrover({"run", quick, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resuming 1 earlier experiment(s)"), std::string::npos) << r.out;
  EXPECT_EQ(CountProcesses(marker, /*with_shims=*/true), 0);
  auto store = Store::Open(store_ + "/drover.db");
  auto run = (*store)->GetRun(1).value();
  EXPECT_EQ(run->state, RunState::kSucceeded);
  auto attempts = (*store)->ListAttempts(1).value();
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].reason, "succeeded");
  EXPECT_EQ(run->retries_used, 0);
}

TEST_F(CliTest, BadCommandLinesSayWhatToDo) {
  auto typo = RunDrover({"rnu", "x.yaml"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown command 'rnu'; did you mean 'run'?"), std::string::npos)
      << typo.err;
  std::string file = Write("not-a-folder", "x");
  std::string path = Write("ok.yaml", "name: ok\nworkdir: code\ncommand: \"true\"\n");
  auto store_file = RunDrover({"run", path, "--store", file});
  EXPECT_EQ(store_file.exit_code, 2);
  EXPECT_NE(store_file.err.find("is a file, not a folder"), std::string::npos) << store_file.err;
  auto fake = RunDrover({"run", path, "--dry-run", "--fake-gpus", "0x16GiB"});
  EXPECT_EQ(fake.exit_code, 2);
  EXPECT_NE(fake.err.find("--fake-gpus '0x16GiB'"), std::string::npos) << fake.err;
  EXPECT_EQ(RunDrover({"run", path, "--cpus", "-1"}).exit_code, 2);
}

// drover diff: two runs of a changed script with other params and env give the param, command,
// code (a unified diff of the snapshots, with the workdir's paths) and env var differences; a
// run against itself differs in nothing.
TEST_F(CliTest, DiffShowsWhatDiffersBetweenTwoRuns) {
  fs::create_directories(dir_ / "w");
  std::ofstream(dir_ / "w" / "train.py") << "import sys\nprint('{\"step\": 1, \"acc\": ' + sys.argv[1] + '}')\n";
  auto spec = [&](const std::string& name, const std::string& lr, const std::string& seed) {
    return Write(name + ".yaml", "name: " + name + "\nworkdir: w\ncommand: \"/usr/bin/python3 train.py {lr}\"\n"
                                 "params: {lr: [" + lr + "]}\nenv: {SEED: \"" + seed + "\"}\n"
                                 "resources: {gpus: 0, cpus: 1}\n");
  };
  ASSERT_EQ(RunDrover({"run", spec("a", "0.1", "1"), "--store", store_, "--quiet"}).exit_code, 0);
  std::ofstream(dir_ / "w" / "train.py") << "import sys\nprint('{\"step\": 1, \"accuracy\": ' + sys.argv[1] + '}')\n";
  ASSERT_EQ(RunDrover({"run", spec("b", "0.01", "2"), "--store", store_, "--quiet"}).exit_code, 0);

  auto text = RunDrover({"diff", "1", "2", "--store", store_});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("params       lr: 0.1 -> 0.01"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("--- a/train.py"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("+++ b/train.py"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("-print('{\"step\": 1, \"acc\": '"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("+print('{\"step\": 1, \"accuracy\": '"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("env vars     SEED: \"1\" -> \"2\""), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find(dir_.string() + "/store"), std::string::npos) << text.out;  // no store paths

  auto json = RunDrover({"diff", "1", "2", "--json", "--store", store_});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_EQ(j["params"]["lr"], Json::parse("[0.1, 0.01]"));
  EXPECT_EQ(j["code"]["same"], false);
  EXPECT_EQ(j["environment"]["vars"]["SEED"], Json::parse(R"(["1", "2"])"));

  auto same = RunDrover({"diff", "1", "1", "--store", store_});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("params       the same"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("code         the same"), std::string::npos) << same.out;
  auto missing = RunDrover({"diff", "1", "99", "--store", store_});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no run 99"), std::string::npos) << missing.err;
}

TEST_F(CliTest, ReadCommandsExplainMissingThings) {
  auto none = RunDrover({"ls", "--store", store_});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no drover store at"), std::string::npos) << none.err;
  std::string path = Write("ok.yaml", "name: ok\nworkdir: code\ncommand: \"true\"\n");
  ASSERT_EQ(RunDrover({"run", path, "--store", store_, "--quiet"}).exit_code, 0);
  auto missing = RunDrover({"show", "99", "--store", store_});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no run 99"), std::string::npos);
  auto notid = RunDrover({"logs", "abc", "--store", store_});
  EXPECT_NE(notid.err.find("'abc' is not a run id"), std::string::npos);
  auto exp = RunDrover({"compare", "nope", "--store", store_});
  EXPECT_NE(exp.err.find("no experiment 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

// `drover cancel` from another terminal reaches a `drover run` in the foreground (no daemon):
// one run, then the rest of the experiment; with nothing holding the store it says so.
TEST_F(CliTest, AnotherTerminalCancelsARunThenTheExperimentOfAForegroundRun) {
  const std::string store = store_;
  std::string spec = Write("s.yaml", "name: long\nworkdir: code\ncommand: sleep {t}\n"
                                     "params: {t: [300, 301]}\nmax_parallel: 1\n");
  auto none = RunDrover({"cancel", "1", "--store", store});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no daemon serves it and no drover run holds it"), std::string::npos)
      << none.err;
  std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  pid_t pid = testing::SpawnDrover({"run", spec, "--store", store}, out, err);
  auto state = [&](int64_t id) {
    auto s = Store::Open(store + "/drover.db");
    if (!s.ok()) return std::string();
    auto r = (*s)->GetRun(id);
    return r.ok() && r->has_value() ? std::string(ToString((**r).state)) : std::string();
  };
  for (int i = 0; i < 400 && state(1) != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(state(1), "running") << testing::ReadFile(err);
  auto one = RunDrover({"cancel", "1", "--store", store});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("cancelling run 1 (in the drover run in the foreground, pid " +
                         std::to_string(pid) + ")"),
            std::string::npos)
      << one.out;
  for (int i = 0; i < 400 && state(2) != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(state(1), "cancelled");
  ASSERT_EQ(state(2), "running");
  auto bad = RunDrover({"cancel", "1", "--store", store});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("run 1 is already cancelled"), std::string::npos) << bad.err;
  auto rest = RunDrover({"cancel", "-e", "long", "--store", store});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.out.find("cancelling experiment 1 (long)"), std::string::npos) << rest.out;
  EXPECT_NE(testing::WaitExit(pid), 0);
  EXPECT_EQ(state(2), "cancelled");
  EXPECT_FALSE(std::filesystem::exists(store + "/requests/") &&
               !std::filesystem::is_empty(store + "/requests/"));
}

}  // namespace
}  // namespace drover
