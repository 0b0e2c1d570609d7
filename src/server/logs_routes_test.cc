// /api/v1/runs/{id}/logs: byte ranges of the log files, and following them.
#include <chrono>
#include <future>

#include "server/server_test_util.h"

namespace drover::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::ServerTest;

class LogsRoutesTest : public ServerTest {
 protected:
  void Fill(bool ended) {
    auto e = AddExperiment("logs");
    run_ = AddRun(e.id, ended ? RunState::kSucceeded : RunState::kRunning);
    attempt_ = AddAttempt(run_.id, 1, ended);
  }
  drover::Run run_;
  Attempt attempt_;
};

TEST_F(LogsRoutesTest, ReadsFromOffsetWithLimit) {
  Fill(true);
  AppendFile(attempt_.stdout_path, "line one\nline two\n");
  AppendFile(attempt_.stderr_path, "warning\n");
  StartServer();
  auto r = Get("/api/v1/runs/1/logs");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["attempt"], 1);
  EXPECT_EQ(r.body["attempts"], 1);
  EXPECT_EQ(r.body["stream"], "stdout");
  EXPECT_EQ(r.body["offset"], 0);
  EXPECT_EQ(r.body["next_offset"], 18);
  EXPECT_EQ(r.body["data"], "line one\nline two\n");
  EXPECT_EQ(r.body["ended"], true);
  EXPECT_EQ(r.body["run_ended"], true);

  auto part = Get("/api/v1/runs/1/logs?offset=5&limit_bytes=3");
  EXPECT_EQ(part.body["data"], "one");
  EXPECT_EQ(part.body["next_offset"], 8);
  EXPECT_EQ(part.body["ended"], false);  // more bytes remain

  auto err = Get("/api/v1/runs/1/logs?stream=stderr&attempt=1");
  EXPECT_EQ(err.body["data"], "warning\n");
  EXPECT_EQ(err.body["stream"], "stderr");
}

TEST_F(LogsRoutesTest, BadParameters) {
  Fill(true);
  AppendFile(attempt_.stdout_path, "abc");
  StartServer();
  EXPECT_EQ(Get("/api/v1/runs/1/logs?stream=stdin").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/1/logs?offset=-3").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/1/logs?limit_bytes=0").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/1/logs?follow=maybe").status, 400);
  auto past = Get("/api/v1/runs/1/logs?offset=10");
  EXPECT_EQ(past.status, 400);
  EXPECT_NE(past.raw.find("past the end"), std::string::npos) << past.raw;
  auto no_attempt = Get("/api/v1/runs/1/logs?attempt=2");
  EXPECT_EQ(no_attempt.status, 404);
  EXPECT_NE(no_attempt.raw.find("has 1 attempt"), std::string::npos) << no_attempt.raw;
  EXPECT_EQ(Get("/api/v1/runs/9/logs").status, 404);
}

TEST_F(LogsRoutesTest, CutsAtCharacterBoundaries) {
  Fill(true);
  AppendFile(attempt_.stdout_path, "h\xC3\xA9llo");  // "héllo": é is two bytes
  StartServer();
  auto r = Get("/api/v1/runs/1/logs?limit_bytes=2");
  EXPECT_EQ(r.body["data"], "h");  // not half an é
  EXPECT_EQ(r.body["next_offset"], 1);
  auto rest = Get("/api/v1/runs/1/logs?offset=1");
  EXPECT_EQ(rest.body["data"], "\xC3\xA9llo");
  // Bytes that are not UTF-8 at all still come back as JSON (replaced), never a 500.
  AppendFile(attempt_.stdout_path, "\xFF\xFE");
  auto bin = Get("/api/v1/runs/1/logs");
  EXPECT_EQ(bin.status, 200);
  EXPECT_EQ(bin.body["next_offset"], 8);
}

TEST_F(LogsRoutesTest, NoAttemptYet) {
  auto e = AddExperiment("q");
  AddRun(e.id, RunState::kQueued);
  StartServer();
  auto r = Get("/api/v1/runs/1/logs");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["attempt"], 0);
  EXPECT_EQ(r.body["data"], "");
  EXPECT_EQ(r.body["ended"], false);
}

TEST_F(LogsRoutesTest, FollowReturnsWhenTheFileGrows) {
  Fill(false);
  AppendFile(attempt_.stdout_path, "first\n");
  StartServer();
  auto start = steady_clock::now();
  auto pending = std::async(std::launch::async,
                            [&] { return Get("/api/v1/runs/1/logs?attempt=1&offset=6&follow=1"); });
  // Nothing new yet: the request is still waiting.
  EXPECT_EQ(pending.wait_for(milliseconds(400)), std::future_status::timeout);
  AppendFile(attempt_.stdout_path, "second\n");
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto r = pending.get();
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["data"], "second\n");
  EXPECT_EQ(r.body["offset"], 6);
  EXPECT_EQ(r.body["next_offset"], 13);
  EXPECT_EQ(r.body["ended"], false);
}

TEST_F(LogsRoutesTest, FollowReturnsWhenTheAttemptEnds) {
  Fill(false);
  StartServer();
  auto pending =
      std::async(std::launch::async, [&] { return Get("/api/v1/runs/1/logs?attempt=1&follow=1"); });
  EXPECT_EQ(pending.wait_for(milliseconds(300)), std::future_status::timeout);
  Attempt a = attempt_;
  a.ended = true;
  a.reason = "succeeded";
  ASSERT_TRUE(store_->UpdateAttempt(a).ok());
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto r = pending.get();
  EXPECT_EQ(r.body["ended"], true);
  EXPECT_EQ(r.body["data"], "");
}

TEST_F(LogsRoutesTest, FollowTimesOutWithNothing) {
  Fill(false);
  ServerOptions o;
  o.follow_timeout_ms = 300;
  StartServer(o);
  auto r = Get("/api/v1/runs/1/logs?follow=1");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body["data"], "");
  EXPECT_EQ(r.body["next_offset"], 0);
  EXPECT_EQ(r.body["ended"], false);
}

TEST_F(LogsRoutesTest, FollowWaitsForTheNextAttempt) {
  Fill(false);
  Attempt a = attempt_;
  a.ended = true;
  ASSERT_TRUE(store_->UpdateAttempt(a).ok());
  StartServer();
  // Attempt 2 does not exist yet: with follow it is waited for (a retry is coming).
  auto pending =
      std::async(std::launch::async, [&] { return Get("/api/v1/runs/1/logs?attempt=2&follow=1"); });
  EXPECT_EQ(pending.wait_for(milliseconds(300)), std::future_status::timeout);
  Attempt second = AddAttempt(run_.id, 2, false);
  AppendFile(second.stdout_path, "retry output\n");
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto r = pending.get();
  EXPECT_EQ(r.body["attempt"], 2);
  EXPECT_EQ(r.body["data"], "retry output\n");
}

TEST_F(LogsRoutesTest, StopEndsAFollowAtOnce) {
  Fill(false);
  StartServer();
  auto pending = std::async(std::launch::async, [&] {
    auto c = Client();
    return c->Get("/api/v1/runs/1/logs?follow=1");
  });
  std::this_thread::sleep_for(milliseconds(200));
  auto t0 = steady_clock::now();
  StopServer();
  EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(3));
  pending.wait();
}

}  // namespace
}  // namespace drover::server
