#include "report/groups.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace drover::report {

bool IsSeedParam(const std::string& name) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower == "seed" || lower == "random_seed" || lower == "rng_seed" || lower == "rng";
}

namespace {

// The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's method,
// as in Numerical Recipes' betacf), for the t distribution's tail.
double ContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-14) break;
  }
  return h;
}

double IncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * ContinuedFraction(a, b, x) / a;
  return 1 - front * ContinuedFraction(b, a, 1 - x) / b;
}

}  // namespace

double StudentTwoSidedP(double t, double df) {
  if (!std::isfinite(t)) return std::isnan(t) ? 1 : 0;
  if (df <= 0) return 1;
  return IncompleteBeta(df / 2, 0.5, df / (df + t * t));
}

std::optional<Welch> WelchTest(double mean_a, double sd_a, int n_a, double mean_b, double sd_b,
                               int n_b) {
  if (n_a < 2 || n_b < 2) return std::nullopt;
  const double va = sd_a * sd_a / n_a, vb = sd_b * sd_b / n_b;
  Welch w;
  if (va + vb <= 0) {
    // No spread at all: equal means are the same, different ones as different as can be.
    w.t = mean_a == mean_b ? 0 : std::copysign(INFINITY, mean_a - mean_b);
    w.df = n_a + n_b - 2;
    w.p = mean_a == mean_b ? 1 : 0;
    return w;
  }
  w.t = (mean_a - mean_b) / std::sqrt(va + vb);
  w.df = (va + vb) * (va + vb) / (va * va / (n_a - 1) + vb * vb / (n_b - 1));
  w.p = StudentTwoSidedP(w.t, w.df);
  return w;
}

Grouping GroupBySeed(const Comparison& c) {
  Grouping g;
  for (const std::string& p : c.varying) {
    if (IsSeedParam(p)) g.seeds.push_back(p);
  }
  if (g.seeds.empty()) return g;
  std::map<std::string, size_t> index;  // the config's JSON -> its group
  std::map<size_t, std::vector<double>> scores;
  std::vector<Run> by_id = c.runs;
  std::sort(by_id.begin(), by_id.end(), [](const Run& a, const Run& b) { return a.id < b.id; });
  // Runs of several experiments (a cross-experiment compare): the same params in two experiments
  // are two configs (the code or the data may differ).
  const bool several = std::any_of(by_id.begin(), by_id.end(), [&](const Run& r) {
    return r.experiment_id != by_id.front().experiment_id;
  });
  for (const Run& r : by_id) {
    Json config = r.params.is_object() ? r.params : Json::object();
    for (const std::string& s : g.seeds) config.erase(s);
    const std::string key = (several ? std::to_string(r.experiment_id) + ":" : "") + config.dump();
    auto [it, added] = index.emplace(key, g.groups.size());
    if (added) {
      g.groups.emplace_back();
      g.groups.back().params = config;
      if (several) g.groups.back().experiment_id = r.experiment_id;
    }
    RunGroup& group = g.groups[it->second];
    group.runs.push_back(r.id);
    auto score = SortValue(c, r);
    if (r.state == RunState::kSucceeded && score && std::isfinite(*score)) {
      scores[it->second].push_back(*score);
    }
  }
  for (size_t i = 0; i < g.groups.size(); ++i) {
    RunGroup& group = g.groups[i];
    const std::vector<double>& v = scores[i];
    group.n = static_cast<int>(v.size());
    if (v.empty()) continue;
    double sum = 0;
    for (double x : v) sum += x;
    group.mean = sum / group.n;
    double sq = 0;
    for (double x : v) sq += (x - group.mean) * (x - group.mean);
    group.stddev = group.n > 1 ? std::sqrt(sq / (group.n - 1)) : 0;
    group.min = *std::min_element(v.begin(), v.end());
    group.max = *std::max_element(v.begin(), v.end());
  }
  for (const RunGroup& group : g.groups) {
    g.seeds_per_config = std::max(g.seeds_per_config, static_cast<int>(group.runs.size()));
  }
  for (RunGroup& group : g.groups) group.complete = group.n > 0 && group.n == g.seeds_per_config;
  std::stable_sort(g.groups.begin(), g.groups.end(), [&](const RunGroup& a, const RunGroup& b) {
    if ((a.n > 0) != (b.n > 0)) return a.n > 0;
    if (a.n == 0) return false;
    if (a.complete != b.complete) return a.complete;
    return c.maximize ? a.mean > b.mean : a.mean < b.mean;
  });
  if (g.groups.size() >= 2 && g.groups[0].complete && g.groups[1].complete) {
    const RunGroup& a = g.groups[0];
    const RunGroup& b = g.groups[1];
    g.top_two = WelchTest(a.mean, a.stddev, a.n, b.mean, b.stddev, b.n);
  }
  return g;
}

Json GroupsJson(const Comparison& c) {
  const Grouping g = GroupBySeed(c);
  if (g.groups.empty() || c.metric.empty()) return nullptr;
  Json configs = Json::array();
  for (const RunGroup& r : g.groups) {
    configs.push_back({{"experiment_id", r.experiment_id > 0 ? Json(r.experiment_id) : Json()},
                       {"params", r.params},
                       {"runs", r.runs},
                       {"n", r.n},
                       {"complete", r.complete},
                       {"mean", r.n > 0 ? Json(r.mean) : Json()},
                       {"std", r.n > 0 ? Json(r.stddev) : Json()},
                       {"min", r.n > 0 ? Json(r.min) : Json()},
                       {"max", r.n > 0 ? Json(r.max) : Json()}});
  }
  Json out = {{"seeds", g.seeds},
              {"seeds_per_config", g.seeds_per_config},
              {"configs", std::move(configs)},
              {"top_two", nullptr}};
  if (g.top_two) {
    out["top_two"] = {{"test", "welch"},
                      {"t", ScoreJson(g.top_two->t)},
                      {"df", g.top_two->df},
                      {"p", g.top_two->p},
                      {"overlap", g.top_two->p >= 0.05}};
  }
  return out;
}

}  // namespace drover::report
