#pragma once
// The spec that runs a recorded run again (drover reproduce, POST /runs/{id}/reproduce;
// docs/pipelines.md, "Reproduce"): the experiment's recorded spec with the run's own parameters,
// the recorded snapshot as its workdir, never cached (rerun). A stage that needs nothing runs
// alone with its stage's command; one that needs others is the pipeline up to it, its sweep
// narrowed to the run's values (kept as axes, so its needs keep their fingerprints and are cached
// from the runs that made its inputs), the stage forced. Pure.
#include "common/status.h"
#include "model/run.h"
#include "model/spec.h"

namespace drover {

Result<Spec> ReproduceSpec(const Run& run, const Experiment& exp, const Snapshot& snap);

}  // namespace drover
