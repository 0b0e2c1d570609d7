// drover mcp over stdio with the real binary: it starts a daemon for the store, and a scripted
// client submits, waits, compares, reads curves and logs, and gets a bad argument back as an
// isError result. (The official TypeScript SDK client and the conformance suite are still to
// come: docs/mcp.md.)
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

using Json = nlohmann::json;

class McpTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    // drover mcp started a daemon that outlives it, by design: stop it.
    testing::StopDaemonOf(store_);
    CliFixture::TearDown();
  }
};

Json Call(int id, const std::string& tool, Json args) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"},
          {"params", {{"name", tool}, {"arguments", std::move(args)}}}};
}

TEST_F(McpTest, AScriptedAgentSubmitsWaitsAndCompares) {
  std::string spec =
      "name: sweep\nworkdir: code\nshell: true\n"
      "command: \"echo '{{\\\"step\\\": 1, \\\"acc\\\": {a}}}'\"\n"
      "params: {a: [0.5, 0.9, 0.7]}\nobjective: {metric: acc, mode: max}\n";
  std::vector<Json> requests = {
      {{"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"},
       {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", Json::object()},
                   {"clientInfo", {{"name", "e2e"}, {"version", "1"}}}}}},
      {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
      {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}},
      Call(2, "submit", {{"spec_yaml", spec}, {"base_dir", dir_.string()}}),
      Call(3, "wait", {{"experiment", "sweep"}, {"timeout_s", 40}}),
      Call(4, "compare", {{"experiment", "sweep"}}),
      Call(5, "get_metrics", {{"run_id", 2}, {"name", "acc"}}),
      Call(6, "logs", {{"run_id", 2}}),
      Call(7, "cancel", {{"run_ids", Json::array({"two"})}}),
      Call(8, "submit", {{"spec_yaml", "name: bad\ncomand: x\n"}}),
      Call(9, "gpu_status", Json::object()),
      Call(10, "submit", {{"spec", {{"name", "as-json"}, {"command", "true {i}"},
                                    {"params", {{"i", {1, 2}}}}}}}),
      Call(11, "compare", {{"experiment", "sweep"}, {"metric", "acc"}, {"mode", "min"}}),
      // A plan submitted again with overrides gets a name that says so; name= keeps the caller's.
      Call(12, "submit", {{"spec", {{"name", "as-json"}, {"command", "true {i}"},
                                    {"params", {{"i", {1, 2}}}}}},
                          {"overrides", {"i=[3,4,5]"}}}),
      Call(13, "submit", {{"spec", {{"name", "as-json"}, {"command", "true {i}"},
                                    {"params", {{"i", {1, 2}}}}}},
                          {"overrides", {"i=7", "name=mine"}}}),
      Call(14, "list_runs", {{"experiment", "as-json-i-3-4-5"}}),
      // A search: compare says how it spent its trials.
      Call(15, "submit", {{"spec_yaml", "name: tuned\nworkdir: code\nshell: true\n"
                                        "command: \"echo '{{\\\"step\\\": 1, \\\"acc\\\": {a}}}'\"\n"
                                        "params: {a: {uniform: [0.0, 1.0]}}\n"
                                        "search: {trials: 3, parallel: 1, seed: 2}\n"
                                        "objective: {metric: acc, mode: max}\n"},
                          {"base_dir", dir_.string()}}),
      Call(16, "wait", {{"experiment", "tuned"}, {"timeout_s", 40}}),
      Call(17, "compare", {{"experiment", "tuned"}}),
  };
  std::string in = (dir_ / "in.jsonl").string();
  {
    std::ofstream f(in);
    for (const auto& r : requests) f << r.dump() << "\n";
  }
  std::string out = (dir_ / "out.jsonl").string(), err = (dir_ / "err.txt").string();
  // stdin from the file: SpawnDrover gives /dev/null, so go through a shell redirect.
  std::string cmd = testing::DroverBin() + " mcp --store " + store_ + " --fake-gpus 2x16GiB < " +
                    in + " > " + out + " 2> " + err;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::ReadFile(err);

  std::map<int, Json> replies;
  std::ifstream lines(out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    Json m = Json::parse(line);
    ++count;
    replies[m["id"].get<int>()] = m;
  }
  EXPECT_EQ(count, 18);  // every request answered, the notification not
  const Json& tuned = replies[17]["result"]["structuredContent"];
  EXPECT_EQ(tuned["search"]["budget"],
            "3 trials: 2 random (the start), 1 by the GP; 0 pruned early, 3 ran to the end")
      << replies[17].dump();
  EXPECT_TRUE(replies[4]["result"]["structuredContent"]["search"].is_null()) << replies[4].dump();
  EXPECT_EQ(replies[0]["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(replies[1]["result"]["tools"].size(), 15u);
  for (const auto& t : replies[1]["result"]["tools"]) {
    EXPECT_TRUE(t.contains("inputSchema")) << t["name"];
    EXPECT_TRUE(t.contains("outputSchema") || t["name"] == "get_run" || t["name"] == "get_metrics")
        << t["name"];
  }
  const Json& sub = replies[2]["result"]["structuredContent"];
  EXPECT_EQ(sub["run_ids"].size(), 3u) << replies[2].dump();
  // The spec leaves resources.gpus out on 2 fake GPUs: the agent is told its runs see no GPU.
  ASSERT_EQ(sub["notes"].size(), 1u) << replies[2].dump();
  EXPECT_NE(sub["notes"][0].get<std::string>().find("the runs ask for no GPU"), std::string::npos);
  const Json& wait = replies[3]["result"]["structuredContent"];
  EXPECT_TRUE(wait["done"].get<bool>()) << replies[3].dump();
  const Json& cmp = replies[4]["result"]["structuredContent"];
  EXPECT_EQ(cmp["best_run"], 2) << replies[4].dump();
  EXPECT_EQ(cmp["runs"][0]["score"], 0.9);
  EXPECT_NE(replies[5]["result"]["structuredContent"].dump().find("0.9"), std::string::npos);
  EXPECT_NE(replies[6]["result"]["structuredContent"]["text"].get<std::string>().find("0.9"),
            std::string::npos)
      << replies[6].dump();
  EXPECT_TRUE(replies[7]["result"]["isError"].get<bool>());
  EXPECT_NE(replies[7]["result"]["content"][0]["text"].get<std::string>().find("run_ids"),
            std::string::npos);
  EXPECT_TRUE(replies[8]["result"]["isError"].get<bool>());
  EXPECT_NE(replies[8]["result"]["content"][0]["text"].get<std::string>().find("comand"),
            std::string::npos)
      << replies[8].dump();
  EXPECT_EQ(replies[9]["result"]["structuredContent"]["gpus"].size(), 2u);
  EXPECT_EQ(replies[10]["result"]["structuredContent"]["run_ids"].size(), 2u) << replies[10].dump();
  EXPECT_EQ(replies[11]["result"]["structuredContent"]["best_run"], 1) << replies[11].dump();
  EXPECT_EQ(replies[10]["result"]["structuredContent"]["name"], "as-json") << replies[10].dump();
  EXPECT_EQ(replies[12]["result"]["structuredContent"]["name"], "as-json-i-3-4-5")
      << replies[12].dump();
  EXPECT_EQ(replies[12]["result"]["structuredContent"]["run_ids"].size(), 3u);
  EXPECT_EQ(replies[13]["result"]["structuredContent"]["name"], "mine") << replies[13].dump();
  EXPECT_EQ(replies[14]["result"]["structuredContent"]["runs"].size(), 3u) << replies[14].dump();
}

}  // namespace
}  // namespace drover
