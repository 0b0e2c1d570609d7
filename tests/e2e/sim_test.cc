// drover sim with the real binary: a small Philly-format trace replayed under two policies, the
// JSON the benchmark reads, the CSV and SVG outputs, and bad input.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/xml_check.h"

namespace drover {
namespace {

using testing::ReadFile;
using testing::RunDrover;
using Json = nlohmann::json;

class SimTest : public testing::CliFixture {
 protected:
  // One GPU: a 100 s job at 0, a 10 s job at 10 s.
  std::string Trace() {
    return Write("philly.csv",
                 "timestamp,duration,num_gpus,gpu_time,cluster\n"
                 "2017-10-02 00:00:00,100.0,1,100.0,a\n"
                 "2017-10-02 00:00:10,10.0,1,10.0,a\n");
  }
};

TEST_F(SimTest, ReplaysATraceUnderAPolicyAndReportsJson) {
  std::string trace = Trace();
  auto fifo = RunDrover({"sim", "--trace", trace, "--cluster", "1x1", "--policy", "fifo", "--json"});
  ASSERT_EQ(fifo.exit_code, 0) << fifo.err;
  Json f = Json::parse(fifo.out);
  EXPECT_EQ(f["policy"], "fifo");
  EXPECT_EQ(f["jobs"], 2);
  EXPECT_DOUBLE_EQ(f["avg_jct_s"].get<double>(), 100);  // 100 and 110 - 10
  EXPECT_DOUBLE_EQ(f["avg_queue_s"].get<double>(), 45);
  EXPECT_DOUBLE_EQ(f["makespan_s"].get<double>(), 110);
  EXPECT_EQ(f["preemptions"], 0);
  for (const char* key : {"p99_jct_s", "mean_bounded_slowdown", "utilization",
                          "lower_bound_avg_jct_s"}) {
    EXPECT_TRUE(f.contains(key)) << key;
  }

  std::string csv = (dir_ / "jobs.csv").string(), svg = (dir_ / "load.svg").string();
  auto human = RunDrover({"sim", "--trace", trace, "--cluster", "1x1", "--policy", "srtf",
                          "--oracle", "--csv", csv, "--plot", svg});
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("2 jobs of"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("policy srtf (oracle durations)"), std::string::npos) << human.out;
  std::string rows = ReadFile(csv);
  EXPECT_EQ(rows.substr(0, rows.find('\n')), "job,submit_s,end_s,duration_s,gpus,jct_s,queue_s,preemptions");
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 3);
  auto doc = testing::ParseXml(ReadFile(svg));
  EXPECT_EQ(doc.error, "");
  EXPECT_EQ(doc.root.FindAll("path", "line").size(), 2u);  // utilisation and queue length
}

TEST_F(SimTest, BadInputSaysWhatToDo) {
  std::string trace = Trace();
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"sim", "--trace", trace, "--cluster", "8"}, "write MACHINESxGPUS, e.g. 16x4"},
      {{"sim", "--trace", trace, "--policy", "sjf"}, "choose fifo, priority, las, srtf or default"},
      {{"sim", "--trace", trace, "--from", "2017-10-05"}, "widen --from/--to"},
      {{"sim", "--trace", trace, "--from", "yesterday"}, "YYYY-MM-DD"},
      {{"sim", "--trace", trace, "--from", "2017-10-03", "--to", "2017-10-02"}, "is not after"},
      {{"sim", "--trace", (dir_ / "missing.csv").string()}, "cannot read trace"},
      {{"sim"}, "--format philly needs --trace FILE"},
      {{"sim", "--format", "drover", "--store", (dir_ / "nowhere").string()}, "no store at"},
      {{"sim", "--format", "drover", "--trace", trace}, "leave out --trace"},
  };
  for (const auto& c : cases) {
    auto r = RunDrover(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args.back() << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  std::string big = Write("big.csv",
                          "timestamp,duration,num_gpus,gpu_time,cluster\n"
                          "2017-10-02 00:00:00,100.0,16,1600.0,a\n");
  auto r = RunDrover({"sim", "--trace", big, "--cluster", "1x8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("declare a larger --cluster"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "nowhere"));  // a wrong --store creates nothing
}

// The store's own history: a run that used a (fake) GPU is a job of the trace.
TEST_F(SimTest, ReplaysTheStoresOwnHistory) {
  std::string spec = Write("s.yaml", "name: s\nworkdir: code\ncommand: sleep 0.2\n"
                                     "resources: {gpus: 1}\nparams: {i: [1, 2]}\n");
  Write("code/.keep", "");
  auto run = RunDrover({"run", spec, "--store", store_, "--fake-gpus", "1x16GiB"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto r = RunDrover({"sim", "--format", "drover", "--store", store_, "--cluster", "1x1",
                      "--policy", "fifo", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["jobs"], 2);
  EXPECT_GT(j["avg_jct_s"].get<double>(), 0.2);
}

}  // namespace
}  // namespace drover
