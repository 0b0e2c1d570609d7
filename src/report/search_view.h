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
  // grouped by the value for choices and grid axes, or by quartile for numbers), over the succeeded and pruned trials with a score (a pruned one's
  // when it was stopped), normalised to sum to 1. Sorted, most important first; empty below 8
  // such trials.
  std::vector<std::pair<std::string, double>> importance;
};

SearchView SearchViewOf(const Comparison& c);
Json SearchViewJson(const SearchView& v);

}  // namespace drover::report
