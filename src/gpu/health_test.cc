// GPU health: MIG instances declared with --fake-gpus, the health fields of telemetry scripts and
// their replay (an XID is reported once), the health evaluation (what drains, what warns, what is
// not news), its words, the drain book, and the JSON of the health fields.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gpu/background_probe.h"
#include "gpu/drain_book.h"
#include "gpu/gpu_probe.h"
#include "gpu/health.h"
#include "gpu/health_json.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kHealthGiB = int64_t{1} << 30;

// --- MIG instances in --fake-gpus

TEST(FakeMigTest, InstancesAreDevicesOfTheirOwnNumberedAfterTheGpus) {
  auto gpus = ParseFakeGpus("2x16GiB,1x80GiB:mig=3g.40gb+2g.20gb, 24GiB");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 5u);
  // Whole GPUs keep the index they would have without MIG; GPU 2 is in MIG mode, so it is not a
  // device itself: its instances are, after GPU 3.
  EXPECT_EQ((*gpus)[0].index, 0);
  EXPECT_EQ((*gpus)[1].index, 1);
  EXPECT_EQ((*gpus)[2].index, 3);
  EXPECT_EQ((*gpus)[2].memory_total, 24 * kHealthGiB);
  EXPECT_FALSE(IsMig((*gpus)[2]));
  const GpuDevice& a = (*gpus)[3];
  const GpuDevice& b = (*gpus)[4];
  EXPECT_EQ(a.index, 4);
  EXPECT_EQ(b.index, 5);
  EXPECT_TRUE(IsMig(a));
  EXPECT_EQ(a.parent_index, 2);
  EXPECT_EQ(a.parent_uuid, "GPU-fake-2");
  EXPECT_EQ(a.uuid, "MIG-fake-2-0");
  EXPECT_EQ(b.uuid, "MIG-fake-2-1");
  EXPECT_EQ(a.mig_profile, "3g.40gb");
  EXPECT_EQ(b.mig_profile, "2g.20gb");
  EXPECT_EQ(a.memory_total, 40 * kHealthGiB);
  EXPECT_EQ(b.memory_total, 20 * kHealthGiB);
  EXPECT_EQ(a.name, "Fake GPU MIG 3g.40gb");
  EXPECT_EQ(PhysicalIndex(a), 2);
  EXPECT_EQ(PhysicalIndex((*gpus)[0]), 0);
  // CUDA takes a MIG instance by its UUID only.
  EXPECT_EQ(CudaDeviceId(a), "MIG-fake-2-0");
  EXPECT_EQ(CudaDeviceId((*gpus)[1]), "1");
  EXPECT_EQ(CudaVisibleDevices(*gpus, {1, 4}), "1,MIG-fake-2-0");
  EXPECT_EQ(CudaVisibleDevices(*gpus, {5}), "MIG-fake-2-1");
  EXPECT_EQ(CudaVisibleDevices(*gpus, {}), "");
}

TEST(FakeMigTest, EachGpuOfACountGetsTheInstances) {
  auto gpus = ParseFakeGpus("2x80GiB:MIG=1g.10gb+1g.10gb");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[0].index, 2);
  EXPECT_EQ((*gpus)[0].parent_index, 0);
  EXPECT_EQ((*gpus)[2].index, 4);
  EXPECT_EQ((*gpus)[2].parent_index, 1);
  EXPECT_EQ((*gpus)[3].uuid, "MIG-fake-1-1");
  FakeGpuProbe probe(*gpus);
  EXPECT_NE(probe.Describe().find("GPU 5: Fake GPU MIG 1g.10gb, 10GiB, MIG-fake-1-1 (MIG instance "
                                  "of GPU 1)"),
            std::string::npos)
      << probe.Describe();
}

TEST(FakeMigTest, ErrorsSayTheForm) {
  struct Case {
    const char* text;
    const char* part;
  };
  const Case cases[] = {
      {"1x80GiB:mig=4g.40gb+4g.40gb", "take 8 compute slices; a GPU has 7"},
      {"1x40GiB:mig=3g.40gb+3g.40gb", "take 80GiB of memory; the GPU has 40GiB"},
      {"1x80GiB:mig=big", "MIG profile 'big' in '1x80GiB:mig=big' is not <slices>g.<GiB>gb"},
      {"1x80GiB:mig=9g.10gb", "has slices outside 1..7"},
      {"1x80GiB:mig=", "mig= lists no instance"},
      {"1x80GiB:mig=3g.40gb++3g.40gb", "an empty MIG profile between '+'"},
      {"1x80GiB:split=2", "'split=2' after ':' is not mig=PROFILE+PROFILE..."},
  };
  for (const Case& c : cases) {
    auto gpus = ParseFakeGpus(c.text);
    ASSERT_FALSE(gpus.ok()) << c.text;
    EXPECT_NE(gpus.status().message().find(c.part), std::string::npos)
        << c.text << ": " << gpus.status().message();
  }
}

// --- health fields in telemetry scripts

TEST(HealthScriptTest, FieldsAreRead) {
  auto script = ParseTelemetryScript(
      R"({"at": "0s", "gpu": 1, "xid": 79, "ecc_uncorrected": 1, "ecc_corrected": 12, "retired_pages": 3}
{"at": "1s", "gpu": 0, "xid": [48, 63], "throttle": ["thermal", "power"], "sm_clock_mhz": 1095, "sm_clock_max_mhz": 1980, "mem_clock_mhz": 1593}
{"at": "2s", "retired_pages_pending": true, "remap_failed": false, "throttle": []}
{"at": "3s", "throttle": "hw_slowdown"}
)");
  ASSERT_TRUE(script.ok()) << script.status().message();
  const auto& s = script->steps;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].xids, std::vector<int>{79});
  EXPECT_EQ(s[0].ecc_uncorrected, 1);
  EXPECT_EQ(s[0].ecc_corrected, 12);
  EXPECT_EQ(s[0].retired_pages, 3);
  EXPECT_FALSE(s[0].throttle.has_value());
  EXPECT_EQ(s[1].xids, (std::vector<int>{48, 63}));
  ASSERT_TRUE(s[1].throttle.has_value());
  EXPECT_TRUE(s[1].throttle->known);
  EXPECT_TRUE(s[1].throttle->sw_thermal);
  EXPECT_TRUE(s[1].throttle->power_cap);
  EXPECT_FALSE(s[1].throttle->hw_slowdown);
  EXPECT_EQ(s[1].sm_clock_mhz, 1095);
  EXPECT_EQ(s[1].sm_clock_max_mhz, 1980);
  EXPECT_EQ(s[1].mem_clock_mhz, 1593);
  EXPECT_EQ(s[2].pages_pending, true);
  EXPECT_EQ(s[2].remap_failed, false);
  ASSERT_TRUE(s[2].throttle.has_value());
  EXPECT_TRUE(s[2].throttle->known);
  EXPECT_FALSE(s[2].throttle->Slowing());
  EXPECT_TRUE(s[3].throttle->hw_slowdown);
}

TEST(HealthScriptTest, ErrorsNameTheFieldAndTheForm) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {R"({"at": "0s", "xid": 0})",
       "telemetry script line 1: 'xid' must be an XID code from 1 to 999, or a list of them, e.g. "
       "79 or [48, 63] (got 0)"},
      {R"({"at": "0s", "xid": []})",
       "telemetry script line 1: 'xid' lists no XID code; write e.g. 79 or [48, 63]"},
      {R"({"at": "0s", "ecc_uncorrected": -1})",
       "telemetry script line 1: 'ecc_uncorrected' must be a count, a whole number from 0 (got "
       "-1)"},
      {R"({"at": "0s", "retired_pages_pending": 1})",
       "telemetry script line 1: 'retired_pages_pending' must be true or false (got 1)"},
      {R"({"at": "0s", "throttle": ["thermol"]})",
       "telemetry script line 1: 'throttle': \"thermol\" is not a reason (did you mean "
       "\"thermal\"?); 'throttle' must be a list of reasons from thermal, hw_thermal, "
       "hw_slowdown, power_brake, power, sync_boost, app_clocks, idle (e.g. [\"thermal\", "
       "\"power\"]; [] for none)"},
      {R"({"at": "0s", "sm_clock_mhz": "fast"})",
       "telemetry script line 1: 'sm_clock_mhz' must be megahertz, a number from 0"},
  };
  for (const Case& c : cases) {
    auto script = ParseTelemetryScript(c.text);
    ASSERT_FALSE(script.ok()) << c.text;
    EXPECT_EQ(script.status().message(), c.message);
  }
}

TEST(HealthScriptTest, AnXidIsReportedOnceAndHealthValuesHold) {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * kHealthGiB, 0},
                      {1, "GPU-1", "Fake", 16 * kHealthGiB, 0}});
  probe.SetScript(*ParseTelemetryScript(
      "{\"at\": \"10s\", \"gpu\": 1, \"xid\": 48, \"ecc_uncorrected\": 1, \"throttle\": "
      "[\"thermal\"], \"sm_clock_mhz\": 900}\n"));
  const Millis t0 = 1'000'000;
  auto s = probe.Sample(t0);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)[1].xids.empty());
  EXPECT_EQ((*s)[1].ecc_uncorrected, -1);
  EXPECT_EQ((*s)[1].last_xid, -1);
  s = probe.Sample(t0 + 12'000);
  EXPECT_EQ((*s)[1].xids, std::vector<int>{48});
  EXPECT_EQ((*s)[1].last_xid, 48);
  EXPECT_EQ((*s)[1].last_xid_ms, t0 + 12'000);
  EXPECT_EQ((*s)[1].ecc_uncorrected, 1);
  EXPECT_TRUE((*s)[1].throttle.sw_thermal);
  EXPECT_EQ((*s)[1].sm_clock_mhz, 900);
  EXPECT_TRUE((*s)[0].xids.empty());
  EXPECT_EQ((*s)[0].ecc_uncorrected, -1);
  // Later readings keep the values, not the event.
  s = probe.Sample(t0 + 20'000);
  EXPECT_TRUE((*s)[1].xids.empty());
  EXPECT_EQ((*s)[1].last_xid, 48);
  EXPECT_EQ((*s)[1].last_xid_ms, t0 + 12'000);
  EXPECT_EQ((*s)[1].ecc_uncorrected, 1);
}

TEST(HealthScriptTest, ARepeatingScriptReportsItsXidOncePerCycle) {
  FakeGpuProbe probe({{0, "GPU-0", "Fake", 16 * kHealthGiB, 0}});
  probe.SetScript(*ParseTelemetryScript("{\"at\": \"5s\", \"xid\": 92}\n{\"repeat\": \"60s\"}\n"));
  int reported = 0;
  for (Millis t = 0; t < 180'000; t += 5000) {
    auto s = probe.Sample(t);
    reported += static_cast<int>((*s)[0].xids.size());
  }
  EXPECT_EQ(reported, 3);
}

TEST(HealthScriptTest, AStepForAGpuInMigModeAppliesToEachInstance) {
  auto gpus = ParseFakeGpus("16GiB,1x80GiB:mig=3g.40gb+3g.40gb");
  ASSERT_TRUE(gpus.ok());
  FakeGpuProbe probe(*gpus);
  probe.SetScript(*ParseTelemetryScript(
      "{\"at\": 0, \"gpu\": 1, \"xid\": 79, \"temperature\": 70}\n"
      "{\"at\": 0, \"gpu\": 3, \"utilization\": 55}\n"));
  auto s = probe.Sample(0);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].index, 0);
  EXPECT_TRUE((*s)[0].xids.empty());
  EXPECT_EQ((*s)[0].parent_index, -1);
  for (int i : {1, 2}) {
    EXPECT_EQ((*s)[i].parent_index, 1);
    EXPECT_EQ((*s)[i].xids, std::vector<int>{79});
    EXPECT_EQ((*s)[i].temperature_c, 70);
    EXPECT_EQ((*s)[i].memory_total, 40 * kHealthGiB);
  }
  EXPECT_EQ((*s)[1].index, 2);
  EXPECT_EQ((*s)[1].utilization, 0);
  EXPECT_EQ((*s)[2].index, 3);
  EXPECT_EQ((*s)[2].utilization, 55);
}

// --- the evaluation

GpuSample Reading(Millis t) {
  GpuSample s;
  s.index = 1;
  s.t_ms = t;
  return s;
}

TEST(EvaluateHealthTest, CriticalXidsDrainOthersWarnOrStayTelemetry) {
  HealthMemory m;
  GpuSample s = Reading(0);
  s.xids = {13, 48, 48, 92};
  auto f = EvaluateHealth(s, m, HealthConfig{});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[0].drain);
  EXPECT_EQ(f[0].kind, "gpu_drained");
  EXPECT_EQ(f[0].severity, "error");
  EXPECT_EQ(f[0].key, "xid:48");
  EXPECT_EQ(f[0].what, "reported an uncorrectable memory error (double-bit ECC, XID 48)");
  EXPECT_EQ(f[0].data["xid"], 48);
  EXPECT_FALSE(f[1].drain);
  EXPECT_EQ(f[1].kind, "gpu_xid");
  EXPECT_EQ(f[1].severity, "warning");
  EXPECT_EQ(f[1].key, "xid:92");
  for (int code : {48, 63, 64, 74, 79, 94, 95}) {
    ASSERT_NE(LookupXid(code), nullptr) << code;
    EXPECT_EQ(LookupXid(code)->action, XidAction::kDrain) << code;
  }
  for (int code : {13, 31, 43, 45}) EXPECT_EQ(LookupXid(code), nullptr) << code;
}

TEST(EvaluateHealthTest, UncorrectableErrorsDrainWhenTheyRiseAboveWhatWasSeen) {
  HealthMemory m;
  GpuSample s = Reading(0);
  s.ecc_uncorrected = 0;
  s.ecc_corrected = 50;  // corrected errors are telemetry
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());
  ASSERT_TRUE(m.seen.has_value());
  EXPECT_EQ(m.seen->ecc_uncorrected, 0);
  s.ecc_uncorrected = 2;
  auto f = EvaluateHealth(s, m, {});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].drain);
  EXPECT_EQ(f[0].key, "ecc");
  EXPECT_EQ(f[0].what, "reported 2 uncorrectable memory errors (2 since the driver loaded)");
  // The same count again is not news; one more is.
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());
  s.ecc_uncorrected = 3;
  f = EvaluateHealth(s, m, {});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].what, "reported an uncorrectable memory error (3 since the driver loaded)");
  // A driver reload starts the count again: lower is not news, and the next error is.
  s.ecc_uncorrected = 0;
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());
  s.ecc_uncorrected = 1;
  EXPECT_EQ(EvaluateHealth(s, m, {}).size(), 1u);
  // Unknown readings leave what was seen alone.
  s.ecc_uncorrected = -1;
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());
  EXPECT_EQ(m.seen->ecc_uncorrected, 1);
}

TEST(EvaluateHealthTest, ACountSeenBeforeARestartIsNotNewsButANeverSeenOneIs) {
  GpuSample s = Reading(0);
  s.ecc_uncorrected = 4;
  HealthMemory fresh;  // this GPU never read before: errors already counted are news
  EXPECT_EQ(EvaluateHealth(s, fresh, {}).size(), 1u);
  HealthMemory restarted;
  restarted.seen = HealthCounters{4, 0, 0};  // from the drain book
  EXPECT_TRUE(EvaluateHealth(s, restarted, {}).empty());
}

TEST(EvaluateHealthTest, PagesWaitingForAResetAndAFailedRemapDrainOnce) {
  HealthMemory m;
  GpuSample s = Reading(0);
  s.pages_pending = 0;
  s.remap_failed = 0;
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());
  s.pages_pending = 1;
  auto f = EvaluateHealth(s, m, {});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].key, "pages_pending");
  EXPECT_TRUE(f[0].drain);
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());  // still pending: said
  s.remap_failed = 1;
  f = EvaluateHealth(s, m, {});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].key, "remap_failed");
  // After a reset nothing is pending; pending again is news again.
  s.pages_pending = 0;
  EXPECT_TRUE(EvaluateHealth(s, m, {}).empty());
  s.pages_pending = 1;
  EXPECT_EQ(EvaluateHealth(s, m, {}).size(), 1u);
}

TEST(EvaluateHealthTest, SustainedThrottlingWarnsOnceWithTheClocks) {
  HealthConfig c;
  c.throttle_ms = 60'000;
  c.power_cap_ms = 600'000;
  HealthMemory m;
  auto at = [&](Millis t, ThrottleReasons r) {
    GpuSample s = Reading(t);
    s.throttle = r;
    s.sm_clock_mhz = 1095;
    s.sm_clock_max_mhz = 1980;
    s.mem_clock_mhz = 1593;
    s.temperature_c = 87;
    return EvaluateHealth(s, m, c);
  };
  ThrottleReasons hot;
  hot.known = true;
  hot.sw_thermal = true;
  EXPECT_TRUE(at(0, hot).empty());
  EXPECT_TRUE(at(55'000, hot).empty());
  auto f = at(60'000, hot);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, "gpu_throttle");
  EXPECT_EQ(f[0].severity, "warning");
  EXPECT_FALSE(f[0].drain);
  EXPECT_EQ(f[0].key, "throttle:heat");
  EXPECT_EQ(f[0].what,
            "has slowed its clocks for heat for 1m00s (SM 1095 of 1980 MHz, memory 1593 MHz, "
            "87 °C): runs on it go slower; check its cooling (fans, airflow) with nvidia-smi -q "
            "-d TEMPERATURE,PERFORMANCE");
  EXPECT_EQ(f[0].data["sm_clock_mhz"], 1095);
  EXPECT_TRUE(at(120'000, hot).empty());  // said once while it lasts
  ThrottleReasons calm;
  calm.known = true;
  EXPECT_TRUE(at(130'000, calm).empty());
  EXPECT_TRUE(at(140'000, hot).empty());  // the clock starts again
  EXPECT_EQ(at(200'000, hot).size(), 1u);

  // The power cap takes longer: at full load a GPU often sits at its cap.
  HealthMemory p;
  ThrottleReasons capped;
  capped.known = true;
  capped.power_cap = true;
  GpuSample s = Reading(0);
  s.throttle = capped;
  EXPECT_TRUE(EvaluateHealth(s, p, c).empty());
  s.t_ms = 300'000;
  EXPECT_TRUE(EvaluateHealth(s, p, c).empty());
  s.t_ms = 600'000;
  f = EvaluateHealth(s, p, c);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].key, "throttle:power");
  EXPECT_NE(f[0].what.find("held at its power limit for 10m00s"), std::string::npos) << f[0].what;

  // A hardware slowdown that comes with heat is the heat; a power brake is hardware.
  HealthMemory h;
  ThrottleReasons brake;
  brake.known = true;
  brake.power_brake = true;
  brake.hw_slowdown = true;
  s = Reading(0);
  s.throttle = brake;
  EXPECT_TRUE(EvaluateHealth(s, h, c).empty());
  s.t_ms = 60'000;
  f = EvaluateHealth(s, h, c);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].key, "throttle:hardware");
  // Idle or application clocks are not slowing.
  HealthMemory idle;
  ThrottleReasons rest;
  rest.known = true;
  rest.idle = true;
  s.throttle = rest;
  for (Millis t = 0; t <= 1'000'000; t += 100'000) {
    s.t_ms = t;
    EXPECT_TRUE(EvaluateHealth(s, idle, c).empty());
  }
}

TEST(HealthWordsTest, DrainMessageSaysWhatHappenedWhatIsLeftAloneAndHowToClear) {
  EXPECT_EQ(DrainMessage("GPU 1", "reported an uncorrectable memory error (double-bit ECC, XID 48)",
                         {12}, 1),
            "GPU 1 reported an uncorrectable memory error (double-bit ECC, XID 48): drained, no "
            "new runs start on it; its running run 12 is left alone. An admin clears it with "
            "`drover gpu clear 1` after a GPU reset (nvidia-smi -r -i 1, or a reboot).");
  EXPECT_EQ(DrainMessage(GpuLabel(0, {2, 3}), "reported that it fell off the bus (XID 79)",
                         {7, 9}, 0),
            "GPU 0 (MIG instances 2, 3) reported that it fell off the bus (XID 79): drained, no "
            "new runs start on it; its running runs 7, 9 are left alone. An admin clears it with "
            "`drover gpu clear 0` after a GPU reset (nvidia-smi -r -i 0, or a reboot).");
  EXPECT_NE(DrainMessage("GPU 2", "x", {}, 2).find("nothing runs on it now"), std::string::npos);
  EXPECT_EQ(GpuLabel(3, {}), "GPU 3");
  EXPECT_EQ(GpuLabel(0, {4}), "GPU 0 (MIG instance 4)");
}

TEST(HealthWordsTest, Summary) {
  GpuSample s;
  EXPECT_EQ(HealthSummary(s), "unknown");
  s.ecc_uncorrected = 0;
  EXPECT_EQ(HealthSummary(s), "ok");
  s.ecc_uncorrected = 2;
  s.pages_pending = 1;
  s.throttle.known = true;
  s.throttle.sw_thermal = true;
  s.throttle.idle = true;
  s.sm_clock_mhz = 1100;
  s.sm_clock_max_mhz = 1980;
  s.last_xid = 48;
  EXPECT_EQ(HealthSummary(s),
            "reset pending (retired pages); 2 uncorrectable ECC errors; slowed: thermal (SM 1100 "
            "of 1980 MHz); last XID 48");
  GpuSample c;
  c.sm_clock_mhz = 1410;
  c.temperature_c = 64.4;
  c.power_w = 301;
  EXPECT_EQ(ClockWords(c), "SM 1410 MHz, 64 °C, 301 W");
}

// --- the drain book

class DrainBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("drover-drain-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = DrainBookPath(dir_.string());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(DrainBookTest, MissingIsEmptyAndChangesLandWhole) {
  auto book = ReadDrainBook(path_);
  ASSERT_TRUE(book.ok()) << book.status().message();
  EXPECT_TRUE(book->drained.empty());
  EXPECT_EQ(path_, (dir_ / "gpu-drain.json").string());
  ASSERT_TRUE(UpdateDrainBook(path_, [](DrainBook& b) {
                b.drained.push_back({"GPU-1", 1, "XID 48", "drover", 1000, "xid:48"});
                b.seen["GPU-1"] = HealthCounters{2, 0, 0};
                return Status::Ok();
              }).ok());
  book = ReadDrainBook(path_);
  ASSERT_TRUE(book.ok());
  ASSERT_EQ(book->drained.size(), 1u);
  EXPECT_EQ(book->drained[0], (DrainEntry{"GPU-1", 1, "XID 48", "drover", 1000, "xid:48"}));
  EXPECT_EQ(book->seen.at("GPU-1"), (HealthCounters{2, 0, 0}));
  ASSERT_NE(book->Find("GPU-1"), nullptr);
  EXPECT_EQ(book->Find("GPU-0"), nullptr);
  // A change that fails writes nothing; no temporary file is left either way.
  EXPECT_FALSE(UpdateDrainBook(path_, [](DrainBook& b) {
                 b.drained.clear();
                 return InvalidArgument("no");
               }).ok());
  EXPECT_EQ(ReadDrainBook(path_)->drained.size(), 1u);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(DrainBookTest, AnAdminDrainsAndClears) {
  auto drained = DrainGpus(path_, {{"GPU-0", 0}, {"GPU-1", 1}}, "fan noise", "alice", 5000);
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(*drained, (std::vector<int>{0, 1}));
  // Already drained: its entry stays as it was.
  drained = DrainGpus(path_, {{"GPU-1", 1}}, "again", "bob", 6000);
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(drained->empty());
  EXPECT_EQ(ReadDrainBook(path_)->Find("GPU-1")->by, "alice");
  EXPECT_EQ(ReadDrainBook(path_)->Find("GPU-1")->kind, "admin");
  auto cleared = ClearGpus(path_, {{"GPU-1", 1}, {"GPU-7", 7}}, "bob", 7000);
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, std::vector<int>{1});
  auto book = ReadDrainBook(path_);
  ASSERT_EQ(book->drained.size(), 1u);
  EXPECT_EQ(book->drained[0].uuid, "GPU-0");
  EXPECT_EQ(book->cleared.at("GPU-1"), (ClearedEntry{"bob", 7000}));
}

TEST_F(DrainBookTest, ADamagedBookIsAnErrorNotNothingDrained) {
  std::ofstream(path_) << "{\"drained\": 3}";
  auto book = ReadDrainBook(path_);
  ASSERT_FALSE(book.ok());
  EXPECT_NE(book.status().message().find("'drained' is not a list"), std::string::npos);
  std::ofstream(path_) << "not json";
  EXPECT_FALSE(ReadDrainBook(path_).ok());
  EXPECT_FALSE(DrainGpus(path_, {{"GPU-0", 0}}, "x", "alice", 1).ok());
}

TEST_F(DrainBookTest, ConcurrentChangesAreNotLost) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        std::string uuid = "GPU-" + std::to_string(t * 10 + i);
        ASSERT_TRUE(DrainGpus(path_, {{uuid, t * 10 + i}}, "r", "a", 1).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ReadDrainBook(path_)->drained.size(), 40u);
}

// --- JSON of the health fields

TEST(HealthJsonTest, RoundTrip) {
  GpuSample s;
  s.parent_index = 2;
  s.ecc_corrected = 5;
  s.ecc_uncorrected = 1;
  s.retired_pages = 3;
  s.pages_pending = 1;
  s.remap_failed = 0;
  s.throttle.known = true;
  s.throttle.hw_slowdown = true;
  s.throttle.power_cap = true;
  s.sm_clock_mhz = 1200;
  s.sm_clock_max_mhz = 1980;
  s.mem_clock_mhz = 1593;
  s.xids = {79};
  s.last_xid = 79;
  s.last_xid_ms = 1234;
  nlohmann::json j = HealthToJson(s);
  EXPECT_EQ(j["throttle"], nlohmann::json({"hw_slowdown", "power"}));
  EXPECT_EQ(j["retired_pages_pending"], true);
  EXPECT_EQ(j["mig_parent"], 2);
  GpuSample back;
  HealthFromJson(j, back);
  EXPECT_EQ(back.parent_index, 2);
  EXPECT_EQ(back.ecc_corrected, 5);
  EXPECT_EQ(back.ecc_uncorrected, 1);
  EXPECT_EQ(back.retired_pages, 3);
  EXPECT_EQ(back.pages_pending, 1);
  EXPECT_EQ(back.remap_failed, 0);
  EXPECT_EQ(back.throttle, s.throttle);
  EXPECT_EQ(back.sm_clock_mhz, 1200);
  EXPECT_EQ(back.sm_clock_max_mhz, 1980);
  EXPECT_EQ(back.mem_clock_mhz, 1593);
  EXPECT_EQ(back.xids, std::vector<int>{79});
  EXPECT_EQ(back.last_xid, 79);
  EXPECT_EQ(back.last_xid_ms, 1234);
  // Unknown stays unknown.
  nlohmann::json none = HealthToJson(GpuSample{});
  EXPECT_TRUE(none["ecc_uncorrected"].is_null());
  EXPECT_TRUE(none["throttle"].is_null());
  GpuSample unknown;
  HealthFromJson(none, unknown);
  EXPECT_EQ(unknown.ecc_uncorrected, -1);
  EXPECT_FALSE(unknown.throttle.known);
  EXPECT_EQ(unknown.parent_index, -1);
}

// --- XIDs through the background reader

// Reports XID 79 in its first reading only.
class OneXidProbe : public GpuProbe {
 public:
  Result<std::vector<GpuDevice>> Devices() override { return std::vector<GpuDevice>{}; }
  Result<std::vector<GpuSample>> Sample(Millis now) override {
    GpuSample s;
    s.t_ms = now;
    if (reads++ == 0) s.xids = {79};
    return std::vector<GpuSample>{s};
  }
  std::string Kind() const override { return "one-xid"; }
  std::string Describe() override { return ""; }
  std::atomic<int> reads{0};
};

TEST(BackgroundHealthTest, AnXidReachesTheReaderOnceHoweverManyReadingsPassed) {
  auto inner = std::make_unique<OneXidProbe>();
  OneXidProbe* p = inner.get();
  RealClock clock;
  BackgroundGpuProbe probe(std::move(inner), clock, /*period_ms=*/5);
  while (p->reads < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto first = probe.Sample(clock.Now());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)[0].xids, std::vector<int>{79});
  auto second = probe.Sample(clock.Now());
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)[0].xids.empty());
}

}  // namespace
}  // namespace drover
