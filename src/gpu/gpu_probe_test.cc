#include "gpu/gpu_probe.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace drover {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(ParseFakeGpusTest, CountTimesSize) {
  auto gpus = ParseFakeGpus("2x16GiB");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*gpus)[i].index, i);
    EXPECT_EQ((*gpus)[i].memory_total, 16 * kGiB);
    EXPECT_EQ((*gpus)[i].memory_used, 0);
    EXPECT_EQ((*gpus)[i].name, "Fake GPU");
    EXPECT_EQ((*gpus)[i].uuid, "GPU-fake-" + std::to_string(i));
  }
}

TEST(ParseFakeGpusTest, ListOfSizes) {
  auto gpus = ParseFakeGpus("16GiB,24GiB");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].memory_total, 16 * kGiB);
  EXPECT_EQ((*gpus)[1].memory_total, 24 * kGiB);
  EXPECT_EQ((*gpus)[1].index, 1);
}

TEST(ParseFakeGpusTest, MixedGroupsContinueIndices) {
  auto gpus = ParseFakeGpus("1x80GB, 2x16GiB");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[0].memory_total, int64_t{80'000'000'000});
  EXPECT_EQ((*gpus)[1].memory_total, 16 * kGiB);
  EXPECT_EQ((*gpus)[2].index, 2);
  EXPECT_EQ((*gpus)[2].uuid, "GPU-fake-2");
}

TEST(ParseFakeGpusTest, ASizeWithoutAUnitSaysWhichUnitsThereAre) {
  auto gpus = ParseFakeGpus("2x16");
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.status().message().find("size '16' has no unit (write 16GiB, 16GB or 16MiB)"),
            std::string::npos)
      << gpus.status().message();
}

TEST(ParseFakeGpusTest, MaximumCount) {
  auto gpus = ParseFakeGpus("64x1GiB");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  EXPECT_EQ(gpus->size(), 64u);
}

TEST(ParseFakeGpusTest, ErrorsNameTheInputAndTheForm) {
  for (const char* bad : {"", "2x", "x16GiB", "0x16GiB", "65x16GiB", "-1x16GiB", "twox16GiB",
                          "2x16Gib", "16GiB,", "2x0GiB", "60x1GiB,5x1GiB", "2y16GiB", "2x16",
                          "16", "2x16.5", "1x512KiB"}) {
    auto gpus = ParseFakeGpus(bad);
    ASSERT_FALSE(gpus.ok()) << "accepted '" << bad << "'";
    EXPECT_EQ(gpus.status().code(), Code::kInvalidArgument) << bad;
    const std::string& m = gpus.status().message();
    EXPECT_EQ(m.rfind(std::string("--fake-gpus '") + bad + "': ", 0), 0u) << m;
    EXPECT_NE(m.find("write COUNTxSIZE[,COUNTxSIZE...], e.g. 2x16GiB"), std::string::npos) << m;
  }
}

TEST(FakeGpuProbeTest, DevicesKindAndDescription) {
  auto gpus = ParseFakeGpus("2x16GiB");
  ASSERT_TRUE(gpus.ok());
  FakeGpuProbe probe(*gpus);
  EXPECT_EQ(probe.Kind(), "fake");
  auto devices = probe.Devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 2u);
  std::string text = probe.Describe();
  EXPECT_NE(text.find("fake"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 1"), std::string::npos) << text;
  EXPECT_NE(text.find("16GiB"), std::string::npos) << text;
}

TEST(MakeGpuProbeTest, FakeSpecGivesFakeProbe) {
  auto probe = MakeGpuProbe("1x80GB,2x16GiB");
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  EXPECT_EQ((*probe)->Kind(), "fake");
  auto devices = (*probe)->Devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 3u);
}

TEST(MakeGpuProbeTest, BadFakeSpecIsAnError) {
  auto probe = MakeGpuProbe("2x");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), Code::kInvalidArgument);
}

// Whatever this machine has, the default probe works: NVML or nvidia-smi with its GPUs, or no
// GPUs at all (and then it says why, for both sources).
TEST(MakeGpuProbeTest, DefaultIsNvmlNvidiaSmiOrNone) {
  auto probe = MakeGpuProbe("");
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  std::string kind = (*probe)->Kind();
  ASSERT_TRUE(kind == "nvml" || kind == "nvidia-smi" || kind == "none") << kind;
  auto devices = (*probe)->Devices();
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  std::string text = (*probe)->Describe();
  if (kind == "none") {
    EXPECT_TRUE(devices->empty());
    EXPECT_NE(text.find("NVML"), std::string::npos) << text;
    EXPECT_NE(text.find("nvidia-smi"), std::string::npos) << text;
  } else {
    EXPECT_FALSE(devices->empty());
  }
  EXPECT_FALSE(text.empty());
  auto samples = (*probe)->Sample(1000);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  EXPECT_EQ(samples->size(), devices->size());
}

bool HasNvmlLibrary() {
  for (const char* name : {"libnvidia-ml.so.1", "libnvidia-ml.so"}) {
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      dlclose(lib);
      return true;
    }
  }
  return false;
}

TEST(OpenNvmlProbeTest, MissingLibraryIsUnavailableWithAdvice) {
  if (HasNvmlLibrary()) GTEST_SKIP() << "this machine has libnvidia-ml; see RealGpus";
  auto probe = OpenNvmlProbe();
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), Code::kUnavailable);
  EXPECT_EQ(probe.status().message(),
            "NVML not found (libnvidia-ml.so.1): no NVIDIA driver on this machine; use "
            "--fake-gpus 2x16GiB to schedule onto declared GPUs");
}

// Runs only where a driver is installed (the GPU machine): the real devices come back.
TEST(OpenNvmlProbeTest, RealGpus) {
  if (!HasNvmlLibrary()) GTEST_SKIP() << "no libnvidia-ml on this machine";
  auto probe = OpenNvmlProbe();
  if (!probe.ok()) {
    EXPECT_EQ(probe.status().code(), Code::kUnavailable);
    GTEST_SKIP() << probe.status().message();
  }
  EXPECT_EQ((*probe)->Kind(), "nvml");
  auto devices = (*probe)->Devices();
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_FALSE(devices->empty());
  for (size_t i = 0; i < devices->size(); ++i) {
    const GpuDevice& d = (*devices)[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_GT(d.memory_total, 0);
    EXPECT_FALSE(d.name.empty());
    EXPECT_EQ(d.uuid.rfind("GPU-", 0), 0u) << d.uuid;
  }
  std::string text = (*probe)->Describe();
  EXPECT_NE(text.find("NVIDIA driver"), std::string::npos) << text;
  EXPECT_NE(text.find((*devices)[0].uuid), std::string::npos) << text;

  // Telemetry: memory always; the rest where this GPU supports it, within sane ranges.
  auto samples = (*probe)->Sample(1234);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), devices->size());
  for (size_t i = 0; i < samples->size(); ++i) {
    const GpuSample& s = (*samples)[i];
    EXPECT_EQ(s.index, static_cast<int>(i));
    EXPECT_EQ(s.t_ms, 1234);
    EXPECT_EQ(s.memory_total, (*devices)[i].memory_total);
    EXPECT_GE(s.memory_used, 0);
    EXPECT_LE(s.utilization, 100);
    EXPECT_LT(s.temperature_c, 150);
    EXPECT_LT(s.power_w, 5000);
    for (const GpuProcess& p : s.processes) {
      EXPECT_GT(p.pid, 0);
      EXPECT_LE(p.memory_used, s.memory_total);
    }
  }
}

}  // namespace
}  // namespace drover
