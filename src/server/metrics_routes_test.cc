// /api/v1/runs/{id}/metrics and the downsampling behind it.
#include <cmath>

#include "protocol/api.h"
#include "server/routes.h"
#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::ServerTest;

std::vector<MetricPoint> Series(int n, double (*f)(int)) {
  std::vector<MetricPoint> out;
  for (int i = 0; i < n; ++i) out.push_back({1, 1, i, "loss", f(i), 1000 + i});
  return out;
}

TEST(Downsample, ShortSeriesUnchanged) {
  auto s = Series(10, [](int i) { return i * 1.0; });
  EXPECT_EQ(Downsample(s, 10).size(), 10u);
  EXPECT_EQ(Downsample(s, 50).size(), 10u);
  EXPECT_EQ(Downsample(s, 0).size(), 10u);
}

TEST(Downsample, KeepsFirstLastAndExtremes) {
  // A smooth decline with one spike and one dip: both must survive 1000 -> 50.
  auto s = Series(1000, [](int i) { return 10.0 - i * 0.01; });
  s[333].value = 1000;
  s[777].value = -1000;
  auto d = Downsample(s, 50);
  ASSERT_EQ(d.size(), 50u);
  EXPECT_EQ(d.front().step, 0);
  EXPECT_EQ(d.back().step, 999);
  bool spike = false, dip = false;
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].step, d[i].step);  // step order
  for (const auto& p : d) {
    spike |= p.step == 333;
    dip |= p.step == 777;
  }
  EXPECT_TRUE(spike);
  EXPECT_TRUE(dip);
}

TEST(Downsample, OddBudgetsAndTinyBudgets) {
  auto s = Series(1000, [](int i) { return std::sin(i * 0.1); });
  EXPECT_LE(Downsample(s, 51).size(), 51u);
  EXPECT_GE(Downsample(s, 51).size(), 49u);
  auto two = Downsample(s, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].step, 0);
  EXPECT_EQ(two[1].step, 999);
  EXPECT_EQ(Downsample(s, 4).size(), 4u);
  // More buckets than interior points never repeats a point.
  auto small = Series(7, [](int i) { return i * 1.0; });
  auto d = Downsample(small, 6);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].step, d[i].step);
}

TEST(Downsample, NaNDoesNotHideNumbers) {
  auto s = Series(100, [](int i) { return i % 2 ? std::nan("") : i * 1.0; });
  auto d = Downsample(s, 10);
  int numbers = 0;
  for (const auto& p : d) numbers += !std::isnan(p.value);
  EXPECT_GE(numbers, 8);
}

class MetricsRoutesTest : public ServerTest {
 protected:
  void Fill() {
    auto e = AddExperiment("m");
    run_ = AddRun(e.id, RunState::kRunning);
    a1_ = AddAttempt(run_.id, 1, true);
    a2_ = AddAttempt(run_.id, 2, false);
    std::vector<MetricPoint> pts;
    for (int i = 0; i < 1000; ++i) {
      pts.push_back({run_.id, a2_.id, i, "loss", 1.0 / (i + 1), 5000 + i});
    }
    for (int i = 0; i < 10; ++i) pts.push_back({run_.id, a2_.id, i * 100, "acc", i / 10.0, 6000});
    pts.push_back({run_.id, a1_.id, 0, "acc", 0.01, 10});
    ASSERT_TRUE(store_->InsertMetrics(pts).ok());
  }
  drover::Run run_;
  Attempt a1_, a2_;
};

TEST_F(MetricsRoutesTest, AllSeries) {
  Fill();
  StartServer();
  auto r = Get("/api/v1/runs/1/metrics");
  ASSERT_EQ(r.status, 200) << r.raw.substr(0, 300);
  EXPECT_EQ(r.body["run_id"], 1);
  ASSERT_EQ(r.body["series"].size(), 2u);
  EXPECT_EQ(r.body["series"][0]["name"], "acc");
  EXPECT_EQ(r.body["series"][0]["count"], 11);
  EXPECT_EQ(r.body["series"][1]["name"], "loss");
  EXPECT_EQ(r.body["series"][1]["points"].size(), 1000u);
  auto p = protocol::MetricPointFromJson(r.body["series"][1]["points"][999]);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->step, 999);
  EXPECT_EQ(p->attempt_id, a2_.id);
  EXPECT_DOUBLE_EQ(p->value, 1.0 / 1000);
}

TEST_F(MetricsRoutesTest, DownsamplesThousandPointsToFifty) {
  Fill();
  StartServer();
  auto r = Get("/api/v1/runs/1/metrics?name=loss&points=50");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["series"].size(), 1u);
  const Json& s = r.body["series"][0];
  EXPECT_EQ(s["count"], 1000);
  ASSERT_EQ(s["points"].size(), 50u);
  EXPECT_EQ(s["points"][0]["step"], 0);
  EXPECT_EQ(s["points"][49]["step"], 999);
}

TEST_F(MetricsRoutesTest, SinceStepAndAttemptFilters) {
  Fill();
  StartServer();
  auto r = Get("/api/v1/runs/1/metrics?name=loss&since_step=990");
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.body["series"][0]["points"].size(), 9u);  // steps 991..999
  EXPECT_EQ(r.body["series"][0]["points"][0]["step"], 991);
  auto first = Get("/api/v1/runs/1/metrics?attempt=1");
  ASSERT_EQ(first.body["series"].size(), 1u);
  EXPECT_EQ(first.body["series"][0]["name"], "acc");
  EXPECT_EQ(first.body["series"][0]["count"], 1);
  EXPECT_EQ(Get("/api/v1/runs/1/metrics?attempt=3").status, 404);
  auto none = Get("/api/v1/runs/1/metrics?name=nope");
  EXPECT_EQ(none.status, 200);
  EXPECT_EQ(none.body["series"], Json::array());
}

TEST_F(MetricsRoutesTest, BadParameters) {
  Fill();
  StartServer();
  EXPECT_EQ(Get("/api/v1/runs/1/metrics?points=1").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/1/metrics?points=lots").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/1/metrics?since_step=x").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/2/metrics").status, 404);
}

}  // namespace
}  // namespace drover::server
