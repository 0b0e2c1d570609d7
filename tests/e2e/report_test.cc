// Reports without a server, end to end: `drover run` writes the HTML report when the experiment
// ends, `drover report` writes it again (from the store, and through a daemon's API), and
// `drover compare --plot` writes the curves as SVG. A shell script stands in for training.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/xml_check.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::ParseHtml;
using testing::ParseXml;
using testing::ReadFile;
using testing::RunDrover;
using testing::XmlNode;
using Json = nlohmann::json;

// Prints one JSON metric line per step; runs out of memory (as PyTorch says it) above batch 64,
// and the model "crash" exits 3.
constexpr const char* kTrain = R"sh(
model=$1; bs=$2; accum=$3
if [ "$bs" -gt 64 ]; then
  echo "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2
  exit 1
fi
if [ "$model" = crash ]; then echo "Segmentation fault (core dumped)" >&2; exit 3; fi
bonus=0; [ "$model" = cnn ] && bonus=2
i=0
while [ $i -lt 40 ]; do
  echo "{\"step\": $i, \"loss\": $(( 1000 / (i + 1) + bs )).0, \"val_acc\": 0.$(( 50 + i + bonus - bs / 32 ))}"
  i=$((i + 1))
done
)sh";

class ReportTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    Write("code/train.sh", kTrain);
    spec_ = Write("rep.yaml",
                  "name: rep\nworkdir: code\n"
                  "command: sh train.sh {model} {batch_size} {grad_accum}\n"
                  "params: {model: [mlp, cnn, crash], batch_size: [32, 128], grad_accum: 1}\n"
                  "retries: 1\nretry_backoff: 100ms\nresources: {gpus: 0}\n"
                  "oom: {param: batch_size, min: 8, accumulate: grad_accum}\n"
                  "objective: {metric: val_acc, mode: max}\n");
  }
  void TearDown() override {
    if (daemon_ > 0) {
      kill(daemon_, SIGTERM);
      testing::WaitExit(daemon_);
    }
    CliFixture::TearDown();
  }

  void StartDaemon() {
    daemon_ =
        testing::SpawnDrover({"serve", "--listen", "127.0.0.1:0", "--store", store_, "--cpus", "2"},
                             (dir_ / "serve.out").string(), (dir_ / "serve.err").string());
    for (int i = 0; i < 400; ++i) {
      Json j = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
      if (j.is_object() && j.value("pid", 0) == daemon_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    FAIL() << "daemon did not start: " << ReadFile((dir_ / "serve.err").string());
  }

  // What a report shows, read from the page's elements.
  struct Seen {
    std::vector<std::string> ranked;      // run ids, table order
    std::vector<std::string> failures;    // "run/attempt reason: what happened"
    std::vector<std::string> curves;      // the metrics with a chart
    std::map<std::string, size_t> lines;  // metric -> lines drawn
    size_t scatters = 0;
  };
  static Seen Read(const std::string& html) {
    Seen s;
    auto doc = ParseHtml(html);
    EXPECT_EQ(doc.error, "");
    for (const auto* table : doc.root.FindAll("table")) {
      for (const auto* tr : table->FindAll("tr")) {
        if (tr->Attr("data-run").empty()) continue;
        if (table->Attr("id") == "runs") s.ranked.push_back(tr->Attr("data-run"));
        if (table->Attr("id") != "failures-table") continue;
        auto td = tr->FindAll("td");
        s.failures.push_back(tr->Attr("data-run") + "/" + tr->Attr("data-attempt") + " " +
                             td[2]->AllText() + ": " + td[3]->AllText());
      }
    }
    for (const auto* f : doc.root.FindAll("figure", "curve")) {
      s.curves.push_back(f->Attr("data-metric"));
      s.lines[f->Attr("data-metric")] = f->FindAll("path", "line").size();
    }
    s.scatters = doc.root.FindAll("figure", "scatter").size();
    return s;
  }

  std::string spec_;
  pid_t daemon_ = -1;
};

// Each curve comes from the latest attempt that reported its metric: attempt 2 crashed before its
// first evaluation (loss only), so the run's val_acc curve is attempt 1's.
TEST_F(ReportTest, EachCurveFromTheLatestAttemptThatReportedIt) {
  Write("code/flaky.sh",
        "i=0\nwhile [ $i -lt 5 ]; do\n"
        "  if [ \"$DROVER_ATTEMPT\" = 1 ]; then echo \"{\\\"step\\\": $i, \\\"loss\\\": 1.$i, "
        "\\\"val_acc\\\": 0.$i}\"\n"
        "  else echo \"{\\\"step\\\": $i, \\\"loss\\\": 2.$i}\"; fi\n"
        "  i=$((i + 1))\ndone\nexit 1\n");
  std::string spec = Write("flaky.yaml",
                           "name: flaky\nworkdir: code\ncommand: sh flaky.sh\nretries: 1\n"
                           "retry_backoff: 100ms\nresources: {gpus: 0}\n"
                           "objective: {metric: val_acc, mode: max}\n");
  auto run = RunDrover({"run", spec, "--store", store_});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto report = RunDrover({"report", "flaky", "--store", store_, "-o", (dir_ / "f.html").string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  Seen seen = Read(ReadFile((dir_ / "f.html").string()));
  EXPECT_EQ(seen.curves, (std::vector<std::string>{"val_acc", "loss"}));
  EXPECT_EQ(seen.lines["val_acc"], 1u);
  EXPECT_EQ(seen.lines["loss"], 1u);
}

TEST_F(ReportTest, RunWritesTheReportAndReportAndComparePlotWriteItAgain) {
  auto run = RunDrover({"run", spec_, "--store", store_});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;  // the crash runs failed
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex("report: (.*)\n"))) << run.out;
  std::string written = m[1];
  EXPECT_EQ(written, store_ + "/reports/rep-1.html");
  std::string html = ReadFile(written);
  ASSERT_FALSE(html.empty());

  Seen seen = Read(html);
  // Ranked like `drover compare`: the cnn runs first, batch 32 before the halved 128; then the
  // crashed runs by id.
  auto compare = RunDrover({"compare", "rep", "--store", store_, "--json"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  Json compared = Json::parse(compare.out);
  std::vector<std::string> expected;
  for (const auto& r : compared["runs"]) expected.push_back(std::to_string(r["id"].get<int>()));
  EXPECT_EQ(seen.ranked, expected);
  EXPECT_EQ(seen.ranked, (std::vector<std::string>{"3", "4", "1", "2", "5", "6"}));
  EXPECT_EQ(seen.curves, (std::vector<std::string>{"val_acc", "loss"}));
  EXPECT_EQ(seen.lines["val_acc"], 4u);
  EXPECT_EQ(seen.lines["loss"], 4u);
  EXPECT_EQ(seen.scatters, 2u);  // model and batch_size
  EXPECT_EQ(seen.failures,
            (std::vector<std::string>{
                "2/1 cuda_oom: CUDA out of memory at batch_size=128; retried with batch_size=64 "
                "grad_accum=2",
                "4/1 cuda_oom: CUDA out of memory at batch_size=128; retried with batch_size=64 "
                "grad_accum=2",
                "5/1 exit_code: exited with code 3: Segmentation fault (core dumped); retried as "
                "attempt 2",
                "5/2 exit_code: exited with code 3: Segmentation fault (core dumped)",
                "6/1 cuda_oom: CUDA out of memory at batch_size=128; retried with batch_size=64 "
                "grad_accum=2",
                "6/2 exit_code: exited with code 3: Segmentation fault (core dumped); retried as "
                "attempt 3",
                "6/3 exit_code: exited with code 3: Segmentation fault (core dumped)"}));

  // drover report: the same page, to the file asked for (by name or id).
  std::string out = (dir_ / "again.html").string();
  auto rep = RunDrover({"report", "rep", "-o", out, "--store", store_});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(rep.out, out + "\n");
  Seen again = Read(ReadFile(out));
  EXPECT_EQ(again.ranked, seen.ranked);
  EXPECT_EQ(again.failures, seen.failures);
  EXPECT_EQ(again.lines, seen.lines);
  auto by_id = RunDrover({"report", "1", "--store", store_});
  ASSERT_EQ(by_id.exit_code, 0) << by_id.err;
  EXPECT_EQ(by_id.out, written + "\n");

  // drover compare --plot: the objective's curves as a standalone SVG, one line per run with it.
  std::string svg_path = (dir_ / "curves.svg").string();
  auto plot = RunDrover({"compare", "rep", "--plot", svg_path, "--store", store_});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  EXPECT_NE(plot.out.find("curves of val_acc: " + svg_path), std::string::npos) << plot.out;
  std::string svg = ReadFile(svg_path);
  auto doc = ParseXml(svg);
  ASSERT_EQ(doc.error, "") << svg;
  EXPECT_EQ(doc.root.children[0].Attr("xmlns"), "http://www.w3.org/2000/svg");
  auto lines = doc.root.FindAll("path", "line");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines.back()->Attr("data-series"), "run 3 \u00b7 batch_size=32 model=cnn");
  // 40 steps, each one point (far fewer than the chart's pixel columns).
  for (const auto* l : lines) {
    std::string d = l->Attr("d");
    EXPECT_EQ(std::count(d.begin(), d.end(), ','), 40) << d;
  }
  auto loss =
      RunDrover({"compare", "rep", "--metric", "loss", "--plot", svg_path, "--store", store_});
  ASSERT_EQ(loss.exit_code, 0) << loss.err;
  EXPECT_NE(ReadFile(svg_path).find("rep: loss (lower is better)"), std::string::npos);
}

TEST_F(ReportTest, BadInputSaysWhatToDo) {
  auto none = RunDrover({"report", "rep", "--store", store_});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("drover:"), std::string::npos) << none.err;

  auto run = RunDrover({"run", spec_, "--store", store_, "--quiet"});
  ASSERT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out, "");  // --quiet: the report is written, its path not printed
  EXPECT_TRUE(fs::exists(store_ + "/reports/rep-1.html"));

  auto missing = RunDrover({"report", "nope", "--store", store_});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(
      missing.err.find("no experiment 'nope' in this store; `drover ls --experiments` lists them"),
      std::string::npos)
      << missing.err;
  auto no_dir =
      RunDrover({"report", "rep", "-o", (dir_ / "no/such/r.html").string(), "--store", store_});
  EXPECT_EQ(no_dir.exit_code, 2);
  EXPECT_NE(no_dir.err.find("create it first or write elsewhere"), std::string::npos) << no_dir.err;
  auto folder = RunDrover({"report", "rep", "-o", dir_.string(), "--store", store_});
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_NE(folder.err.find("is a folder; give the file to write"), std::string::npos)
      << folder.err;
  auto metric = RunDrover({"report", "rep", "--metric", "acc", "--store", store_});
  EXPECT_EQ(metric.exit_code, 2);
  EXPECT_NE(
      metric.err.find("no run of experiment rep reported 'acc'; metrics reported: loss, val_acc"),
      std::string::npos)
      << metric.err;
  auto plot_folder = RunDrover({"compare", "rep", "--plot", dir_.string(), "--store", store_});
  EXPECT_EQ(plot_folder.exit_code, 2);
  EXPECT_NE(plot_folder.err.find("is a folder"), std::string::npos) << plot_folder.err;
  EXPECT_EQ(plot_folder.out, "");  // nothing printed for a plot that cannot be written

  // A report that cannot be written is a warning; the run's own exit status stands.
  fs::remove_all(store_ + "/reports");
  Write("store/reports", "a file where the folder should be");
  auto blocked = RunDrover({"run", spec_, "--store", store_});
  EXPECT_EQ(blocked.exit_code, 1) << blocked.err;
  EXPECT_NE(blocked.err.find("drover: warning: the HTML report was not written"), std::string::npos)
      << blocked.err;
  EXPECT_EQ(blocked.out.find("report: "), std::string::npos);
}

TEST_F(ReportTest, ThroughTheDaemonsApi) {
  auto embedded = RunDrover({"run", spec_, "--store", store_, "--quiet"});
  ASSERT_EQ(embedded.exit_code, 1) << embedded.err;
  Seen local = Read(ReadFile(store_ + "/reports/rep-1.html"));

  StartDaemon();
  // The daemon serves the store now: the report reads runs, attempts and metric series from
  // its API, and must show the same.
  std::string out = (dir_ / "api.html").string();
  auto rep = RunDrover({"report", "1", "-o", out, "--store", store_});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  Seen api = Read(ReadFile(out));
  EXPECT_EQ(api.ranked, local.ranked);
  EXPECT_EQ(api.failures, local.failures);
  EXPECT_EQ(api.lines, local.lines);
  EXPECT_EQ(api.scatters, local.scatters);

  // drover run through the daemon follows the experiment and writes its report at the end.
  auto run = RunDrover({"run", spec_, "--store", store_});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("report: " + store_ + "/reports/rep-2.html"), std::string::npos)
      << run.out << run.err;
  Seen second = Read(ReadFile(store_ + "/reports/rep-2.html"));
  EXPECT_EQ(second.ranked, (std::vector<std::string>{"9", "10", "7", "8", "11", "12"}));
  // Every attempt that did not succeed, as the store recorded it (a config that keeps failing may
  // not be retried again, so this is read, not assumed).
  auto store = Store::Open(store_ + "/drover.db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> recorded, shown;
  for (int64_t id = 7; id <= 12; ++id) {
    const std::vector<Attempt> attempts = (*store)->ListAttempts(id).value();
    for (const auto& a : attempts) {
      if (a.ended && a.reason != "succeeded") {
        recorded.push_back(fmt::format("{}/{} {}", id, a.number, a.reason));
      }
    }
  }
  for (const auto& f : second.failures) shown.push_back(f.substr(0, f.find(':')));
  EXPECT_EQ(shown, recorded);
  EXPECT_GE(shown.size(), 4u);
}

}  // namespace
}  // namespace drover
