#include "protocol/api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "protocol/json_codec.h"

namespace drover::protocol {
namespace {

// Through text, as on the wire.
Json Wire(const Json& j) { return Json::parse(j.dump()); }

Experiment SampleExperiment() {
  Experiment e;
  e.id = 7;
  e.name = "lr-sweep";
  e.spec = {{"name", "lr-sweep"}, {"params", {{"lr", {0.1, 0.01}}}}};
  e.snapshot_hash = "abc123";
  e.git_commit = "deadbeef";
  e.git_diff = "";
  e.status = ExperimentStatus::kDone;
  e.created_ms = 1'700'000'000'123;
  return e;
}

Run SampleRun() {
  Run r;
  r.id = 42;
  r.experiment_id = 7;
  r.index = 3;
  r.params = {{"lr", 0.01}, {"batch_size", 64}};
  r.current_params = {{"lr", 0.01}, {"batch_size", 32}};
  r.fingerprint = "f00d";
  r.state = RunState::kRetrying;
  r.priority = -5;
  r.resources = {.gpus = 2, .gpu_memory = 6LL << 30, .cpus = 4};
  r.attempts = 2;
  r.retries_used = 1;
  r.created_ms = 1;
  r.started_ms = 2;
  r.ended_ms = 3;
  r.reason = "cuda_oom";
  r.final_metrics = {{"loss", 0.25}, {"acc", 0.9}};
  return r;
}

Attempt SampleAttempt() {
  Attempt a;
  a.id = 9;
  a.run_id = 42;
  a.number = 2;
  a.ended = true;
  a.reason = "exit_code";
  a.exit_code = 3;
  a.signal = 0;
  a.pid = 12345;
  a.gpus = {0, 3};
  a.cuda_visible_devices = "0,3";
  a.params = {{"lr", 0.01}};
  a.argv = {"python3", "train.py", "--lr", "0.01"};
  a.started_ms = 10;
  a.ended_ms = 20;
  a.stdout_path = "/s/runs/42/attempt-2/stdout";
  a.stderr_path = "/s/runs/42/attempt-2/stderr";
  a.hostname = "box";
  a.drover_version = "0.1.0";
  a.workdir = "/s/runs/42/work";
  a.pid_start = 987654;
  a.exit_path = "/s/runs/42/attempt-2/exit";
  return a;
}

TEST(ApiErrors, ErrorJsonShapeAndStatus) {
  Json j = ErrorJson(NotFound("no run 5"));
  EXPECT_EQ(j, Json::parse(R"({"error":{"code":"not_found","message":"no run 5"}})"));
  EXPECT_EQ(HttpStatusFor(Code::kOk), 200);
  EXPECT_EQ(HttpStatusFor(Code::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(Code::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(Code::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(Code::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(Code::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(Code::kIo), 500);
}

TEST(ApiErrors, StatusFromErrorJsonRoundTrips) {
  for (const Status& st : {InvalidArgument("bad"), NotFound("gone"), FailedPrecondition("x"),
                           Unavailable("busy"), Internal("bug"), Status(Code::kIo, "disk")}) {
    Status back = StatusFromErrorJson(Wire(ErrorJson(st)), HttpStatusFor(st.code()));
    EXPECT_EQ(back.code(), st.code());
    EXPECT_EQ(back.message(), st.message());
  }
}

TEST(ApiErrors, StatusFromErrorJsonForeignCodesAndBodies) {
  Json unauth = {{"error", {{"code", "unauthenticated"}, {"message", "missing token"}}}};
  Status st = StatusFromErrorJson(unauth, 401);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_EQ(st.message(), "missing token");
  EXPECT_EQ(StatusFromErrorJson(Json("oops"), 503).code(), Code::kUnavailable);
  EXPECT_NE(StatusFromErrorJson(Json("oops"), 503).message().find("503"), std::string::npos);
  EXPECT_EQ(StatusFromErrorJson(Json(), 404).code(), Code::kNotFound);
  EXPECT_TRUE(StatusFromErrorJson(Json::object(), 200).ok());
}

TEST(ApiCodec, ExperimentRoundTrip) {
  Experiment e = SampleExperiment();
  auto back = ExperimentFromJson(Wire(ToJson(e)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(e));
  EXPECT_EQ(back->id, 7);
  EXPECT_EQ(back->name, "lr-sweep");
  EXPECT_EQ(back->snapshot_hash, "abc123");
  EXPECT_EQ(back->git_commit, "deadbeef");
  EXPECT_EQ(back->status, ExperimentStatus::kDone);
  EXPECT_EQ(back->created_ms, e.created_ms);
  EXPECT_EQ(back->spec, e.spec);
  EXPECT_TRUE(back->git_diff.empty());
}

TEST(ApiCodec, DirtyExperimentKeepsDirtyFlag) {
  Experiment e = SampleExperiment();
  e.git_diff = "diff --git a/x b/x\n";
  auto back = ExperimentFromJson(Wire(ToJson(e)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(ToJson(*back), ToJson(e));
  EXPECT_FALSE(back->git_diff.empty());
  // With the diff in the JSON (the detail route), the diff itself comes back.
  Json j = ToJson(e);
  j["git_diff"] = e.git_diff;
  j["spec_yaml"] = "name: x\n";
  back = ExperimentFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->git_diff, e.git_diff);
  EXPECT_EQ(back->spec_yaml, "name: x\n");
}

TEST(ApiCodec, RunRoundTrip) {
  drover::Run r = SampleRun();
  auto back = RunFromJson(Wire(ToJson(r)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(r));
  EXPECT_EQ(back->state, RunState::kRetrying);
  EXPECT_EQ(back->resources.gpu_memory, 6LL << 30);
  EXPECT_EQ(back->resources.cpus, 4);
  EXPECT_EQ(back->priority, -5);
  EXPECT_EQ(back->final_metrics, r.final_metrics);
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kSucceeded, RunState::kFailed,
                     RunState::kCancelled}) {
    r.state = s;
    auto b = RunFromJson(Wire(ToJson(r)));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->state, s);
  }
  // How a search's trial was proposed comes back; one this client does not know is left out.
  r.origin = TrialOrigin::kGp;
  Json with = ToJson(r);
  EXPECT_EQ(with["origin"], "gp");
  EXPECT_EQ(RunFromJson(Wire(with))->origin, TrialOrigin::kGp);
  with["origin"] = "a-sampler-of-2030";
  auto newer = RunFromJson(Wire(with));
  ASSERT_TRUE(newer.ok()) << newer.status().message();
  EXPECT_EQ(newer->origin, TrialOrigin::kNone);
  r.origin = TrialOrigin::kNone;
  EXPECT_FALSE(ToJson(r).contains("origin"));  // a grid's run says nothing of it
}

TEST(ApiCodec, AttemptRoundTrip) {
  Attempt a = SampleAttempt();
  auto back = AttemptFromJson(Wire(ToJson(a)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(a));
  EXPECT_EQ(back->gpus, (std::vector<int>{0, 3}));
  EXPECT_EQ(back->argv, a.argv);
  EXPECT_EQ(back->pid, 12345);
  EXPECT_TRUE(back->ended);
}

TEST(ApiCodec, GpuStatusWithTelemetryRoundTripsUnknownsAsNull) {
  GpuStatus g;
  g.index = 1;
  g.name = "H200";
  g.memory_total = int64_t{141} << 30;
  g.runs = {4, 5};
  GpuSample t;
  t.index = 1;
  t.t_ms = 1234;
  t.utilization = 87.5;
  t.memory_used = int64_t{40} << 30;
  t.temperature_c = 61;  // power, PCIe and memory_total stay unknown (-1)
  t.processes = {{4242, int64_t{20} << 30}, {4243, -1}};
  g.telemetry = t;
  Json j = ToJson(g);
  EXPECT_TRUE(j["telemetry"]["power_w"].is_null());
  EXPECT_TRUE(j["telemetry"]["memory_total"].is_null());
  EXPECT_TRUE(j["telemetry"]["processes"][1]["memory_used"].is_null());
  auto back = GpuStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->telemetry.has_value());
  EXPECT_EQ(back->telemetry->utilization, 87.5);
  EXPECT_EQ(back->telemetry->memory_used, int64_t{40} << 30);
  EXPECT_EQ(back->telemetry->memory_total, -1);
  EXPECT_EQ(back->telemetry->power_w, -1);
  ASSERT_EQ(back->telemetry->processes.size(), 2u);
  EXPECT_EQ(back->telemetry->processes[1].memory_used, -1);
  EXPECT_EQ(ToJson(*back), j);
  GpuStatus bare;
  EXPECT_TRUE(ToJson(bare)["telemetry"].is_null());
  EXPECT_FALSE(GpuStatusFromJson(ToJson(bare))->telemetry.has_value());
}

TEST(ApiCodec, AlertRoundTripWithoutRunOrGpu) {
  Alert a;
  a.id = 7;
  a.kind = "repeated_failure";
  a.severity = "error";
  a.key = "config:abc:repeated_failure";
  a.message = "failed 3 times";
  a.experiment_id = 2;
  a.data = {{"failures", 3}};
  a.first_ms = 10;
  a.last_ms = 20;
  a.count = 2;
  Json j = protocol::ToJson(a);
  EXPECT_TRUE(j["run_id"].is_null());
  EXPECT_TRUE(j["gpu"].is_null());
  auto back = AlertFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->run_id, 0);
  EXPECT_EQ(back->gpu, -1);
  EXPECT_EQ(back->experiment_id, 2);
  EXPECT_EQ(protocol::ToJson(*back), j);
  EXPECT_FALSE(AlertFromJson(Json{{"kind", "x"}}).ok());  // id is required
}

TEST(ApiCodec, MetricPointRoundTripIncludingNaN) {
  MetricPoint p{
      .run_id = 42, .attempt_id = 9, .step = 100, .name = "loss", .value = 0.125, .t_ms = 55};
  auto back = MetricPointFromJson(Wire(ToJson(p)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(p));
  EXPECT_EQ(back->step, 100);
  EXPECT_DOUBLE_EQ(back->value, 0.125);
  p.value = std::nan("");
  EXPECT_EQ(ToJson(p)["value"], "NaN");  // JSON has no NaN: NumberJson's text
  back = MetricPointFromJson(Wire(ToJson(p)));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->value));
  // +Inf was written as null and read back as NaN (issue 39, 14): it stays infinite.
  p.value = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(ToJson(p)["value"], "-Infinity");
  back = MetricPointFromJson(Wire(ToJson(p)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->value, -std::numeric_limits<double>::infinity());
  // An older daemon's null still reads as NaN.
  Json old = ToJson(p);
  old["value"] = nullptr;
  back = MetricPointFromJson(old);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->value));
}

TEST(ApiCodec, CurveSummariesRoundTripWithNaNAndInfinitiesAndRefuseBadShapes) {
  CurveSummary c;
  c.points = 3;
  c.last = std::nan("");
  c.lowest = 0.25;
  c.highest = std::numeric_limits<double>::infinity();
  c.mean_last = -std::numeric_limits<double>::infinity();
  Json j = Wire(CurveSummariesJson({{7, c}}));
  EXPECT_EQ(j["runs"][0]["last"], "NaN");
  EXPECT_EQ(j["runs"][0]["highest"], "Infinity");
  auto back = CurveSummariesFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  const CurveSummary& b = back->at(7);
  EXPECT_EQ(b.points, 3);
  EXPECT_TRUE(std::isnan(b.last));
  EXPECT_EQ(b.lowest, 0.25);
  EXPECT_EQ(b.highest, std::numeric_limits<double>::infinity());
  EXPECT_EQ(b.mean_last, -std::numeric_limits<double>::infinity());
  // Whatever a peer sends, an error and never an exception.
  for (const char* bad :
       {R"([])", R"({"runs": 3})", R"({"runs": [3]})", R"({"runs": [{"run_id": "x"}]})",
        R"({"runs": [{"run_id": 1, "points": "many"}]})",
        R"({"runs": [{"run_id": 1, "last": "infinite"}]})",
        R"({"runs": [{"run_id": 1, "last": [1]}]})"}) {
    EXPECT_FALSE(CurveSummariesFromJson(Json::parse(bad)).ok()) << bad;
  }
}

TEST(ApiCodec, RequestsAndResponsesRoundTrip) {
  SubmitRequest req{.spec_yaml = "name: a\n",
                    .spec_name = "a.yaml",
                    .base_dir = "/x",
                    .overrides = {"lr=0.1", "epochs=2"}};
  auto r = SubmitRequestFromJson(Wire(ToJson(req)));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(ToJson(*r), ToJson(req));

  SubmitResponse resp{.experiment_id = 3, .run_ids = {10, 11, 12}};
  auto rr = SubmitResponseFromJson(Wire(ToJson(resp)));
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr->experiment_id, 3);
  EXPECT_EQ(rr->run_ids, resp.run_ids);

  GpuStatus g{.index = 1,
              .name = "H100",
              .uuid = "GPU-1",
              .memory_total = 80LL << 30,
              .memory_reserved = 6LL << 30,
              .runs = {4, 5},
              .exclusive = true};
  auto gb = GpuStatusFromJson(Wire(ToJson(g)));
  ASSERT_TRUE(gb.ok());
  EXPECT_EQ(ToJson(*gb), ToJson(g));

  auto p = PriorityRequestFromJson(Json{{"priority", -3}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->priority, -3);
}

TEST(ApiCodec, SubmitRequestDefaults) {
  auto r = SubmitRequestFromJson(Json{{"spec_yaml", "name: a"}, {"base_dir", "/srv/p"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->base_dir, "/srv/p");
  EXPECT_NE(SubmitRequestFromJson(Json{{"spec_yaml", "name: a"}}).status().message().find(
                "base_dir: missing"),
            std::string::npos);
  EXPECT_EQ(r->spec_name, "spec.yaml");
  EXPECT_TRUE(r->overrides.empty());
}

TEST(ApiCodec, BadJsonNamesTheField) {
  auto expect_error = [](const Status& st, const std::string& needle) {
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  };
  expect_error(RunFromJson(Json::array()).status(), "expected a JSON object");
  Json r = ToJson(SampleRun());
  r["state"] = "sleeping";
  expect_error(RunFromJson(r).status(), "run.state");
  r = ToJson(SampleRun());
  r["priority"] = "high";
  expect_error(RunFromJson(r).status(), "run.priority: must be an integer, got string");
  r = ToJson(SampleRun());
  r["resources"]["gpus"] = 1.5;
  expect_error(RunFromJson(r).status(), "run.resources.gpus");
  r = ToJson(SampleRun());
  r["priority"] = 1LL << 40;
  expect_error(RunFromJson(r).status(), "run.priority: integer out of range");
  r = ToJson(SampleRun());
  r.erase("id");
  expect_error(RunFromJson(r).status(), "run.id: missing");
  Json a = ToJson(SampleAttempt());
  a["gpus"] = Json::array({0, "1"});
  expect_error(AttemptFromJson(a).status(), "attempt.gpus");
  a = ToJson(SampleAttempt());
  a["argv"] = "python3 x.py";
  expect_error(AttemptFromJson(a).status(), "attempt.argv: must be a list of strings");
  expect_error(MetricPointFromJson(Json{{"name", "loss"}, {"value", "1"}}).status(),
               "metric point.value");
  expect_error(ExperimentFromJson(Json{{"id", 1}, {"created_ms", true}}).status(),
               "experiment.created_ms");
  expect_error(SubmitRequestFromJson(Json::object()).status(), "submit request.spec_yaml: missing");
  expect_error(
      SubmitRequestFromJson(Json{{"spec_yaml", "x"}, {"overides", Json::array()}}).status(),
      "submit request.overides: unknown field");
  expect_error(SubmitRequestFromJson(Json{{"spec_yaml", "x"}, {"overrides", {1}}}).status(),
               "submit request.overrides");
  expect_error(PriorityRequestFromJson(Json{{"priority", "9"}}).status(),
               "priority request.priority");
  expect_error(PriorityRequestFromJson(Json::object()).status(),
               "priority request.priority: missing");
  expect_error(SubmitResponseFromJson(Json{{"experiment_id", 1}}).status(), "run_ids: missing");
  expect_error(GpuStatusFromJson(Json{{"index", -1}, {"runs", {"a"}}}).status(), "gpu.runs");
}

TEST(RunDetailJson, TheContainerARunRanInGoesToClientsAndBack) {
  RunDetail d;
  d.run.id = 3;
  d.run.experiment_id = 1;
  d.experiment.id = 1;
  d.experiment.name = "c";
  ContainerSpec c;
  c.image = "localhost/digits:latest";
  c.image_id = "sha256:" + std::string(64, 'a');
  c.digest = "sha256:" + std::string(64, 'b');
  d.experiment.spec = SpecToJson(Spec{});
  d.experiment.spec["container"] = ContainerJson(c);
  const Json j = ToJson(d);
  ASSERT_TRUE(j.contains("container"));
  EXPECT_EQ(j["container"]["image_id"], c.image_id);
  EXPECT_NE(j["container"]["description"].get<std::string>().find("no network"), std::string::npos);
  auto back = RunDetailFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(DescribeContainer(back->experiment.spec), DescribeContainer(d.experiment.spec));
  // A run on the host has none.
  RunDetail host = d;
  host.experiment.spec = SpecToJson(Spec{});
  EXPECT_FALSE(ToJson(host).contains("container"));
}

}  // namespace
}  // namespace drover::protocol
