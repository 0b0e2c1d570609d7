// The nvidia-smi fallback: its CSV, and the probe end to end against a fake nvidia-smi on PATH.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gpu/gpu_probe.h"

namespace drover {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

constexpr char kGpuCsv[] =
    "0, GPU-5d5d2a8c-3f1e-7b2a-9c41-0e8f6a1b2c3d, NVIDIA H200, 87, 40213, 143771, 54, 312.45\n"
    "1, GPU-a1b2c3d4-0000-1111-2222-333344445555, NVIDIA H200, [N/A], 0, 143771, [N/A], "
    "[Not Supported]\n";
constexpr char kAppsCsv[] =
    "GPU-5d5d2a8c-3f1e-7b2a-9c41-0e8f6a1b2c3d, 41234, 39800\n"
    "GPU-5d5d2a8c-3f1e-7b2a-9c41-0e8f6a1b2c3d, 41290, [N/A]\n"
    "GPU-ffffffff-0000-0000-0000-000000000000, 999, 10\n";

TEST(ParseNvidiaSmiCsvTest, GpusAndTheirProcesses) {
  auto samples = ParseNvidiaSmiCsv(kGpuCsv, kAppsCsv, 777);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 2u);
  const GpuSample& a = (*samples)[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.t_ms, 777);
  EXPECT_EQ(a.utilization, 87);
  EXPECT_EQ(a.memory_used, 40213 * kMiB);
  EXPECT_EQ(a.memory_total, 143771 * kMiB);
  EXPECT_EQ(a.temperature_c, 54);
  EXPECT_DOUBLE_EQ(a.power_w, 312.45);
  EXPECT_EQ(a.pcie_tx_bytes_per_s, -1);  // not in nvidia-smi's CSV
  EXPECT_EQ(a.pcie_rx_bytes_per_s, -1);
  ASSERT_EQ(a.processes.size(), 2u);
  EXPECT_EQ(a.processes[0].pid, 41234);
  EXPECT_EQ(a.processes[0].memory_used, 39800 * kMiB);
  EXPECT_EQ(a.processes[1].pid, 41290);
  EXPECT_EQ(a.processes[1].memory_used, -1);

  const GpuSample& b = (*samples)[1];
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.utilization, -1);
  EXPECT_EQ(b.memory_used, 0);
  EXPECT_EQ(b.temperature_c, -1);
  EXPECT_EQ(b.power_w, -1);
  EXPECT_TRUE(b.processes.empty());  // the process of an unlisted GPU is dropped
}

TEST(ParseNvidiaSmiCsvTest, NoProcessesAndOddSpacing) {
  for (const char* apps : {"", "\n", "No running processes found\n"}) {
    auto samples = ParseNvidiaSmiCsv(
        "\n0, GPU-1, Tesla V100-SXM2-16GB, 0, N/A, 16160, 35, 41.20 \r\n\n", apps, 1);
    ASSERT_TRUE(samples.ok()) << samples.status().message();
    ASSERT_EQ(samples->size(), 1u);
    EXPECT_EQ((*samples)[0].memory_used, -1);
    EXPECT_EQ((*samples)[0].memory_total, 16160 * kMiB);
    EXPECT_DOUBLE_EQ((*samples)[0].power_w, 41.2);
    EXPECT_TRUE((*samples)[0].processes.empty());
  }
  auto none = ParseNvidiaSmiCsv("", "", 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParseNvidiaSmiCsvTest, MalformedLinesAreNamed) {
  struct Case {
    std::string gpu, apps, message;
  };
  const Case cases[] = {
      {"0, GPU-1, NVIDIA H200, 87, 40213\n", "",
       "nvidia-smi --query-gpu output line 1: expected 8 fields (index, uuid, name, "
       "utilization.gpu, memory.used, memory.total, temperature.gpu, power.draw), got 5: '0, "
       "GPU-1, NVIDIA H200, 87, 40213'"},
      {"0, GPU-1, H200, 87, 1, 2, 3, 4\nzero, GPU-2, H200, 87, 1, 2, 3, 4\n", "",
       "nvidia-smi --query-gpu output line 2: index 'zero' is not a whole number"},
      {"0, GPU-1, H200, 87%, 1, 2, 3, 4\n", "",
       "nvidia-smi --query-gpu output line 1: utilization.gpu '87%' is not a number"},
      {"0, GPU-1, H200, 87, 1, 2, 3, 312.45 W\n", "",
       "nvidia-smi --query-gpu output line 1: power.draw '312.45 W' is not a number"},
      {"0, [N/A], H200, 87, 1, 2, 3, 4\n", "",
       "nvidia-smi --query-gpu output line 1: the GPU has no uuid"},
      {"0, GPU-1, H200, 87, 1, 2, 3, 4\n", "GPU-1, 12\n",
       "nvidia-smi --query-compute-apps output line 1: expected 3 fields (gpu_uuid, pid, "
       "used_memory), got 2: 'GPU-1, 12'"},
      {"0, GPU-1, H200, 87, 1, 2, 3, 4\n", "\nGPU-1, abc, 12\n",
       "nvidia-smi --query-compute-apps output line 2: pid 'abc' is not a whole number"},
  };
  for (const Case& c : cases) {
    auto samples = ParseNvidiaSmiCsv(c.gpu, c.apps, 0);
    ASSERT_FALSE(samples.ok()) << c.gpu << c.apps;
    EXPECT_EQ(samples.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(samples.status().message(), c.message);
  }
}

TEST(ParseNvidiaSmiDevicesTest, DevicesFromTheGpuQuery) {
  auto devices = ParseNvidiaSmiDevices(kGpuCsv);
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].index, 0);
  EXPECT_EQ((*devices)[0].uuid, "GPU-5d5d2a8c-3f1e-7b2a-9c41-0e8f6a1b2c3d");
  EXPECT_EQ((*devices)[0].name, "NVIDIA H200");
  EXPECT_EQ((*devices)[0].memory_total, 143771 * kMiB);
  EXPECT_EQ((*devices)[0].memory_used, 40213 * kMiB);
  EXPECT_EQ((*devices)[1].index, 1);

  auto unknown_used = ParseNvidiaSmiDevices("0, GPU-1, H200, 0, [N/A], 1024, 30, 60\n");
  ASSERT_TRUE(unknown_used.ok());
  EXPECT_EQ((*unknown_used)[0].memory_used, 0);

  auto no_total = ParseNvidiaSmiDevices("0, GPU-1, GH200, 0, 10, [N/A], 30, 60\n");
  ASSERT_FALSE(no_total.ok());
  EXPECT_EQ(no_total.status().message(),
            "nvidia-smi gives no memory.total for GPU 0 (GPU-1), so no work can be placed on it "
            "by memory; use --fake-gpus to declare the GPUs");
}

// A directory with a fake `nvidia-smi` in it, put first on PATH for the test's lifetime.
class FakeNvidiaSmi {
 public:
  // `script` is the body of a /bin/sh script.
  explicit FakeNvidiaSmi(const std::string& script) {
    std::string tmpl = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    tmpl += "/drover-smi-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    std::string tool = dir_ + "/nvidia-smi";
    std::ofstream(tool) << "#!/bin/sh\n" << script;
    ::chmod(tool.c_str(), 0755);
    const char* path = std::getenv("PATH");
    had_path_ = path != nullptr;
    if (had_path_) old_path_ = path;
  }
  ~FakeNvidiaSmi() {
    if (had_path_) {
      ::setenv("PATH", old_path_.c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // Puts the fake first on PATH, or makes it the only directory (no real nvidia-smi found).
  void Prepend() { ::setenv("PATH", (dir_ + ":" + old_path_).c_str(), 1); }
  void Only() { ::setenv("PATH", dir_.c_str(), 1); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string old_path_;
  bool had_path_ = false;
};

// Answers exactly the queries drover sends, and fails anything else.
const std::string kFakeTool = std::string(R"(
if [ "$1" = "-q" ]; then
  echo "==============NVSMI LOG=============="
  echo "Driver Version                            : 550.54.15"
  exit 0
fi
if [ "$2" != "--format=csv,noheader,nounits" ]; then echo "bad format: $2"; exit 3; fi
case "$1" in
  --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw)
    printf '%s' ")") + kGpuCsv +
                              R"(" ;;
  --query-compute-apps=gpu_uuid,pid,used_memory)
    printf '%s' ")" + kAppsCsv +
                              R"(" ;;
  *) echo "unknown query $1"; exit 2 ;;
esac
)";

TEST(NvidiaSmiProbeTest, EndToEndWithAFakeNvidiaSmi) {
  FakeNvidiaSmi fake(kFakeTool);
  ASSERT_FALSE(fake.dir().empty());
  fake.Prepend();
  auto probe = OpenNvidiaSmiProbe();
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  EXPECT_EQ((*probe)->Kind(), "nvidia-smi");

  auto devices = (*probe)->Devices();
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].name, "NVIDIA H200");
  EXPECT_EQ((*devices)[1].memory_total, 143771 * kMiB);

  auto samples = (*probe)->Sample(123);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_EQ((*samples)[0].t_ms, 123);
  EXPECT_EQ((*samples)[0].utilization, 87);
  ASSERT_EQ((*samples)[0].processes.size(), 2u);
  EXPECT_EQ((*samples)[0].processes[0].pid, 41234);
  EXPECT_EQ((*samples)[1].power_w, -1);

  std::string text = (*probe)->Describe();
  EXPECT_NE(text.find("GPU 0: NVIDIA H200, 143771 MiB total, 40213 MiB used, "
                      "GPU-5d5d2a8c-3f1e-7b2a-9c41-0e8f6a1b2c3d"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Driver Version                            : 550.54.15"), std::string::npos)
      << text;
}

TEST(NvidiaSmiProbeTest, SampleWithoutProcessesWhenTheAppsQueryFails) {
  FakeNvidiaSmi fake(std::string("case \"$1\" in --query-gpu=*) printf '%s' '") + kGpuCsv +
                     "' ;; *) exit 6 ;; esac\n");
  ASSERT_FALSE(fake.dir().empty());
  fake.Only();
  auto probe = OpenNvidiaSmiProbe();
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  auto samples = (*probe)->Sample(1);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_EQ((*samples)[0].utilization, 87);
  EXPECT_TRUE((*samples)[0].processes.empty());
}

TEST(NvidiaSmiProbeTest, UnavailableWhenMissingFailingOrEmpty) {
  {
    FakeNvidiaSmi fake("exit 0\n");
    ASSERT_FALSE(fake.dir().empty());
    ::unlink((fake.dir() + "/nvidia-smi").c_str());
    fake.Only();
    auto probe = OpenNvidiaSmiProbe();
    ASSERT_FALSE(probe.ok());
    EXPECT_EQ(probe.status().code(), Code::kUnavailable);
    EXPECT_EQ(probe.status().message(), "nvidia-smi is not on PATH");
  }
  {
    FakeNvidiaSmi fake(
        "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\n"
        "echo \"Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n");
    ASSERT_FALSE(fake.dir().empty());
    fake.Only();
    auto probe = OpenNvidiaSmiProbe();
    ASSERT_FALSE(probe.ok());
    EXPECT_EQ(probe.status().code(), Code::kUnavailable);
    EXPECT_EQ(probe.status().message(),
              "'nvidia-smi --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,"
              "temperature.gpu,power.draw --format=csv,noheader,nounits' failed (exit code 9): "
              "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.");
  }
  {
    FakeNvidiaSmi fake("exit 0\n");
    ASSERT_FALSE(fake.dir().empty());
    fake.Only();
    auto probe = OpenNvidiaSmiProbe();
    ASSERT_FALSE(probe.ok());
    EXPECT_EQ(probe.status().code(), Code::kUnavailable);
    EXPECT_EQ(probe.status().message(), "nvidia-smi lists no GPU");
  }
  {
    FakeNvidiaSmi fake("echo 'Usage: nvidia-smi [OPTION1 [ARG1]]'\n");
    ASSERT_FALSE(fake.dir().empty());
    fake.Only();
    auto probe = OpenNvidiaSmiProbe();
    ASSERT_FALSE(probe.ok());
    EXPECT_EQ(probe.status().code(), Code::kUnavailable);
    EXPECT_EQ(probe.status().message().rfind("nvidia-smi output not understood: nvidia-smi "
                                             "--query-gpu output line 1: expected 8 fields",
                                             0),
              0u)
        << probe.status().message();
  }
}

bool NvmlLibraryFound() {
  for (const char* name : {"libnvidia-ml.so.1", "libnvidia-ml.so"}) {
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      dlclose(lib);
      return true;
    }
  }
  return false;
}

TEST(MakeGpuProbeTest, FallsBackToNvidiaSmiThenNone) {
  if (NvmlLibraryFound()) GTEST_SKIP() << "this machine has libnvidia-ml, which comes first";
  {
    FakeNvidiaSmi fake(kFakeTool);
    ASSERT_FALSE(fake.dir().empty());
    fake.Only();
    auto probe = MakeGpuProbe("");
    ASSERT_TRUE(probe.ok()) << probe.status().message();
    EXPECT_EQ((*probe)->Kind(), "nvidia-smi");
  }
  {
    FakeNvidiaSmi fake("exit 0\n");
    ASSERT_FALSE(fake.dir().empty());
    ::unlink((fake.dir() + "/nvidia-smi").c_str());
    fake.Only();
    auto probe = MakeGpuProbe("");
    ASSERT_TRUE(probe.ok()) << probe.status().message();
    EXPECT_EQ((*probe)->Kind(), "none");
    EXPECT_EQ((*probe)->Describe(),
              "no GPU: NVML not found (libnvidia-ml.so.1): no NVIDIA driver on this machine; use "
              "--fake-gpus 2x16GiB to schedule onto declared GPUs; nvidia-smi fallback: "
              "nvidia-smi is not on PATH\n");
  }
}

}  // namespace
}  // namespace drover
