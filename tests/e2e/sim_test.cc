// drover sim with the real binary: a small Philly-format trace replayed under two policies, the
// JSON the benchmark reads, the CSV and SVG outputs, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

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
      {{"sim", "--trace", trace, "--cluster", "8y4"}, "write MACHINESxGPUS, e.g. 16x4"},
      {{"sim", "--trace", trace, "--cluster", "2x8,0"}, "or a node list such as 8,8,4"},
      {{"sim", "--trace", trace, "--policy", "sjf"}, "choose fifo, priority, las, srtf, gittins or default"},
      {{"sim", "--trace", trace, "--policy", "sfrt"}, "did you mean 'srtf'?"},
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

// --format openb: the packing experiment on two one-GPU nodes (the node list found next to the
// pods by its openb name). First-fit leaves 100 and 200 milli-GPUs stranded and cannot place the
// 300; best-fit and drover's scheduler fill both GPUs (sim/packing_test.cc has the reasoning).
TEST_F(SimTest, OpenbPackingComparesPackers) {
  std::filesystem::create_directories(dir_ / "openb");
  std::filesystem::create_directories(dir_ / "lone");
  std::string pods = Write("openb/pods.csv",
                           "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                           "creation_time,deletion_time,scheduled_time\n"
                           "p1,1000,1024,1,700,,LS,Running,0,100,0\n"
                           "p2,1000,1024,1,800,,LS,Running,1,100,1\n"
                           "p0,1000,1024,0,0,,BE,Running,2,100,2\n"
                           "p3,1000,1024,1,200,,LS,Running,3,100,3\n"
                           "p4,1000,1024,1,300,,LS,Running,4,100,4\n");
  Write("openb/openb_node_list_gpu_node.csv",
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "n0,8000,65536,1,T4\n"
        "n1,8000,65536,1,T4\n");
  auto r = RunDrover({"sim", "--format", "openb", "--trace", pods, "--seeds", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["pods"], 4);  // the CPU-only pod is left out
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["gpu_capacity_milli"], 2000);
  ASSERT_EQ(j["packers"].size(), 3u);
  std::map<std::string, Json> by;
  for (const auto& p : j["packers"]) by[p["packer"]] = p;
  EXPECT_EQ(by["first-fit"]["trace_order"]["pods_placed"], 3);
  EXPECT_DOUBLE_EQ(by["first-fit"]["trace_order"]["unallocated_share"].get<double>(), 0.15);
  EXPECT_EQ(by["first-fit"]["trace_order"]["failed_pod"]["gpu_milli"], 300);
  for (const char* p : {"best-fit", "drover"}) {
    EXPECT_EQ(by[p]["trace_order"]["pods_placed"], 4) << p;
    EXPECT_DOUBLE_EQ(by[p]["trace_order"]["unallocated_share"].get<double>(), 0) << p;
  }
  EXPECT_EQ(by["drover"]["shuffled"]["runs"].size(), 3u);
  EXPECT_TRUE(by["drover"]["shuffled"]["unallocated_share"].contains("sd"));

  auto table = RunDrover({"sim", "--format", "openb", "--trace", pods, "--packer", "best-fit",
                          "--seeds", "0"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("4 GPU pods of"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("best-fit"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("first-fit"), std::string::npos) << table.out;

  std::string lone = Write("lone/pods.csv", ReadFile(pods));
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"sim", "--format", "openb", "--trace", lone}, "needs --nodes NODES.csv"},
      {{"sim", "--format", "openb"}, "needs --trace PODS.csv"},
      {{"sim", "--format", "openb", "--trace", pods, "--cluster", "2x1"},
       "--cluster does not apply"},
      {{"sim", "--format", "openb", "--trace", pods, "--packer", "worst-fit"},
       "choose first-fit, best-fit, drover or all"},
      {{"sim", "--format", "openb", "--trace", lone, "--nodes", (dir_ / "none.csv").string()},
       "cannot read trace"},
      {{"sim", "--trace", pods, "--packer", "best-fit"},
       "--format openb (the packing experiment) only"},
  };
  for (const auto& c : cases) {
    auto bad = RunDrover(c.args);
    EXPECT_EQ(bad.exit_code, 2) << c.args.back() << ": " << bad.err;
    EXPECT_NE(bad.err.find(c.says), std::string::npos) << bad.err;
  }
}

}  // namespace
}  // namespace drover
