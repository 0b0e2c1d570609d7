#include "spec/pipeline.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

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

// Parameters `a` and `b` agree on every name in `axes` that both hold.
bool Agree(const Json& a, const Json& b, const std::vector<std::string>& axes) {
  for (const std::string& n : axes) {
    if (a.contains(n) && b.contains(n) && a[n] != b[n]) return false;
  }
  return true;
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

std::vector<StageRun> ExpandPipeline(const Spec& spec) {
  const std::vector<Json> cells = ExpandGrid(spec);
  std::vector<std::string> all_axes;
  for (const auto& [name, value] : spec.params.items()) {
    if (value.is_array()) all_axes.push_back(name);
  }
  std::vector<StageRun> runs;
  std::map<int, std::vector<int>> by_stage;  // stage -> its runs' indexes
  std::map<int, std::vector<std::string>> axes_of;
  for (int s : StageOrder(spec)) {
    const StageSpec& stage = spec.stages[s];
    const std::vector<std::string> axes = StageAxes(spec, s);
    axes_of[s] = axes;
    std::set<std::string> dropped(all_axes.begin(), all_axes.end());
    for (const std::string& a : axes) dropped.erase(a);
    std::vector<Json> seen;
    for (const Json& cell : cells) {
      Json params = cell;
      for (const std::string& d : dropped) params.erase(d);
      if (std::find(seen.begin(), seen.end(), params) != seen.end()) continue;
      seen.push_back(params);
      StageRun r;
      r.stage = s;
      r.params = params;
      for (const std::string& need : stage.needs) {
        const int n = IndexOf(spec, need);
        for (int j : by_stage[n]) {
          // A run needs the runs of its need that agree with it on the need's axes (exactly one
          // for a fan-out, whose axes hold the need's); a gather, every one that agrees on its own.
          if (Agree(runs[j].params, params, stage.gather ? axes : axes_of[n])) r.needs.push_back(j);
        }
      }
      by_stage[s].push_back(static_cast<int>(runs.size()));
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

}  // namespace drover
