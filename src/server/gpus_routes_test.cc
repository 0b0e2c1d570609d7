// /api/v1/gpus with health and drains, and an admin's drain and clear through the API (the
// drain book in the store folder is what the engine reads back).
#include "gpu/drain_book.h"
#include "server/server_test_util.h"

namespace drover::server::testing {
namespace {

class GpusRoutesTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    protocol::GpuStatus whole;
    whole.index = 0;
    whole.name = "Fake GPU";
    whole.uuid = "GPU-fake-0";
    whole.memory_total = 16LL << 30;
    GpuSample s;
    s.index = 0;
    s.ecc_uncorrected = 2;
    s.throttle.known = true;
    s.throttle.sw_thermal = true;
    s.sm_clock_mhz = 1095;
    whole.telemetry = s;
    engine_.gpus.push_back(whole);
    // GPU 1 in MIG mode: devices 2 and 3.
    for (int i : {2, 3}) {
      protocol::GpuStatus mig;
      mig.index = i;
      mig.name = "Fake GPU MIG 3g.40gb";
      mig.uuid = "MIG-fake-1-" + std::to_string(i - 2);
      mig.memory_total = 40LL << 30;
      GpuSample m;
      m.index = i;
      m.parent_index = 1;
      mig.telemetry = m;
      engine_.gpus.push_back(mig);
    }
    StartServer();
  }
  std::string Book() const { return DrainBookPath(dir_.string()); }
};

TEST_F(GpusRoutesTest, ListsHealthAndDrains) {
  ASSERT_TRUE(DrainGpus(Book(), {{"GPU-fake-0", 0}}, "XID 48", "drover", 1234).ok());
  Reply r = Get("/api/v1/gpus");
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& gpus = r.body["gpus"];
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0]["health"]["ecc_uncorrected"], 2);
  EXPECT_EQ(gpus[0]["health"]["throttle"], Json({"thermal"}));
  EXPECT_EQ(gpus[0]["health"]["sm_clock_mhz"], 1095);
  EXPECT_EQ(gpus[0]["drained"]["reason"], "XID 48");
  EXPECT_EQ(gpus[0]["drained"]["by"], "drover");
  EXPECT_EQ(gpus[0]["drained"]["since_ms"], 1234);
  EXPECT_TRUE(gpus[1]["drained"].is_null());
  EXPECT_EQ(gpus[1]["health"]["mig_parent"], 1);
  EXPECT_FALSE(r.body.contains("drain_error"));
}

TEST_F(GpusRoutesTest, AnAdminDrainsAndClears) {
  Reply r = Post("/api/v1/gpus/0/drain", R"({"reason": "fan rattles"})");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["drained"], Json::array({0}));
  auto book = ReadDrainBook(Book());
  ASSERT_TRUE(book.ok());
  ASSERT_EQ(book->drained.size(), 1u);
  EXPECT_EQ(book->drained[0].uuid, "GPU-fake-0");
  EXPECT_EQ(book->drained[0].reason, "fan rattles");
  EXPECT_EQ(book->drained[0].kind, "admin");
  EXPECT_FALSE(book->drained[0].by.empty());
  r = Post("/api/v1/gpus/0/drain", "");
  EXPECT_EQ(r.body["already_drained"], Json::array({0}));
  // A GPU in MIG mode by its index: each of its instances.
  r = Post("/api/v1/gpus/1/drain", "{}");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["drained"], Json({2, 3}));
  r = Post("/api/v1/gpus/3/clear", "");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["cleared"], Json({3}));
  r = Post("/api/v1/gpus/0/clear", "");
  EXPECT_EQ(r.body["cleared"], Json::array({0}));
  book = ReadDrainBook(Book());
  ASSERT_EQ(book->drained.size(), 1u);
  EXPECT_EQ(book->drained[0].uuid, "MIG-fake-1-0");
  EXPECT_TRUE(book->cleared.count("GPU-fake-0"));
  r = Post("/api/v1/gpus/0/clear", "");
  EXPECT_EQ(r.body["not_drained"], Json::array({0}));
}

TEST_F(GpusRoutesTest, AnUnknownGpuOrABadBodyIsRefused) {
  Reply r = Post("/api/v1/gpus/7/drain", "{}");
  EXPECT_EQ(r.status, 404) << r.raw;
  EXPECT_NE(r.raw.find("this daemon has no GPU 7 (its GPUs: 0, 2, 3; drover gpu ls)"),
            std::string::npos)
      << r.raw;
  r = Post("/api/v1/gpus/x/clear", "");
  EXPECT_EQ(r.status, 400) << r.raw;
  r = Post("/api/v1/gpus/0/drain", R"({"reason": 5})");
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_FALSE(std::filesystem::exists(Book()));
}

}  // namespace
}  // namespace drover::server::testing
