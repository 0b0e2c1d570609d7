#pragma once
// The JSON form of drover's records: what `--json` prints and, later, what the HTTP API and MCP
// tools return. One codec, shared by every face, so the shapes never drift apart.
#include "model/run.h"

namespace drover::protocol {

Json ToJson(const Experiment& e);
// Every state with its count (zeros too), as the experiment listing and GET /experiments/{id}
// carry it under "counts".
Json ToJson(const RunCounts& c);
Json ToJson(const Run& r);
Json ToJson(const Attempt& a);
Json ToJson(const MetricPoint& p);
Json ToJson(const Snapshot& s);
Json ToJson(const Environment& e);
Json ToJson(const Alert& a);
Json ToJson(const RunArtifacts& a);

}  // namespace drover::protocol
