#include "sim/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace drover::sim {
namespace {

const std::string kTraces = std::string(DROVER_SOURCE_DIR) + "/../shared/data/traces";

bool HaveTraces() { return std::filesystem::exists(kTraces + "/philly-2017-sep-oct.csv"); }

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(Trace, ParsesUtcTimes) {
  EXPECT_EQ(*ParseUtcTime("2017-10-02"), 1506902400);
  EXPECT_EQ(*ParseUtcTime("2017-10-02 10:30:41"), 1506902400 + 10 * 3600 + 30 * 60 + 41);
  for (const char* bad : {"2017-13-01", "yesterday", "2017-10-02T10:30:41", "2017-10-02 10:30",
                          "2017-10-02x", ""}) {
    auto r = ParseUtcTime(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("YYYY-MM-DD"), std::string::npos);
  }
}

TEST(Trace, PhillyWindowCountsFromItsStart) {
  std::string path = WriteTemp("drover-philly-small.csv",
                               "timestamp,duration,num_gpus,gpu_time,cluster\n"
                               "2017-10-01 23:59:59,5.0,1,5.0,a\n"
                               "2017-10-02 00:00:10,100.0,8,800.0,b\n"
                               "2017-10-02 00:00:00,7.5,2,15.0,a\r\n"
                               "2017-10-03 00:00:00,1.0,1,1.0,c\n");
  auto t = ReadPhillyTrace(path, *ParseUtcTime("2017-10-02"), *ParseUtcTime("2017-10-03"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->jobs.size(), 2u);  // [from, to): the first and the last row are outside
  EXPECT_EQ(t->epoch_s, 1506902400);
  EXPECT_EQ(t->jobs[0].id, 3);  // sorted by submit time, ids are rows
  EXPECT_DOUBLE_EQ(t->jobs[0].submit_s, 0);
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 7.5);
  EXPECT_EQ(t->jobs[0].gpus, 2);
  EXPECT_EQ(t->jobs[0].group, "a");
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_s, 10);
  EXPECT_EQ(t->jobs[1].gpus, 8);
  auto all = ReadPhillyTrace(path);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs.size(), 4u);
  EXPECT_EQ(all->epoch_s, 1506902399);  // no window: from the first job
}

TEST(Trace, MalformedRowsNameFileLineAndColumn) {
  std::string path = WriteTemp("drover-philly-bad.csv",
                               "timestamp,duration,num_gpus,gpu_time,cluster\n"
                               "2017-10-02 00:00:00,5.0,1,5.0,a\n"
                               "2017-10-02 00:00:01,five,1,5.0,a\n");
  auto t = ReadPhillyTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), path + ":3: column duration: 'five' is not a number");
  path = WriteTemp("drover-philly-gpus.csv",
                   "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-02 00:00:00,5.0,0.5,5.0,a\n");
  t = ReadPhillyTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(":2: column num_gpus: not a whole number"), std::string::npos);
  // Found by fuzz_trace: 6.2e12 GPUs was cast to an int (undefined behaviour).
  path = WriteTemp("drover-philly-many-gpus.csv",
                   "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-02 00:00:00,5.0,6214e9,5.0,a\n");
  t = ReadPhillyTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not a whole number from 1 to 1000000"), std::string::npos)
      << t.status().message();
  // Found by fuzz_trace: memory of 1.6e79 MiB was cast to int64 (undefined behaviour).
  path = WriteTemp("drover-openb-huge.csv",
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                   "deletion_time,scheduled_time\np,1000,1639e76,1,1000,,LS,Running,0,10,0\n");
  auto pods = ReadOpenbPods(path);
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("column memory_mib: 1.639e+79 is not from 0 to"),
            std::string::npos)
      << pods.status().message();
  // The openb pod list is not a Philly table.
  path = WriteTemp("drover-not-philly.csv", "name,cpu_milli\nx,1\n");
  t = ReadPhillyTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no column 'timestamp'"), std::string::npos);
  EXPECT_NE(t.status().message().find("--format"), std::string::npos);
  EXPECT_EQ(ReadPhillyTrace("/nonexistent/trace.csv").status().code(), Code::kNotFound);
}

TEST(Trace, RealPhillyTable) {
  if (!HaveTraces()) GTEST_SKIP() << "no " << kTraces;
  auto all = ReadPhillyTrace(kTraces + "/philly-2017-sep-oct.csv");
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->jobs.size(), 52849u);
  size_t single = 0;
  for (const auto& j : all->jobs) single += j.gpus == 1;
  EXPECT_EQ(single, 50188u);
  // The window issue 7's benchmark uses: an offered load of about 1.15 on 56 x 8 GPUs.
  auto window = ReadPhillyTrace(kTraces + "/philly-2017-sep-oct.csv", *ParseUtcTime("2017-10-02"),
                                *ParseUtcTime("2017-10-16"));
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->jobs.size(), 24137u);
  double work = 0;
  for (const auto& j : window->jobs) work += j.gpus * j.duration_s;
  EXPECT_DOUBLE_EQ(work, 621380242.0);
  EXPECT_NEAR(work / (14 * 86400.0) / (56 * 8), 1.15, 0.01);
}

TEST(Trace, RealOpenbPodsAndNodes) {
  if (!HaveTraces()) GTEST_SKIP() << "no " << kTraces;
  auto pods = ReadOpenbPods(kTraces + "/openb_pod_list_default.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  EXPECT_EQ(pods->jobs.size(), 7064u);  // the pods that ask for a GPU
  size_t fractional = 0;
  for (const auto& j : pods->jobs) fractional += j.gpu_milli < 1000;
  EXPECT_EQ(fractional, 3078u);
  auto nodes = ReadOpenbNodes(kTraces + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ(nodes->size(), 1213u);
  int gpus = 0;
  for (const auto& n : *nodes) gpus += n.gpus;
  EXPECT_EQ(gpus, 6212);
}

}  // namespace
}  // namespace drover::sim
