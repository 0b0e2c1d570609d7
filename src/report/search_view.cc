#include "report/search_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "report/groups.h"

namespace drover::report {

SearchView SearchViewOf(const Comparison& c) {
  SearchView v;
  std::vector<const Run*> scored;
  for (const Run& r : c.runs) {
    v.states[std::string(ToString(r.state))] += 1;
    auto it = c.scores.find(r.id);
    if (r.state == RunState::kSucceeded && it != c.scores.end() && std::isfinite(it->second)) {
      scored.push_back(&r);
    }
  }
  for (TrialOrigin o : kAllTrialOrigins) {
    if (o == TrialOrigin::kNone) continue;
    const auto n = std::count_if(c.runs.begin(), c.runs.end(),
                                 [&](const Run& r) { return r.origin == o; });
    if (n > 0) v.origins.emplace_back(std::string(ToString(o)), static_cast<int>(n));
  }
  std::sort(scored.begin(), scored.end(),
            [](const Run* a, const Run* b) {
              return a->index != b->index ? a->index < b->index : a->id < b->id;
            });
  for (const Run* r : scored) {
    const double s = c.scores.at(r->id);
    const double best = v.history.empty() ? s
                        : c.maximize        ? std::max(v.history.back().best, s)
                                            : std::min(v.history.back().best, s);
    v.history.push_back({r->index + 1, r->id, s, best});
  }
  // Importance from the finished trials only (`scored`): their values are comparable.
  if (scored.size() < kImportanceTrials) {
    const int pruned = v.states.count("pruned") ? v.states.at("pruned") : 0;
    v.importance_note = fmt::format(
        "parameter importance needs {} finished trials with a score; {} {}{}", kImportanceTrials,
        scored.size(), scored.size() == 1 ? "has" : "have",
        pruned > 0 ? fmt::format(" ({} pruned: their values, from earlier in training, are not "
                                 "compared with final ones)",
                                 pruned)
                   : std::string());
    return v;
  }
  double mean = 0;
  for (const Run* r : scored) mean += c.scores.at(r->id) / static_cast<double>(scored.size());
  double total = 0;
  for (const Run* r : scored) total += std::pow(c.scores.at(r->id) - mean, 2);
  if (total <= 0) return v;
  double sum = 0;
  for (const std::string& p : c.varying) {
    if (IsSeedParam(p)) continue;  // a seed's effect is noise, not a choice to make
    // Group the scores by the parameter's value, numbers by quartile.
    std::vector<std::pair<Json, double>> values;
    bool numeric = true;
    for (const Run* r : scored) {
      Json x = r->params.contains(p) ? r->params[p] : Json();
      numeric = numeric && x.is_number();
      values.emplace_back(x, c.scores.at(r->id));
    }
    std::map<std::string, std::pair<double, int>> groups;  // key -> (sum, count)
    if (numeric) {
      std::vector<double> xs;
      for (const auto& [x, s] : values) xs.push_back(x.get<double>());
      std::vector<double> sorted = xs;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < values.size(); ++i) {
        // Rank among the values, in four buckets; equal values share one.
        size_t rank = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), xs[i]) -
                                          sorted.begin());
        std::string key = std::to_string(rank * 4 / sorted.size());
        groups[key].first += values[i].second;
        groups[key].second += 1;
      }
    } else {
      for (const auto& [x, s] : values) {
        groups[x.dump()].first += s;
        groups[x.dump()].second += 1;
      }
    }
    // A constant among these trials explains nothing: left out rather than listed at 0.
    std::set<std::string> distinct;
    for (const auto& [x, s] : values) distinct.insert(x.dump());
    if (distinct.size() < 2) continue;
    double between = 0;
    for (const auto& [key, g] : groups) {
      between += g.second * std::pow(g.first / g.second - mean, 2);
    }
    // Epsilon squared: the share of variance between the groups less what that many groups
    // would explain by chance (so ten buckets of noise do not look important); at least 0.
    const double k = static_cast<double>(groups.size());
    const double n = static_cast<double>(scored.size());
    const double within = total - between;
    const double eps2 = n > k && k > 1 ? std::max(0.0, (between - (k - 1) * within / (n - k)) / total)
                                       : 0.0;
    v.importance.emplace_back(p, eps2);
    sum += eps2;
  }
  for (auto& [p, share] : v.importance) share = sum > 0 ? share / sum : 0;
  std::stable_sort(v.importance.begin(), v.importance.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

std::string BudgetLine(const SearchView& v) {
  auto count = [&](const char* state) {
    auto it = v.states.find(state);
    return it == v.states.end() ? 0 : it->second;
  };
  const int pruned = count("pruned");
  if (v.origins.empty() && pruned == 0) return "";
  int total = 0;
  for (const auto& [state, n] : v.states) total += n;
  std::string how;
  for (const auto& [origin, n] : v.origins) {
    std::string what = origin == "random start" ? "random (the start)"
                       : origin == "tpe"        ? "by TPE"
                       : origin == "gp"         ? "by the GP"
                       : origin == "agent"      ? "an agent's own"
                                                : origin;
    how += fmt::format("{}{} {}", how.empty() ? "" : ", ", n, what);
  }
  std::string ends = fmt::format("{} pruned early, {} ran to the end", pruned, count("succeeded"));
  if (const int failed = count("failed")) ends += fmt::format(", {} failed", failed);
  if (const int open = count("queued") + count("running") + count("retrying")) {
    ends += fmt::format(", {} not ended", open);
  }
  return fmt::format("{} trial{}{}; {}", total, total == 1 ? "" : "s",
                     how.empty() ? "" : ": " + how, ends);
}

Json SearchViewJson(const SearchView& v) {
  Json history = Json::array();
  for (const auto& p : v.history) {
    history.push_back({{"trial", p.trial}, {"run_id", p.run_id}, {"score", p.score},
                       {"best", p.best}});
  }
  Json importance = Json::array();
  for (const auto& [p, share] : v.importance) {
    importance.push_back({{"param", p}, {"share", share}});
  }
  Json out = {{"states", v.states}, {"history", history}, {"importance", importance}};
  if (!v.importance_note.empty()) out["importance_note"] = v.importance_note;
  if (!v.origins.empty()) {
    Json origins = Json::object();
    for (const auto& [origin, n] : v.origins) origins[origin] = n;
    out["origins"] = origins;
  }
  if (std::string budget = BudgetLine(v); !budget.empty()) out["budget"] = budget;
  return out;
}

}  // namespace drover::report
