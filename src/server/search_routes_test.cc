// The ask/tell routes: bodies checked, answers from the engine, the experiment by id or name.
#include <gtest/gtest.h>

#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::ServerTest;

class SearchRoutesTest : public ServerTest {};

TEST_F(SearchRoutesTest, SuggestTellAndAddTrialReachTheEngine) {
  Experiment e = AddExperiment("s");
  StartServer();
  auto r = Post("/api/v1/experiments/s/suggest", R"({"count": 2})");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["experiment_id"], e.id);
  EXPECT_EQ(r.body["configs"].size(), 2u);

  r = Post("/api/v1/experiments/" + std::to_string(e.id) + "/tell",
           R"({"params": {"lr": 0.1}, "value": 0.9})");
  ASSERT_EQ(r.status, 200) << r.raw;
  r = Post("/api/v1/experiments/s/tell", R"({"params": {"lr": 0.2}, "value": null})");
  ASSERT_EQ(r.status, 200) << r.raw;
  auto told = engine_.Locked([&] { return engine_.told; });
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[0].second.params, (Json{{"lr", 0.1}}));
  EXPECT_EQ(told[0].second.value, 0.9);
  EXPECT_FALSE(told[1].second.value.has_value());  // a failed config

  r = Post("/api/v1/experiments/s/trials", R"({"params": {"lr": 0.3}})");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["run_id"], 77);
}

TEST_F(SearchRoutesTest, BadBodiesAreRefusedWithWhatToSend) {
  AddExperiment("s");
  StartServer();
  auto r = Post("/api/v1/experiments/s/suggest", R"({"count": 0})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["message"], "count must be an integer from 1 to 100");
  r = Post("/api/v1/experiments/s/tell", R"({"params": {"lr": 0.1}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["message"],
            "value is missing: give the objective's value, or null when the config failed");
  r = Post("/api/v1/experiments/s/tell", R"({"params": {"lr": 0.1}, "value": "high"})");
  EXPECT_EQ(r.status, 400);
  r = Post("/api/v1/experiments/s/trials", R"({"lr": 0.1})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Post("/api/v1/experiments/nope/suggest", "{}").status, 404);
  EXPECT_TRUE(engine_.Locked([&] { return engine_.told.empty() && engine_.added.empty(); }));
}

}  // namespace
}  // namespace drover::server
