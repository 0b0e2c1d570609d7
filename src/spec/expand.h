#pragma once
// Sweep expansion and command rendering: pure functions over a parsed Spec.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/spec.h"

namespace drover {

// The cartesian product of every list-valued parameter, in file order, the last axis varying
// fastest; scalars are copied into every run; distributions (a search's) are left out. A spec
// with no lists gives one run.
// Check CountGrid against spec.max_runs first (the spec parser does): this builds every run.
std::vector<Json> ExpandGrid(const Spec& spec);

// How many runs the grid expands to, by multiplication, without expanding it; a count past
// int64 is reported as INT64_MAX. A list with no values makes no run.
int64_t CountGrid(const Spec& spec);

// The argv for one set of resolved parameters. Without shell, each {name} is replaced inside its
// word (a value never splits into more words or reaches a shell). With shell: true the result is
// {"/bin/sh", "-c", script} and values are shell-quoted. "{{" and "}}" are literal braces.
// Strings are substituted as-is, numbers in their shortest JSON form, booleans as true/false.
Result<std::vector<std::string>> RenderCommand(const Spec& spec, const Json& params);

// The placeholder names a command template uses, in order of appearance (for validation).
Result<std::vector<std::string>> PlaceholderNames(const std::string& word);

// SHA-256 over the canonical JSON (sorted keys, no whitespace) of
// {"argv": argv, "env": spec.env, "params": params, "shell": shell, "snapshot": snapshot_hash},
// with "container", "metrics" ([[name, expression], ...]), "tensorboard" and "tensorboard_off"
// only where the spec has them. Scheduling settings (resources, priority, retries, timeout) are
// not part of it.
std::string Fingerprint(const Spec& spec, const std::vector<std::string>& argv, const Json& params,
                        const std::string& snapshot_hash);

// Why a run is never cached from an earlier success with its fingerprint (docs/pipelines.md,
// "Caching"): kNone when it is. The engine asks it before it looks a run up (Engine::Dedups), and
// `drover run --dry-run` to say which runs would be cached.
enum class CacheBypass {
  kNone,
  kSearch,   // a search's trials: the sampler decides what to try
  kRerun,    // --rerun, rerun: true
  kForced,   // --force STAGE (or all), force: [...]
  kData,     // a plain run that reads data: folders (outside the snapshot, so its fingerprint)
  kNoStage,  // a stage the spec does not have
};
std::string_view ToString(CacheBypass b);
// `stage`: the run's stage ("" for a plain spec's run).
CacheBypass CacheBypassOf(const Spec& spec, const std::string& stage);

// What a pipeline stage's run takes into its fingerprint from one run it needs: that run's
// fingerprint and the hash of its stored outputs (exec/artifacts.h, ArtifactsHash; a cached
// run's are its source's).
struct NeedPrint {
  std::string fingerprint;
  std::string outputs_hash;
};

// A pipeline stage's run's fingerprint (docs/pipelines.md, "Caching"): SHA-256 over
// {"base": Fingerprint(...) of its stage's view, "stage": its name, "inputs": the stage's
// declared inputs' hashes, "needs": [{"fingerprint", "outputs"}, ...] in the order of its needs}.
// The engine fingerprints a run with it once its needs have succeeded, and `drover run --dry-run`
// to say which runs would be cached: one function, so they never disagree.
std::string StageFingerprint(const std::string& base, const std::string& stage,
                             const std::map<std::string, std::string>& input_hashes,
                             const std::vector<NeedPrint>& needs);

}  // namespace drover
