// Runs in containers end to end (docs/containers.md): the drover binary with real podman from
// Debian and images built here without a registry (scripts/podman-local.sh images):
// localhost/drover-bb:test (busybox) for the fast tests, localhost/drover-digits:test (Debian 12
// with python3-torch and python3-sklearn) for the digits. 4 fake GPUs are character devices
// /dev/fakegpu0-3 named in /etc/cdi/drover-fake-gpus.yaml. Each test skips where podman cannot
// run its image.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "common/hash.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunDrover;

constexpr char kBusybox[] = "localhost/drover-bb:test";
constexpr char kDigits[] = "localhost/drover-digits:test";

bool HaveImage(const std::string& image) {
  auto r = RunAndCapture({"podman", "image", "exists", image}, {.timeout_ms = 30'000});
  return r.ok() && r->exit_code == 0;
}

// Whether podman runs a container here at all (a machine whose kernel or sandbox refuses
// podman's namespaces or cgroups): asked once, of podman alone, before any test of drover.
bool PodmanRuns() {
  static const bool runs = [] {
    auto r = RunAndCapture({"podman", "run", "--rm", "--network", "none", kBusybox, "true"},
                           {.timeout_ms = 60'000});
    return r.ok() && r->exit_code == 0;
  }();
  return runs;
}

std::string Podman(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"podman"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunAndCapture(argv, {.timeout_ms = 60'000});
  return r.ok() ? r->out : "";
}

class ContainerTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    if (!HaveImage(kBusybox)) {
      GTEST_SKIP() << "podman or " << kBusybox
                   << " is missing: run scripts/podman-local.sh install && "
                      "scripts/podman-local.sh images (as root)";
    }
    if (!PodmanRuns()) {
      GTEST_SKIP() << "`podman run --rm " << kBusybox
                   << " true` fails on this machine: podman cannot run containers here "
                      "(docs/containers.md, \"Rootful and rootless podman\")";
    }
    CliFixture::SetUp();
  }
  void TearDown() override {
    StopDaemon(SIGKILL);
    if (!dir_.empty()) {
      // Whatever a failed test left: the store's containers go with it.
      const std::string left = StoreContainers();
      for (const std::string& name : Split(left, '\n')) {
        if (!name.empty()) Podman({"rm", "--force", "--ignore", name});
      }
      CliFixture::TearDown();
    }
  }

  std::string StoreId() const {
    return Sha256Hex(fs::weakly_canonical(store_).string()).substr(0, 8);
  }
  // The names of the containers podman has of this store, running or not, one per line.
  std::string StoreContainers() const {
    return Podman({"ps", "--all", "--filter", "label=drover.store=" + StoreId(), "--format",
                   "{{.Names}}"});
  }

  std::unique_ptr<Store> OpenStore() {
    auto s = Store::Open(store_ + "/drover.db");
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::vector<drover::Run> Runs() {
    auto store = OpenStore();
    return store ? store->ListRuns(RunFilter{}).value() : std::vector<drover::Run>{};
  }
  std::vector<Attempt> AttemptsOf(int64_t run_id) {
    auto store = OpenStore();
    return store ? store->ListAttempts(run_id).value() : std::vector<Attempt>{};
  }
  Json SpecOf(int64_t experiment_id) {
    auto store = OpenStore();
    auto e = store->GetExperiment(experiment_id);
    return e.ok() && *e ? (*e)->spec : Json();
  }
  std::string Out(int64_t experiment, int64_t run, int attempt = 1) {
    return ReadFile(fmt::format("{}/logs/{}/{}-{}.out", store_, experiment, run, attempt));
  }

  void StartDaemon(const std::vector<std::string>& extra = {}) {
    fs::remove(store_ + "/daemon.json");
    std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0", "--store", store_};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = testing::SpawnDrover(args, (dir_ / "serve.out").string(), (dir_ / "serve.err").string());
    for (int i = 0; i < 600; ++i) {
      Json j = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
      if (j.is_object() && j.value("pid", 0) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "daemon did not start: " << ReadFile((dir_ / "serve.err").string());
  }
  int StopDaemon(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    const int code = testing::WaitExit(pid_);
    pid_ = -1;
    return code;
  }
  std::vector<drover::Run> WaitFinal(size_t n, int seconds) {
    std::vector<drover::Run> runs;
    for (int i = 0; i < seconds * 10; ++i) {
      runs = Runs();
      if (runs.size() == n && std::all_of(runs.begin(), runs.end(),
                                          [](const drover::Run& r) { return IsFinal(r.state); })) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return runs;
  }
  // Waits until `n` of the store's containers run.
  bool WaitContainers(size_t n, int seconds = 30) {
    for (int i = 0; i < seconds * 10; ++i) {
      const std::string out = Podman({"ps", "--filter", "label=drover.store=" + StoreId(),
                                      "--format", "{{.Names}}"});
      size_t count = 0;
      for (const std::string& l : Split(out, '\n')) count += !l.empty();
      if (count == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  pid_t pid_ = -1;
};

TEST_F(ContainerTest, ARunRunsInItsContainerWithTheImagePinnedAndNothingLeftBehind) {
  const std::string spec = Write("c.yaml", R"(name: in-container
command: ["sh", "-c", "echo '{{\"step\": 1, \"x\": {x}}}'; echo host=$(hostname); echo cwd=$(pwd); echo uid=$(id -u); echo ckpt=$DROVER_CHECKPOINT_DIR; touch $DROVER_CHECKPOINT_DIR/saved; cat /etc/os-release 2>&1 | head -1; echo marker > made-here"]
params: {x: [1, 2]}
container: {image: localhost/drover-bb:test}
)");
  auto r = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto runs = Runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const drover::Run& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded);
    ASSERT_TRUE(run.final_metrics.contains("x")) << run.final_metrics.dump();
    const std::string out = Out(run.experiment_id, run.id);
    EXPECT_NE(out.find(fmt::format("host=drover-run-{}", run.id)), std::string::npos) << out;
    EXPECT_NE(out.find("cwd=" + (fs::path(store_) / "runs" / std::to_string(run.id)).string()),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(fmt::format("uid={}", getuid())), std::string::npos) << out;
    // The image's files, not the host's: busybox has no /etc/os-release.
    EXPECT_NE(out.find("No such file"), std::string::npos) << out;
    // The checkpoint folder is the run's, writable, on the host.
    EXPECT_TRUE(fs::exists(fmt::format("{}/checkpoints/{}/saved", store_, run.id))) << out;
  }
  // The image is recorded by its id, the one podman has for the tag.
  const Json c = SpecOf(runs[0].experiment_id).value("container", Json::object());
  const std::string inspected =
      Podman({"image", "inspect", "--format", "{{.Id}} {{.Digest}}", kBusybox});
  EXPECT_EQ("sha256:" + Split(inspected, ' ')[0], c.value("image_id", "")) << inspected;
  EXPECT_EQ(Split(Split(inspected, '\n')[0], ' ')[1], c.value("digest", "")) << inspected;
  auto show = RunDrover({"show", std::to_string(runs[0].id), "--store", store_});
  EXPECT_NE(show.out.find("container    localhost/drover-bb:test (podman), image " +
                          c.value("image_id", "")),
            std::string::npos)
      << show.out;
  // A run of a tag that is removed afterwards: reproduce runs the recorded image.
  const std::string moved = "localhost/drover-moved:test";
  Podman({"tag", kBusybox, moved});
  const std::string moved_spec = Write("m.yaml", R"(name: moved
command: ["sh", "-c", "echo moved"]
container: {image: localhost/drover-moved:test}
)");
  ASSERT_EQ(RunDrover({"run", moved_spec, "--store", store_}).exit_code, 0);
  const int64_t moved_run = static_cast<int64_t>(Runs().size());
  const int64_t moved_exp = Runs().back().experiment_id;
  Podman({"untag", kBusybox, moved});
  // The tag is gone: reproduce runs the recorded image by its id.
  auto repro = RunDrover({"reproduce", std::to_string(moved_run), "--store", store_});
  EXPECT_EQ(repro.exit_code, 0) << repro.out << repro.err;
  int64_t newest = 0;
  for (const auto& run : Runs()) newest = std::max(newest, run.experiment_id);
  ASSERT_GT(newest, moved_exp);
  EXPECT_EQ(SpecOf(newest).value("container", Json::object()).value("image_id", ""),
            SpecOf(moved_exp).value("container", Json::object()).value("image_id", ""));
  EXPECT_EQ(StoreContainers(), "");
}

TEST_F(ContainerTest, WithoutNetworkTrueARunCannotReachTheHostsLoopback) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(s, 16), 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  // Each connection is closed at once, so the client that got one ends.
  std::thread acceptor([s] {
    for (;;) {
      const int c = accept(s, nullptr, nullptr);
      if (c < 0) return;
      close(c);
    }
  });
  const std::string closed = Write("closed.yaml", fmt::format(R"(name: closed
command: ["sh", "-c", "echo x | nc -w 2 127.0.0.1 {}"]
container: {{image: localhost/drover-bb:test}}
)",
                                                              port));
  const std::string open = Write("open.yaml", fmt::format(R"(name: open
command: ["sh", "-c", "echo x | nc -w 2 127.0.0.1 {}"]
container: {{image: localhost/drover-bb:test, network: true}}
)",
                                                          port));
  auto r1 = RunDrover({"run", closed, "--store", store_});
  auto r2 = RunDrover({"run", open, "--store", store_});
  shutdown(s, SHUT_RDWR);
  close(s);
  acceptor.join();
  auto runs = Runs();
  ASSERT_EQ(runs.size(), 2u) << r1.err << r2.err;
  std::map<std::string, RunState> by;
  for (const auto& run : runs) by[run.experiment_id == 1 ? "closed" : "open"] = run.state;
  EXPECT_EQ(by["closed"], RunState::kFailed) << r1.out << r1.err;
  EXPECT_EQ(by["open"], RunState::kSucceeded) << r2.out << r2.err;
}

TEST_F(ContainerTest, AnImageThatIsNotThereIsRefusedAtSubmitAndACommandNotInTheImageFailsAtOnce) {
  const std::string missing = Write("missing.yaml", R"(name: missing
command: ["true"]
container: {image: localhost/drover-no-such-image:1}
)");
  auto r = RunDrover({"run", missing, "--store", store_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("localhost/drover-no-such-image:1 is not in podman's images"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(Runs().empty());

  const std::string nocmd = Write("nocmd.yaml", R"(name: nocmd
command: ["no-such-program-here"]
retries: 3
container: {image: localhost/drover-bb:test}
)");
  r = RunDrover({"run", nocmd, "--store", store_});
  auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u) << r.err;
  EXPECT_EQ(runs[0].state, RunState::kFailed);
  auto attempts = AttemptsOf(runs[0].id);
  ASSERT_EQ(attempts.size(), 1u) << "a launch error is not retried";
  EXPECT_EQ(attempts[0].reason, "launch_error");
  EXPECT_EQ(StoreContainers(), "");
}

TEST_F(ContainerTest, GpusArePassedByTheirCdiNamesAndNumberedFromZeroInside) {
  if (!fs::exists("/etc/cdi/drover-fake-gpus.yaml")) GTEST_SKIP() << "no CDI spec of fake GPUs";
  StartDaemon({"--fake-gpus", "2x16GiB"});
  // Two whole-GPU runs at once, then three that share one GPU by memory.
  const std::string whole = Write("whole.yaml", R"(name: whole
command: ["sh", "-c", "echo cvd=$CUDA_VISIBLE_DEVICES; ls /dev | grep fakegpu; sleep 1"]
params: {i: [1, 2]}
resources: {gpus: 1}
container: {image: localhost/drover-bb:test}
)");
  auto r = RunDrover({"submit", whole, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto runs = WaitFinal(2, 60);
  ASSERT_EQ(runs.size(), 2u);
  std::set<std::string> devices;
  for (const auto& run : runs) {
    ASSERT_EQ(run.state, RunState::kSucceeded);
    const std::string out = Out(run.experiment_id, run.id);
    EXPECT_NE(out.find("cvd=0\n"), std::string::npos) << out;
    const auto lines = Split(out, '\n');
    ASSERT_GE(lines.size(), 2u) << out;
    EXPECT_EQ(lines[1].rfind("fakegpu", 0), 0u) << out;
    EXPECT_EQ(lines.size() > 2 ? lines[2] : "", "") << "one device only: " << out;
    devices.insert(lines[1]);
    // Host numbering in the record: the GPU the scheduler gave.
    auto attempts = AttemptsOf(run.id);
    ASSERT_EQ(attempts.size(), 1u);
    EXPECT_EQ(lines[1], "fakegpu" + attempts[0].cuda_visible_devices) << out;
  }
  EXPECT_EQ(devices.size(), 2u) << "each run had a GPU of its own";
  EXPECT_EQ(StoreContainers(), "");
}

TEST_F(ContainerTest, CancelAndAKilledDaemonLeaveNoContainerAndLoseNoRun) {
  StartDaemon();
  const std::string spec = Write("long.yaml", R"(name: long
command: ["sh", "-c", "trap 'echo stopping; exit 3' TERM; i=0; while [ $i -lt {n} ]; do echo '{{\"step\": '$i', \"loss\": 1}}'; sleep 0.1; i=$((i+1)); done"]
params: {n: [600, 40]}
container: {image: localhost/drover-bb:test}
)");
  auto r = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitContainers(2)) << StoreContainers();
  // Cancel: SIGTERM reaches the container's processes; the container goes.
  r = RunDrover({"cancel", "1", "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitContainers(1));
  // The daemon killed while run 2's container runs: the next one adopts it.
  ASSERT_EQ(StopDaemon(SIGKILL), 128 + SIGKILL);
  EXPECT_TRUE(WaitContainers(1, 1)) << "the run outlives the daemon";
  // The store no longer says it never started a container, so the next start looks for those
  // no run owns.
  EXPECT_FALSE(fs::exists(store_ + "/containers-none"));
  // A container of this store that no run owns (its client died with a machine's crash, say).
  const std::string stray = fmt::format("drover-{}-99-1", StoreId());
  Podman({"run", "-d", "--name", stray, "--label", "drover.store=" + StoreId(), kBusybox, "sleep",
          "300"});
  StartDaemon();
  auto runs = WaitFinal(2, 60);
  ASSERT_EQ(runs.size(), 2u);
  std::map<int64_t, drover::Run> by;
  for (const auto& run : runs) by[run.id] = run;
  EXPECT_EQ(by[1].state, RunState::kCancelled);
  EXPECT_NE(Out(1, 1).find("stopping"), std::string::npos) << Out(1, 1);
  EXPECT_EQ(by[2].state, RunState::kSucceeded);
  EXPECT_EQ(AttemptsOf(2).size(), 1u) << "adopted, not run again";
  EXPECT_NE(ReadFile((dir_ / "serve.out").string()).find("1 adopted"), std::string::npos)
      << ReadFile((dir_ / "serve.out").string());
  for (int i = 0; i < 100 && !StoreContainers().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(StoreContainers(), "");
}

// A store that never started a container is not listed at each start (`podman ps` costs tens
// of milliseconds of every `drover run`): a new store says so in its folder, so a container that
// merely carries its label is left alone, and the first container run removes the marker (a
// store of an older drover, which has none, is listed as before).
TEST_F(ContainerTest, AStoreThatNeverStartedAContainerIsNotListedAtEachStart) {
  const std::string plain = Write("plain.yaml", "name: plain\ncommand: \"true\"\n");
  // A container with the store's label that this store never started (an earlier store's at
  // the same path, deleted while it ran).
  const std::string stray = fmt::format("drover-{}-98-1", StoreId());
  Podman({"run", "-d", "--name", stray, "--label", "drover.store=" + StoreId(), kBusybox, "sleep",
          "300"});
  auto r = RunDrover({"run", plain, "--store", store_, "--foreground"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(store_ + "/containers-none"));
  EXPECT_EQ(StoreContainers(), stray + "\n") << "a store without containers lists none";
  // Its first container removes what carries its label first, then the marker.
  const std::string boxed = Write("boxed.yaml", R"(name: boxed
command: ["sh", "-c", "echo inside"]
container: {image: localhost/drover-bb:test}
)");
  r = RunDrover({"run", boxed, "--store", store_, "--foreground"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(store_ + "/containers-none"));
  EXPECT_EQ(StoreContainers(), "");
  // Without the marker every start lists the store's containers: a stray is removed.
  Podman({"run", "-d", "--name", stray, "--label", "drover.store=" + StoreId(), kBusybox, "sleep",
          "300"});
  r = RunDrover({"run", plain, "--store", store_, "--foreground"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StoreContainers(), "");
}

// What a container run computes depends on its image, mounts and network: the same spec is
// cached, a different network is not; an interrupted container experiment resumes.
TEST_F(ContainerTest, TheFingerprintCoversMountsAndNetworkAndAContainerExperimentResumes) {
  fs::create_directories(dir_ / "data");
  const std::string spec = Write("fp.yaml", fmt::format(R"(name: fp
command: ["sh", "-c", "ls /data"]
container: {{image: localhost/drover-bb:test, mounts: ["{}:/data:ro"]}}
)",
                                                        (dir_ / "data").string()));
  ASSERT_EQ(RunDrover({"run", spec, "--store", store_}).exit_code, 0);
  ASSERT_EQ(RunDrover({"run", spec, "--store", store_}).exit_code, 0);
  auto r = RunDrover({"run", spec, "--store", store_, "--set", "container.network=true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto runs = Runs();
  ASSERT_EQ(runs.size(), 3u);
  std::sort(runs.begin(), runs.end(),
            [](const drover::Run& a, const drover::Run& b) { return a.id < b.id; });
  EXPECT_EQ(runs[0].cached_from, 0);
  EXPECT_EQ(runs[1].cached_from, runs[0].id) << "the same container spec is cached";
  EXPECT_EQ(runs[2].cached_from, 0) << "with a network it computes something else";

  const std::string slow = Write("slow.yaml", R"(name: slow
command: ["sh", "-c", "sleep {s}"]
params: {s: 5}
container: {image: localhost/drover-bb:test}
)");
  pid_t run = testing::SpawnDrover({"run", slow, "--store", store_},
                                   (dir_ / "slow.out").string(), (dir_ / "slow.err").string());
  ASSERT_TRUE(WaitContainers(1));
  kill(run, SIGINT);
  testing::WaitExit(run);
  ASSERT_TRUE(WaitContainers(0));
  r = RunDrover({"run", "--resume", slow, "--store", store_, "--set", "s=6"});
  EXPECT_NE(r.exit_code, 0) << "a changed spec is not resumed";
  r = RunDrover({"run", "--resume", slow, "--store", store_});
  EXPECT_EQ(r.err.find("has changed"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("resumed"), std::string::npos) << r.out << r.err;
}

// Runs started while the daemon has no supervisor are led by a shim (docs/architecture.md): a
// restarted daemon adopts such a run by its shim and must know its container is owned, not a
// stray to remove.
TEST_F(ContainerTest, ARunLedByAShimIsAdoptedWithItsContainer) {
  StartDaemon();
  // The supervisor is the daemon's child; without it, each run gets a shim of its own.
  auto children = RunAndCapture({"pgrep", "-P", std::to_string(pid_)}, {.timeout_ms = 10'000});
  ASSERT_TRUE(children.ok());
  for (const std::string& p : Split(children->out, '\n')) {
    if (!p.empty()) kill(std::stoi(p), SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string spec = Write("shim.yaml", R"(name: shim
command: ["sh", "-c", "i=0; while [ $i -lt 40 ]; do echo '{{\"step\": '$i', \"loss\": 1}}'; sleep 0.1; i=$((i+1)); done"]
container: {image: localhost/drover-bb:test}
)");
  auto r = RunDrover({"submit", spec, "--store", store_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitContainers(1)) << StoreContainers();
  ASSERT_EQ(StopDaemon(SIGKILL), 128 + SIGKILL);
  StartDaemon();
  auto runs = WaitFinal(1, 60);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::kSucceeded) << ReadFile((dir_ / "serve.err").string());
  EXPECT_EQ(AttemptsOf(runs[0].id).size(), 1u) << "adopted, its container left running";
  EXPECT_NE(Out(1, 1).find("\"step\": 39"), std::string::npos) << Out(1, 1);
  EXPECT_EQ(ReadFile((dir_ / "serve.err").string()).find("removing"), std::string::npos)
      << ReadFile((dir_ / "serve.err").string());
  EXPECT_EQ(StoreContainers(), "");
}

class DigitsContainerTest : public ContainerTest {
 protected:
  void SetUp() override {
    if (!HaveImage(kDigits)) {
      GTEST_SKIP() << kDigits << " is missing: run scripts/podman-local.sh images (as root)";
    }
    ContainerTest::SetUp();
  }
};

TEST_F(DigitsContainerTest, TheDigitsComparisonRunsInContainersAsOnTheHost) {
  const std::string examples = std::string(DROVER_SOURCE_DIR) + "/examples/digits";
  auto r = RunDrover({"run", examples + "/compare.yaml", "--store", store_, "--fake-gpus",
                      "2x16GiB", "--set", std::string("container.image=") + kDigits, "--set",
                      "python=python3"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto runs = Runs();
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& run : runs) {
    EXPECT_EQ(run.state, RunState::kSucceeded);
    EXPECT_GT(run.final_metrics.value("val_acc", 0.0), 0.8) << run.final_metrics.dump();
  }
  auto compare = RunDrover({"compare", "digits-compare", "--store", store_});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  for (const auto& run : runs) {
    EXPECT_NE(compare.out.find(fmt::format("  {}  ", run.id)), std::string::npos) << compare.out;
  }
  // The packages recorded are the image's (torch from Debian inside it).
  auto show = RunDrover({"show", "1", "--store", store_, "--json"});
  EXPECT_NE(show.out.find("torch=="), std::string::npos);
  const Json c = SpecOf(1).value("container", Json::object());
  EXPECT_EQ("sha256:" + Split(Podman({"image", "inspect", "--format", "{{.Id}}", kDigits}), '\n')[0],
            c.value("image_id", ""));
  EXPECT_EQ(StoreContainers(), "");
}

TEST_F(DigitsContainerTest, TheOomExampleRecoversInsideAContainer) {
  const std::string examples = std::string(DROVER_SOURCE_DIR) + "/examples/digits";
  auto r = RunDrover({"run", examples + "/oom.yaml", "--store", store_, "--set",
                      std::string("container.image=") + kDigits, "--set", "python=python3"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::kSucceeded);
  auto attempts = AttemptsOf(runs[0].id);
  ASSERT_EQ(attempts.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(attempts[i].reason, "cuda_oom");
  EXPECT_EQ(attempts[3].params.value("batch_size", 0), 64);
  EXPECT_EQ(StoreContainers(), "");
}

}  // namespace
}  // namespace drover
