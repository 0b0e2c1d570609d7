// Slurm's answers about drover's jobs, as a real Slurm 22.05 wrote them (tests/slurm/data/,
// tests/slurm/README.md says how): parsed and judged for an attempt.
#include "slurm/jobs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

namespace drover::slurm {
namespace {

std::string Data(const std::string& name) {
  std::ifstream in(std::string(DROVER_SOURCE_DIR) + "/tests/slurm/data/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, Job> ByName(const std::vector<Job>& jobs) {
  std::map<std::string, Job> out;
  for (const Job& j : jobs) out[j.name] = j;
  return out;
}

TEST(SlurmJobs, SqueueJsonOfEveryEndIsJudgedAsDroverSeesIt) {
  auto jobs = ParseSqueueJson(Data("squeue-end.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 12u);
  auto by = ByName(*jobs);
  // exit 0, exit 3, kill -9 $$, a 1-minute time limit, scancel while running, an impossible
  // request (gpu:9), a job preempted by the high partition then run again.
  Verdict ok = Judge(by["drover-t-1-1"], false);
  EXPECT_EQ(ok.phase, Phase::kEnded);
  EXPECT_EQ(ok.outcome, AttemptOutcome::kSucceeded);
  EXPECT_EQ(ok.exit_code, 0);
  Verdict three = Judge(by["drover-t-2-1"], false);
  EXPECT_EQ(three.outcome, AttemptOutcome::kExitCode);
  EXPECT_EQ(three.exit_code, 3);  // squeue's raw wait status 768
  Verdict killed = Judge(by["drover-t-3-1"], false);
  EXPECT_EQ(killed.outcome, AttemptOutcome::kSignal);
  EXPECT_EQ(killed.signal, 9);
  EXPECT_EQ(Judge(by["drover-t-5-1"], false).outcome, AttemptOutcome::kTimeout);
  EXPECT_EQ(by["drover-t-5-1"].reason, "TimeLimit");
  EXPECT_EQ(Judge(by["drover-t-4-1"], true).outcome, AttemptOutcome::kCancelled);
  Verdict other = Judge(by["drover-t-4-1"], false);  // cancelled, but not by drover
  EXPECT_EQ(other.outcome, AttemptOutcome::kSignal);
  EXPECT_EQ(other.why, "CANCELLED outside drover");
  Verdict never = Judge(by["drover-t-7-1"], false);
  EXPECT_EQ(never.outcome, AttemptOutcome::kLaunchError);
  EXPECT_NE(never.why.find("BadConstraints"), std::string::npos) << never.why;
  EXPECT_EQ(by["drover-t-fill-1"].restarts, 1);
  EXPECT_EQ(by["drover-t-6-1"].partition, "high");
  EXPECT_EQ(by["drover-t-1-1"].nodes, "localhost");
}

TEST(SlurmJobs, APreemptedJobWaitingToRunAgainIsANewAttempt) {
  auto jobs = ParseSqueueJson(Data("squeue-mid.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  auto by = ByName(*jobs);
  const Job& victim = by["drover-t-fill-1"];
  EXPECT_EQ(victim.state, JobState::kPending);
  EXPECT_EQ(victim.reason, "BeginTime");
  EXPECT_EQ(Judge(victim, false).phase, Phase::kRequeued);
  EXPECT_EQ(Judge(by["drover-t-5-1"], false).phase, Phase::kRunning);
}

TEST(SlurmJobs, SacctWithoutADatabaseReadsTheJobcompFile) {
  auto jobs = ParseSacctParsable(Data("sacct-c.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 12u);  // job 7 twice (preempted, then completed): once, as it ended
  auto by = ByName(*jobs);
  EXPECT_EQ(by["drover-t-fill-1"].state, JobState::kCompleted);
  EXPECT_EQ(by["drover-t-fill-1"].restarts, 1);
  EXPECT_EQ(Judge(by["drover-t-2-1"], false).exit_code, 3);
  EXPECT_EQ(Judge(by["drover-t-3-1"], false).signal, 9);
  EXPECT_EQ(Judge(by["drover-t-5-1"], false).outcome, AttemptOutcome::kTimeout);
  EXPECT_GT(by["drover-t-5-1"].end_s, by["drover-t-5-1"].start_s);
  EXPECT_EQ(by["drover-t-5-1"].end_s - by["drover-t-5-1"].start_s, 68);
}

TEST(SlurmJobs, StatesAndAnswersThatAreNotWhatWasAskedFor) {
  EXPECT_EQ(ParseJobState("CANCELLED by 0"), JobState::kCancelled);
  EXPECT_EQ(ParseJobState("OUT_OF_MEMORY"), JobState::kOutOfMemory);
  EXPECT_EQ(ParseJobState("SPECIAL_EXIT"), JobState::kUnknown);
  Job forgotten;
  forgotten.state = JobState::kUnknown;
  EXPECT_EQ(Judge(forgotten, false).phase, Phase::kLost);  // retried, never a success
  Job oom;
  oom.state = JobState::kOutOfMemory;
  EXPECT_EQ(Judge(oom, false).signal, 9);
  for (JobState s : {JobState::kNodeFail, JobState::kPreempted, JobState::kBootFail}) {
    Job j;
    j.state = s;
    EXPECT_EQ(Judge(j, false).phase, Phase::kRequeued) << ToString(s);
  }
  EXPECT_FALSE(ParseSqueueJson("not json").ok());
  EXPECT_FALSE(ParseSqueueJson("{\"jobs\": [{\"name\": \"x\"}]}").ok());
  EXPECT_FALSE(ParseSacctParsable("").ok());
  EXPECT_FALSE(ParseSacctParsable("JobName|Start\nx|y\n").ok());
}

TEST(SlurmJobs, AJobNameCarriesTheStoreRunAndAttempt) {
  EXPECT_EQ(JobName("a1b2c3", 42, 3), "drover-a1b2c3-42-3");
  auto id = ParseJobName("drover-a1b2c3-42-3");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->store_id, "a1b2c3");
  EXPECT_EQ(id->run_id, 42);
  EXPECT_EQ(id->attempt, 3);
  EXPECT_FALSE(ParseJobName("wrap").has_value());
  EXPECT_FALSE(ParseJobName("drover-t-fill-1").has_value());  // not a run id
  EXPECT_FALSE(ParseJobName("drover--1-1").has_value());
  EXPECT_FALSE(ParseJobName("drover-x-0-1").has_value());
}

}  // namespace
}  // namespace drover::slurm

namespace drover::slurm {
namespace {

TEST(SlurmJobs, SqueueTextIsWhatARoundReadsAndIsJudgedTheSame) {
  auto jobs = ParseSqueueText(Data("squeue-text.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 13u);
  auto by = ByName(*jobs);
  const Job& ok = by.at("drover-t-1-1");
  EXPECT_EQ(ok.id, 3286);
  EXPECT_EQ(ok.partition, "debug");
  EXPECT_EQ(ok.nodes, "localhost");
  EXPECT_GT(ok.start_s, 0);
  EXPECT_EQ(Judge(ok, false).outcome, AttemptOutcome::kSucceeded);
  const Verdict failed = Judge(by.at("drover-t-2-1"), false);
  EXPECT_EQ(failed.phase, Phase::kEnded);
  EXPECT_EQ(failed.outcome, AttemptOutcome::kExitCode);  // its code is in its exit record
  EXPECT_EQ(Judge(by.at("drover-t-3-1"), false).outcome, AttemptOutcome::kLaunchError);
  // A waiting job's START_TIME is Slurm's guess, not a start.
  const Job& waiting = by.at("drover-t-fill-8");
  EXPECT_EQ(waiting.start_s, 0);
  EXPECT_EQ(waiting.reason, "Resources");
  EXPECT_EQ(Judge(waiting, false).phase, Phase::kWaiting);
  EXPECT_EQ(Judge(by.at("drover-t-fill-1"), false).phase, Phase::kRunning);
  // A name with '|' stays whole: the fields after it are counted from the end.
  ASSERT_TRUE(by.count("name|with|bars"));
  EXPECT_EQ(by.at("name|with|bars").state, JobState::kRunning);
  EXPECT_FALSE(ParseJobName("name|with|bars"));
  // Not a table: said so.
  EXPECT_FALSE(ParseSqueueText("squeue: error: Invalid user: nobody2\n").ok());
  EXPECT_FALSE(ParseSqueueText("JOBID|NAME|STATE\n12|x|RUNNING\n").ok());
  auto empty = ParseSqueueText("JOBID|NAME|STATE|REASON|PARTITION|NODELIST|START_TIME|END_TIME\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace drover::slurm
