// drover's MCP tools, over the daemon's HTTP API (the one protocol every face uses). Each tool's
// description is written for a model: what it does, when to use it, what comes back.
#include "cli/mcp_tools.h"

#include <fmt/format.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/catalog.h"
#include "cli/comparison.h"
#include "cli/follow.h"
#include "plan/planner.h"
#include "report/groups.h"
#include "report/search_view.h"

namespace drover::cli {
namespace {

using mcp::Tool;

// The `name:` of a spec's text ("" when it has none or is not YAML: the daemon says why).
std::string SpecNameOf(const std::string& spec_yaml) {
  try {
    YAML::Node root = YAML::Load(spec_yaml);
    if (root.IsMap() && root["name"] && root["name"].IsScalar()) return root["name"].Scalar();
  } catch (const YAML::Exception&) {
  }
  return "";
}

Json Obj(Json properties, std::vector<std::string> required = {}) {
  Json s = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) s["required"] = required;
  s["additionalProperties"] = false;
  return s;
}
Json Int(const std::string& description, int64_t min = 1) {
  return {{"type", "integer"}, {"minimum", min}, {"description", description}};
}
Json Str(const std::string& description) { return {{"type", "string"}, {"description", description}}; }
// Records come back as the API gives them: objects whose fields docs/http-api.md lists.
Json AnyObject() { return {{"type", "object"}}; }
Json ListOf(Json item) { return {{"type", "array"}, {"items", std::move(item)}}; }

std::string Q(const std::string& v) { return httplib::detail::encode_query_param(v); }

// Tool errors tell the model what to do next; the API's own messages already do.
Status Explain(const Status& st, const std::string& next) {
  return Status(st.code(), st.message() + (next.empty() ? "" : "; " + next));
}

bool Final(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled" || state == "pruned";
}

}  // namespace

std::string McpInstructions() {
  return "drover runs ML experiments on this machine's GPUs. Typical loop: plan (an instruction "
         "-> a spec, nothing submitted) or write a spec; submit; wait (long-polls up to 45 s; call "
         "again while done is false); compare (best run by the objective) and get_metrics "
         "(curves); then submit a follow-up around the best config. get_run and logs explain "
         "failures; alerts lists what the watchers found; gpu_status shows capacity.";
}

mcp::ToolRegistry MakeDroverTools(const DaemonInfo& info, const McpToolOptions& options) {
  mcp::ToolRegistry r;

  r.Add(Tool{
      "gpu_status", "GPUs and queue",
      "The GPUs drover schedules onto: memory total and reserved by runs, utilisation, "
      "temperature, which runs hold each; and how many runs are queued and running. Use it before "
      "submitting to see how much fits at once.",
      Obj(Json::object()),
      Obj({{"gpus", ListOf(AnyObject())}, {"running", {{"type", "integer"}}},
           {"queued", {{"type", "integer"}}}},
          {"gpus", "running", "queued"}),
      [info](const Json&) -> Result<Json> {
        ApiClient a(info);
        DROVER_ASSIGN_OR_RETURN(Json gpus, a.Get("/gpus"));
        RunFilter running, queued;
        running.state = RunState::kRunning;
        queued.state = RunState::kQueued;
        DROVER_ASSIGN_OR_RETURN(auto run_list, FetchRuns(a, running));  // paged: every one
        DROVER_ASSIGN_OR_RETURN(auto queue_list, FetchRuns(a, queued));
        return Json{{"gpus", gpus["gpus"]},
                    {"running", run_list.size()},
                    {"queued", queue_list.size()}};
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "plan", "Plan from an instruction",
      "Turn an instruction in English or Chinese (e.g. 'compare resnet50 and efficientnet at "
      "batch size 32 and 64', '对比mlp和cnn，3个种子') into an experiment spec, using the project's "
      "recipe (drover.yaml). Nothing is submitted: read `understood` and `ignored`, then pass "
      "`spec_yaml` to submit.",
      Obj({{"instruction", Str("What to try")},
           {"recipe", Str("Path of drover.yaml; default: the one in the project folder")}},
          {"instruction"}),
      Obj({{"spec", AnyObject()}, {"spec_yaml", {{"type", "string"}}},
           {"runs", {{"type", "integer"}}}, {"understood", ListOf({{"type", "string"}})},
           {"ignored", ListOf({{"type", "string"}})}, {"base_dir", {{"type", "string"}}}},
          {"spec", "spec_yaml", "understood", "ignored", "base_dir"}),
      [options](const Json& args) -> Result<Json> {
        std::string path = args.value("recipe", std::string());
        // The daemon's own recipes (serve --recipe) first, then the one nearest its folder.
        for (const std::string& dir : options.recipe_dirs) {
          if (!path.empty()) break;
          std::error_code ec;
          if (std::filesystem::is_regular_file(dir, ec)) {
            path = dir;  // --recipe named the drover.yaml itself
          } else if (auto found = FindRecipe(dir); found.ok()) {
            path = *found;
          }
        }
        if (path.empty()) {
          auto found = FindRecipe(options.project_dir);
          if (!found.ok()) return Explain(found.status(), "pass `recipe` with the path of one");
          path = *found;
        }
        DROVER_ASSIGN_OR_RETURN(Recipe recipe, LoadRecipe(path));
        auto plan = PlanInstruction(recipe, args["instruction"].get<std::string>());
        if (!plan.ok()) return Explain(plan.status(), "rephrase with the names it lists");
        int runs = 1;
        for (const auto& [name, values] : plan->spec["params"].items()) {
          runs *= static_cast<int>(values.size());
        }
        return Json{{"spec", plan->spec},         {"spec_yaml", plan->spec_yaml},
                    {"runs", runs},               {"understood", plan->understood},
                    {"ignored", plan->ignored},   {"base_dir", recipe.dir}};
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "submit", "Submit an experiment",
      "Queue an experiment from a spec: `spec_yaml` (YAML text, as in docs/spec.md or from "
      "plan) or `spec` (the same as a JSON object). Returns at once with the experiment and run "
      "ids and its name; use wait to block until they finish. `overrides` are key=value strings "
      "like 'epochs=2' or 'lr=[0.1,0.01]'; they are added to the experiment's name "
      "(model-mlp-cnn-epochs-2) unless one of them is name=.... A run whose command, params, env "
      "and code succeeded before is not run again: it is recorded as cached from that run, with "
      "its metrics (pass 'rerun=true' to run it anyway; a pipeline: 'force=STAGE').",
      Obj({{"spec_yaml", Str("The spec, YAML text")},
           {"spec", {{"type", "object"}, {"description", "The spec as a JSON object"}}},
           {"base_dir", Str("Folder a relative workdir resolves against (plan gives it)")},
           {"overrides", ListOf({{"type", "string"}})}}),
      Obj({{"experiment_id", {{"type", "integer"}}},
           {"run_ids", ListOf({{"type", "integer"}})},
           {"name", {{"type", "string"}}},
           {"notes", ListOf({{"type", "string"}})}},
          {"experiment_id", "run_ids"}),
      [info, options](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        if (args.contains("spec_yaml") == args.contains("spec")) {
          return InvalidArgument("pass the spec once: spec_yaml (YAML text) or spec (an object)");
        }
        protocol::SubmitRequest req;
        // JSON is YAML: an object spec goes through the same parser, with the same errors.
        req.spec_yaml = args.contains("spec") ? args["spec"].dump()
                                              : args["spec_yaml"].get<std::string>();
        req.spec_name = "spec.yaml";
        req.base_dir = args.value("base_dir", options.project_dir);
        if (args.contains("overrides")) {
          req.overrides = args["overrides"].get<std::vector<std::string>>();
        }
        // A plan submitted with overrides runs something else than its name says: the name gets
        // the overrides (unless one sets it), so compare and list_runs by name find this one.
        std::string name = SpecNameOf(req.spec_yaml);
        if (auto renamed = NameWithOverrides(name, req.overrides); renamed && !name.empty()) {
          name = *renamed;
          req.overrides.push_back("name=" + name);
        }
        for (const std::string& o : req.overrides) {
          if (o.rfind("name=", 0) == 0) name = o.substr(5);  // the last one given wins
        }
        auto r = a->Post("/experiments", protocol::ToJson(req));
        if (!r.ok()) return Explain(r.status(), "fix the spec at the position given and submit again");
        Json out = {{"experiment_id", (*r)["experiment_id"]}, {"run_ids", (*r)["run_ids"]}};
        if (!name.empty()) out["name"] = name;
        // What the agent should know though nothing was refused (runs that will see no GPU).
        if (r->contains("notes") && (*r)["notes"].is_array()) out["notes"] = (*r)["notes"];
        return out;
      }});

  r.Add(Tool{
      "list_runs", "List runs",
      "Runs with their state, parameters and latest metrics, newest first. Filter by experiment "
      "(id or name) and state (queued, running, retrying, succeeded, failed, cancelled, pruned).",
      Obj({{"experiment", Str("Experiment id or name")},
           {"state", {{"type", "string"},
                      {"enum", {"queued", "running", "retrying", "succeeded", "failed", "cancelled",
                                "pruned"}}}},
           {"limit", Int("At most this many (default 50)")}}),
      Obj({{"runs", ListOf(AnyObject())}}, {"runs"}),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        std::string path = fmt::format("/runs?order=desc&limit={}", args.value("limit", 50));
        if (args.contains("experiment")) path += "&experiment=" + Q(args["experiment"]);
        if (args.contains("state")) path += "&state=" + Q(args["state"]);
        DROVER_ASSIGN_OR_RETURN(Json j, a->Get(path));
        return Json{{"runs", j["runs"]}};
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "get_run", "One run in full",
      "Everything about a run: state, parameters, every attempt with its failure reason (cuda_oom "
      "with the smaller batch it retried at, diverged, stalled, timeout, exit code) and, for one "
      "that exited with an error, its `error`: the end of its stderr (the exception); final "
      "metrics, the code snapshot id and commit, the environment. A run that waits has `waiting`: "
      "why, in the scheduler's words (no GPU has the memory it asks for, max_parallel, a quota, a "
      "stage it needs); each attempt has the hyper-parameters the script logged (`hparams`) and "
      "its last `checkpoint`.",
      Obj({{"run_id", Int("The run")}}, {"run_id"}), AnyObject(),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        auto j = a->Get(fmt::format("/runs/{}", args["run_id"].get<int64_t>()));
        if (!j.ok()) return Explain(j.status(), "list_runs shows the runs there are");
        return *j;
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "get_metrics", "Metric series of a run",
      "The curves a run logged (step, value), each downsampled to at most `points` points "
      "(min/max per bucket, so spikes survive). Name one metric or get all.",
      Obj({{"run_id", Int("The run")}, {"name", Str("One metric, e.g. loss")},
           {"points", Int("At most this many points per series (default 200)", 2)}},
          {"run_id"}),
      AnyObject(),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        std::string path = fmt::format("/runs/{}/metrics?points={}", args["run_id"].get<int64_t>(),
                                       args.value("points", 200));
        if (args.contains("name")) path += "&name=" + Q(args["name"]);
        return a->Get(path);
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "compare", "Compare an experiment's runs",
      "The runs of one experiment side by side, best first by their score: each run's curve of "
      "a metric (default: the spec's objective) summed up as the objective says (last value, "
      "best value, or mean of the last K), as `drover compare`, the report and the web UI rank "
      "them. NaN and infinite scores are given as \"NaN\", \"Infinity\" and never win. For a "
      "search (or a pruned sweep), `search` says its trials by state, how it spent its budget "
      "(random start, model-based, pruned), the best so far and parameter importance. Use it to "
      "pick the config to build on.",
      Obj({{"experiment", Str("Experiment id or name")},
           {"metric", Str("Rank by this metric (default: the objective)")},
           {"mode", {{"type", "string"}, {"enum", {"max", "min"}}}},
           {"summary", Str("last, best or mean_last:K (default: the objective's, else last)")}},
          {"experiment"}),
      Obj({{"metric", {{"type", "string"}}}, {"mode", {{"type", "string"}}},
           {"summary", {{"type", "string"}}}, {"ranking", AnyObject()},
           {"groups", {{"type", {"object", "null"}}}},
           {"search", {{"type", {"object", "null"}}}},
           {"runs", ListOf(AnyObject())}, {"best_run", {{"type", {"integer", "null"}}}}},
          {"metric", "mode", "summary", "runs", "best_run"}),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        auto exp = FetchExperiment(*a, args["experiment"].get<std::string>());
        if (!exp.ok()) return Explain(exp.status(), "list_runs or submit's experiment_id name one");
        DROVER_ASSIGN_OR_RETURN(auto runs, FetchRuns(*a, exp->id));  // every run, paged
        // The same ranking as `drover compare`, the report and the web UI.
        report::RankOptions options{args.value("metric", std::string()),
                                    args.value("mode", std::string()),
                                    args.value("summary", std::string())};
        DROVER_ASSIGN_OR_RETURN(Comparison c,
                                CompareRuns(*CatalogOf(info), *exp, std::move(runs), options));
        if (c.metric.empty()) {
          return InvalidArgument(c.metrics.empty()
                                     ? "no run of this experiment reported a metric yet; wait first"
                                     : c.rule.Note());
        }
        Json rows = Json::array();
        for (const Run& run : c.runs) {
          auto score = report::SortValue(c, run);
          rows.push_back({{"run_id", run.id},
                          {"state", std::string(ToString(run.state))},
                          {"params", run.params},
                          {"score", score ? report::ScoreJson(*score) : Json(nullptr)}});
        }
        Json best = c.best_run > 0 ? Json(c.best_run) : Json(nullptr);
        // A search's (or a pruned sweep's) view, as `drover compare --json` and the web table.
        Json search = exp->spec.contains("search") || exp->spec.contains("prune")
                          ? report::SearchViewJson(report::SearchViewOf(c))
                          : Json(nullptr);
        return Json{{"metric", c.metric},
                    {"mode", c.maximize ? "max" : "min"},
                    {"summary", ScoreSummaryText(c.rule.summary, c.rule.last_k)},
                    {"ranking", report::RankRuleJson(c.rule)},
                    {"groups", report::GroupsJson(c)},
                    {"search", search},
                    {"runs", rows},
                    {"best_run", best}};
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "wait", "Wait for runs to finish",
      "Blocks until every given run (or the experiment: every run, and every trial a search "
      "still makes) has finished, or until "
      "`timeout_s` passes (at most 45, so a client's 60 s request limit is never hit). Returns "
      "each run's state; call it again while `done` is false.",
      Obj({{"run_ids", ListOf({{"type", "integer"}, {"minimum", 1}})},
           {"experiment", Str("Experiment id or name")},
           {"timeout_s", {{"type", "integer"}, {"minimum", 0}, {"maximum", 45}}}}),
      Obj({{"done", {{"type", "boolean"}}}, {"runs", ListOf(AnyObject())}}, {"done", "runs"}),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        if (!args.contains("run_ids") && !args.contains("experiment")) {
          return InvalidArgument("pass run_ids (from submit) or experiment");
        }
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(args.value("timeout_s", 30));
        for (;;) {
          Json states = Json::array();
          bool done = true;
          if (args.contains("experiment")) {
            auto exp = FetchExperiment(*a, args["experiment"].get<std::string>());
            if (!exp.ok()) return Explain(exp.status(), "pass the experiment_id submit returned");
            DROVER_ASSIGN_OR_RETURN(auto runs, FetchRuns(*a, exp->id));  // every run, paged
            // A search is not done while it may still propose trials, though every run so
            // far has ended: the daemon marks the experiment done when it has made them all.
            done = exp->status == ExperimentStatus::kDone;
            for (const Run& run : runs) {
              std::string state(ToString(run.state));
              states.push_back({{"run_id", run.id}, {"state", state}, {"reason", run.reason}});
              done = done && Final(state);
            }
          } else {
            for (const auto& id : args["run_ids"]) {
              auto j = a->Get(fmt::format("/runs/{}", id.get<int64_t>()));
              if (!j.ok()) return Explain(j.status(), "pass run ids that submit returned");
              const Json& run = *j;  // GET /runs/{id} is the run, with its attempts
              states.push_back({{"run_id", run["id"]}, {"state", run["state"]}, {"reason", run["reason"]}});
              done = done && Final(run["state"]);
            }
          }
          if (done || std::chrono::steady_clock::now() >= deadline) {
            return Json{{"done", done}, {"runs", states}};
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "logs", "Tail of a run's output",
      "The last bytes of a run's stdout or stderr (default: the latest attempt's stdout, 8 KiB). "
      "Read stderr of a failed attempt to see why it failed.",
      Obj({{"run_id", Int("The run")},
           {"stream", {{"type", "string"}, {"enum", {"stdout", "stderr"}}}},
           {"attempt", Int("Attempt number (default the latest)")},
           {"bytes", Int("How many bytes from the end (default 8192)")}},
          {"run_id"}),
      Obj({{"text", {{"type", "string"}}}, {"attempt", {{"type", "integer"}}}}, {"text"}),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        int64_t run = args["run_id"];
        std::string stream = args.value("stream", "stdout");
        std::string base = fmt::format("/runs/{}/logs?stream={}", run, stream);
        if (args.contains("attempt")) base += fmt::format("&attempt={}", args["attempt"].get<int>());
        // The size and the attempt first (the latest when none is named), then the file's tail.
        auto head = a->Get(base + "&limit_bytes=1");
        if (!head.ok()) return Explain(head.status(), "get_run lists the run's attempts");
        int attempt = head->value("attempt", 0);
        int64_t size = head->value("size", int64_t{0});
        int64_t want = std::min<int64_t>(args.value("bytes", 8192), 4 << 20);
        if (attempt == 0 || size == 0) return Json{{"text", ""}, {"attempt", attempt}};
        DROVER_ASSIGN_OR_RETURN(
            Json j, a->Get(fmt::format("/runs/{}/logs?stream={}&attempt={}&offset={}&limit_bytes={}",
                                       run, stream, attempt, std::max<int64_t>(0, size - want), want)));
        return Json{{"text", j.value("data", std::string())}, {"attempt", j.value("attempt", 0)}};
      },
      Json{{"readOnlyHint", true}}});

  r.Add(Tool{
      "cancel", "Cancel runs",
      "Stop queued or running runs: give run_ids, or an experiment to cancel all its unfinished "
      "runs. Running ones get SIGTERM, then SIGKILL after a grace period.",
      Obj({{"run_ids", ListOf({{"type", "integer"}, {"minimum", 1}})},
           {"experiment", Str("Experiment id or name")}}),
      Obj({{"cancelled", ListOf({{"type", "integer"}})}, {"experiment", {{"type", {"string", "null"}}}}},
          {"cancelled"}),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        if (!args.contains("run_ids") && !args.contains("experiment")) {
          return InvalidArgument("pass run_ids or experiment");
        }
        Json out = {{"cancelled", Json::array()}, {"experiment", nullptr}};
        if (args.contains("experiment")) {
          auto r = a->Post("/experiments/" + Q(args["experiment"]) + "/cancel", Json::object());
          if (!r.ok()) return Explain(r.status(), "");
          out["experiment"] = args["experiment"];
        }
        for (const auto& id : args.value("run_ids", Json::array())) {
          auto r = a->Post(fmt::format("/runs/{}/cancel", id.get<int64_t>()), Json::object());
          if (!r.ok()) return Explain(r.status(), "get_run shows its state");
          out["cancelled"].push_back(id);
        }
        return out;
      },
      Json{{"destructiveHint", true}}});

  r.Add(Tool{
      "retry", "Retry runs",
      "Run finished runs of an experiment again, as new attempts of the same runs with their "
      "checkpoint folders (a script that checkpoints into $DROVER_CHECKPOINT_DIR resumes): the "
      "failed ones, the cancelled ones (an interrupted sweep), or runs by id. By default they run "
      "the code recorded when the experiment was submitted; after fixing the code, pass "
      "code: \"current\" to run the workdir as it is now (a new snapshot, for these runs' next "
      "attempts; their checkpoints are kept). Returns the run ids queued again and the code they "
      "run (`code`, `snapshot`); wait follows them.",
      Obj({{"experiment", Str("Experiment id or name")},
           {"failed", {{"type", "boolean"}, {"description", "Retry the failed runs"}}},
           {"cancelled", {{"type", "boolean"}, {"description", "Retry the cancelled runs"}}},
           {"run_ids", ListOf({{"type", "integer"}, {"minimum", 1}})},
           {"code",
            {{"type", "string"},
             {"enum", {"submitted", "current"}},
             {"description",
              "submitted (default): the code recorded at the submit; current: the workdir as it "
              "is now, e.g. after a fix"}}}},
          {"experiment"}),
      Obj({{"experiment_id", {{"type", "integer"}}},
           {"run_ids", ListOf({{"type", "integer"}})},
           {"snapshot", {{"type", "string"}}},
           {"code", {{"type", "string"}}}},
          {"experiment_id", "run_ids"}),
      [info](const Json& args) -> Result<Json> {
        ApiClient client(info);
        Json body = Json::object();
        if (args.contains("failed")) body["failed"] = args["failed"];
        if (args.contains("cancelled")) body["cancelled"] = args["cancelled"];
        if (args.contains("run_ids")) body["runs"] = args["run_ids"];
        if (args.contains("code")) body["code"] = args["code"];
        auto r = client.Post("/experiments/" + Q(args["experiment"]) + "/retry", body);
        if (!r.ok()) return Explain(r.status(), "list_runs shows the runs and their states");
        auto reply = protocol::RetryResponseFromJson(*r);
        if (!reply.ok()) return reply.status();
        return protocol::ToJson(*reply);
      }});

  r.Add(Tool{
      "suggest", "Suggest configs",
      "The next configs a search would try (its sampler's proposals, honouring its running "
      "trials and every result told to it), without running them: run them yourself and report "
      "each with tell, or hand one to add_trial. The experiment must be a search (a spec with "
      "distributions such as lr: {log_uniform: [1e-5, 1e-1]} and search: {trials: N}).",
      Obj({{"experiment", Str("Search experiment id or name")},
           {"count", Int("How many configs (default 1, at most 100)")}},
          {"experiment"}),
      Obj({{"experiment_id", {{"type", "integer"}}}, {"configs", ListOf(AnyObject())}},
          {"experiment_id", "configs"}),
      [info](const Json& args) -> Result<Json> {
        ApiClient client(info);
        auto r = client.Post("/experiments/" + Q(args["experiment"]) + "/suggest",
                             {{"count", args.value("count", 1)}});
        if (!r.ok()) return Explain(r.status(), "");
        return Json{{"experiment_id", (*r)["experiment_id"]}, {"configs", (*r)["configs"]}};
      }});

  r.Add(Tool{
      "tell", "Tell a result",
      "Report the objective's value for a config you ran yourself (or null when it failed): "
      "the search's sampler learns from it as from its own trials, so its next suggestions and "
      "trials account for it. params must be a complete config of the search (its fixed and "
      "grid values too).",
      Obj({{"experiment", Str("Search experiment id or name")},
           {"params", {{"type", "object"}, {"description", "The config, name: value"}}},
           {"value", {{"type", {"number", "null"}},
                      {"description", "The objective's value; null: the config failed"}}}},
          {"experiment", "params", "value"}),
      Obj({{"experiment_id", {{"type", "integer"}}}, {"told", {{"type", "boolean"}}}},
          {"experiment_id", "told"}),
      [info](const Json& args) -> Result<Json> {
        ApiClient client(info);
        auto r = client.Post("/experiments/" + Q(args["experiment"]) + "/tell",
                             {{"params", args["params"]}, {"value", args["value"]}});
        if (!r.ok()) return Explain(r.status(), "suggest shows configs of this search");
        return Json{{"experiment_id", (*r)["experiment_id"]}, {"told", true}};
      }});

  r.Add(Tool{
      "add_trial", "Add a trial",
      "Run a config of your choosing as the search's next trial (it counts toward the search's "
      "trials and is scheduled like the sampler's). Fixed and grid values you leave out are "
      "filled in. Returns the run id; wait follows it.",
      Obj({{"experiment", Str("Search experiment id or name")},
           {"params", {{"type", "object"}, {"description", "The config, name: value"}}}},
          {"experiment", "params"}),
      Obj({{"experiment_id", {{"type", "integer"}}}, {"run_id", {{"type", "integer"}}}},
          {"experiment_id", "run_id"}),
      [info](const Json& args) -> Result<Json> {
        ApiClient client(info);
        auto r = client.Post("/experiments/" + Q(args["experiment"]) + "/trials",
                             {{"params", args["params"]}});
        if (!r.ok()) return Explain(r.status(), "suggest shows configs of this search");
        return Json{{"experiment_id", (*r)["experiment_id"]}, {"run_id", (*r)["run_id"]}};
      }});

  r.Add(Tool{
      "alerts", "Alerts",
      "What drover's watchers found, newest first: diverged or stalled runs, loss spikes, "
      "plateaus, GPU memory leaks, idle GPUs, fragmentation, configs that keep failing.",
      Obj({{"run_id", Int("Only about this run")},
           {"experiment", Str("Only this experiment (id or name)")},
           {"kind", Str("Only this kind, e.g. loss_spike")}, {"limit", Int("At most (default 50)")}}),
      Obj({{"alerts", ListOf(AnyObject())}}, {"alerts"}),
      [info](const Json& args) -> Result<Json> {
        // A client per call: calls come from several HTTP threads at once under /mcp.
        ApiClient client(info);
        ApiClient* a = &client;
        std::string path = fmt::format("/alerts?limit={}", args.value("limit", 50));
        if (args.contains("run_id")) path += fmt::format("&run={}", args["run_id"].get<int64_t>());
        if (args.contains("experiment")) {
          // An id or a name, as the other tools take it.
          auto exp = FetchExperiment(*a, args["experiment"].get<std::string>());
          if (!exp.ok()) return exp.status();
          path += fmt::format("&experiment={}", exp->id);
        }
        if (args.contains("kind")) path += "&kind=" + Q(args["kind"]);
        DROVER_ASSIGN_OR_RETURN(Json j, a->Get(path));
        return Json{{"alerts", j["alerts"]}};
      },
      Json{{"readOnlyHint", true}}});
  return r;
}

}  // namespace drover::cli
