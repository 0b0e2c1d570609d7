// Following drover's jobs: with a scripted cluster (what squeue and the accounting list, round
// by round) for every case, and on the real test cluster (scripts/slurm-local.sh start; skipped
// where none answers) for a small sweep.
#include "slurm/tracker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/subprocess.h"
#include "exec/process_launcher.h"
#include "testutil/fake_cluster.h"
#include "testutil/slurm.h"

namespace drover::slurm {
namespace {

namespace fs = std::filesystem;

Submission Sub() {
  Submission s;
  s.argv = {"true"};
  s.workdir = "/w";
  s.script_path = "/w/job.sh";
  return s;
}

TEST(Tracker, AJobIsFollowedFromPendingToItsEndInOneQueryARound) {
  FakeCluster c;
  Tracker t(c, "s1");
  auto a = t.Submit(Target{}, Sub(), 7, 1, 0);
  auto b = t.Submit(Target{}, Sub(), 8, 2, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(c.submitted[0].job_name, "drover-s1-7-1");
  EXPECT_EQ(t.next_poll_at(), 1000);  // soon after a submit
  auto none = t.Poll(500);  // not due: no command
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(c.lists, 0);
  auto pending = t.Poll(1000);  // first listed: why each waits, for the views
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_EQ((*pending)[0].verdict.phase, Phase::kWaiting);
  EXPECT_EQ((*pending)[0].job.reason, "Priority");
  EXPECT_EQ(t.Last(7, 1)->reason, "Priority");
  auto same = t.Poll(2000);  // still pending for the same reason: no news
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->empty());
  c.queue[*a].state = JobState::kRunning;
  c.queue[*a].nodes = "n1";
  c.queue[*b].state = JobState::kRunning;
  auto started = t.Poll(3000);
  ASSERT_TRUE(started.ok());
  ASSERT_EQ(started->size(), 2u);
  EXPECT_EQ((*started)[0].verdict.phase, Phase::kRunning);
  EXPECT_EQ((*started)[0].job.nodes, "n1");
  c.queue[*a].state = JobState::kFailed;
  c.queue[*a].exit_code = 3;
  c.queue[*a].start_s = 1;
  auto ended = t.Poll(4000);
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].who.run_id, 7);
  EXPECT_EQ((*ended)[0].verdict.outcome, AttemptOutcome::kExitCode);
  EXPECT_EQ((*ended)[0].verdict.exit_code, 3);
  EXPECT_EQ(t.followed(), 1u);
  EXPECT_EQ(c.lists, 4);  // one squeue a round for both jobs
  EXPECT_EQ(c.ended_queries, 0);
}

TEST(Tracker, QuietRoundsBackOff) {
  FakeCluster c;
  Tracker t(c, "s1");
  ASSERT_TRUE(t.Submit(Target{}, Sub(), 1, 1, 0).ok());
  ASSERT_TRUE(t.Poll(1000).ok());
  EXPECT_EQ(t.next_poll_at(), 2000);
  ASSERT_TRUE(t.Poll(30'000, true).ok());
  EXPECT_EQ(t.next_poll_at(), 35'000);
  ASSERT_TRUE(t.Poll(120'000, true).ok());
  EXPECT_EQ(t.next_poll_at(), 150'000);
}

TEST(Tracker, CancelPreemptionAReusedIdAndAForgottenJob) {
  FakeCluster c;
  Tracker t(c, "s1");
  auto cancel = t.Submit(Target{}, Sub(), 1, 1, 0);
  auto preempt = t.Submit(Target{}, Sub(), 2, 1, 0);
  auto reused = t.Submit(Target{}, Sub(), 3, 1, 0);
  auto forgotten = t.Submit(Target{}, Sub(), 4, 1, 0);
  ASSERT_TRUE(t.Cancel(1, 1, 0).ok());
  EXPECT_EQ(c.cancelled, std::vector<int64_t>{*cancel});
  EXPECT_FALSE(t.Cancel(9, 1, 0).ok());
  c.queue[*cancel].state = JobState::kCancelled;
  c.queue[*preempt].state = JobState::kPreempted;
  // Slurm reused run 3's job id for someone else's job; ours ended, as the accounting says.
  c.queue[*reused].name = "someone-else";
  Job ours;
  ours.id = *reused;
  ours.name = "drover-s1-3-1";
  ours.state = JobState::kCompleted;
  ours.exit_code = 0;
  c.accounting = {ours};
  c.queue.erase(*forgotten);
  auto events = t.Poll(1000);
  ASSERT_TRUE(events.ok());
  std::map<int64_t, Verdict> by_run;
  for (const JobEvent& e : *events) by_run[e.who.run_id] = e.verdict;
  EXPECT_EQ(by_run[1].outcome, AttemptOutcome::kCancelled);
  EXPECT_EQ(by_run[2].phase, Phase::kRequeued);
  EXPECT_EQ(by_run[3].outcome, AttemptOutcome::kSucceeded);
  EXPECT_FALSE(by_run.count(4));  // one round missing: not yet lost
  auto again = t.Poll(2000);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].who.run_id, 4);
  EXPECT_EQ((*again)[0].verdict.phase, Phase::kLost);  // retried, never a success
  EXPECT_EQ(t.followed(), 0u);
}

TEST(Tracker, AfterARestartTheStoresJobsAreAdoptedByName) {
  FakeCluster c;
  Job mine, ended, other;
  mine.id = 5;
  mine.name = "drover-s1-12-2";
  mine.state = JobState::kRunning;
  ended.id = 6;
  ended.name = "drover-s1-13-1";
  ended.state = JobState::kCompleted;
  ended.exit_code = 0;
  other.id = 7;
  other.name = "drover-s2-12-2";  // another store's
  other.state = JobState::kRunning;
  c.queue = {{5, mine}, {6, ended}, {7, other}};
  Tracker t(c, "s1");
  auto found = t.Adopt(0);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 2u);
  EXPECT_EQ((*found)[0].who.run_id, 12);
  EXPECT_EQ((*found)[0].who.attempt, 2);
  EXPECT_EQ((*found)[0].verdict.phase, Phase::kRunning);
  EXPECT_EQ((*found)[1].verdict.phase, Phase::kEnded);
  EXPECT_EQ(t.followed(), 1u);  // the running one
  c.queue[5].state = JobState::kCompleted;
  c.queue[5].exit_code = 0;
  auto done = t.Poll(1000);
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done->size(), 1u);
  EXPECT_EQ((*done)[0].verdict.outcome, AttemptOutcome::kSucceeded);
}

// A small sweep on the real test cluster: four jobs, one failing, followed to their ends with a
// handful of Slurm commands in all.
TEST(Tracker, ASweepOnTheTestCluster) {
  if (!testing::SlurmAnswers()) GTEST_SKIP() << testing::kNoSlurm;
  const fs::path dir = fs::temp_directory_path() / ("drover-tracker-" + std::to_string(getpid()));
  fs::create_directories(dir);
  CommandCluster cluster;
  Tracker t(cluster, "tr" + std::to_string(getpid()));
  for (int i = 1; i <= 4; ++i) {
    Submission s;
    s.argv = {"/bin/sh", "-c", i == 3 ? "exit 3" : "echo \"$CUDA_VISIBLE_DEVICES\""};
    s.env = {{"PATH", "/usr/bin:/bin"}};
    s.workdir = dir.string();
    s.script_path = (dir / ("job" + std::to_string(i) + ".sh")).string();
    s.stdout_path = (dir / ("job" + std::to_string(i) + ".out")).string();
    s.stderr_path = (dir / ("job" + std::to_string(i) + ".err")).string();
    s.exit_path = (dir / ("job" + std::to_string(i) + ".exit")).string();
    s.gpus = 1;
    ASSERT_TRUE(t.Submit(Target{}, s, i, 1, 0).ok());
  }
  std::map<int64_t, Verdict> ends;
  Millis now = 0;
  for (int round = 0; round < 300 && ends.size() < 4; ++round) {
    now += 100;
    auto events = t.Poll(now, true);
    ASSERT_TRUE(events.ok()) << events.status().message();
    for (const JobEvent& e : *events) {
      if (e.verdict.phase == Phase::kEnded) ends[e.who.run_id] = e.verdict;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(ends.size(), 4u);
  EXPECT_EQ(ends[3].outcome, AttemptOutcome::kExitCode);
  // squeue's text has no exit code: the job's own record has it (the launcher reads it).
  auto record = ReadExitRecord({(dir / "job3.exit").string(), ""});
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->exit_code, 3);
  for (int i : {1, 2, 4}) EXPECT_EQ(ends[i].outcome, AttemptOutcome::kSucceeded) << i;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::slurm
