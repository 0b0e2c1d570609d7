#include "sim/history.h"

#include <algorithm>
#include <map>

namespace drover::sim {

Result<Trace> ReadDroverHistory(Store& store, std::optional<int64_t> from_s,
                                std::optional<int64_t> to_s) {
  Trace trace;
  trace.source = "the store's run history";
  DROVER_ASSIGN_OR_RETURN(std::vector<Run> runs, store.ListRuns(RunFilter{}));
  std::map<int64_t, std::string> names;
  std::vector<std::pair<Millis, TraceJob>> rows;
  for (const Run& r : runs) {
    if (!IsFinal(r.state) || r.resources.gpus <= 0 || r.started_ms <= 0) continue;
    int64_t created_s = r.created_ms / 1000;
    if ((from_s && created_s < *from_s) || (to_s && created_s >= *to_s)) continue;
    DROVER_ASSIGN_OR_RETURN(std::vector<Attempt> attempts, store.ListAttempts(r.id));
    Millis ran = 0;
    for (const Attempt& a : attempts) {
      if (a.started_ms > 0 && a.ended_ms >= a.started_ms) ran += a.ended_ms - a.started_ms;
    }
    if (!names.contains(r.experiment_id)) {
      DROVER_ASSIGN_OR_RETURN(auto e, store.GetExperiment(r.experiment_id));
      names[r.experiment_id] = e ? e->name : std::to_string(r.experiment_id);
    }
    TraceJob j;
    j.id = r.id;
    j.duration_s = static_cast<double>(ran) / 1000.0;
    j.gpus = r.resources.gpus;
    j.group = names[r.experiment_id];
    rows.emplace_back(r.created_ms, std::move(j));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Millis epoch_ms = from_s ? *from_s * 1000 : (rows.empty() ? 0 : rows.front().first);
  trace.epoch_s = epoch_ms / 1000;
  for (auto& [created, j] : rows) {
    j.submit_s = static_cast<double>(created - epoch_ms) / 1000.0;
    trace.jobs.push_back(std::move(j));
  }
  return trace;
}

}  // namespace drover::sim
