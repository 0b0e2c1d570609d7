#include "spec/pipeline.h"

#include <algorithm>
#include <functional>
#include <map>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "spec/expand.h"

namespace drover {

namespace {

int IndexOf(const Spec& spec, const std::string& name) {
  for (size_t i = 0; i < spec.stages.size(); ++i) {
    if (spec.stages[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::set<std::string> OwnAxes(const Spec& spec, const StageSpec& stage) {
  std::set<std::string> used;
  for (const std::string& word : stage.command) {
    Result<std::vector<std::string>> names = PlaceholderNames(word);
    if (!names.ok()) continue;
    for (const std::string& n : *names) {
      if (spec.params.contains(n) && spec.params[n].is_array()) used.insert(n);
    }
  }
  return used;
}

}  // namespace

std::vector<int> StageOrder(const Spec& spec) {
  std::vector<int> order;
  std::vector<int> state(spec.stages.size(), 0);
  std::function<void(int)> visit = [&](int i) {
    if (i < 0 || state[i] != 0) return;
    state[i] = 1;
    for (const std::string& n : spec.stages[i].needs) visit(IndexOf(spec, n));
    state[i] = 2;
    order.push_back(i);
  };
  for (size_t i = 0; i < spec.stages.size(); ++i) visit(static_cast<int>(i));
  return order;
}

std::vector<std::string> StageAxes(const Spec& spec, int stage) {
  std::set<std::string> axes;
  std::function<void(int)> add = [&](int i) {
    const StageSpec& s = spec.stages[i];
    for (const std::string& a : OwnAxes(spec, s)) axes.insert(a);
    if (s.gather) return;
    for (const std::string& n : s.needs) add(IndexOf(spec, n));
  };
  add(stage);
  std::vector<std::string> out;
  for (const auto& [name, value] : spec.params.items()) {
    if (axes.count(name)) out.push_back(name);
  }
  return out;
}

int64_t CountPipelineRuns(const Spec& spec) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    int64_t n = 1;
    for (const std::string& a : StageAxes(spec, static_cast<int>(s))) {
      const int64_t size = static_cast<int64_t>(spec.params[a].size());
      if (size == 0) return 0;  // an empty axis makes no run at all (as a grid's)
      n = n > kMax / size ? kMax : n * size;
    }
    total = total > kMax - n ? kMax : total + n;
  }
  return total;
}

std::string OutputsClash(const Spec& spec) {
  // `inner` is `outer` or lies inside it.
  auto within = [](const std::string& inner, const std::string& outer) {
    return inner == outer ||
           (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
            inner[outer.size()] == '/');
  };
  for (const StageSpec& s : spec.stages) {
    if (s.gather) continue;
    // Each path the stage's runs would see or write, and whose it is (its own first).
    std::vector<std::pair<std::string, std::string>> seen;
    for (const std::string& o : s.outputs) seen.emplace_back(o, s.name);
    for (const std::string& n : s.needs) {
      const int i = IndexOf(spec, n);
      if (i < 0) continue;
      for (const std::string& o : spec.stages[i].outputs) {
        for (const auto& [path, from] : seen) {
          if (o == path) {
            return fmt::format("stage {} would see '{}' from both {} and {}; give the outputs "
                               "different paths",
                               s.name, o, from, n);
          }
          const bool inside = within(o, path);
          if (!inside && !within(path, o)) continue;
          const std::string& inner = inside ? o : path;
          const std::string& outer = inside ? path : o;
          const std::string& inner_from = inside ? n : from;
          const std::string& outer_from = inside ? from : n;
          return fmt::format(
              "stage {} would see '{}' (from {}) inside '{}' (from {}); a need's output is shown "
              "to it read-only and whole, so nothing can be put inside another one: give them "
              "paths apart (such as '{}' and '{}'), or let one stage write both",
              s.name, inner, inner_from, outer, outer_from, outer,
              inner.substr(outer.size() + 1));
        }
        seen.emplace_back(o, n);
      }
    }
  }
  return "";
}

std::vector<StageRun> ExpandPipeline(const Spec& spec) {
  const std::vector<Json> cells = ExpandGrid(spec);
  std::vector<std::string> all_axes;
  for (const auto& [name, value] : spec.params.items()) {
    if (value.is_array()) all_axes.push_back(name);
  }
  // The values of `names` in `params`, as one key (absent names left out).
  auto key_of = [](const Json& params, const std::vector<std::string>& names) {
    Json k = Json::object();
    for (const std::string& n : names) {
      if (params.contains(n)) k[n] = params[n];
    }
    return k.dump();
  };
  std::vector<StageRun> runs;
  std::map<int, std::vector<int>> by_stage;  // stage -> its runs' indexes
  std::map<int, std::vector<std::string>> axes_of;
  for (int s : StageOrder(spec)) {
    const StageSpec& stage = spec.stages[s];
    const std::vector<std::string> axes = StageAxes(spec, s);
    axes_of[s] = axes;
    // Each need's runs by the values of the axes this stage matches them on: a fan-out on the
    // need's axes (exactly one run each, as its axes hold the need's), a gather on the axes its
    // own command names that the need also has (every run that agrees).
    std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::vector<int>>>> index;
    for (const std::string& need : stage.needs) {
      const int n = IndexOf(spec, need);
      std::vector<std::string> on = axes_of[n];
      if (stage.gather) {
        on.clear();
        for (const std::string& a : axes) {
          if (std::find(axes_of[n].begin(), axes_of[n].end(), a) != axes_of[n].end()) {
            on.push_back(a);
          }
        }
      }
      std::map<std::string, std::vector<int>> by_key;
      for (int j : by_stage[n]) by_key[key_of(runs[j].params, on)].push_back(j);
      index.emplace_back(std::move(on), std::move(by_key));
    }
    std::set<std::string> dropped(all_axes.begin(), all_axes.end());
    for (const std::string& a : axes) dropped.erase(a);
    std::set<std::string> seen;
    for (const Json& cell : cells) {
      Json params = cell;
      for (const std::string& d : dropped) params.erase(d);
      if (!seen.insert(params.dump()).second) continue;
      StageRun r;
      r.stage = s;
      r.params = params;
      for (const auto& [on, by_key] : index) {
        auto it = by_key.find(key_of(params, on));
        if (it != by_key.end()) r.needs.insert(r.needs.end(), it->second.begin(), it->second.end());
      }
      by_stage[s].push_back(static_cast<int>(runs.size()));
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

}  // namespace drover
