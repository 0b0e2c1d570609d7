// /api/v1/runs/{id}/metrics and the downsampling behind it.
#include <cmath>

#include "protocol/api.h"
#include "server/routes.h"
#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::ServerTest;



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
