// Requests to a foreground engine through the store's requests/ folder, against the real file
// system: posted, taken in order, answered; a malformed one answered with why; an answer that
// never comes withdraws the request.
#include "engine/requests.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace drover {
namespace {

namespace fs = std::filesystem;

class RequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-req-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RequestsTest, PostedTakenAnsweredInOrder) {
  auto first = PostEngineRequest(dir_, {{3, 4}, 0}, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto second = PostEngineRequest(dir_, {{}, 7}, 1001);
  ASSERT_TRUE(first.ok() && second.ok());
  std::ofstream(dir_ + "/requests/0-bad.json") << "{not json";
  auto taken = TakeEngineRequests(dir_);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].first, *first);
  EXPECT_EQ(taken[0].second.cancel_runs, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(taken[1].second.cancel_experiment, 7);
  // The malformed one was answered, not left to be read again.
  EXPECT_FALSE(fs::exists(dir_ + "/requests/0-bad.json"));
  EXPECT_EQ(AwaitEngineAnswer(dir_, "0-bad.json", 1000).message(), "the request is not a JSON object");
  AnswerEngineRequest(dir_, *first, Status::Ok());
  AnswerEngineRequest(dir_, *second, FailedPrecondition("run 9 is already cancelled"));
  EXPECT_TRUE(AwaitEngineAnswer(dir_, *first, 1000).ok());
  Status refused = AwaitEngineAnswer(dir_, *second, 1000);
  EXPECT_EQ(refused.message(), "run 9 is already cancelled");
  EXPECT_TRUE(TakeEngineRequests(dir_).empty());
}

TEST_F(RequestsTest, AnUnansweredRequestIsWithdrawn) {
  auto name = PostEngineRequest(dir_, {{1}, 0}, 1000);
  ASSERT_TRUE(name.ok());
  Status st = AwaitEngineAnswer(dir_, *name, 100);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_TRUE(TakeEngineRequests(dir_).empty());  // a later engine does not act on it
  ClearEngineRequests(dir_);
  EXPECT_FALSE(fs::exists(dir_ + "/requests"));
}

}  // namespace
}  // namespace drover
