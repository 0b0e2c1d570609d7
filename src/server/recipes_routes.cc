// /api/v1/recipes and /api/v1/plan: what the web UI's new-experiment page offers (recipes and
// values to tick) and the spec it would submit, from ticked values or an instruction. Nothing
// here submits: the page posts the spec to /api/v1/experiments (docs/web.md).
#include <cstdint>
#include <filesystem>
#include <set>
#include <system_error>

#include "common/users.h"
#include "plan/planner.h"
#include "plan/recipe.h"
#include "server/routes.h"

namespace drover::server {
namespace {

namespace fs = std::filesystem;

// A drover.yaml path from a folder or a file path.
std::string RecipePath(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return (fs::path(path) / "drover.yaml").string();
  return path;
}

Status ListRecipes(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  std::vector<std::string> starts;
  std::error_code ec;
  const Caller& caller = CurrentCaller();
  starts.push_back(fs::current_path(ec).string());
  for (const std::string& d : ctx.options.recipe_dirs) starts.push_back(d);
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto experiments, store->ListExperiments(200));
  // Another user's project folders are theirs: a user is shown only their own experiments'
  // recipes, looked for with their own rights.
  ActingAs as(caller.admin ? nullptr : &caller.user);
  if (!as.status().ok()) return as.status();
  for (const Experiment& e : experiments) {
    if (!caller.admin && !MayActOn(caller, e, "read").ok()) continue;
    if (e.spec.contains("workdir") && e.spec["workdir"].is_string()) {
      starts.push_back(e.spec["workdir"].get<std::string>());
    }
  }
  std::set<std::string> seen;
  Json list = Json::array();
  for (const std::string& start : starts) {
    if (start.empty()) continue;
    std::string path;
    if (fs::is_regular_file(start, ec)) {
      path = start;
    } else {
      auto found = FindRecipe(start);
      if (!found.ok()) continue;
      path = *found;
    }
    path = fs::weakly_canonical(path, ec).string();
    if (!seen.insert(path).second) continue;
    std::string dir = fs::path(path).parent_path().string();
    list.push_back({{"path", path}, {"dir", dir}, {"name", fs::path(dir).filename().string()}});
  }
  SendJson(res, 200, {{"recipes", list}});
  return Status::Ok();
}

// On a shared daemon a user reads through it only a recipe they own and could read themselves:
// the file is read with their own rights (a root daemon acts as them on this thread) and its
// owner is checked on the descriptor that is read, never by a stat before the open (a link
// swapped between the two once handed out the daemon's token). So an error that quotes the
// file (the YAML parser's "got '<first line>'") only ever quotes what the caller could read.
Result<Recipe> LoadFromQuery(const std::string& path) {
  if (path.empty()) {
    return InvalidArgument("name the recipe: path=<a drover.yaml, or the folder that holds it> "
                           "(GET /api/v1/recipes lists those the daemon knows)");
  }
  const Caller& c = CurrentCaller();
  if (c.admin) return LoadRecipe(RecipePath(path));
  ActingAs as(&c.user);
  if (!as.status().ok()) return as.status();
  Result<Recipe> r = LoadRecipe(RecipePath(path), c.user.uid);
  if (!r.ok() && (r.status().code() == Code::kPermissionDenied ||
                  r.status().code() == Code::kIo || r.status().code() == Code::kNotFound)) {
    // One answer whether the file is missing, unreadable or someone else's: nothing is said
    // of a path the caller could not read.
    return PermissionDenied(DisplayName(c.user) +
                            " may read only their own recipes through this daemon (a drover.yaml "
                            "they own and can read, at " + path + "); `drover plan` reads one "
                            "directly");
  }
  return r;
}

Status Show(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Recipe r, LoadFromQuery(req.get_param_value("path")));
  Json params = Json::array();
  for (const RecipeParam& p : r.params) {
    Json one = {{"name", p.name},       {"type", p.type},
                {"default", p.default_value}, {"aliases", p.aliases},
                {"suggested", SuggestedValues(p)}};
    if (p.type == "choice") one["choices"] = p.choices;
    params.push_back(std::move(one));
  }
  Json metrics = Json::array();
  for (const RecipeMetric& m : r.metrics) {
    metrics.push_back({{"name", m.name}, {"mode", m.maximize ? "max" : "min"}, {"aliases", m.aliases}});
  }
  SendJson(res, 200,
           {{"path", r.source}, {"dir", r.dir}, {"command", r.command}, {"gpus", r.gpus},
            {"params", params}, {"metrics", metrics}});
  return Status::Ok();
}

Result<std::optional<int>> OptionalInt(const Json& body, const char* name) {
  if (!body.contains(name) || body[name].is_null()) return std::optional<int>();
  const Json& v = body[name];
  // Read as 64 bits first: get<int>() of a bigger number would wrap into range.
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) ||
      (!v.is_number_unsigned() && (v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX))) {
    return InvalidArgument(std::string("plan request.") + name +
                           " must be an integer from -2147483648 to 2147483647");
  }
  return std::optional<int>(v.get<int>());
}

Status PlanRoute(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  if (!body.is_object()) return InvalidArgument("plan request must be a JSON object");
  static const std::set<std::string> kFields = {"recipe", "instruction", "params", "objective",
                                                "gpus", "priority"};
  for (const auto& [k, v] : body.items()) {
    if (!kFields.contains(k)) {
      return InvalidArgument("plan request." + k + ": unknown field (known: recipe, instruction, "
                             "params, objective, gpus, priority)");
    }
  }
  if (body.contains("recipe") && !body["recipe"].is_string()) {
    return InvalidArgument("plan request.recipe must be a path (a drover.yaml or its folder)");
  }
  std::string recipe_path = body.value("recipe", "");
  DROVER_ASSIGN_OR_RETURN(Recipe recipe, LoadFromQuery(recipe_path));
  Plan plan;
  if (body.contains("instruction")) {
    if (!body["instruction"].is_string() || body.contains("params")) {
      return InvalidArgument("plan request: give either 'instruction' (a string) or 'params', "
                             "not both");
    }
    DROVER_ASSIGN_OR_RETURN(plan, PlanInstruction(recipe, body["instruction"].get<std::string>()));
  } else {
    Selection sel;
    if (body.contains("params")) {
      if (!body["params"].is_object()) {
        return InvalidArgument("plan request.params must be an object: {name: [values]}");
      }
      for (const auto& [name, values] : body["params"].items()) {
        if (values.is_array()) {
          sel.params[name] = values.get<std::vector<Json>>();
        } else {
          sel.params[name] = {values};
        }
      }
    }
    if (body.contains("objective") && !body["objective"].is_null()) {
      if (!body["objective"].is_string()) {
        return InvalidArgument("plan request.objective must be a metric's name");
      }
      sel.objective = body["objective"].get<std::string>();
    }
    DROVER_ASSIGN_OR_RETURN(sel.gpus, OptionalInt(body, "gpus"));
    DROVER_ASSIGN_OR_RETURN(sel.priority, OptionalInt(body, "priority"));
    DROVER_ASSIGN_OR_RETURN(plan, PlanSelection(recipe, sel));
  }
  DROVER_ASSIGN_OR_RETURN(int runs, PlannedRuns(plan, recipe));
  SendJson(res, 200,
           {{"spec", plan.spec}, {"spec_yaml", plan.spec_yaml}, {"runs", runs},
            {"understood", plan.understood}, {"ignored", plan.ignored}, {"base_dir", recipe.dir},
            {"recipe", recipe.source}});
  return Status::Ok();
}

}  // namespace

void RegisterRecipesRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::string api = protocol::kApiPrefix;
  http.Get(api + "/recipes", Route(ctx, ListRecipes));
  http.Get(api + "/recipes/show", Route(ctx, Show));
  http.Post(api + "/plan", Route(ctx, PlanRoute));
}

}  // namespace drover::server
