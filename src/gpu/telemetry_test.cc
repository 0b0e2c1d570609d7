// Telemetry: scripts for fake GPUs, their replay, the default Sample, and NVML's process records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "gpu/gpu_probe.h"
#include "gpu/nvml_processes.h"

namespace drover {
namespace {

constexpr int64_t kTelemetryMiB = int64_t{1} << 20;
constexpr int64_t kTelemetryGiB = int64_t{1} << 30;

TEST(ParseTelemetryScriptTest, StepsFieldsAndUnits) {
  auto script = ParseTelemetryScript(R"(# warm-up, then a busy phase
{"at": "0s", "gpu": 0, "utilization": 95, "memory_used": "10GiB", "temperature": 61, "power": 250}

{"at": "30s", "gpu": 0, "utilization": 3}
  {"at": 1500, "gpu": 1, "memory_used": 1048576, "pcie_tx": "12GB/s", "pcie_rx": 2000}
{"at": "1m30s", "power": 99.5}
)");
  ASSERT_TRUE(script.ok()) << script.status().message();
  EXPECT_EQ(script->repeat_ms, 0);
  ASSERT_EQ(script->steps.size(), 4u);
  const auto& s = script->steps;
  EXPECT_EQ(s[0].at_ms, 0);
  EXPECT_EQ(s[0].gpu, 0);
  EXPECT_EQ(s[0].utilization, 95);
  EXPECT_EQ(s[0].memory_used, 10 * kTelemetryGiB);
  EXPECT_EQ(s[0].temperature_c, 61);
  EXPECT_EQ(s[0].power_w, 250);
  EXPECT_FALSE(s[0].pcie_tx_bytes_per_s.has_value());
  // Sorted by time: the plain number is 1500 ms, before 30s.
  EXPECT_EQ(s[1].at_ms, 1500);
  EXPECT_EQ(s[1].gpu, 1);
  EXPECT_EQ(s[1].memory_used, kTelemetryMiB);
  EXPECT_EQ(s[1].pcie_tx_bytes_per_s, 12e9);
  EXPECT_EQ(s[1].pcie_rx_bytes_per_s, 2000);
  EXPECT_FALSE(s[1].utilization.has_value());
  EXPECT_EQ(s[2].at_ms, 30'000);
  EXPECT_EQ(s[2].utilization, 3);
  EXPECT_FALSE(s[2].memory_used.has_value());
  EXPECT_EQ(s[3].at_ms, 90'000);
  EXPECT_EQ(s[3].gpu, 0);  // the default
  EXPECT_EQ(s[3].power_w, 99.5);
}

TEST(ParseTelemetryScriptTest, SortIsStableAndRepeatIsRead) {
  auto script = ParseTelemetryScript(
      "{\"repeat\": \"60s\"}\n"
      "{\"at\": \"10s\", \"utilization\": 1}\n"
      "{\"at\": \"500ms\", \"utilization\": 2}\n"
      "{\"at\": \"10s\", \"utilization\": 3}\n");
  ASSERT_TRUE(script.ok()) << script.status().message();
  EXPECT_EQ(script->repeat_ms, 60'000);
  ASSERT_EQ(script->steps.size(), 3u);
  EXPECT_EQ(script->steps[0].utilization, 2);
  EXPECT_EQ(script->steps[1].utilization, 1);  // same time: file order kept
  EXPECT_EQ(script->steps[2].utilization, 3);
}

TEST(ParseTelemetryScriptTest, ErrorsNameTheLineAndTheAcceptedForm) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"{\"at\": \"0s\", \"utilization\": 5}\n\n{\"at\": \"1s\", \"utilisation\": 5}",
       "telemetry script line 3: 'utilisation' is not a field; did you mean 'utilization'? The "
       "fields are at, gpu, utilization, memory_used, temperature, power, pcie_tx, pcie_rx, xid, "
       "ecc_corrected, ecc_uncorrected, retired_pages, retired_pages_pending, remap_failed, "
       "throttle, sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz (and \"repeat\" on a line of "
       "its own)"},
      {"{\"at\": \"0s\", \"colour\": 5}",
       "telemetry script line 1: 'colour' is not a field; the fields are at, gpu, utilization, "
       "memory_used, temperature, power, pcie_tx, pcie_rx, xid, ecc_corrected, ecc_uncorrected, "
       "retired_pages, retired_pages_pending, remap_failed, throttle, sm_clock_mhz, "
       "sm_clock_max_mhz, mem_clock_mhz (and \"repeat\" on a line of its own)"},
      {"{\"at\": \"0s\", \"utilization\": 150}",
       "telemetry script line 1: 'utilization' must be a percentage from 0 to 100 (got 150)"},
      {"{\"at\": \"0s\", \"utilization\": \"high\"}",
       "telemetry script line 1: 'utilization' must be a percentage from 0 to 100"},
      {"{\"gpu\": 0, \"utilization\": 5}",
       "telemetry script line 1: 'at' is missing; say when the step applies, e.g. {\"at\": "
       "\"30s\", \"gpu\": 0, \"utilization\": 95}"},
      {"{\"at\": \"soon\", \"utilization\": 5}",
       "telemetry script line 1: 'at' must be a duration such as \"500ms\", \"30s\" or \"5m\", "
       "or a number of milliseconds (got \"soon\")"},
      {"{\"at\": \"30\", \"utilization\": 5}",
       "telemetry script line 1: 'at': \"30\" has no unit; write \"30s\" or \"30ms\", or the "
       "number 30 (milliseconds) without quotes"},
      {"{\"at\": -5, \"utilization\": 5}",
       "telemetry script line 1: 'at' must be a duration such as \"500ms\", \"30s\" or \"5m\", "
       "or a number of milliseconds"},
      {"{\"at\": \"0s\", \"gpu\": -1, \"utilization\": 5}",
       "telemetry script line 1: 'gpu' must be a GPU index, a whole number from 0 (got -1)"},
      {"{\"at\": \"0s\", \"gpu\": 1.5, \"utilization\": 5}",
       "telemetry script line 1: 'gpu' must be a GPU index, a whole number from 0 (got 1.5)"},
      {"{\"at\": \"0s\", \"memory_used\": \"10 gigs\"}",
       "telemetry script line 1: 'memory_used' must be a size such as \"10GiB\" or \"512MiB\", "
       "or a number of bytes (got \"10 gigs\")"},
      {"{\"at\": \"0s\", \"pcie_rx\": true}",
       "telemetry script line 1: 'pcie_rx' must be a rate such as \"12GB/s\" or \"512MiB\", or "
       "a number of bytes per second"},
      {"{\"at\": \"0s\", \"temperature\": 500}",
       "telemetry script line 1: 'temperature' must be degrees Celsius, a number from 0 to 200 "
       "(got 500)"},
      {"{\"at\": \"0s\", \"power\": -3}",
       "telemetry script line 1: 'power' must be watts, a number from 0 (got -3)"},
      {"{\"at\": \"0s\", \"gpu\": 1}",
       "telemetry script line 1: the step sets no value; give at least one of utilization, "
       "memory_used, temperature, power, pcie_tx, pcie_rx, or a health field (xid, "
       "ecc_uncorrected, throttle, ...)"},
      {"# only a comment\n{\"at\": \"0s\", \"utilization\": 5",
       "telemetry script line 2: not a JSON object; write one object per line, e.g. {\"at\": "
       "\"30s\", \"gpu\": 0, \"utilization\": 95}"},
      {"[1, 2]",
       "telemetry script line 1: not a JSON object; write one object per line, e.g. {\"at\": "
       "\"30s\", \"gpu\": 0, \"utilization\": 95}"},
      {"{\"repeat\": \"60s\", \"at\": \"0s\", \"utilization\": 5}",
       "telemetry script line 1: 'repeat' goes on a line of its own, e.g. {\"repeat\": \"60s\"}"},
      {"{\"repeat\": \"60s\"}\n{\"repeat\": \"30s\"}\n{\"at\": 0, \"utilization\": 5}",
       "telemetry script line 2: a second 'repeat' (the first is on line 1)"},
      {"{\"repeat\": \"0s\"}\n{\"at\": 0, \"utilization\": 5}",
       "telemetry script line 1: 'repeat' must be longer than 0, e.g. \"60s\""},
      {"{\"at\": 0, \"utilization\": 5}\n{\"at\": \"70s\", \"utilization\": 6}\n"
       "{\"repeat\": \"1m\"}",
       "telemetry script line 2: the step at 1m10s never applies: the script starts over every "
       "1m00s (line 3); move it before that"},
      {"# nothing\n\n",
       "telemetry script has no steps; write one JSON object per line, e.g. {\"at\": \"30s\", "
       "\"gpu\": 0, \"utilization\": 95}"},
  };
  for (const Case& c : cases) {
    auto script = ParseTelemetryScript(c.text);
    ASSERT_FALSE(script.ok()) << "accepted: " << c.text;
    EXPECT_EQ(script.status().code(), Code::kInvalidArgument) << c.text;
    EXPECT_EQ(script.status().message(), c.message) << c.text;
  }
}

// A temporary directory, removed with its files.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    tmpl += "/drover-gpu-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

TEST(LoadTelemetryScriptTest, ReadsTheFileAndNamesItInErrors) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string good = dir.Write("good.jsonl", "{\"at\": \"1s\", \"utilization\": 50}\n");
  auto script = LoadTelemetryScript(good);
  ASSERT_TRUE(script.ok()) << script.status().message();
  ASSERT_EQ(script->steps.size(), 1u);
  EXPECT_EQ(script->steps[0].at_ms, 1000);

  std::string bad = dir.Write("bad.jsonl", "{\"at\": \"1s\", \"utilisation\": 50}\n");
  script = LoadTelemetryScript(bad);
  ASSERT_FALSE(script.ok());
  EXPECT_EQ(script.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(script.status().message().rfind(bad + ": telemetry script line 1: 'utilisation'", 0),
            0u)
      << script.status().message();

  std::string missing = dir.path() + "/missing.jsonl";
  script = LoadTelemetryScript(missing);
  ASSERT_FALSE(script.ok());
  EXPECT_EQ(script.status().code(), Code::kNotFound);
  EXPECT_EQ(script.status().message(),
            "cannot read telemetry script " + missing + ": No such file or directory");
}

// A probe that only knows its devices: Sample falls back to GpuProbe's default.
class DevicesOnlyProbe : public GpuProbe {
 public:
  Result<std::vector<GpuDevice>> Devices() override {
    return std::vector<GpuDevice>{
        {.index = 0, .memory_total = 80 * kTelemetryGiB, .memory_used = kTelemetryGiB},
        {.index = 1, .memory_total = 40 * kTelemetryGiB, .memory_used = 0}};
  }
  std::string Kind() const override { return "test"; }
  std::string Describe() override { return ""; }
};

TEST(GpuProbeSampleTest, DefaultGivesMemoryOnly) {
  DevicesOnlyProbe probe;
  auto samples = probe.Sample(42);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 2u);
  const GpuSample& s = (*samples)[0];
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(s.t_ms, 42);
  EXPECT_EQ(s.memory_used, kTelemetryGiB);
  EXPECT_EQ(s.memory_total, 80 * kTelemetryGiB);
  EXPECT_EQ(s.utilization, -1);
  EXPECT_EQ(s.temperature_c, -1);
  EXPECT_EQ(s.power_w, -1);
  EXPECT_EQ(s.pcie_tx_bytes_per_s, -1);
  EXPECT_EQ(s.pcie_rx_bytes_per_s, -1);
  EXPECT_TRUE(s.processes.empty());
  EXPECT_EQ((*samples)[1].index, 1);
  EXPECT_EQ((*samples)[1].memory_total, 40 * kTelemetryGiB);
}

FakeGpuProbe TwoFakeGpus() {
  auto gpus = ParseFakeGpus("2x16GiB");
  EXPECT_TRUE(gpus.ok());
  return FakeGpuProbe(*gpus);
}

TEST(FakeGpuProbeSampleTest, WithoutScript) {
  FakeGpuProbe probe = TwoFakeGpus();
  auto samples = probe.Sample(5000);
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const GpuSample& s = (*samples)[i];
    EXPECT_EQ(s.index, i);
    EXPECT_EQ(s.t_ms, 5000);
    EXPECT_EQ(s.utilization, 0);
    EXPECT_EQ(s.memory_used, 0);
    EXPECT_EQ(s.memory_total, 16 * kTelemetryGiB);
    EXPECT_EQ(s.temperature_c, -1);
    EXPECT_EQ(s.power_w, -1);
    EXPECT_EQ(s.pcie_tx_bytes_per_s, -1);
    EXPECT_TRUE(s.processes.empty());
  }
}

TelemetryScript MustParse(const std::string& text) {
  auto script = ParseTelemetryScript(text);
  EXPECT_TRUE(script.ok()) << script.status().message();
  return script.ok() ? *script : TelemetryScript{};
}

TEST(FakeGpuProbeSampleTest, ScriptReplaysFromTheFirstCallAndCarriesValues) {
  FakeGpuProbe probe = TwoFakeGpus();
  probe.SetScript(MustParse(R"(
{"at": "0s", "gpu": 0, "utilization": 95, "memory_used": "10GiB", "temperature": 61, "power": 250}
{"at": "10s", "gpu": 1, "utilization": 40, "pcie_rx": 1000}
{"at": "30s", "gpu": 0, "utilization": 3}
{"at": "30s", "gpu": 7, "utilization": 77}
)"));
  const Millis t0 = 1'700'000'000'000;
  auto at = [&](Millis offset) {
    auto samples = probe.Sample(t0 + offset);
    EXPECT_TRUE(samples.ok());
    EXPECT_EQ(samples->size(), 2u);  // the step for GPU 7 is ignored
    return *samples;
  };
  auto s = at(0);
  EXPECT_EQ(s[0].t_ms, t0);
  EXPECT_EQ(s[0].utilization, 95);
  EXPECT_EQ(s[0].memory_used, 10 * kTelemetryGiB);
  EXPECT_EQ(s[0].memory_total, 16 * kTelemetryGiB);
  EXPECT_EQ(s[0].temperature_c, 61);
  EXPECT_EQ(s[0].power_w, 250);
  EXPECT_EQ(s[0].pcie_rx_bytes_per_s, -1);
  EXPECT_EQ(s[1].utilization, 0);  // no step for GPU 1 yet: the unscripted values
  EXPECT_EQ(s[1].memory_used, 0);

  s = at(9'999);
  EXPECT_EQ(s[1].utilization, 0);
  s = at(10'000);
  EXPECT_EQ(s[1].utilization, 40);
  EXPECT_EQ(s[1].pcie_rx_bytes_per_s, 1000);
  EXPECT_EQ(s[1].temperature_c, -1);
  EXPECT_EQ(s[0].utilization, 95);

  // At 30s GPU 0's utilisation changes; what the step leaves out keeps its earlier value.
  s = at(45'000);
  EXPECT_EQ(s[0].utilization, 3);
  EXPECT_EQ(s[0].memory_used, 10 * kTelemetryGiB);
  EXPECT_EQ(s[0].temperature_c, 61);
  EXPECT_EQ(s[0].power_w, 250);
  EXPECT_EQ(s[1].utilization, 40);

  // Without repeat the last values hold.
  s = at(3'600'000);
  EXPECT_EQ(s[0].utilization, 3);
  EXPECT_EQ(s[1].utilization, 40);

  // A clock that steps back reads as the start.
  s = at(-5'000);
  EXPECT_EQ(s[0].utilization, 95);
  EXPECT_EQ(s[1].utilization, 0);
}

TEST(FakeGpuProbeSampleTest, RepeatStartsOverFromTheUnscriptedValues) {
  FakeGpuProbe probe = TwoFakeGpus();
  probe.SetScript(MustParse(R"(
{"at": "5s", "gpu": 0, "utilization": 90, "temperature": 70}
{"at": "40s", "gpu": 0, "utilization": 10}
{"repeat": "60s"}
)"));
  const Millis t0 = 1000;
  auto util = [&](Millis offset) {
    auto samples = probe.Sample(t0 + offset);
    EXPECT_TRUE(samples.ok());
    return std::make_pair((*samples)[0].utilization, (*samples)[0].temperature_c);
  };
  EXPECT_EQ(util(0), std::make_pair(0.0, -1.0));
  EXPECT_EQ(util(5'000), std::make_pair(90.0, 70.0));
  EXPECT_EQ(util(59'999), std::make_pair(10.0, 70.0));
  // The second cycle: before 5s the values are those without a script again.
  EXPECT_EQ(util(60'000), std::make_pair(0.0, -1.0));
  EXPECT_EQ(util(64'999), std::make_pair(0.0, -1.0));
  EXPECT_EQ(util(65'000), std::make_pair(90.0, 70.0));
  EXPECT_EQ(util(100'000), std::make_pair(10.0, 70.0));
  EXPECT_EQ(util(10 * 60'000 + 6'000), std::make_pair(90.0, 70.0));
}

TEST(FakeGpuProbeSampleTest, SetScriptRestartsAtTheNextCall) {
  FakeGpuProbe probe = TwoFakeGpus();
  TelemetryScript script = MustParse("{\"at\": \"10s\", \"gpu\": 1, \"power\": 300}");
  probe.SetScript(script);
  ASSERT_TRUE(probe.Sample(0).ok());
  EXPECT_EQ((*probe.Sample(10'000))[1].power_w, 300);
  probe.SetScript(script);
  EXPECT_EQ((*probe.Sample(20'000))[1].power_w, -1);  // the new start
  EXPECT_EQ((*probe.Sample(29'999))[1].power_w, -1);
  EXPECT_EQ((*probe.Sample(30'000))[1].power_w, 300);
}

// NVML's process records: the stride is read from how far the driver wrote.
std::vector<unsigned char> Records(size_t stride,
                                   const std::vector<std::pair<unsigned, uint64_t>>& procs,
                                   size_t capacity) {
  std::vector<unsigned char> buf(capacity * nvml::kMaxRecordSize, nvml::kFill);
  for (size_t i = 0; i < procs.size(); ++i) {
    unsigned char* rec = buf.data() + i * stride;
    std::memset(rec, 0, stride);  // the driver writes whole records, padding included
    std::memcpy(rec, &procs[i].first, sizeof(unsigned));
    std::memcpy(rec + 8, &procs[i].second, sizeof(uint64_t));
    if (stride >= 24) {
      unsigned no_instance = 0xFFFFFFFF;  // gpuInstanceId, computeInstanceId outside MIG
      std::memcpy(rec + 16, &no_instance, 4);
      std::memcpy(rec + 20, &no_instance, 4);
    }
  }
  return buf;
}

TEST(NvmlProcessRecordsTest, EveryRecordSize) {
  const std::vector<std::pair<unsigned, uint64_t>> procs = {
      {4242, 3 * uint64_t{kTelemetryGiB}}, {77, ~uint64_t{0}}, {31337, uint64_t{512} << 20}};
  for (size_t stride : {16, 24, 32}) {
    std::vector<unsigned char> buf = Records(stride, procs, 8);
    auto got = nvml::ReadProcessRecords(buf.data(), buf.size(), 3);
    ASSERT_EQ(got.size(), 3u) << stride;
    EXPECT_EQ(got[0].pid, 4242) << stride;
    EXPECT_EQ(got[0].memory_used, 3 * kTelemetryGiB) << stride;
    EXPECT_EQ(got[1].pid, 77) << stride;
    EXPECT_EQ(got[1].memory_used, -1) << stride;  // NVML_VALUE_NOT_AVAILABLE
    EXPECT_EQ(got[2].pid, 31337) << stride;
    EXPECT_EQ(got[2].memory_used, 512 * kTelemetryMiB) << stride;

    auto one = Records(stride, {procs[0]}, 1);
    got = nvml::ReadProcessRecords(one.data(), one.size(), 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].pid, 4242);
  }
  std::vector<unsigned char> buf = Records(24, procs, 8);
  EXPECT_TRUE(nvml::ReadProcessRecords(buf.data(), buf.size(), 0).empty());
  // A count beyond the buffer is cut to what fits.
  EXPECT_EQ(nvml::ReadProcessRecords(buf.data(), 2 * nvml::kMaxRecordSize, 3).size(), 2u);
}

}  // namespace
}  // namespace drover
