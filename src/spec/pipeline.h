#pragma once
// A pipeline's runs (stages:, docs/pipelines.md): pure functions over a parsed Spec.
#include <string>
#include <vector>

#include "common/status.h"
#include "model/spec.h"

namespace drover {

// One run of one stage: its parameters (the pipeline's fixed values and the values of the swept
// parameters it fans out over) and the runs it needs, as indexes into the same list (always
// earlier ones).
struct StageRun {
  int stage = 0;  // index into spec.stages
  Json params = Json::object();
  std::vector<int> needs;
};

// The swept parameters (list-valued params) stage `stage` fans out over: those its command
// names, and, unless it gathers, those of its needs, in the order params lists them.
std::vector<std::string> StageAxes(const Spec& spec, int stage);

// Every run of every stage, stages in an order where needs come first (their order as written
// otherwise), each stage's runs in grid order. A stage that names no swept parameter (and whose
// needs name none) runs once; a gathering stage runs once per value of the swept parameters its
// own command names, over every run of its needs that agrees with them.
std::vector<StageRun> ExpandPipeline(const Spec& spec);

// How many runs ExpandPipeline makes, by multiplication, without expanding (INT64_MAX past it):
// what the spec's max_runs bounds.
int64_t CountPipelineRuns(const Spec& spec);

// Why a stage that runs once per need's run could not be shown its needs' outputs: two of them
// (or one of them and one of its own) at the same path, or one inside the other (`d` and `d/e`:
// a need's output is shown read-only, whole, so nothing can be put inside it, and a link put in
// its place would write into the stored output). The message, with what to do; "" when every
// path is apart. Gathering stages read their needs' outputs from $DROVER_INPUTS and are not
// checked.
std::string OutputsClash(const Spec& spec);

// The order ExpandPipeline runs the stages in (indexes into spec.stages).
std::vector<int> StageOrder(const Spec& spec);

}  // namespace drover
