// Following an experiment a daemon runs (follow.h): how the looks are spaced, and that a follower
// with nothing to show looks at the runs' counts until the end and fetches the runs once; and
// what the report written at the end asks its catalog for (report_cmd.h).
#include "cli/follow.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "cli/catalog.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "cli/report_cmd.h"
#include "protocol/api.h"
#include "protocol/json_codec.h"

namespace drover::cli {
namespace {

// What a follower says of a run on a later attempt: why (the attempt before's outcome) and with
// which parameters now, against the run's own.
TEST(RetryNote, SaysWhyAndWhatChanged) {
  drover::Run run;
  run.params = {{"batch_size", 512}, {"grad_accum", 1}, {"lr", 0.1}};
  run.current_params = {{"batch_size", 64}, {"grad_accum", 8}, {"lr", 0.1}};
  drover::Attempt oom;
  oom.number = 3;
  oom.reason = "cuda_oom";
  EXPECT_EQ(RetryNote(run, oom), "retried after CUDA OOM: batch_size 512 -> 64, grad_accum 1 -> 8");
  run.current_params = run.params;
  drover::Attempt crash;
  crash.number = 1;
  crash.reason = "exit_code";
  EXPECT_EQ(RetryNote(run, crash), "retried after exit_code");
}

TEST(FollowPace, DoublesFromItsFloorUntilARunEnds) {
  FollowPace pace(10, 300);
  EXPECT_EQ(pace.Next(0, 0, 100), 10);
  EXPECT_EQ(pace.Next(10, 0, 100), 20);
  EXPECT_EQ(pace.Next(30, 0, 100), 40);
  EXPECT_EQ(pace.Next(70, 0, 100), 80);
  EXPECT_EQ(pace.Next(150, 0, 100), 160);
  EXPECT_EQ(pace.Next(310, 0, 100), 300);  // never above its ceiling
  EXPECT_EQ(pace.Next(610, 0, 100), 300);
}

TEST(FollowPace, ClosesInOnTheEndAtThePaceRunsEnd) {
  FollowPace pace(10, 300);
  pace.Next(0, 0, 1000);
  // 100 runs ended in 100 ms: 900 left take 900 ms at that pace; the next look at half of that,
  // which the ceiling cuts to 300 ms.
  EXPECT_EQ(pace.Next(100, 100, 900), 300);
  // 300 more in the next 300 ms: 600 ms left, looked at again in 300.
  EXPECT_EQ(pace.Next(400, 400, 600), 300);
  // 500 more in 300 ms: 100 left take 60 ms; looked at in 30.
  EXPECT_EQ(pace.Next(700, 900, 100), 30);
  // 50 in 30 ms: 50 left take 30 ms, looked at in 15.
  EXPECT_EQ(pace.Next(730, 950, 50), 15);
  // 45 in 15 ms: 5 left, under 2 ms at that pace: the floor.
  EXPECT_EQ(pace.Next(745, 995, 5), 10);
  // Nothing ended since the last look (a slow last run): back to doubling from the last wait.
  EXPECT_EQ(pace.Next(755, 995, 5), 20);
  EXPECT_EQ(pace.Next(775, 995, 5), 40);
}

// A daemon that answers what FollowExperiment asks about experiment 7 of three runs: the
// counts say the runs end one per look, and the experiment is done with the third; every
// request is counted by its path. As a search (`search`), each trial is proposed only after the
// one before it ended: at every other look all the runs so far are final while the experiment
// is still active.
class FakeDaemon {
 public:
  explicit FakeDaemon(bool search = false) : search_(search) {
    server_.Get(R"(/api/v1/experiments/7)", [this](const httplib::Request&, httplib::Response& res) {
      const int look = Count("experiments/7");
      protocol::ExperimentListing l;
      l.experiment = Experiment7();
      if (search_) {
        // Looks 2, 3: trial 1 running, then ended; 4, 5: trial 2; 6, 7: trial 3 and done.
        const int made = std::min(3, look / 2);
        const bool last_ended = look % 2 == 1 || look > 7;
        if (made > 0) {
          const int ended = made - (last_ended ? 0 : 1);
          if (ended > 0) l.runs.by_state[RunState::kSucceeded] = ended;
          if (!last_ended) l.runs.by_state[RunState::kRunning] = 1;
        }
        l.experiment.status = made == 3 && last_ended ? ExperimentStatus::kDone
                                                      : ExperimentStatus::kActive;
      } else {
        const int ended = std::min(3, look - 1);
        if (ended > 0) l.runs.by_state[RunState::kSucceeded] = ended;
        if (ended < 3) l.runs.by_state[RunState::kRunning] = 3 - ended;
        l.experiment.status = ended == 3 ? ExperimentStatus::kDone : ExperimentStatus::kActive;
      }
      res.set_content(protocol::ToJson(l).dump(), "application/json");
    });
    server_.Get(R"(/api/v1/runs)", [this](const httplib::Request& req, httplib::Response& res) {
      Count("runs");
      EXPECT_EQ(req.get_param_value("experiment"), "7");
      const bool done = Looks() > (search_ ? 6 : 3);
      Json runs = Json::array();
      for (int i = 1; i <= 3; ++i) {
        Run r;
        r.id = i;
        r.experiment_id = 7;
        r.index = i - 1;
        r.params = {{"i", i}};
        r.current_params = r.params;
        r.state = done ? RunState::kSucceeded : RunState::kRunning;
        r.attempts = 1;
        runs.push_back(protocol::ToJson(r));
      }
      res.set_content(Json({{"runs", runs}, {"offset", 0}, {"limit", 1000},
                            {"next_offset", nullptr}})
                          .dump(),
                      "application/json");
    });
    server_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (res.status == 404) Count("unexpected " + req.path);
    });
    // Its answers' headers and body go out as written (Nagle's wait for an ACK the client
    // delays would add 40 ms a request).
    server_.set_tcp_nodelay(true);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeDaemon() {
    server_.stop();
    thread_.join();
  }
  DaemonInfo Info() const {
    DaemonInfo d;
    d.host = "127.0.0.1";
    d.port = port_;
    d.pid = 1;
    d.token = "t";
    return d;
  }
  std::map<std::string, int> Requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  static Experiment Experiment7() {
    Experiment e;
    e.id = 7;
    e.name = "sweep";
    e.spec = {{"name", "sweep"}};
    return e;
  }
  int Count(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    return ++requests_[what];
  }
  int Looks() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_["experiments/7"];
  }
  const bool search_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, int> requests_;
};

TEST(FollowExperiment, QuietLooksAtTheCountsAndFetchesTheRunsOnceAtTheEnd) {
  FakeDaemon daemon;
  ApiClient api(daemon.Info());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(FollowExperiment(api, 7, {.cancel_on_exit = true, .json = false, .quiet = true}),
            kExitOk);
  const auto took = std::chrono::steady_clock::now() - t0;
  std::map<std::string, int> requests = daemon.Requests();
  // One look for the experiment itself, then one per look until its counts say nothing is left
  // (the third): the runs listed only then, once.
  EXPECT_EQ(requests["experiments/7"], 1 + 3);
  EXPECT_EQ(requests["runs"], 1);
  EXPECT_EQ(requests.size(), 2u) << "asked for something else";
  // Looks 10 ms apart (the floor: a run ends per look, one or two left), not 300 ms.
  EXPECT_LT(took, std::chrono::milliseconds(250));
}

// A search's next trial is proposed after the one before it ends: a look that finds every run
// so far final, the experiment still active, is not the end (the matrix's plain `drover run`
// of a search on Slurm ended after its first trial and said the search was over).
TEST(FollowExperiment, ASearchIsFollowedUntilTheDaemonSaysItIsDoneNotUntilItsRunsSoFarEnd) {
  FakeDaemon daemon(/*search=*/true);
  ApiClient api(daemon.Info());
  EXPECT_EQ(FollowExperiment(api, 7, {.cancel_on_exit = true, .json = false, .quiet = true}),
            kExitOk);
  std::map<std::string, int> requests = daemon.Requests();
  // Looks 3 and 5 found every run final with the search still active: it went on to look 7.
  EXPECT_EQ(requests["experiments/7"], 1 + 6);
  EXPECT_EQ(requests["runs"], 1);
}

// The daemon stops answering midway (drover daemon stop, a drained daemon, a kill): the
// follower says the experiment is not over, where its runs are, and the command that follows it
// again, instead of only that a connection failed.
TEST(FollowExperiment, ADaemonThatStopsAnsweringMidwayIsSaidToLeaveTheRunsForTheNext) {
  httplib::Server server;
  std::atomic<int> looks{0};
  server.Get(R"(/api/v1/experiments/7)", [&](const httplib::Request&, httplib::Response& res) {
    looks.fetch_add(1);
    protocol::ExperimentListing l;
    l.experiment.id = 7;
    l.experiment.name = "sweep";
    l.experiment.spec = {{"name", "sweep"}};
    l.runs.by_state[RunState::kRunning] = 2;  // never done
    res.set_content(protocol::ToJson(l).dump(), "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread stopper([&] {
    while (looks.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server.stop();
  });
  DaemonInfo d;
  d.host = "127.0.0.1";
  d.port = port;
  d.pid = 1;
  d.token = "t";
  ApiClient api(d);
  FollowOptions o{.cancel_on_exit = true, .json = false, .quiet = true};
  o.again = "drover run --resume spec.yaml";
  ::testing::internal::CaptureStderr();
  const int code = FollowExperiment(api, 7, o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  stopper.join();
  serving.join();
  EXPECT_NE(code, kExitOk);
  EXPECT_NE(err.find("the daemon stopped answering while experiment 7 (sweep) was being followed"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("those running go on and are taken over"), std::string::npos) << err;
  EXPECT_NE(err.find("Follow it again with drover run --resume spec.yaml"), std::string::npos)
      << err;
  EXPECT_NE(err.find("drover ls -e 7"), std::string::npos) << err;
}

// A catalog that records what it is asked for; runs and attempts as a test sets them.
class RecordingCatalog : public Catalog {
 public:
  std::vector<Run> runs;
  int list_runs = 0;
  std::vector<std::vector<int64_t>> attempts_asked;  // the run ids of each ListAttemptsOfRuns
  std::vector<int64_t> series_asked;

  Result<std::vector<protocol::ExperimentListing>> ListExperiments(int) override {
    return std::vector<protocol::ExperimentListing>{};
  }
  Result<Experiment> FindExperiment(const std::string&) override { return NotFound("none"); }
  Result<std::vector<Run>> ListRuns(const RunFilter&) override {
    ++list_runs;
    return runs;
  }
  Result<protocol::RunDetail> GetRunDetail(int64_t) override { return NotFound("none"); }
  Result<std::vector<Alert>> ListAlerts(const AlertFilter&) override {
    return std::vector<Alert>{};
  }
  Result<std::vector<Attempt>> ListAttempts(int64_t run_id) override {
    std::vector<Attempt> out;
    for (const Run& r : runs) {
      if (r.id != run_id) continue;
      for (int n = 1; n <= r.attempts; ++n) {
        Attempt a;
        a.id = run_id * 10 + n;
        a.run_id = run_id;
        a.number = n;
        a.ended = true;
        a.reason = n == r.attempts && r.state == RunState::kSucceeded ? "succeeded" : "exit_code";
        out.push_back(a);
      }
    }
    return out;
  }
  Result<RunArtifacts> RunOutputs(int64_t) override { return NotFound("none"); }
  Result<std::map<int64_t, std::vector<Attempt>>> ListAttemptsOfRuns(
      const std::vector<Run>& asked) override {
    std::vector<int64_t> ids;
    for (const Run& r : asked) ids.push_back(r.id);
    attempts_asked.push_back(ids);
    return Catalog::ListAttemptsOfRuns(asked);
  }
  Result<std::vector<report::MetricSeries>> GetMetricSeries(int64_t run_id,
                                                            const SeriesQuery&) override {
    series_asked.push_back(run_id);
    return std::vector<report::MetricSeries>{};
  }
  Result<std::map<int64_t, CurveSummary>> MetricSummaries(int64_t, const std::string&,
                                                          int) override {
    return std::map<int64_t, CurveSummary>{};
  }
};

Run MakeRun(int64_t id, RunState state, int attempts, Json final_metrics = Json::object()) {
  Run r;
  r.id = id;
  r.experiment_id = 7;
  r.index = static_cast<int>(id) - 1;
  r.params = {{"i", id}};
  r.current_params = r.params;
  r.state = state;
  r.attempts = attempts;
  r.final_metrics = std::move(final_metrics);
  return r;
}

TEST(LoadCurves, AsksOnlyForTheAttemptsTheReportShows) {
  RecordingCatalog catalog;
  catalog.runs = {MakeRun(1, RunState::kSucceeded, 1), MakeRun(2, RunState::kFailed, 1),
                  MakeRun(3, RunState::kSucceeded, 2), MakeRun(4, RunState::kSucceeded, 1),
                  MakeRun(5, RunState::kSucceeded, 1, {{"loss", 0.5}}),
                  MakeRun(6, RunState::kCancelled, 0)};
  std::map<int64_t, report::RunDetails> details;
  ASSERT_TRUE(LoadCurves(catalog, catalog.runs, {"loss"}, &details).ok());
  // The failed run, the one retried after a failed attempt and the one with a curve; not the
  // two that succeeded at their first try without one, nor the one that never started.
  ASSERT_EQ(catalog.attempts_asked.size(), 1u);
  EXPECT_EQ(catalog.attempts_asked[0], (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(details[2].attempts.size(), 1u);
  EXPECT_EQ(details[3].attempts.size(), 2u);
  EXPECT_EQ(details[3].attempts[0].reason, "exit_code");  // the failure the report lists
  EXPECT_TRUE(details[1].attempts.empty());
  EXPECT_EQ(catalog.series_asked, (std::vector<int64_t>{5}));

  // A clean sweep without metrics: nothing to ask.
  RecordingCatalog clean;
  for (int i = 1; i <= 50; ++i) clean.runs.push_back(MakeRun(i, RunState::kSucceeded, 1));
  std::map<int64_t, report::RunDetails> none;
  ASSERT_TRUE(LoadCurves(clean, clean.runs, {}, &none).ok());
  EXPECT_TRUE(clean.attempts_asked.empty());
}

TEST(LoadReportData, RunsGivenAreNotListedAgain) {
  RecordingCatalog catalog;
  catalog.runs = {MakeRun(1, RunState::kSucceeded, 1), MakeRun(2, RunState::kSucceeded, 1)};
  Experiment exp;
  exp.id = 7;
  exp.name = "sweep";
  exp.spec = {{"name", "sweep"}};
  auto given = LoadReportData(catalog, exp, {}, &catalog.runs);
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(catalog.list_runs, 0);
  EXPECT_EQ(given->runs.size(), 2u);
  auto listed = LoadReportData(catalog, exp, {});
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(catalog.list_runs, 1);
  EXPECT_EQ(listed->runs.size(), 2u);
}

}  // namespace
}  // namespace drover::cli

namespace drover::cli {
namespace {

// The report's attempts through a daemon come a page of runs at a time: the client follows
// next_offset until the daemon says there is no more, and asks for nothing twice.
TEST(ApiCatalog, AnExperimentsAttemptsAreReadPageByPage) {
  httplib::Server server;
  std::mutex mu;
  std::vector<std::string> offsets;
  server.Get(R"(/api/v1/experiments/7/attempts)",
             [&](const httplib::Request& req, httplib::Response& res) {
               const std::string offset = req.get_param_value("offset");
               {
                 std::lock_guard<std::mutex> l(mu);
                 offsets.push_back(offset);
               }
               // 40 runs, 16 a page: 0-15, 16-31, 32-39; one attempt each.
               const int from = std::stoi(offset.empty() ? "0" : offset);
               const int to = std::min(40, from + 16);
               Json attempts = Json::array();
               for (int id = from + 1; id <= to; ++id) {
                 Attempt a;
                 a.id = id;
                 a.run_id = id;
                 a.number = 1;
                 a.ended = true;
                 a.reason = "succeeded";
                 attempts.push_back(protocol::ToJson(a));
               }
               res.set_content(Json({{"experiment_id", 7},
                                     {"attempts", attempts},
                                     {"next_offset", to < 40 ? Json(to) : Json(nullptr)}})
                                   .dump(),
                               "application/json");
             });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  DaemonInfo d;
  d.host = "127.0.0.1";
  d.port = port;
  d.pid = 1;
  d.token = "t";
  std::vector<drover::Run> runs;
  for (int id = 1; id <= 40; ++id) runs.push_back(MakeRun(id, RunState::kSucceeded, 1));
  auto got = CatalogOf(d)->ListAttemptsOfRuns(runs);
  server.stop();
  t.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 40u);
  EXPECT_EQ(got->at(40).front().run_id, 40);
  EXPECT_EQ(offsets, (std::vector<std::string>{"0", "16", "32"}));
}

}  // namespace
}  // namespace drover::cli
