// drover's samplers on the benchmark functions of bench/search_quality.py (bench/README.md,
// "Search quality"). Each trial is proposed by search::Propose with the history so far, as the
// engine does, one at a time.
//
//   search_bench quality FUNC SAMPLER TRIALS SEEDS [STARTUP]
//                                                     one JSON line per seed: the best value seen
//                                                     after each trial (for a noisy function, the
//                                                     noiseless value of the best-looking trial)
//   search_bench time FUNC SAMPLER FINISHED REPEATS  the mean time of one proposal after
//                                                     FINISHED random trials, in ms
//   search_bench eval FUNC 'JSON'                    the function's noiseless value at a point
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "search/sampler.h"

using namespace drover;
using namespace drover::search;

namespace {

Dimension Num(const std::string& name, Distribution d, double lo, double hi) {
  Dimension x;
  x.name = name;
  x.dist = d;
  x.low = lo;
  x.high = hi;
  return x;
}

double Branin(const Json& p) {
  double x1 = p["x1"].get<double>(), x2 = p["x2"].get<double>();
  const double a = 1, b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, r = 6, s = 10,
               t = 1 / (8 * M_PI);
  return a * std::pow(x2 - b * x1 * x1 + c * x1 - r, 2) + s * (1 - t) * std::cos(x1) + s;
}

double Hartmann6(const Json& p) {
  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                 {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                 {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                 {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) {
      double x = p["x" + std::to_string(j + 1)].get<double>();
      inner += A[i][j] * (x - P[i][j]) * (x - P[i][j]);
    }
    sum += alpha[i] * std::exp(-inner);
  }
  return -sum;
}

double Mixed(const Json& p) {
  static const std::map<std::string, std::pair<double, double>> shift = {
      {"a", {1.5, 0.5}}, {"b", {-1.0, 0.0}}, {"c", {0.0, 1.0}}, {"d", {2.0, 0.25}}};
  const auto& [s, o] = shift.at(p["c"].get<std::string>());
  double x = p["x"].get<double>(), y = p["y"].get<double>();
  double n = static_cast<double>(p["n"].get<int64_t>());
  return std::pow(x - s, 2) + std::pow(std::log10(y) + 1, 2) + 0.05 * std::pow(n - 11, 2) + o;
}

struct Problem {
  Space space;
  double (*f)(const Json&);
  double noise = 0;  // sd of Gaussian noise added to what the sampler sees
};

Problem Make(const std::string& name) {
  Problem pr;
  if (name == "branin") {
    pr.space.dims = {Num("x1", Distribution::kUniform, -5, 10), Num("x2", Distribution::kUniform, 0, 15)};
    pr.f = Branin;
  } else if (name == "hartmann6" || name == "noisy_hartmann6") {
    for (int j = 1; j <= 6; ++j) pr.space.dims.push_back(Num("x" + std::to_string(j), Distribution::kUniform, 0, 1));
    pr.f = Hartmann6;
    if (name == "noisy_hartmann6") pr.noise = 0.1;
  } else if (name == "mixed") {
    Dimension c;
    c.name = "c";
    c.dist = Distribution::kChoice;
    c.choices = {"a", "b", "c", "d"};
    pr.space.dims = {Num("x", Distribution::kUniform, -5, 5), Num("y", Distribution::kLogUniform, 1e-3, 10),
                     Num("n", Distribution::kInt, 1, 32), c};
    pr.f = Mixed;
  } else {
    std::fprintf(stderr, "unknown function %s\n", name.c_str());
    std::exit(2);
  }
  return pr;
}

SamplerOptions Options(const std::string& sampler, int64_t budget) {
  SamplerOptions o;
  std::optional<SamplerKind> k = ParseSamplerKind(sampler == "tpe-univariate" ? "tpe" : sampler);
  if (!k) {
    std::fprintf(stderr, "unknown sampler %s\n", sampler.c_str());
    std::exit(2);
  }
  o.kind = *k;
  o.multivariate = sampler != "tpe-univariate";
  o.budget = budget;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: search_bench quality|time|eval FUNC ...\n");
    return 2;
  }
  const std::string mode = argv[1];
  Problem pr = Make(argv[2]);
  if (mode == "eval" && argc == 4) {
    std::printf("%.12g\n", pr.f(Json::parse(argv[3])));
    return 0;
  }
  if (argc < 6) return 2;
  SamplerOptions options = Options(argv[3], std::atoll(argv[4]));
  if (argc > 6) options.startup_trials = std::atoi(argv[6]);  // 0: the default for the budget
  if (mode == "quality") {
    const int trials = std::atoi(argv[4]), seeds = std::atoi(argv[5]);
    for (int seed = 0; seed < seeds; ++seed) {
      std::mt19937_64 noise(1000 + static_cast<uint64_t>(seed));
      std::normal_distribution<double> gauss(0, 1);
      std::vector<Observation> history;
      Json best_so_far = Json::array();
      double best_seen = INFINITY, best_true = INFINITY;
      for (int t = 0; t < trials; ++t) {
        uint64_t s = (static_cast<uint64_t>(seed) << 32) ^ static_cast<uint64_t>(t) ^ 0x9e3779b97f4a7c15ULL;
        Json p = Propose(options, pr.space, Json::object(), history, s);
        double truth = pr.f(p);
        double seen = truth + pr.noise * gauss(noise);
        history.push_back({p, TrialState::kComplete, seen, 0, t});
        if (seen < best_seen) {
          best_seen = seen;
          best_true = truth;
        }
        best_so_far.push_back(best_true);
      }
      std::cout << Json{{"seed", seed}, {"best", best_so_far}}.dump() << "\n";
    }
    return 0;
  }
  if (mode == "time") {
    const int finished = std::atoi(argv[4]), repeats = std::atoi(argv[5]);
    std::mt19937_64 rng(7);
    std::vector<Observation> history;
    for (int t = 0; t < finished; ++t) {
      Json p = ProposeRandom(pr.space, Json::object(), rng);
      history.push_back({p, TrialState::kComplete, pr.f(p), 0, t});
    }
    SamplerOptions o = options;
    o.budget = finished + repeats;
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) Propose(o, pr.space, Json::object(), history, static_cast<uint64_t>(r));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << Json{{"finished", finished}, {"ms_per_proposal", ms / repeats},
                      {"sampler", std::string(ToString(Choose(o, pr.space, static_cast<size_t>(finished))))}}
                     .dump()
              << "\n";
    return 0;
  }
  return 2;
}
