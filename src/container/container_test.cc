#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "container/command.h"
#include "container/launcher.h"
#include "container/runtime.h"

namespace drover::container {
namespace {

namespace fs = std::filesystem;

bool Has(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
}

ContainerRun Sample() {
  ContainerRun r;
  r.spec.image = "localhost/digits:latest";
  r.spec.image_id = "sha256:" + std::string(64, 'a');
  r.spec.mounts = {"/data/imagenet:/data:ro"};
  r.name = "drover-abcd1234-7-2";
  r.hostname = "drover-run-7";
  r.labels = {{"drover.store", "abcd1234"}, {"drover.run", "7"}};
  r.workdir = "/store/runs/7";
  r.binds = {{"/store/checkpoints/7", true}, {"/opt/drover/python", false}};
  r.env_keys = {"DROVER_RUN_ID"};
  r.inline_env = {"CUDA_VISIBLE_DEVICES=0,1"};
  r.gpu_uuids = {"GPU-1", "GPU-3"};
  r.uid = 1000;
  r.gid = 100;
  return r;
}

TEST(RunArgvTest, PodmanRunsThePinnedImageInTheForegroundWithNoNetworkAndTheUsersIds) {
  const auto argv = RunArgv(Sample(), {"python3", "train.py", "--lr", "0.1"});
  ASSERT_GE(argv.size(), 6u);
  EXPECT_EQ(argv[0], "podman");
  EXPECT_EQ(argv[1], "run");
  EXPECT_TRUE(Has(argv, {"--rm", "--init"}));
  EXPECT_TRUE(Has(argv, {"--name", "drover-abcd1234-7-2"}));
  EXPECT_TRUE(Has(argv, {"--hostname", "drover-run-7"}));
  EXPECT_TRUE(Has(argv, {"--log-driver=passthrough", "--pull=never"}));
  EXPECT_TRUE(Has(argv, {"--label=drover.run=7"}));
  EXPECT_TRUE(Has(argv, {"--network", "none"}));
  EXPECT_TRUE(Has(argv, {"--user", "1000:100"}));
  EXPECT_TRUE(Has(argv, {"--volume=/store/runs/7:/store/runs/7", "--workdir=/store/runs/7"}));
  EXPECT_TRUE(Has(argv, {"--volume=/store/checkpoints/7:/store/checkpoints/7"}));
  EXPECT_TRUE(Has(argv, {"--volume=/opt/drover/python:/opt/drover/python:ro"}));
  EXPECT_TRUE(Has(argv, {"--volume=/data/imagenet:/data:ro"}));
  EXPECT_TRUE(Has(argv, {"--env=DROVER_RUN_ID"}));
  EXPECT_TRUE(Has(argv, {"--env=CUDA_VISIBLE_DEVICES=0,1"}));
  EXPECT_TRUE(Has(argv, {"--device", "nvidia.com/gpu=GPU-1", "--device", "nvidia.com/gpu=GPU-3"}));
  // The pinned id, then the command as given.
  EXPECT_TRUE(Has(argv, {"sha256:" + std::string(64, 'a'), "python3", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(argv.back(), "0.1");
}

TEST(RunArgvTest, NetworkRootlessDockerAndSlurmGpus) {
  ContainerRun r = Sample();
  r.spec.network = true;
  r.rootless = true;
  auto argv = RunArgv(r, {"true"});
  EXPECT_TRUE(Has(argv, {"--network", "host"}));
  EXPECT_TRUE(Has(argv, {"--userns=keep-id"}));
  EXPECT_FALSE(Has(argv, {"--user"}));

  r.spec.runtime = ContainerRuntime::kDocker;
  argv = RunArgv(r, {"true"});
  EXPECT_EQ(argv[0], "docker");
  EXPECT_TRUE(Has(argv, {"--gpus", "\"device=GPU-1,GPU-3\""}));
  EXPECT_TRUE(Has(argv, {"--user", "1000:100"})) << "docker maps no user namespace";
  EXPECT_FALSE(Has(argv, {"--log-driver=passthrough"}));

  r.spec.runtime = ContainerRuntime::kPodman;
  r.all_gpus = true;
  argv = RunArgv(r, {"true"});
  EXPECT_TRUE(Has(argv, {"--device", "nvidia.com/gpu=all"}));
  EXPECT_FALSE(Has(argv, {"--device", "nvidia.com/gpu=GPU-1"}));
}

TEST(RunArgvTest, PyxisIsAnSrunStepWithTheImageByDigest) {
  ContainerRun r = Sample();
  r.spec.runtime = ContainerRuntime::kPyxis;
  r.spec.image = "nvcr.io/nvidia/pytorch:24.01-py3";
  r.spec.digest = "sha256:" + std::string(64, 'b');
  const auto argv = RunArgv(r, {"python", "train.py"});
  EXPECT_EQ(argv[0], "srun");
  EXPECT_TRUE(Has(argv, {"--container-image=nvcr.io/nvidia/pytorch@sha256:" +
                         std::string(64, 'b')}));
  EXPECT_TRUE(Has(argv, {"--container-mounts=/store/runs/7:/store/runs/7,/store/checkpoints/7:/"
                         "store/checkpoints/7,/opt/drover/python:/opt/drover/python:ro,/data/"
                         "imagenet:/data:ro"}));
  EXPECT_TRUE(Has(argv, {"--container-workdir=/store/runs/7"}));
  EXPECT_EQ(argv[argv.size() - 2], "python");
}

TEST(ImageTest, InspectOutputOfPodmanAndDocker) {
  ContainerSpec c;
  const std::string hex(64, 'c');
  ASSERT_TRUE(ParseInspect(hex + "|sha256:" + std::string(64, 'd') + "|[\"x@sha256:e\"]\n", &c).ok());
  EXPECT_EQ(c.image_id, "sha256:" + hex);
  EXPECT_EQ(c.digest, "sha256:" + std::string(64, 'd'));
  ContainerSpec d;
  ASSERT_TRUE(ParseInspect("sha256:" + hex + "||[\"docker.io/library/python@sha256:" +
                               std::string(64, 'f') + "\"]",
                           &d)
                  .ok());
  EXPECT_EQ(d.image_id, "sha256:" + hex);
  EXPECT_EQ(d.digest, "sha256:" + std::string(64, 'f'));
  ContainerSpec bad;
  EXPECT_FALSE(ParseInspect("not-an-id|", &bad).ok());
  EXPECT_FALSE(ParseInspect("", &bad).ok());
}

TEST(ImageTest, AMissingRuntimeSaysWhatToInstall) {
  ContainerSpec c;
  c.image = "localhost/x:1";
  c.runtime = ContainerRuntime::kDocker;
  const char* path = getenv("PATH");
  const std::string saved = path ? path : "";
  setenv("PATH", "/nonexistent", 1);
  Status st = PinImage(&c);
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("docker is not installed"), std::string::npos) << st.message();
}

TEST(ImageTest, WithoutARuntimeWrittenDockerIsTakenWhereOnlyDockerIsInstalled) {
  // A docker on PATH that answers image inspect as docker does; no podman.
  const fs::path dir = fs::temp_directory_path() / ("docker-only-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string id(64, 'e');
  std::ofstream(dir / "docker") << "#!/bin/sh\necho 'sha256:" << id << "||[]'\n";
  fs::permissions(dir / "docker", fs::perms::owner_all);
  const std::string saved = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", dir.string().c_str(), 1);  // the script needs only /bin/sh and echo
  ContainerSpec c;
  c.image = "docker.io/library/python:3.11";
  Status st = PinImage(&c);
  ContainerSpec written;
  written.image = c.image;
  written.runtime_given = true;  // runtime: podman, written: kept
  Status st2 = PinImage(&written);
  setenv("PATH", saved.c_str(), 1);
  fs::remove_all(dir);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(c.image_id, "sha256:" + id);
  EXPECT_EQ(st2.code(), Code::kFailedPrecondition);
  EXPECT_NE(st2.message().find("podman is not installed"), std::string::npos) << st2.message();
}

TEST(ListTest, NamesAndStates) {
  auto l = ParseList("drover-a-1-1\trunning\ndrover-a-2-1\texited\n\nbroken\n");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "drover-a-1-1");
  EXPECT_EQ(l[0].state, "running");
  EXPECT_EQ(l[1].state, "exited");
}

class CdiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cdi-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

TEST_F(CdiTest, EveryGpuNeedsADeviceOfKindNvidiaGpuByUuidOrIndex) {
  std::vector<GpuDevice> gpus(3);
  for (int i = 0; i < 3; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = "GPU-" + std::to_string(i);
  }
  // Nothing there: what to run.
  Status st = CheckCdi(gpus, {dir_.string()});
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("nvidia-ctk cdi generate"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("GPU 2 (GPU-2)"), std::string::npos) << st.message();
  // YAML by UUID, JSON by index; another kind and a broken file count for nothing.
  Write("nvidia.yaml", "cdiVersion: \"0.5.0\"\nkind: nvidia.com/gpu\ndevices:\n- name: GPU-0\n"
                       "  containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}\n");
  Write("more.json", R"({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "1"}]})");
  Write("other.yaml", "kind: vendor.com/fpga\ndevices:\n- name: GPU-2\n");
  Write("broken.yaml", "kind: [\n");
  Write("notes.txt", "kind: nvidia.com/gpu\ndevices:\n- name: GPU-2\n");
  st = CheckCdi(gpus, {dir_.string()});
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("GPU 2 (GPU-2)"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("GPU 0"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("GPU 1"), std::string::npos) << st.message();
  Write("gpu2.yaml", "kind: nvidia.com/gpu\ndevices:\n- name: GPU-2\n");
  EXPECT_TRUE(CheckCdi(gpus, {dir_.string()}).ok());
  EXPECT_TRUE(CheckCdi({}, {"/nonexistent"}).ok()) << "no GPUs, nothing to name";
}

// A launcher that records what it was asked to start.
class RecordingLauncher : public ProcessLauncher {
 public:
  Result<ExecHandle> Start(const LaunchSpec& spec) override {
    started.push_back(spec);
    return ExecHandle(4242);
  }
  void Stop(ExecHandle attempt, StopSignal how) override {
    signals.emplace_back(static_cast<int>(attempt.id), how == StopSignal::kKill ? SIGKILL : SIGTERM);
  }
  WaitResult Wait(int64_t) override {
    WaitResult r;
    r.exits = std::move(exits);
    exits.clear();
    return r;
  }
  std::vector<ProcessExit> exits;  // what the next Wait reports
  int64_t Identity(ExecHandle) override { return 0; }
  void Adopt(ExecHandle, int64_t, const ExitRecordAt&) override {}
  std::vector<LaunchSpec> started;
  std::vector<std::pair<int, int>> signals;
};

TEST(ContainerLauncherTest, WrapsOnlyContainerRunsAndKeepsTheHostsGpuNumberingForTheClient) {
  RecordingLauncher inner;
  ContainerLauncher launcher(inner, "abcd1234");
  LaunchSpec plain;
  plain.argv = {"true"};
  plain.env = {"A=1"};
  ASSERT_TRUE(launcher.Start(plain).ok());
  EXPECT_EQ(inner.started.back().argv, plain.argv);

  LaunchSpec ls = plain;
  ls.argv = {"python3", "train.py"};
  ls.cwd = "/store/runs/3";
  ls.env = {"CUDA_VISIBLE_DEVICES=2", "DROVER_RUN_ID=3", "PATH=/opt/in/image/bin"};
  ls.request.run_id = 3;
  ls.request.attempt = 1;
  ls.request.container = ContainerSpec{};
  ls.request.container->image = "localhost/x:1";
  ls.request.container->image_id = "sha256:" + std::string(64, 'a');
  ls.request.gpu_uuids = {"GPU-2"};
  ASSERT_TRUE(launcher.Start(ls).ok());
  const LaunchSpec& w = inner.started.back();
  EXPECT_EQ(w.argv[0], "podman");
  EXPECT_TRUE(Has(w.argv, {"--name", "drover-abcd1234-3-1"}));
  EXPECT_TRUE(Has(w.argv, {"--env=CUDA_VISIBLE_DEVICES=0"}));
  EXPECT_TRUE(Has(w.argv, {"--env=DROVER_RUN_ID=3"}));
  // The spec's own PATH is for inside; the client finds podman with drover's.
  EXPECT_TRUE(Has(w.argv, {"--env=PATH=/opt/in/image/bin"}));
  EXPECT_TRUE(Has(w.argv, {"--device", "nvidia.com/gpu=GPU-2"}));
  EXPECT_NE(std::find(w.env.begin(), w.env.end(), "CUDA_VISIBLE_DEVICES=2"), w.env.end())
      << "a restarted engine reads the host's numbering back from the client";
  EXPECT_EQ(std::find(w.env.begin(), w.env.end(), "PATH=/opt/in/image/bin"), w.env.end());
  EXPECT_TRUE(Has(w.argv, {"sha256:" + std::string(64, 'a'), "python3", "train.py"}));
}

TEST(ContainerLauncherTest, AShimsRunIsNamedFromItsExitRecord) {
  EXPECT_EQ(ContainerNameFromRecord("abcd1234", "/s/logs/3/17-2.exit"), "drover-abcd1234-17-2");
  EXPECT_EQ(ContainerNameFromRecord("abcd1234", "17-2.exit"), "drover-abcd1234-17-2");
  for (const char* bad : {"", "/s/logs/3/17-2.out", "/s/logs/3/-2.exit", "/s/logs/3/17-.exit",
                          "/s/logs/3/x-2.exit", "/s/logs/3/.exit", "/s/logs/3/1-2-3.exit",
                          "/s/logs/3/99999999999999999999-1.exit",
                          "/s/logs/3/1-99999999999.exit"}) {
    EXPECT_EQ(ContainerNameFromRecord("abcd1234", bad), "") << bad;
  }
}

TEST(ContainerLauncherTest, TheRunsEnvironmentGoesInByAFileNeverThroughTheClient) {
  const fs::path dir = fs::temp_directory_path() / ("wrap-env-" + std::to_string(getpid()));
  fs::create_directories(dir);
  RecordingLauncher inner;
  ContainerLauncher launcher(inner, "abcd1234");
  LaunchSpec ls;
  ls.argv = {"true"};
  ls.cwd = "/store/runs/3";
  ls.stdout_path = (dir / "3-1.out").string();
  ls.env = {"CUDA_VISIBLE_DEVICES=2", "DROVER_RUN_ID=3", "LD_PRELOAD=/tmp/x.so", "*=x",
            "MULTI=a\nb"};
  ls.request.run_id = 3;
  ls.request.attempt = 1;
  ls.request.container = ContainerSpec{};
  ls.request.container->image_id = "sha256:" + std::string(64, 'a');
  ls.request.gpu_uuids = {"GPU-2"};
  ASSERT_TRUE(launcher.Start(ls).ok());
  const LaunchSpec& w = inner.started.back();
  const std::string file = (dir / "3-1.env").string();
  EXPECT_TRUE(Has(w.argv, {"--env-file=" + file}));
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "CUDA_VISIBLE_DEVICES=0\nDROVER_RUN_ID=3\nLD_PRELOAD=/tmp/x.so\n");
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(Has(w.argv, {"--env=MULTI=a\nb"})) << "a value of more than one line: inline";
  for (const std::string& kv : w.env) {
    EXPECT_NE(kv.rfind("LD_PRELOAD=", 0), 0u) << "the spec's env never reaches the client";
    EXPECT_NE(kv.rfind("DROVER_RUN_ID=", 0), 0u);
  }
  for (const std::string& a : w.argv) EXPECT_EQ(a.find("*"), std::string::npos) << a;
  fs::remove_all(dir);
}

TEST(ContainerLauncherTest, OnlyTheRuntimesOwnAccountOfAFailedStartIsALaunchError) {
  const fs::path dir = fs::temp_directory_path() / ("judge-" + std::to_string(getpid()));
  fs::create_directories(dir);
  RecordingLauncher inner;
  ContainerLauncher launcher(inner, "abcd1234");
  auto judge = [&](int code, const std::string& stderr_text) {
    LaunchSpec ls;
    ls.argv = {"true"};
    ls.stderr_path = (dir / "err").string();
    std::ofstream(ls.stderr_path) << stderr_text;
    ls.request.run_id = 1;
    ls.request.attempt = 1;
    ls.request.container = ContainerSpec{};
    auto pid = launcher.Start(ls);
    ProcessExit e;
    e.handle = *pid;
    e.exit_code = code;
    inner.exits.push_back(e);
    return launcher.Wait(0).exits.at(0);
  };
  auto launch = [](const ProcessExit& e) { return e.outcome == AttemptOutcome::kLaunchError; };
  EXPECT_TRUE(launch(judge(125, "Error: statfs /nope: no such file or directory\n")));
  EXPECT_TRUE(launch(judge(127, "Error: runc: exec: \"x\": executable file not found in $PATH: "
                                "OCI runtime attempted to invoke a command that was not found\n")));
  EXPECT_TRUE(launch(judge(1, "ERROR (catatonit:7): failed to exec pid1: No such file or directory\n")));
  // The program's own words and codes are its own.
  EXPECT_FALSE(launch(judge(1, "Error: transient\n")));
  EXPECT_FALSE(launch(judge(1, "warning: OCI runtime hooks are fine\n")));
  EXPECT_FALSE(launch(judge(126, "Error: x\n")));
  EXPECT_FALSE(launch(judge(125, "")));
  EXPECT_FALSE(launch(judge(125, "Error: early\nthen the program went on\n")));
  const ProcessExit killed = judge(137, "");
  EXPECT_EQ(killed.signal, 9);
  EXPECT_FALSE(killed.outcome.has_value());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::container
