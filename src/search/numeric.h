#pragma once
// Small numeric helpers shared by the samplers.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace drover::search::numeric {

inline constexpr double kSqrt2 = 1.4142135623730951;
inline constexpr double kLogSqrt2Pi = 0.91893853320467274;  // log(sqrt(2 pi))

// log N(x; 0, 1).
inline double LogPhi(double z) { return -0.5 * z * z - kLogSqrt2Pi; }
// Phi(z), the standard normal CDF.
inline double Cdf(double z) { return 0.5 * std::erfc(-z / kSqrt2); }

// log(Phi(b) - Phi(a)) for a < b, accurate in both tails.
inline double LogCdfDiff(double a, double b) {
  double d;
  if (a > 0) {
    d = 0.5 * (std::erfc(a / kSqrt2) - std::erfc(b / kSqrt2));  // upper tail: 1-Phi
  } else if (b < 0) {
    d = 0.5 * (std::erfc(-b / kSqrt2) - std::erfc(-a / kSqrt2));
  } else {
    d = Cdf(b) - Cdf(a);
  }
  return d > 0 ? std::log(d) : -745.0;
}

inline double LogSumExp(const std::vector<double>& v) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : v) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

inline double Uniform(std::mt19937_64& rng, double low, double high) {
  // 53 random bits: the same on every platform (std::uniform_real_distribution is not pinned).
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return low + (high - low) * u;
}

inline double StandardNormal(std::mt19937_64& rng) {
  // Box-Muller, written out so that a seed gives the same numbers with every standard library.
  double u1 = Uniform(rng, 0, 1), u2 = Uniform(rng, 0, 1);
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// N(mu, sigma) truncated to [low, high]: rejection, then a clamp after 100 misses.
inline double TruncatedNormal(std::mt19937_64& rng, double mu, double sigma, double low,
                              double high) {
  for (int i = 0; i < 100; ++i) {
    double x = mu + sigma * StandardNormal(rng);
    if (x >= low && x <= high) return x;
  }
  return std::min(std::max(mu, low), high);
}

inline size_t Pick(std::mt19937_64& rng, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  double u = Uniform(rng, 0, total);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (u < weights[i]) return i;
    u -= weights[i];
  }
  return weights.empty() ? 0 : weights.size() - 1;
}

}  // namespace drover::search::numeric
