// Why a run failed, found later: the end of its stderr (the exception) is kept with the attempt
// and shown by `drover show`, `drover ls`, the report's failures table, the API's run (what the
// web run page and MCP's get_run read) and MCP's get_run itself. The web page is checked in
// tests/web/ui.test.mjs.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

using Json = nlohmann::json;
using testing::ReadFile;
using testing::RunDrover;

class FailureTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    testing::StopDaemonOf(store_);  // the one `drover mcp` started
    CliFixture::TearDown();
  }
};

TEST_F(FailureTest, TheExceptionIsKeptAndShownEverywhere) {
  Write("code/crash.py",
        "import sys\n"
        "print('{\"step\": 1, \"loss\": 0.5}', flush=True)\n"
        "def train(epoch):\n"
        "    raise RuntimeError(f'simulated crash at epoch {epoch}')\n"
        "train(int(sys.argv[1]))\n");
  std::string spec = Write("crash.yaml",
                           "name: crash\nworkdir: code\ncommand: /usr/bin/python3 crash.py {e}\n"
                           "params: {e: [3]}\nretries: 1\nretry_backoff: 100ms\n");
  auto run = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;

  auto show = RunDrover({"show", "1", "--store", store_});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("attempt 2 ended with (exit_code, the end of its stderr):"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("  Traceback (most recent call last):"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("  RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << show.out;

  auto ls = RunDrover({"ls", "--store", store_});
  EXPECT_NE(ls.out.find("failed: RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << ls.out;

  auto json = RunDrover({"show", "1", "--store", store_, "--json"});
  Json j = Json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  ASSERT_EQ(j["attempt_list"].size(), 2u) << json.out;
  for (const Json& a : j["attempt_list"]) {
    const std::string error = a.value("error", "");
    EXPECT_NE(error.find("RuntimeError: simulated crash at epoch 3"), std::string::npos) << error;
    EXPECT_LE(error.size(), 2048u + 3);
  }

  std::string html_path = (dir_ / "r.html").string();
  auto report = RunDrover({"report", "crash", "--store", store_, "-o", html_path});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  std::string html = ReadFile(html_path);
  EXPECT_NE(html.find("exited with code 1: RuntimeError: simulated crash at epoch 3; retried as "
                      "attempt 2"),
            std::string::npos);

  // MCP's get_run, through the daemon `drover mcp` starts for the store.
  std::string in = testing::McpStdin({{"get_run", {{"run_id", 1}}}});
  auto mcp = testing::RunDroverWithInput({"mcp", "--store", store_}, in);
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  EXPECT_NE(mcp.out.find("RuntimeError: simulated crash at epoch 3"), std::string::npos)
      << mcp.out;
}

}  // namespace
}  // namespace drover
