// /api/v1/runs and /api/v1/experiments against a real store.
#include "protocol/api.h"
#include "server/server_test_util.h"
#include "spec/spec_parser.h"

namespace drover::server {
namespace {

using testing::ServerTest;

class RunsRoutesTest : public ServerTest {
 protected:
  // Experiment "alpha" with runs 1..5 (run i in grid point i-1), "beta" with runs 6..8.
  void Fill() {
    alpha_ = AddExperiment("alpha");
    RunState states[] = {RunState::kSucceeded, RunState::kFailed, RunState::kRunning,
                         RunState::kQueued, RunState::kSucceeded};
    for (int i = 0; i < 5; ++i) AddRun(alpha_.id, states[i], i);
    beta_ = AddExperiment("beta");
    for (int i = 0; i < 3; ++i) AddRun(beta_.id, RunState::kQueued, i);
  }

  std::vector<int64_t> Ids(const Json& runs) {
    std::vector<int64_t> ids;
    for (const auto& r : runs) ids.push_back(r["id"].get<int64_t>());
    return ids;
  }

  Experiment alpha_, beta_;
};

TEST_F(RunsRoutesTest, ListsAllRuns) {
  Fill();
  StartServer();
  auto r = Get("/api/v1/runs");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(Ids(r.body["runs"]), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(r.body["next_offset"].is_null());
  // Each run decodes with the protocol's decoder.
  for (const auto& j : r.body["runs"]) {
    auto run = protocol::RunFromJson(j);
    ASSERT_TRUE(run.ok()) << run.status().message();
  }
  EXPECT_EQ(r.body["runs"][1]["state"], "failed");
}

TEST_F(RunsRoutesTest, PagesWithNextOffset) {
  Fill();
  StartServer();
  std::vector<int64_t> seen;
  std::string path = "/api/v1/runs?limit=3";
  int pages = 0;
  int64_t offset = 0;
  while (true) {
    auto r = Get(path + "&offset=" + std::to_string(offset));
    ASSERT_EQ(r.status, 200) << r.raw;
    for (int64_t id : Ids(r.body["runs"])) seen.push_back(id);
    ++pages;
    if (r.body["next_offset"].is_null()) break;
    offset = r.body["next_offset"].get<int64_t>();
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  auto desc = Get("/api/v1/runs?limit=2&order=desc");
  EXPECT_EQ(Ids(desc.body["runs"]), (std::vector<int64_t>{8, 7}));
  EXPECT_EQ(desc.body["next_offset"], 2);
}

TEST_F(RunsRoutesTest, FiltersByExperimentAndState) {
  Fill();
  StartServer();
  EXPECT_EQ(Ids(Get("/api/v1/runs?experiment=beta").body["runs"]), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(Ids(Get("/api/v1/runs?experiment=" + std::to_string(alpha_.id) + "&state=succeeded")
                    .body["runs"]),
            (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(Ids(Get("/api/v1/runs?state=queued").body["runs"]), (std::vector<int64_t>{4, 6, 7, 8}));
  auto missing = Get("/api/v1/runs?experiment=gamma");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["error"]["code"], "not_found");
}

TEST_F(RunsRoutesTest, RejectsBadQueryParameters) {
  Fill();
  StartServer();
  for (const char* q : {"limit=abc", "limit=0", "limit=100000", "offset=-1", "state=sleeping",
                        "order=sideways", "limit=1x"}) {
    auto r = Get(std::string("/api/v1/runs?") + q);
    EXPECT_EQ(r.status, 400) << q << ": " << r.raw;
    EXPECT_EQ(r.body["error"]["code"], "invalid_argument") << q;
  }
  auto r = Get("/api/v1/runs?state=sleeping");
  EXPECT_NE(r.raw.find("queued, running"), std::string::npos) << r.raw;
}

TEST_F(RunsRoutesTest, RunDetailLikeShowJson) {
  Fill();
  AddAttempt(2, 1, true);
  AddAttempt(2, 2, false);
  StartServer();
  auto r = Get("/api/v1/runs/2");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["id"], 2);
  EXPECT_EQ(r.body["state"], "failed");
  EXPECT_EQ(r.body["experiment"],
            Json::parse(R"({"id": 1, "name": "alpha", "user": "", "created_ms": 1700000000000})"));
  ASSERT_EQ(r.body["attempt_list"].size(), 2u);
  EXPECT_EQ(r.body["attempt_list"][1]["number"], 2);
  EXPECT_TRUE(protocol::AttemptFromJson(r.body["attempt_list"][0]).ok());
  EXPECT_EQ(r.body["snapshot"]["hash"], "snap-alpha");
  EXPECT_EQ(r.body["snapshot"]["git_commit"], "c0ffee");  // the experiment's, not the snapshot's
  EXPECT_EQ(r.body["snapshot"]["git_dirty"], true);
  EXPECT_EQ(r.body["snapshot"]["git_diff"], "diff --git a/train.py b/train.py\n");
  ASSERT_EQ(r.body["environments"].size(), 1u);
  EXPECT_EQ(r.body["environments"][0]["interpreter"], "/usr/bin/python3");
  EXPECT_TRUE(protocol::RunFromJson(r.body).ok());
}

TEST_F(RunsRoutesTest, AttemptsOfARun) {
  Fill();
  AddAttempt(3, 1, true);
  StartServer();
  auto r = Get("/api/v1/runs/3/attempts");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["run_id"], 3);
  ASSERT_EQ(r.body["attempts"].size(), 1u);
  EXPECT_EQ(r.body["attempts"][0]["argv"], Json::parse(R"(["python3", "train.py"])"));
  EXPECT_EQ(Get("/api/v1/runs/99/attempts").status, 404);
}

TEST_F(RunsRoutesTest, AttemptsOfAnExperimentInOneAnswer) {
  Fill();
  AddAttempt(3, 1, true);
  AddAttempt(2, 1, true);
  AddAttempt(2, 2, false);
  AddAttempt(6, 1, true);  // beta's: not alpha's
  StartServer();
  for (std::string which : {"alpha", "1"}) {
    auto r = Get("/api/v1/experiments/" + which + "/attempts");
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["experiment_id"], alpha_.id);
    // By run, then number: what one GET /runs/{id}/attempts per run would have said.
    ASSERT_EQ(r.body["attempts"].size(), 3u) << r.raw;
    std::vector<std::pair<int64_t, int64_t>> seen;
    for (const Json& a : r.body["attempts"]) {
      seen.emplace_back(a["run_id"].get<int64_t>(), a["number"].get<int64_t>());
      EXPECT_TRUE(protocol::AttemptFromJson(a).ok()) << a.dump();
    }
    EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 2}, {3, 1}}));
    EXPECT_EQ(r.body["attempts"][2], Get("/api/v1/runs/3/attempts").body["attempts"][0]);
  }
  auto none = Get("/api/v1/experiments/beta/attempts");
  ASSERT_EQ(none.status, 200) << none.raw;
  EXPECT_EQ(none.body["attempts"].size(), 1u);
  EXPECT_EQ(Get("/api/v1/experiments/nope/attempts").status, 404);
}

// The answer is bounded: a page of runs at a time (at most 1000), with where the next starts.
TEST_F(RunsRoutesTest, AnExperimentsAttemptsComeAPageOfRunsAtATime) {
  Fill();
  AddAttempt(3, 1, true);
  AddAttempt(2, 1, true);
  AddAttempt(2, 2, false);
  AddAttempt(5, 1, true);
  AddAttempt(6, 1, true);  // beta's
  StartServer();
  std::vector<std::pair<int64_t, int64_t>> seen;
  std::vector<Json> nexts;
  for (int64_t offset = 0;;) {
    auto r = Get("/api/v1/experiments/alpha/attempts?limit=2&offset=" + std::to_string(offset));
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["limit"], 2);
    for (const Json& a : r.body["attempts"]) {
      seen.emplace_back(a["run_id"].get<int64_t>(), a["number"].get<int64_t>());
    }
    nexts.push_back(r.body["next_offset"]);
    if (r.body["next_offset"].is_null()) break;
    offset = r.body["next_offset"].get<int64_t>();
  }
  // Runs 1-2, 3-4, 5: every attempt of alpha once, in order.
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 2}, {3, 1}, {5, 1}}));
  EXPECT_EQ(nexts, (std::vector<Json>{2, 4, nullptr}));
  EXPECT_EQ(Get("/api/v1/experiments/alpha/attempts?limit=1001").status, 400);
  EXPECT_EQ(Get("/api/v1/experiments/alpha/attempts?limit=0").status, 400);
  EXPECT_EQ(Get("/api/v1/experiments/alpha/attempts?offset=-1").status, 400);
}

TEST_F(RunsRoutesTest, UnknownAndMalformedRunIds) {
  Fill();
  StartServer();
  auto r = Get("/api/v1/runs/99");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body["error"]["code"], "not_found");
  EXPECT_NE(r.raw.find("no run 99"), std::string::npos);
  for (const char* bad : {"abc", "-1", "0", "1.5", "99999999999999999999999"}) {
    auto b = Get(std::string("/api/v1/runs/") + bad);
    EXPECT_EQ(b.status, 400) << bad << ": " << b.raw;
    EXPECT_NE(b.raw.find("run id must be a positive integer"), std::string::npos) << b.raw;
  }
  EXPECT_EQ(Post("/api/v1/runs/abc/cancel", "").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/abc/metrics").status, 400);
  EXPECT_EQ(Get("/api/v1/runs/abc/logs").status, 400);
}

TEST_F(RunsRoutesTest, CancelReachesTheEngine) {
  Fill();
  StartServer();
  auto r = Post("/api/v1/runs/3/cancel", "");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, Json::parse(R"({"run_id": 3, "cancelled": true})"));
  EXPECT_EQ(engine_.Locked([&] { return engine_.cancelled_runs; }), std::vector<int64_t>{3});
  EXPECT_EQ(Post("/api/v1/runs/42/cancel", "").status, 404);
  EXPECT_EQ(engine_.Locked([&] { return engine_.cancelled_runs.size(); }), 1u);
}

TEST_F(RunsRoutesTest, EngineErrorsMapToStatus) {
  Fill();
  engine_.cancel_error = FailedPrecondition("run 1 has already ended");
  StartServer();
  auto r = Post("/api/v1/runs/1/cancel", "");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.body["error"]["code"], "failed_precondition");
  EXPECT_EQ(r.body["error"]["message"], "run 1 has already ended");
}

TEST_F(RunsRoutesTest, PriorityReachesTheEngine) {
  Fill();
  StartServer();
  auto r = Post("/api/v1/runs/4/priority", R"({"priority": 7})");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, Json::parse(R"({"run_id": 4, "priority": 7})"));
  auto calls = engine_.Locked([&] { return engine_.priorities; });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::pair<int64_t, int>{4, 7}));
  auto bad = Post("/api/v1/runs/4/priority", R"({"priority": "high"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.raw.find("priority request.priority"), std::string::npos) << bad.raw;
  EXPECT_EQ(Post("/api/v1/runs/4/priority", R"({"prio": 1})").status, 400);
  EXPECT_EQ(Post("/api/v1/runs/77/priority", R"({"priority": 1})").status, 404);
}

TEST_F(RunsRoutesTest, ExperimentsListAndDetail) {
  Fill();
  StartServer();
  auto list = Get("/api/v1/experiments");
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["experiments"].size(), 2u);
  EXPECT_EQ(list.body["experiments"][0]["name"], "beta");  // newest first
  EXPECT_TRUE(protocol::ExperimentFromJson(list.body["experiments"][0]).ok());
  // Each row counts its runs by state, every state named (a listing never fetches the runs).
  EXPECT_EQ(list.body["experiments"][1]["total_runs"], 5);
  EXPECT_EQ(list.body["experiments"][1]["counts"]["succeeded"], 2);
  EXPECT_EQ(list.body["experiments"][1]["counts"]["pruned"], 0);
  EXPECT_EQ(list.body["experiments"][0]["counts"]["queued"], 3);
  auto row = protocol::ExperimentListingFromJson(list.body["experiments"][1]);
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->runs.Of(RunState::kFailed), 1);
  EXPECT_EQ(row->runs.Unfinished(), 2);
  EXPECT_EQ(Get("/api/v1/experiments?limit=1").body["experiments"].size(), 1u);
  auto second = Get("/api/v1/experiments?limit=1&offset=1");
  ASSERT_EQ(second.body["experiments"].size(), 1u) << second.raw;
  EXPECT_EQ(second.body["experiments"][0]["name"], "alpha");
  EXPECT_EQ(Get("/api/v1/experiments?offset=2").body["experiments"].size(), 0u);
  EXPECT_EQ(Get("/api/v1/experiments?offset=-1").status, 400);
  EXPECT_EQ(Get("/api/v1/experiments?limit=x").status, 400);

  for (std::string which : {"alpha", "1"}) {
    auto one = Get("/api/v1/experiments/" + which);
    ASSERT_EQ(one.status, 200) << one.raw;
    EXPECT_EQ(one.body["id"], 1);
    EXPECT_EQ(one.body["total_runs"], 5);
    EXPECT_FALSE(one.body.contains("runs"));  // paged through /runs?experiment=
    EXPECT_EQ(one.body["counts"]["succeeded"], 2);
    EXPECT_EQ(one.body["counts"]["queued"], 1);
    EXPECT_EQ(one.body["counts"]["retrying"], 0);
    EXPECT_EQ(one.body["spec_yaml"], alpha_.spec_yaml);
    auto e = protocol::ExperimentFromJson(one.body);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->git_diff, alpha_.git_diff);
  }
  auto missing = Get("/api/v1/experiments/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["error"]["code"], "not_found");
}

TEST_F(RunsRoutesTest, SubmitReturns201AndTheEnginesIds) {
  engine_.submit_reply = {.experiment_id = 12, .run_ids = {30, 31}};
  StartServer();
  protocol::SubmitRequest req{.spec_yaml = "name: x\ncommand: [true]\n",
                              .spec_name = "x.yaml",
                              .base_dir = "/tmp/proj",
                              .overrides = {"lr=0.1"}};
  auto r = Post("/api/v1/experiments", protocol::ToJson(req).dump());
  EXPECT_EQ(r.status, 201) << r.raw;
  auto reply = protocol::SubmitResponseFromJson(r.body);
  ASSERT_TRUE(reply.ok()) << r.raw;
  EXPECT_EQ(reply->experiment_id, 12);
  EXPECT_EQ(reply->run_ids, (std::vector<int64_t>{30, 31}));
  auto loc = r.headers.find("Location");
  ASSERT_NE(loc, r.headers.end());
  EXPECT_EQ(loc->second, "/api/v1/experiments/12");
  auto got = engine_.Locked([&] { return engine_.submits; });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(protocol::ToJson(got[0]), protocol::ToJson(req));
}

// POST /runs/{id}/reproduce: the server makes the spec from the records (the run's params, the
// recorded snapshot as its workdir, never cached) and submits it; the answer names the run.
TEST_F(RunsRoutesTest, ReproduceSubmitsTheRecordedSpec) {
  // An experiment as a real submit records it: its spec as JSON, its snapshot.
  Result<Spec> spec = ParseSpecString("name: alpha\ncommand: python3 train.py {lr}\n"
                                      "params: {lr: [0.1, 0.01]}\n",
                                      "alpha.yaml", dir_.string());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  Experiment e;
  e.name = "alpha";
  e.spec = SpecToJson(*spec);
  e.snapshot_hash = "snap-alpha";
  ASSERT_TRUE(store_->InsertExperiment(e).ok());
  Snapshot snap;
  snap.hash = e.snapshot_hash;
  snap.path = Path("snapshots/snap-alpha");
  ASSERT_TRUE(store_->PutSnapshot(snap).ok());
  const drover::Run made = AddRun(e.id, RunState::kSucceeded, 1);
  engine_.submit_reply = {.experiment_id = 12, .run_ids = {30}};
  StartServer();
  auto r = Post("/api/v1/runs/" + std::to_string(made.id) + "/reproduce", "");
  ASSERT_EQ(r.status, 200) << r.raw;
  auto reply = protocol::ReproduceResponseFromJson(r.body);
  ASSERT_TRUE(reply.ok()) << r.raw;
  EXPECT_EQ(reply->experiment_id, 12);
  EXPECT_EQ(reply->run_id, 30);
  auto specs = engine_.Locked([&] { return engine_.submitted_specs; });
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_TRUE(specs[0].rerun);
  EXPECT_EQ(specs[0].name, "alpha-reproduce");
  EXPECT_EQ(specs[0].workdir, Path("snapshots/snap-alpha"));
  EXPECT_EQ(Json::parse(specs[0].params.dump()), made.params);
  EXPECT_TRUE(specs[0].command.size() == 3 && specs[0].command[2] == "{lr}");
  EXPECT_EQ(Post("/api/v1/runs/99/reproduce", "").status, 404);
  EXPECT_EQ(Post("/api/v1/runs/x/reproduce", "").status, 400);
}

TEST_F(RunsRoutesTest, SubmitErrors) {
  engine_.submit_error = InvalidArgument("x.yaml:2:10: unknown field 'comand'");
  StartServer();
  auto r = Post("/api/v1/experiments",
                R"({"spec_yaml": "name: x\ncomand: [true]\n", "base_dir": "/tmp"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["message"], "x.yaml:2:10: unknown field 'comand'");
  // A 5000-digit integer: nlohmann's out_of_range, once a 500 from the handler.
  auto huge = Post("/api/v1/experiments",
                   R"({"spec_yaml": "x", "base_dir": "/tmp", "n": )" + std::string(5000, '9') + "}");
  EXPECT_EQ(huge.status, 400) << huge.raw;
  EXPECT_NE(huge.raw.find("numbers must fit a double"), std::string::npos) << huge.raw;
  // Without base_dir (or with a relative one) relative paths have nothing to start at: a 400
  // that names the field, not a 500 from the file system.
  auto no_base = Post("/api/v1/experiments", R"({"spec_yaml": "name: x\ncommand: [true]\n"})");
  EXPECT_EQ(no_base.status, 400);
  EXPECT_NE(no_base.raw.find("base_dir: missing"), std::string::npos) << no_base.raw;
  auto relative = Post("/api/v1/experiments",
                       R"({"spec_yaml": "name: x\ncommand: [true]\n", "base_dir": "proj"})");
  EXPECT_EQ(relative.status, 400);
  EXPECT_NE(relative.raw.find("not an absolute path"), std::string::npos) << relative.raw;
  auto missing = Post("/api/v1/experiments", R"({"spec": "x"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.raw.find("unknown field"), std::string::npos) << missing.raw;
  EXPECT_EQ(Post("/api/v1/experiments", "[]").status, 400);
}

TEST_F(RunsRoutesTest, CancelExperimentByIdOrName) {
  Fill();
  StartServer();
  EXPECT_EQ(Post("/api/v1/experiments/beta/cancel", "").status, 200);
  auto r = Post("/api/v1/experiments/1/cancel", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, Json::parse(R"({"experiment_id": 1, "cancelled": true})"));
  EXPECT_EQ(engine_.Locked([&] { return engine_.cancelled_experiments; }),
            (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Post("/api/v1/experiments/zzz/cancel", "").status, 404);
}

TEST_F(RunsRoutesTest, RetryReachesTheEngineWithWhatToRetry) {
  Fill();
  StartServer();
  auto r = Post("/api/v1/experiments/alpha/retry", R"({"runs": [1, 2]})");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["experiment_id"], 1);
  EXPECT_EQ(r.body["run_ids"], Json::parse("[1, 2]"));
  // The reply names the code the runs run: the snapshot recorded at the submit.
  EXPECT_EQ(r.body["snapshot"], "snap-alpha");
  EXPECT_EQ(r.body["code"],
            "the runs run the code recorded when experiment 1 was submitted (snapshot snap-alpha, "
            "git c0ffee + its uncommitted changes), not the workdir as it is now: edits made "
            "since are not in it; to run them, retry with --code current (the API and MCP: "
            "\"code\": \"current\")");
  auto decoded = protocol::RetryResponseFromJson(r.body);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->run_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(decoded->snapshot, "snap-alpha");
  EXPECT_EQ(Post("/api/v1/experiments/2/retry", R"({"failed": true, "cancelled": true})").status,
            200);
  auto calls = engine_.Locked([&] { return engine_.retried; });
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].first, 1);
  EXPECT_FALSE(calls[0].second.failed);
  EXPECT_EQ(calls[1].first, 2);
  EXPECT_TRUE(calls[1].second.failed);
  EXPECT_TRUE(calls[1].second.cancelled);
  // Nothing asked for, a misspelt field, a wrong type, an unknown experiment: refused, with why.
  auto empty = Post("/api/v1/experiments/1/retry", "{}");
  EXPECT_EQ(empty.status, 400);
  EXPECT_NE(empty.raw.find("say which runs to retry"), std::string::npos) << empty.raw;
  auto typo = Post("/api/v1/experiments/1/retry", R"({"failled": true})");
  EXPECT_EQ(typo.status, 400);
  EXPECT_NE(typo.raw.find("unknown field"), std::string::npos) << typo.raw;
  EXPECT_EQ(Post("/api/v1/experiments/1/retry", R"({"runs": ["a"]})").status, 400);
  EXPECT_EQ(Post("/api/v1/experiments/zzz/retry", R"({"failed": true})").status, 404);
  EXPECT_EQ(engine_.Locked([&] { return engine_.retried.size(); }), 2u);
}

TEST_F(RunsRoutesTest, DeleteAnExperimentAndCollectGarbageReachTheEngine) {
  Fill();
  StartServer();
  auto dry = Delete("/api/v1/experiments/beta?dry_run=true");
  ASSERT_EQ(dry.status, 200) << dry.raw;
  EXPECT_EQ(dry.body["experiments"], Json::array({2}));
  EXPECT_EQ(dry.body["applied"], false);
  auto done = Delete("/api/v1/experiments/1");
  ASSERT_EQ(done.status, 200) << done.raw;
  auto decoded = protocol::CleanupFromJson(done.body);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->applied);
  EXPECT_EQ(Delete("/api/v1/experiments/zzz").status, 404);
  EXPECT_EQ(Delete("/api/v1/experiments/1?dry_run=maybe").status, 400);
  auto removed = engine_.Locked([&] { return engine_.removed; });
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0], (std::pair<std::vector<int64_t>, bool>{{2}, true}));
  EXPECT_EQ(removed[1], (std::pair<std::vector<int64_t>, bool>{{1}, false}));

  auto gc = Post("/api/v1/store/gc", R"({"older_than": "3d", "checkpoints": true, "dry_run": true})");
  ASSERT_EQ(gc.status, 200) << gc.raw;
  EXPECT_EQ(gc.body["bytes"], 10);
  EXPECT_EQ(gc.body["files"][0]["path"], "/store/runs/1");
  auto calls = engine_.Locked([&] { return engine_.collected; });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].older_than_ms, 3LL * 24 * 3600 * 1000);
  EXPECT_TRUE(calls[0].checkpoints);
  EXPECT_TRUE(calls[0].dry_run);
  auto bad = Post("/api/v1/store/gc", R"({"older_than": "soon"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.raw.find("gc request.older_than"), std::string::npos) << bad.raw;
  EXPECT_EQ(Post("/api/v1/store/gc", R"({"dryrun": true})").status, 400);
}

TEST_F(RunsRoutesTest, CheckAsksTheEngineAndRecordsNothing) {
  StartServer();
  const std::string body = R"({"spec_yaml": "name: x\ncommand: \"true\"\n", "base_dir": "/tmp"})";
  auto ok = Post("/api/v1/experiments/check", body);
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body, Json::parse(R"({"fits": true})"));
  engine_.Locked([&] { engine_.check_error = FailedPrecondition("each run needs 9 GPUs"); return 0; });
  auto refused = Post("/api/v1/experiments/check", body);
  EXPECT_EQ(refused.status, 409) << refused.raw;
  EXPECT_EQ(refused.body["error"]["message"], "each run needs 9 GPUs");
  EXPECT_EQ(Post("/api/v1/experiments/check", R"({"spec": 1})").status, 400);
  EXPECT_EQ(engine_.Locked([&] { return engine_.checked.size(); }), 2u);
  EXPECT_TRUE(engine_.Locked([&] { return engine_.submits.empty(); }));
}

TEST_F(RunsRoutesTest, Gpus) {
  engine_.gpus = {{.index = 0,
                   .name = "fake",
                   .uuid = "GPU-0",
                   .memory_total = 16LL << 30,
                   .memory_reserved = 4LL << 30,
                   .runs = {3},
                   .exclusive = false}};
  StartServer();
  auto r = Get("/api/v1/gpus");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["gpus"].size(), 1u);
  auto g = protocol::GpuStatusFromJson(r.body["gpus"][0]);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->runs, std::vector<int64_t>{3});
  EXPECT_EQ(g->memory_reserved, 4LL << 30);
}

}  // namespace
}  // namespace drover::server
