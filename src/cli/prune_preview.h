#pragma once
// What `drover run --dry-run` says of a prune rule (docs/search.md, "Early stopping"): its rungs
// in the units they count, and, when an earlier experiment of the same name in the store has a
// run that reported the metric, where that run's reports would have put them: two rungs that
// fall on one report are a warning (only the last is judged; the others are passed over).
#include <string>
#include <vector>

#include "model/run.h"
#include "model/spec.h"

namespace drover::cli {

class Catalog;

struct PrunePreview {
  std::string rungs;                  // "rungs at epoch 1, 3, 9 (...)"
  std::vector<std::string> warnings;  // each a sentence that says what to change
};

// The rungs where `p` compares runs. `history`: an earlier run's points of the metric and of the
// resource (any order); empty when there is none. `history_run` names it in the warning.
PrunePreview PreviewPrune(const PruneSpec& p, const std::vector<MetricPoint>& history,
                          int64_t history_run);

// The same, with the history read from the newest earlier experiment named `name` (none: no
// history; the catalog may be null).
PrunePreview PreviewPruneOf(const PruneSpec& p, const std::string& name, Catalog* catalog);

// The text and JSON forms a dry run prints.
std::string PrunePreviewText(const PruneSpec& p, const PrunePreview& preview);

}  // namespace drover::cli
