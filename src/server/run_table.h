#pragma once
// The web UI's runs table of one experiment (GET /api/v1/experiments/{id}/table, docs/web.md):
// derived columns, filter, sort and one page, computed here so a browser with a 10,000-run sweep
// only ever receives the page it shows. Pure: the route reads the store and the clock.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/run.h"
#include "report/comparison.h"

namespace drover::server {

struct TableQuery {
  // id | state | stage | duration | attempts | score | param:NAME | metric:NAME ("best": score)
  std::string sort;  // "": a pipeline's runs by stage, others by id
  bool desc = false;
  std::string q;                   // whitespace-separated terms, each must occur in the row
  std::optional<RunState> state;   // only runs in this state
  std::string stage;               // a pipeline: only this stage's runs
  int64_t offset = 0;
  int64_t limit = 50;
  bool scatter = false;            // add every matched run's params and objective
};

// The runs ranked as every view ranks them (report/comparison.h): each row's score is the
// comparison's, and its best run is the table's. A pipeline's table also has its stages (the
// graph the web UI draws: each stage's needs, depth, runs by state and cached runs) and sorts by
// stage (in the spec's order) unless asked otherwise. InvalidArgument for an unknown sort key
// (naming the keys it knows) or stage.
Result<Json> RunTable(const Experiment& e, const std::vector<Run>& runs,
                      const report::Comparison& ranking, const TableQuery& query, Millis now);

}  // namespace drover::server
