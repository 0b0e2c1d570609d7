#include "spec/reproduce.h"

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

namespace drover {
namespace {

// A recorded value in the spec's ordered JSON; bytes that are not UTF-8 (a run's params come from
// a user) are replaced, never thrown on.
OrderedJson Ordered(const Json& v) {
  return OrderedJson::parse(v.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

Result<Spec> ReproduceSpec(const Run& run, const Experiment& exp, const Snapshot& snap) {
  DROVER_ASSIGN_OR_RETURN(Spec s, SpecFromJson(exp.spec));
  bool pipeline = false;
  if (!run.stage.empty()) {
    const StageSpec* stage = FindStage(s, run.stage);
    if (!stage) return Internal("run " + std::to_string(run.id) + "'s stage is not in its spec");
    {
      // A stage: the pipeline up to it (itself alone when it needs nothing), with its
      // parameters (a gather: all the sweep's), that stage forced, so its outputs are stored as
      // the original's were. Its needs are cached from runs with their fingerprints (run again
      // where those outputs are gone), and shown to it as in the pipeline.
      pipeline = true;
      std::set<std::string> keep = {run.stage};
      std::vector<std::string> todo = {run.stage};
      while (!todo.empty()) {
        const StageSpec* st = FindStage(s, todo.back());
        todo.pop_back();
        for (const std::string& n : st ? st->needs : std::vector<std::string>{}) {
          if (keep.insert(n).second) todo.push_back(n);
        }
      }
      std::vector<StageSpec> kept;
      for (const StageSpec& st : s.stages) {
        if (keep.count(st.name)) kept.push_back(st);
      }
      const bool gather = stage->gather;
      s.stages = std::move(kept);
      s.force = {run.stage};
      // The sweep narrowed to the run's values, each kept a list of one so it stays an axis:
      // the stages it needs get the parameters (and so the fingerprints) they had. A gather
      // keeps the whole sweep (it ran over all of it).
      if (!gather) {
        for (auto it = run.params.begin(); it != run.params.end(); ++it) {
          if (s.params.contains(it.key()) && s.params[it.key()].is_array()) {
            s.params[it.key()] = OrderedJson::array({Ordered(it.value())});
          }
        }
      }
    }
  }
  if (!pipeline) {
    s.stages.clear();
    s.force.clear();
  }
  s.search.reset();
  s.prune.reset();
  // Run, never cached from the run it reproduces (or any other); a pipeline forces its stage
  // and lets its needs be cached.
  s.rerun = !pipeline;
  if (!pipeline) {
    s.params = OrderedJson::object();
    for (auto it = run.params.begin(); it != run.params.end(); ++it) {
      s.params[it.key()] = Ordered(it.value());
    }
  }
  s.name = exp.name + "-reproduce";
  s.workdir = snap.path;
  s.source_text = fmt::format("# drover reproduce {}: run {} of experiment {} ({})\n", run.id,
                              run.id, exp.id, exp.name) +
                  exp.spec_yaml;
  return s;
}

}  // namespace drover
