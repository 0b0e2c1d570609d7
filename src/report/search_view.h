#pragma once
// What a search's views show beside its runs table (drover compare, the report, the web UI):
// its trials by state, the best score so far trial by trial, and how much each parameter
// matters. Pure: computed from the ranked runs (docs/search.md, "Seeing a search").
#include <map>
#include <string>
#include <vector>

#include "report/comparison.h"

namespace drover::report {

struct SearchView {
  std::map<std::string, int> states;  // state name -> trials
  // A search's trials by how their parameters were chosen (TrialOrigin's names), in the order of
  // kAllTrialOrigins; empty for runs no search made.
  std::vector<std::pair<std::string, int>> origins;
  // One point per succeeded trial with a score, in trial order: the best score up to it.
  struct Point {
    int trial = 0;       // 1-based trial number (the run's index + 1)
    int64_t run_id = 0;
    double score = 0;    // this trial's
    double best = 0;     // the best so far
  };
  std::vector<Point> history;
  // Parameter importance: the share of the scores' variance explained by the parameter's value
  // (epsilon squared, the correlation ratio corrected for the number of groups, of the score
  // grouped by the value for choices and grid axes, or by quartile for numbers), normalised to
  // sum to 1. Over the trials that finished (succeeded, with a score) only: a pruned trial's
  // value is from earlier in training and is not comparable with a final one. Seeds
  // (IsSeedParam) and parameters with one value among those trials are left out. Sorted, most
  // important first; empty below kImportanceTrials such trials (importance_note says why).
  std::vector<std::pair<std::string, double>> importance;
  std::string importance_note;
};

inline constexpr size_t kImportanceTrials = 8;

SearchView SearchViewOf(const Comparison& c);
// How a search spent its budget, in one line: "16 trials: 4 random (the start), 12 by TPE; 11
// pruned early, 5 ran to the end". "" when no run says how it was chosen and none was pruned.
std::string BudgetLine(const SearchView& v);
Json SearchViewJson(const SearchView& v);

}  // namespace drover::report
