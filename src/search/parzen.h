#pragma once
// The Parzen estimator of TPE (tpe.cc): a mixture with one component per observation and a prior
// component, over one or more dimensions jointly. Inside the search module (and its tests).
#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>
#include <vector>

#include "search/numeric.h"
#include "search/space.h"

namespace drover::search {

using numeric::LogCdfDiff;

inline constexpr double kPriorWeight = 1.0;

// Optuna's default_weights: flat below 25 observations, then a ramp from 1/n up for the older
// ones and 1 for the newest 25.
inline std::vector<double> DefaultWeights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n < 25) return w;
  size_t ramp = n - 25;
  for (size_t i = 0; i < ramp; ++i) {
    double t = ramp == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(ramp - 1);
    w[i] = 1.0 / static_cast<double>(n) + t * (1.0 - 1.0 / static_cast<double>(n));
  }
  return w;
}

struct NumericKernel {
  std::vector<double> mus, sigmas;
  double low = 0, high = 1;
  bool discrete = false;  // integers on a linear scale: the mass of [x - 0.5, x + 0.5]
  // Per component, computed once: 1/sigma, and the log of what the truncated density's
  // Gaussian exponent is scaled by (for integers, the log mass of the truncated range).
  std::vector<double> inv_sigma, log_norm;
  void Prepare() {
    for (size_t k = 0; k < mus.size(); ++k) {
      const double mu = mus[k], s = sigmas[k];
      const double z = LogCdfDiff((low - mu) / s, (high - mu) / s);
      inv_sigma.push_back(1.0 / s);
      log_norm.push_back(discrete ? -z : -numeric::kLogSqrt2Pi - std::log(s) - z);
    }
  }
};

struct ChoiceKernel {
  std::vector<std::vector<double>> probs;  // component -> probability of each choice
  std::vector<std::vector<double>> log_probs;
};

class Parzen {
 public:
  // rows[i][j]: observation i's internal coordinate of dims[j]; rows are oldest first.
  Parzen(const std::vector<const Dimension*>& dims, const std::vector<std::vector<double>>& rows)
      : dims_(dims), discrete_cache_(dims.size()) {
    const size_t n = rows.size();
    std::vector<double> w = DefaultWeights(n);
    w.push_back(kPriorWeight);
    double total = 0;
    for (double x : w) total += x;
    for (double x : w) log_weights_.push_back(std::log(x / total));
    weights_ = w;
    for (size_t j = 0; j < dims.size(); ++j) {
      const Dimension& d = *dims[j];
      if (!d.numeric()) {
        const size_t k = d.choices.size();
        ChoiceKernel c;
        for (const auto& row : rows) {
          std::vector<double> p(k, kPriorWeight / static_cast<double>(n + 1));
          p[static_cast<size_t>(row[j])] += 1.0;
          double s = 0;
          for (double x : p) s += x;
          for (double& x : p) x /= s;
          c.probs.push_back(std::move(p));
        }
        c.probs.emplace_back(k, 1.0 / static_cast<double>(k));
        for (const auto& p : c.probs) {
          std::vector<double> lp;
          for (double x : p) lp.push_back(std::log(x));
          c.log_probs.push_back(std::move(lp));
        }
        choices_.push_back(std::move(c));
        numerics_.emplace_back();
        continue;
      }
      NumericKernel nk;
      nk.low = d.InternalLow();
      nk.high = d.InternalHigh();
      nk.discrete = d.dist == Distribution::kInt;
      const double range = nk.high - nk.low;
      for (const auto& row : rows) nk.mus.push_back(row[j]);
      const double prior_mu = 0.5 * (nk.low + nk.high);
      {
        // The wider gap to a neighbour, the prior's centre among the neighbours; the ends of the
        // range are not neighbours of the outermost values (Optuna's consider_endpoints=False).
        std::vector<double> with_prior = nk.mus;
        with_prior.push_back(prior_mu);
        std::vector<size_t> order(with_prior.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return with_prior[a] < with_prior[b]; });
        std::vector<double> ends{nk.low};
        for (size_t i : order) ends.push_back(with_prior[i]);
        ends.push_back(nk.high);
        const size_t m = with_prior.size();
        std::vector<double> sorted_sigma(m);
        for (size_t i = 0; i < m; ++i) {
          sorted_sigma[i] = std::max(ends[i + 1] - ends[i], ends[i + 2] - ends[i + 1]);
        }
        if (ends.size() >= 4) {
          sorted_sigma[0] = ends[2] - ends[1];
          sorted_sigma[m - 1] = ends[m] - ends[m - 1];
        }
        nk.sigmas.assign(m, 0);
        for (size_t i = 0; i < m; ++i) nk.sigmas[order[i]] = sorted_sigma[i];
        nk.sigmas.resize(n);
      }
      const double maxsigma = range;
      const double minsigma = range / std::min(100.0, 2.0 + static_cast<double>(n));
      for (double& s : nk.sigmas) s = std::clamp(s, minsigma, maxsigma);
      nk.mus.push_back(prior_mu);
      nk.sigmas.push_back(range);
      nk.Prepare();
      numerics_.push_back(std::move(nk));
      choices_.emplace_back();
    }
  }

  std::vector<double> Sample(std::mt19937_64& rng) const {
    size_t k = numeric::Pick(rng, weights_);
    std::vector<double> x(dims_.size());
    for (size_t j = 0; j < dims_.size(); ++j) {
      if (!dims_[j]->numeric()) {
        x[j] = static_cast<double>(numeric::Pick(rng, choices_[j].probs[k]));
        continue;
      }
      const NumericKernel& nk = numerics_[j];
      double v = numeric::TruncatedNormal(rng, nk.mus[k], nk.sigmas[k], nk.low, nk.high);
      if (nk.discrete) v = std::clamp(std::round(v), nk.low + 0.5, nk.high - 0.5);
      x[j] = v;
    }
    return x;
  }

  double LogPdf(const std::vector<double>& x) const {
    const size_t comps = log_weights_.size();
    std::vector<double> terms(log_weights_);
    for (size_t j = 0; j < dims_.size(); ++j) {
      if (!dims_[j]->numeric()) {
        size_t c = static_cast<size_t>(x[j]);
        for (size_t k = 0; k < comps; ++k) terms[k] += choices_[j].log_probs[k][c];
        continue;
      }
      const NumericKernel& nk = numerics_[j];
      if (nk.discrete) {
        // Candidates share integers: each integer's masses are computed once.
        std::vector<double>& mass = discrete_cache_[j][static_cast<int64_t>(x[j])];
        if (mass.empty()) {
          mass.resize(comps);
          for (size_t k = 0; k < comps; ++k) {
            const double mu = nk.mus[k], inv = nk.inv_sigma[k];
            mass[k] = LogCdfDiff((x[j] - 0.5 - mu) * inv, (x[j] + 0.5 - mu) * inv) + nk.log_norm[k];
          }
        }
        for (size_t k = 0; k < comps; ++k) terms[k] += mass[k];
      } else {
        for (size_t k = 0; k < comps; ++k) {
          const double z = (x[j] - nk.mus[k]) * nk.inv_sigma[k];
          terms[k] += -0.5 * z * z + nk.log_norm[k];
        }
      }
    }
    return numeric::LogSumExp(terms);
  }

 private:
  std::vector<const Dimension*> dims_;
  std::vector<double> weights_, log_weights_;
  std::vector<NumericKernel> numerics_;
  std::vector<ChoiceKernel> choices_;
  // Per dimension: an integer's log masses under each component (LogPdf fills it).
  mutable std::vector<std::unordered_map<int64_t, std::vector<double>>> discrete_cache_;
};

}  // namespace drover::search
