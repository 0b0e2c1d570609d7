#pragma once
// Runs that differ only in their seed are one config tried several times: their scores pooled
// into a mean, a spread and a count, the configs ranked by mean, and whether the top two can be
// told apart (Welch's t-test). Shared by `drover compare` and its JSON (docs/spec.md, "Seeds and
// noise").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/comparison.h"

namespace drover::report {

// Parameter names that are a seed: seed, random_seed, rng_seed, rng (any case).
bool IsSeedParam(const std::string& name);

struct RunGroup {
  int64_t experiment_id = 0;     // set when the runs come from several experiments
  Json params = Json::object();  // the config: the runs' params without their seeds
  std::vector<int64_t> runs;     // every run of the config, by id
  int n = 0;                     // succeeded runs with a finite score
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 for one run
  double min = 0;
  double max = 0;
  // Every seed of the config gave a score: n equals the largest number of runs any config has.
  // An incomplete group ranks after the complete ones and is never marked best.
  bool complete = false;
};

struct Welch {
  double t = 0;
  double df = 0;
  double p = 1;  // two-sided
};

struct Grouping {
  std::vector<std::string> seeds;  // the seed parameters that vary; empty: no groups
  // Ranked: complete groups by mean (the comparison's mode), then incomplete ones by mean, then
  // those with n = 0.
  std::vector<RunGroup> groups;
  int seeds_per_config = 0;  // the largest number of runs of one config
  // The two best groups compared, when each has 2 or more scores and both are complete.
  std::optional<Welch> top_two;
};

// Groups the comparison's runs when a seed parameter varies between them (else no groups).
Grouping GroupBySeed(const Comparison& c);

// The grouping as `drover compare --json`, MCP compare and the web table send it: null without
// groups, else {seeds, configs: [{experiment_id, params, runs, n, mean, std, min, max}], top_two}.
Json GroupsJson(const Comparison& c);

// Welch's unequal-variances t-test of two samples (each 2 or more values); nullopt otherwise.
std::optional<Welch> WelchTest(double mean_a, double sd_a, int n_a, double mean_b, double sd_b,
                               int n_b);
// P(|T| >= |t|) for Student's t with `df` degrees of freedom.
double StudentTwoSidedP(double t, double df);

}  // namespace drover::report
