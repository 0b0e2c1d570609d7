// One ranking everywhere (docs/spec.md, "Ranking runs"): an experiment whose runs' peak and last
// values of the objective disagree, ranked by `drover compare` (on the store and through a
// daemon), the end of `drover run`, `drover report`, the daemon's runs table (what the web UI
// shows; tests/web/ui.test.mjs checks the page) and MCP's compare, for `summary: best` and
// `summary: last`: every view names the same best run.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"

namespace drover {
namespace {

using Json = nlohmann::json;
using testing::ReadFile;
using testing::RunDrover;

class RankingTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    testing::StopDaemonOf(store_);  // the one `drover mcp` started
    CliFixture::TearDown();
  }

  // Run 1 peaks highest and ends lower; run 2 peaks lower and ends highest; run 3's last value
  // is NaN after the highest peak of all; run 4 diverges to inf.
  std::string PeaksSpec(const std::string& summary) {
    Write("code/curve.sh",
          "case $1 in\n"
          "  peak) vals='0.5 0.99 0.90' ;;\n"
          "  steady) vals='0.5 0.95 0.94' ;;\n"
          "  nan) vals='0.5 0.999 NaN' ;;\n"
          "  inf) vals='0.5 0.6 Infinity' ;;\n"
          "esac\n"
          "i=0\n"
          "for v in $vals; do i=$((i + 1)); echo \"{\\\"step\\\": $i, \\\"val_acc\\\": $v}\"; "
          "done\n");
    return Write("peaks-" + summary + ".yaml",
                 "name: peaks-" + summary +
                     "\nworkdir: code\ncommand: sh curve.sh {curve}\n"
                     "params: {curve: [peak, steady, nan, inf]}\n"
                     "monitor: {on_nan: ignore}\n"
                     "objective: {metric: val_acc, mode: max, summary: " +
                     summary + "}\n");
  }

  static int64_t BestOfJson(const std::string& text) {
    Json j = Json::parse(text, nullptr, false);
    if (!j.is_object() || !j["best_run"].is_number_integer()) return -1;
    return j["best_run"].get<int64_t>();
  }

  // The best run the HTML report names, or -1.
  int64_t BestOfReport(const std::string& experiment, const std::string& summary) {
    std::string path = (dir_ / ("report-" + experiment + ".html")).string();
    auto r = RunDrover({"report", experiment, "--store", store_, "-o", path, "--summary", summary});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::smatch m;
    std::string html = ReadFile(path);
    if (!std::regex_search(html, m, std::regex("<dt>best</dt><dd><a href=\"#run-([0-9]+)\""))) {
      return -1;
    }
    return std::stoll(m[1]);
  }

  int64_t BestOfCompare(const std::string& experiment, const std::string& summary) {
    auto r = RunDrover({"compare", experiment, "--store", store_, "--json", "--summary", summary});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return BestOfJson(r.out);
  }
};

TEST_F(RankingTest, EveryViewNamesTheSameBestRunForBestAndForLast) {
  // The objective's summary decides what `drover run` ends with.
  auto best_run = RunDrover({"run", PeaksSpec("best"), "--store", store_, "--json"});
  ASSERT_EQ(best_run.exit_code, 0) << best_run.out << best_run.err;
  Json ended = Json::parse(best_run.out, nullptr, false);
  ASSERT_TRUE(ended.is_object()) << best_run.out;
  // Run 3 ended in NaN, but its curve's best, 0.999, is finite and the highest: under `best` it
  // wins.
  EXPECT_EQ(ended["best_run"], 3) << best_run.out;
  EXPECT_EQ(ended["summary"], "best");
  std::map<int64_t, Json> scores;
  for (const Json& r : ended["runs"]) scores[r["id"].get<int64_t>()] = r["score"];
  EXPECT_EQ(scores[1], 0.99);
  EXPECT_EQ(scores[2], 0.95);
  EXPECT_EQ(scores[3], 0.999);
  EXPECT_EQ(scores[4], 0.6);
  auto last_run = RunDrover({"run", PeaksSpec("last"), "--store", store_, "--json"});
  ASSERT_EQ(last_run.exit_code, 0) << last_run.out << last_run.err;
  ended = Json::parse(last_run.out, nullptr, false);
  ASSERT_TRUE(ended.is_object()) << last_run.out;
  EXPECT_EQ(ended["best_run"], 6) << last_run.out;  // runs 5..8: steady is run 6
  scores.clear();
  for (const Json& r : ended["runs"]) scores[r["id"].get<int64_t>()] = r["score"];
  EXPECT_EQ(scores[7], "NaN");
  EXPECT_EQ(scores[8], "Infinity");
  // NaN and inf never win, and sort after the finite scores.
  ASSERT_EQ(ended["runs"].size(), 4u);
  EXPECT_EQ(ended["runs"][0]["id"], 6);
  EXPECT_EQ(ended["runs"][1]["id"], 5);

  // For each experiment and each summary: which run is best.
  struct Case {
    std::string experiment, summary;
    int64_t best;
  };
  // Under `best` the NaN-ending run 3 (and 7) peaked highest of all: 0.999.
  const std::vector<Case> cases = {{"peaks-best", "best", 3},
                                   {"peaks-best", "last", 2},
                                   {"peaks-last", "best", 7},
                                   {"peaks-last", "last", 6}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.experiment + " by " + c.summary);
    EXPECT_EQ(BestOfCompare(c.experiment, c.summary), c.best);
    EXPECT_EQ(BestOfReport(c.experiment, c.summary), c.best);
  }
  // The text table says what it ranks by, with NaN and inf as such.
  auto text = RunDrover({"compare", "peaks-last", "--store", store_});
  EXPECT_NE(text.out.find("val_acc (max, last)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("* best: run 6 by val_acc (max, last value)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(" nan "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" inf "), std::string::npos) << text.out;

  // Now through a daemon serving the store: the runs table the web UI shows, compare as its
  // client (the summaries come over HTTP), and MCP's compare.
  pid_t daemon = testing::SpawnDrover({"serve", "--listen", "127.0.0.1:0", "--store", store_},
                                      (dir_ / "serve.out").string(),
                                      (dir_ / "serve.err").string());
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {
    Json j = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
    if (j.is_object() && j.value("pid", 0) == daemon) port = j["port"];
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_GT(port, 0) << ReadFile((dir_ / "serve.err").string());
  std::string token = ReadFile(store_ + "/token");
  token.erase(token.find_last_not_of('\n') + 1);
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  httplib::Headers auth = {{"Authorization", "Bearer " + token}};

  std::vector<std::pair<std::string, Json>> calls;
  for (const Case& c : cases) {
    calls.push_back({"compare", {{"experiment", c.experiment}, {"summary", c.summary}}});
  }
  std::string mcp_in = testing::McpStdin(calls);
  auto mcp = testing::RunDroverWithInput({"mcp", "--store", store_}, mcp_in);
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  std::map<int, Json> replies;
  std::istringstream lines(mcp.out);
  for (std::string line; std::getline(lines, line);) {
    Json m = Json::parse(line, nullptr, false);
    if (m.is_object() && m.contains("id")) replies[m["id"].get<int>()] = m;
  }

  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.experiment + " by " + c.summary + " through the daemon");
    auto table = http.Get("/api/v1/experiments/" + c.experiment +
                              "/table?sort=score&order=desc&summary=" + c.summary,
                          auth);
    ASSERT_TRUE(table) << "no answer";
    ASSERT_EQ(table->status, 200) << table->body;
    Json t = Json::parse(table->body);
    EXPECT_EQ(t["best_run_id"], c.best) << table->body;
    EXPECT_EQ(t["rows"][0]["id"], c.best) << table->body;  // no NaN or inf above it
    EXPECT_EQ(BestOfCompare(c.experiment, c.summary), c.best);
    EXPECT_EQ(BestOfReport(c.experiment, c.summary), c.best);
    const Json& reply = replies[static_cast<int>(i + 1)];
    ASSERT_TRUE(reply.contains("result")) << reply.dump();
    EXPECT_EQ(reply["result"]["structuredContent"]["best_run"], c.best) << reply.dump();
  }
  // The summaries clients rank with: NaN and inf as text.
  auto summaries = http.Get("/api/v1/experiments/peaks-last/summaries?metric=val_acc", auth);
  ASSERT_TRUE(summaries);
  ASSERT_EQ(summaries->status, 200) << summaries->body;
  EXPECT_NE(summaries->body.find("\"last\":\"NaN\""), std::string::npos) << summaries->body;
  EXPECT_NE(summaries->body.find("\"last\":\"Infinity\""), std::string::npos) << summaries->body;
  // Two experiments compared together, through the daemon: one rule for both, or an error.
  auto across = RunDrover({"compare", "peaks-best", "peaks-last", "--store", store_, "--json"});
  EXPECT_EQ(across.exit_code, 2) << across.out;
  EXPECT_NE(across.err.find("rank their runs differently (val_acc (max, best value) and val_acc "
                            "(max, last value))"),
            std::string::npos)
      << across.err;
  across = RunDrover(
      {"compare", "peaks-best", "peaks-last", "--store", store_, "--json", "--summary", "last"});
  ASSERT_EQ(across.exit_code, 0) << across.err;
  Json both = Json::parse(across.out, nullptr, false);
  ASSERT_TRUE(both.is_object()) << across.out;
  EXPECT_EQ(both["runs"].size(), 8u);
  EXPECT_EQ(both["experiments"].size(), 2u);
  EXPECT_EQ(both["best_run"], 2);  // 0.94 in both steady runs: the first
  auto both_text = RunDrover({"compare", "peaks-best", "peaks-last", "--store", store_,
                              "--summary", "best"});
  EXPECT_NE(both_text.out.find("experiment 2 (peaks-last)"), std::string::npos) << both_text.out;
  EXPECT_NE(both_text.out.find("* best: run 3 by val_acc (max, best value)"), std::string::npos)
      << both_text.out;
  EXPECT_EQ(http.Get("/api/v1/experiments/peaks-last/summaries", auth)->status, 400);
  EXPECT_EQ(http.Get("/api/v1/experiments/peaks-last/summaries?metric=val_acc&last=0", auth)
                ->status,
            400);
}

TEST_F(RankingTest, TwoConfigsTimesThreeSeedsGiveTwoGroupsWithMeanSpreadAndCount) {
  // cnn scores 0.95 +- 0.01 over its seeds, mlp 0.92 +- 0.01: the top two differ.
  Write("code/seeded.sh",
        "case $1 in mlp) b=92 ;; cnn) b=95 ;; esac\n"
        "case $2 in 0) d=0 ;; 1) d=1 ;; 2) d=-1 ;; esac\n"
        "echo \"{\\\"val_acc\\\": 0.$((b + d))}\"\n");
  std::string spec = Write("seeds.yaml",
                           "name: seeds\nworkdir: code\ncommand: sh seeded.sh {model} {seed}\n"
                           "params: {model: [mlp, cnn], seed: [0, 1, 2]}\n"
                           "objective: {metric: val_acc, mode: max}\n");
  auto run = RunDrover({"run", spec, "--store", store_, "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto cmp = RunDrover({"compare", "seeds", "--store", store_, "--json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  Json j = Json::parse(cmp.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << cmp.out;
  const Json& g = j["groups"];
  EXPECT_EQ(g["seeds"], Json({"seed"}));
  ASSERT_EQ(g["configs"].size(), 2u) << g.dump();
  EXPECT_EQ(g["configs"][0]["params"], Json({{"model", "cnn"}}));
  EXPECT_EQ(g["configs"][0]["n"], 3);
  EXPECT_NEAR(g["configs"][0]["mean"].get<double>(), 0.95, 1e-9);
  EXPECT_NEAR(g["configs"][0]["std"].get<double>(), 0.01, 1e-9);
  EXPECT_EQ(g["configs"][1]["params"], Json({{"model", "mlp"}}));
  EXPECT_NEAR(g["configs"][1]["mean"].get<double>(), 0.92, 1e-9);
  EXPECT_NEAR(g["top_two"]["p"].get<double>(), 0.0213, 5e-4);  // t = 3.67 on 4 df
  EXPECT_FALSE(g["top_two"]["overlap"].get<bool>());
  auto text = RunDrover({"compare", "seeds", "--store", store_});
  EXPECT_NE(text.out.find("0.95 \u00b1 0.01"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("the top two configs differ: Welch's t-test p = 0.021"),
            std::string::npos)
      << text.out;
  // The report shows the same groups.
  std::string path = (dir_ / "seeds.html").string();
  ASSERT_EQ(RunDrover({"report", "seeds", "--store", store_, "-o", path}).exit_code, 0);
  std::string html = ReadFile(path);
  EXPECT_NE(html.find("<h3>By config, seed pooled</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>model=cnn</td><td class=\"num\">3/3</td><td class=\"num strong\">"
                      "0.95</td>"),
            std::string::npos);
  EXPECT_NE(html.find("The top two configs differ: Welch's t-test p = 0.021"), std::string::npos);
}

TEST_F(RankingTest, WithoutAnObjectiveTheGuessIsSaidAndSharedAndABadSummaryIsRefused) {
  Write("code/m.sh", "echo \"{\\\"grad_norm\\\": $1, \\\"loss\\\": $2}\"\n");
  std::string spec = Write("guess.yaml",
                           "name: guess\nworkdir: code\ncommand: sh m.sh {g} {l}\n"
                           "params:\n  g: [9]\n  l: [0.3, 0.2]\n");
  auto run = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // Not the alphabetically first metric (grad_norm): the loss, going down, labelled as a guess.
  EXPECT_NE(run.out.find("* best: run 2 by loss (min, last value)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("the spec has no objective"), std::string::npos) << run.out;
  EXPECT_EQ(BestOfCompare("guess", "last"), 2);
  EXPECT_EQ(BestOfReport("guess", "last"), 2);
  auto bad = RunDrover({"compare", "guess", "--store", store_, "--summary", "peak"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("last (the last value), best"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace drover
