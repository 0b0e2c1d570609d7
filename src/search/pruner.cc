#include "search/pruner.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace drover::search {

Pruner::Pruner(PruneSpec spec) : spec_(std::move(spec)) {
  spec_.min_steps = std::max<int64_t>(spec_.min_steps, 1);
  spec_.reduction = std::max(spec_.reduction, 2);
}

int Pruner::Brackets() const {
  if (spec_.rule != PruneRule::kHyperband || spec_.max_steps <= spec_.min_steps) return 1;
  int s = 0;
  for (double r = static_cast<double>(spec_.min_steps) * spec_.reduction;
       r <= static_cast<double>(spec_.max_steps); r *= spec_.reduction) {
    ++s;
  }
  return s + 1;
}

bool Pruner::Judges(int64_t at, double end) const {
  const double next = static_cast<double>(at) * spec_.reduction;
  if (spec_.max_steps > 0 && next > static_cast<double>(spec_.max_steps)) return false;
  if (end > 0 && next > end) return false;
  return true;
}

int Pruner::BracketOf(int64_t index) const {
  return static_cast<int>(std::max<int64_t>(index, 0) % Brackets());
}

int64_t Pruner::RungStep(int bracket, int rung) const {
  double step = static_cast<double>(spec_.min_steps);
  for (int i = 0; i < bracket + rung; ++i) step *= spec_.reduction;
  return step > 4e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(step);
}

double Pruner::Score(double value) const {
  if (std::isnan(value)) return -std::numeric_limits<double>::infinity();
  return spec_.maximize ? value : -value;
}

void Pruner::Load(const RungRecord& r) {
  values_[{r.bracket, r.rung}].emplace_back(r.run_id, r.value);
  int& next = next_rung_[r.run_id];
  next = std::max(next, r.rung + 1);
  if (r.pruned) pruned_[r.run_id] = r;
}

const RungRecord* Pruner::PrunedAt(int64_t run_id) const {
  auto it = pruned_.find(run_id);
  return it == pruned_.end() ? nullptr : &it->second;
}

bool Pruner::Decide(const RungRecord& r) const {
  auto it = values_.find({r.bracket, r.rung});
  const double mine = Score(r.value);
  std::vector<double> others;
  if (it != values_.end()) {
    for (const auto& [run, v] : it->second) {
      if (run != r.run_id) others.push_back(Score(v));
    }
  }
  if (spec_.rule == PruneRule::kMedian) {
    if (static_cast<int>(others.size()) < spec_.startup_trials) return false;
    std::sort(others.begin(), others.end());
    const size_t n = others.size();
    const double median = n % 2 ? others[n / 2] : 0.5 * (others[n / 2 - 1] + others[n / 2]);
    return mine < median;
  }
  // Successive halving: the best ceil(n / reduction) of the n values here go on, once the rung
  // holds `reduction` values: before that no run there could be promoted past another in
  // asynchronous successive halving, and one comparison with one earlier run is too thin a
  // reason to stop a run for good.
  const size_t n = others.size() + 1;
  if (n < static_cast<size_t>(spec_.reduction)) return false;
  const size_t keep = (n + static_cast<size_t>(spec_.reduction) - 1) / static_cast<size_t>(spec_.reduction);
  size_t better = 0;
  for (double o : others) better += o > mine ? 1 : 0;
  return better >= keep;
}

std::optional<RungRecord> Pruner::Report(int64_t run_id, int64_t index, const Place& place,
                                         double value, bool ended) {
  if (pruned_.count(run_id)) return std::nullopt;
  const int bracket = BracketOf(index);
  int& next = next_rung_[run_id];
  // The last rung this report reached (none when it reached none).
  int reached = -1;
  for (int k = next;; ++k) {
    const int64_t at = RungStep(bracket, k);
    if (place.at < static_cast<double>(at)) break;
    // No rung at the end of a full run, nor so near it that a run it keeps has no next rung.
    if (!Judges(at, place.end)) break;
    reached = k;
    if (at == std::numeric_limits<int64_t>::max()) break;
  }
  if (reached < 0) return std::nullopt;
  RungRecord r{run_id, bracket, reached, RungStep(bracket, reached), value, false};
  r.unit = place.unit;
  r.report_step = place.step;
  r.pruned = !ended && Decide(r);
  values_[{bracket, reached}].emplace_back(run_id, value);
  next = reached + 1;
  if (r.pruned) pruned_[run_id] = r;
  return r;
}

void ReportPlacer::Place(int64_t run_id, const std::vector<MetricPoint>& points, double end,
                         const std::function<bool(const MetricPoint&, const Pruner::Place&)>& each) {
  const bool by_steps = spec_.resource == "step";
  const std::string resource = spec_.resource.empty() ? "epoch" : spec_.resource;
  std::vector<const MetricPoint*> mine;
  for (const MetricPoint& p : points) {
    if (p.name == spec_.metric || (!by_steps && p.name == resource)) mine.push_back(&p);
  }
  std::stable_sort(mine.begin(), mine.end(), [&](const MetricPoint* a, const MetricPoint* b) {
    return std::pair(a->step, a->name == spec_.metric) <
           std::pair(b->step, b->name == spec_.metric);
  });
  for (const MetricPoint* p : mine) {
    if (p->name != spec_.metric) {
      resource_[run_id] = p->value;
      continue;
    }
    Pruner::Place place{static_cast<double>(p->step), "step", p->step};
    if (!by_steps) {
      auto it = resource_.find(run_id);
      if (it != resource_.end()) {
        place.at = it->second;
        place.unit = resource;
        place.end = end;
      } else if (!spec_.resource.empty()) {
        continue;  // a named resource not reported yet: no rung can be placed
      }
    }
    if (!each(*p, place)) return;
  }
}

}  // namespace drover::search
