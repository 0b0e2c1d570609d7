#include "server/run_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/strings.h"
#include "protocol/json_codec.h"
#include "report/groups.h"
#include "report/search_view.h"

namespace drover::server {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ValueText(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// One run with what the table derives from it.
struct Row {
  const Run* run;
  std::optional<double> score;
  int64_t duration_ms;
};

// A sortable value: missing, a number, or text; missing sorts last in either order.
struct Key {
  int kind = 0;  // 0 number, 1 text, 2 missing, 3 a NaN or infinite score
  double number = 0;
  std::string text;
};

Key KeyOf(const Json* v) {
  if (v == nullptr || v->is_null()) return {2, 0, ""};
  if (v->is_number()) {
    double d = v->get<double>();
    if (std::isnan(d)) return {2, 0, ""};
    return {0, d, ""};
  }
  return {1, 0, Lower(ValueText(*v))};
}

// A score sorts by the rule's order whichever way the column is sorted; NaN and infinities after
// every finite score, before runs without one.
Key ScoreKey(const report::RankRule& rule, std::optional<double> d) {
  if (!d) return {2, 0, ""};
  if (!std::isfinite(*d)) return {3, 0, ""};
  return {0, *d, ""};
}

// A pipeline's stages as the web UI draws them: each with its needs, its depth (the longest
// chain of needs before it), its runs by state, how many were cached, and its first runs (up to
// kStageRunsShown, for the graph's dots).
constexpr size_t kStageRunsShown = 24;

Json PipelineJson(const Json& stages, const std::vector<Run>& runs) {
  Json out = Json::array();
  std::map<std::string, size_t> index;
  for (const Json& st : stages) {
    if (!st.is_object() || !st.contains("name") || !st["name"].is_string()) continue;
    const std::string name = st["name"].get<std::string>();
    std::vector<std::string> needs = st.value("needs", std::vector<std::string>{});
    int depth = 0;
    for (const std::string& n : needs) {  // stages come after their needs (the parser's order)
      if (auto it = index.find(n); it != index.end()) {
        depth = std::max(depth, out[it->second]["depth"].get<int>() + 1);
      }
    }
    Json counts = Json::object();
    for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying,
                       RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
      counts[std::string(ToString(s))] = 0;
    }
    index[name] = out.size();
    out.push_back({{"name", name},
                   {"needs", needs},
                   {"depth", depth},
                   {"gather", st.value("gather", false)},
                   {"outputs", st.value("outputs", std::vector<std::string>{})},
                   {"runs", 0},
                   {"cached", 0},
                   {"waiting", 0},
                   {"counts", std::move(counts)},
                   {"shown", Json::array()}});
  }
  for (const Run& r : runs) {
    auto it = index.find(r.stage);
    if (it == index.end()) continue;
    Json& st = out[it->second];
    st["runs"] = st["runs"].get<int64_t>() + 1;
    Json& n = st["counts"][std::string(ToString(r.state))];
    n = n.get<int64_t>() + 1;
    if (r.cached_from != 0) st["cached"] = st["cached"].get<int64_t>() + 1;
    // Queued with no fingerprint yet: waiting for the runs it needs.
    if (r.state == RunState::kQueued && r.fingerprint.empty()) {
      st["waiting"] = st["waiting"].get<int64_t>() + 1;
    }
    if (st["shown"].size() < kStageRunsShown) {
      Json one = {{"id", r.id}, {"state", ToString(r.state)}, {"reason", r.reason}};
      if (r.cached_from != 0) one["cached_from"] = r.cached_from;
      st["shown"].push_back(std::move(one));
    }
  }
  return out;
}

}  // namespace

Result<Json> RunTable(const Experiment& e, const std::vector<Run>& runs,
                      const report::Comparison& ranking, const TableQuery& query, Millis now) {
  // Columns: the spec's parameters (then any others runs have) and metrics, by name.
  std::vector<std::string> params;
  std::set<std::string> seen_params, metrics;
  if (e.spec.contains("params") && e.spec["params"].is_object()) {
    for (const auto& [k, v] : e.spec["params"].items()) {
      if (seen_params.insert(k).second) params.push_back(k);
    }
  }
  for (const Run& r : runs) {
    if (r.params.is_object()) {
      for (const auto& [k, v] : r.params.items()) {
        if (seen_params.insert(k).second) params.push_back(k);
      }
    }
    if (r.final_metrics.is_object()) {
      for (const auto& [k, v] : r.final_metrics.items()) metrics.insert(k);
    }
  }

  const Json* stages = e.spec.contains("stages") && e.spec["stages"].is_array() &&
                               !e.spec["stages"].empty()
                           ? &e.spec["stages"]
                           : nullptr;
  std::map<std::string, int> stage_order;
  if (stages) {
    for (const Json& st : *stages) {
      if (st.is_object() && st.contains("name") && st["name"].is_string()) {
        stage_order.emplace(st["name"].get<std::string>(), static_cast<int>(stage_order.size()));
      }
    }
  }
  if (!query.stage.empty() && !stage_order.count(query.stage)) {
    std::vector<std::string> names;
    for (const auto& [name, i] : stage_order) names.push_back(name);
    return InvalidArgument(stages ? "stage must be one of this pipeline's stages (" +
                                        Join(names, ", ") + "), got '" + query.stage + "'"
                                  : "stage: this experiment is not a pipeline (it has no stages)");
  }
  // A pipeline's runs come by stage unless another order is asked for.
  std::string sort = query.sort.empty() ? (stages ? "stage" : "id")
                     : query.sort == "best" ? "score"
                                            : query.sort;
  std::string sort_name;
  if (sort.starts_with("param:") || sort.starts_with("metric:")) {
    sort_name = sort.substr(sort.find(':') + 1);
    sort = sort.substr(0, sort.find(':'));
  }
  static const std::vector<std::string> kSorts = {"id",    "state", "stage",  "duration",
                                                  "attempts", "score", "param", "metric"};
  if (std::find(kSorts.begin(), kSorts.end(), sort) == kSorts.end() ||
      ((sort == "param" || sort == "metric") && sort_name.empty())) {
    return InvalidArgument("sort must be id, state, stage, duration, attempts, score, "
                           "param:NAME or metric:NAME; got '" + query.sort + "'");
  }

  std::vector<Row> rows;
  rows.reserve(runs.size());
  std::vector<std::string> terms;
  for (const std::string& t : Split(Lower(query.q), ' ')) {
    if (!Trim(t).empty()) terms.push_back(std::string(Trim(t)));
  }
  for (const Run& r : runs) {
    const std::optional<double> score = report::SortValue(ranking, r);
    if (query.state && r.state != *query.state) continue;
    if (!query.stage.empty() && r.stage != query.stage) continue;
    if (!terms.empty()) {
      std::string text = "#" + std::to_string(r.id) + " " + std::string(ToString(r.state)) + " " +
                         r.reason;
      if (!r.stage.empty()) text += " " + r.stage + (r.cached_from ? " cached" : "");
      if (r.params.is_object()) {
        for (const auto& [k, v] : r.params.items()) text += " " + k + "=" + ValueText(v);
      }
      text = Lower(text);
      bool all = std::all_of(terms.begin(), terms.end(),
                             [&](const std::string& t) { return text.find(t) != std::string::npos; });
      if (!all) continue;
    }
    int64_t duration = 0;
    if (r.started_ms > 0) duration = (r.ended_ms > 0 ? r.ended_ms : now) - r.started_ms;
    rows.push_back({&r, score, std::max<int64_t>(0, duration)});
  }

  auto key = [&](const Row& row) -> Key {
    const Run& r = *row.run;
    if (sort == "id") return {0, static_cast<double>(r.id), ""};
    if (sort == "state") return {1, 0, std::string(ToString(r.state))};
    if (sort == "stage") {  // the spec's order of stages; runs of no stage last
      auto it = stage_order.find(r.stage);
      return it == stage_order.end() ? Key{2, 0, ""} : Key{0, static_cast<double>(it->second), ""};
    }
    if (sort == "duration") {  // a run that never started has no duration: last
      return r.started_ms > 0 ? Key{0, static_cast<double>(row.duration_ms), ""} : Key{2, 0, ""};
    }
    if (sort == "attempts") return {0, static_cast<double>(r.attempts), ""};
    if (sort == "score") return ScoreKey(ranking.rule, row.score);
    const Json& obj = sort == "param" ? r.params : r.final_metrics;
    if (!obj.is_object() || !obj.contains(sort_name)) return {2, 0, ""};
    return KeyOf(&obj[sort_name]);
  };
  std::vector<std::pair<Key, size_t>> keyed;
  keyed.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) keyed.emplace_back(key(rows[i]), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    const Key& x = a.first;
    const Key& y = b.first;
    if (x.kind == 2 || y.kind == 2) return x.kind != 2 && y.kind == 2;  // missing last
    if (x.kind == 3 || y.kind == 3) return x.kind != 3 && y.kind == 3;  // then NaN, inf
    if (x.kind != y.kind) return query.desc ? x.kind > y.kind : x.kind < y.kind;
    bool less = x.kind == 0 ? x.number < y.number : x.text < y.text;
    bool greater = x.kind == 0 ? x.number > y.number : x.text > y.text;
    if (!less && !greater) return rows[a.second].run->id < rows[b.second].run->id;
    return query.desc ? greater : less;
  });

  Json page = Json::array();
  int64_t end = std::min<int64_t>(query.offset + query.limit, static_cast<int64_t>(keyed.size()));
  for (int64_t i = query.offset; i < end; ++i) {
    const Row& row = rows[keyed[i].second];
    const Run& r = *row.run;
    page.push_back({{"id", r.id},
                    {"index", r.index},
                    {"state", ToString(r.state)},
                    {"reason", r.reason},
                    {"priority", r.priority},
                    {"params", r.params},
                    {"metrics", r.final_metrics},
                    {"score", row.score ? report::ScoreJson(*row.score) : Json(nullptr)},
                    {"attempts", r.attempts},
                    {"duration_ms", row.duration_ms},
                    {"started_ms", r.started_ms},
                    {"ended_ms", r.ended_ms}});
    if (!r.stage.empty()) {
      page.back()["stage"] = r.stage;
      page.back()["needs"] = r.needs;
    }
    if (r.cached_from != 0) page.back()["cached_from"] = r.cached_from;
  }

  // Parameters with one value in every run (2 or more runs): a column of the same value says
  // nothing, so views hide them by default and say what they are once.
  Json constant = Json::object();
  if (runs.size() >= 2) {
    for (const std::string& p : params) {
      const Json* first = nullptr;
      bool same = true;
      for (const Run& r : runs) {
        const Json* v = r.params.is_object() && r.params.contains(p) ? &r.params[p] : nullptr;
        if (v == nullptr) {
          same = false;
          break;
        }
        if (first == nullptr) first = v;
        if (*v != *first) {
          same = false;
          break;
        }
      }
      if (same && first != nullptr) constant[p] = *first;
    }
  }

  std::map<std::string, int64_t> counts;
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying,
                     RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    counts[std::string(ToString(s))] = 0;
  }
  for (const Run& r : runs) ++counts[std::string(ToString(r.state))];

  Json out = {{"experiment",
               {{"id", e.id}, {"name", e.name}, {"status", ToString(e.status)}, {"created_ms", e.created_ms}}},
              {"objective", report::RankRuleJson(ranking.rule)},
              {"params", params},
              {"constant", std::move(constant)},
              {"metrics", Json(std::vector<std::string>(metrics.begin(), metrics.end()))},
              {"counts", counts},
              {"total", runs.size()},
              {"matched", rows.size()},
              {"offset", query.offset},
              {"limit", query.limit},
              {"best_run_id", ranking.best_run > 0 ? Json(ranking.best_run) : Json(nullptr)},
              // Runs that differ only in their seed, as `drover compare --json` groups them.
              {"groups", report::GroupsJson(ranking)},
              {"rows", std::move(page)}};
  if (stages) {
    out["pipeline"] = {{"stages", PipelineJson(*stages, runs)}};
    out["stage"] = query.stage.empty() ? Json(nullptr) : Json(query.stage);
  }
  // A search (or a sweep with a prune rule): its trials by state, the best so far, importance.
  if (e.spec.contains("search") || e.spec.contains("prune")) {
    out["search"] = report::SearchViewJson(report::SearchViewOf(ranking));
  }
  if (query.scatter) {
    Json srows = Json::array();
    for (const auto& [k, i] : keyed) {
      const Row& row = rows[i];
      Json one = Json::array(
          {row.run->id, row.score ? report::ScoreJson(*row.score) : Json(nullptr)});
      for (const std::string& p : params) {
        one.push_back(row.run->params.is_object() && row.run->params.contains(p)
                          ? row.run->params[p]
                          : Json(nullptr));
      }
      srows.push_back(std::move(one));
    }
    // Parameters searched on a log scale: the scatter puts them on a log axis, as the report does.
    Json log_params = Json::array();
    for (const std::string& p : params) {
      if (report::SearchedOnLogScale(e.spec, p)) log_params.push_back(p);
    }
    out["scatter"] = {{"params", params}, {"rows", std::move(srows)}, {"log_params", log_params}};
  }
  return out;
}

}  // namespace drover::server
