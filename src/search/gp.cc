// Gaussian-process Bayesian optimisation for numeric spaces (docs/search.md, "gp").
//
// - Inputs: each parameter's internal coordinate (log for log scales) scaled to [0, 1]; integers
//   are rounded before the acquisition is evaluated, so it sees only values that can run.
// - Outputs: the losses of finished trials, standardised; failed trials count as the worst loss.
// - Kernel: Matern 5/2 with one lengthscale per parameter (automatic relevance), a signal
//   variance and a noise variance, fitted by maximum a posteriori with L-BFGS. The priors are
//   Optuna's GPSampler's: -(0.1/l^-2 + 0.1 l^-2) on each inverse squared lengthscale,
//   Gamma(2, 1) on the signal variance and Gamma(1.1, 30) on the noise variance.
// - Acquisition: log expected improvement over the best posterior mean at an observed point
//   (robust to noise), computed in log space so it keeps its order far from the optimum.
//   Augmented (Huang et al. 2006): multiplied by 1 - noise sd / sqrt(variance + noise), so that
//   a noisy objective does not keep sampling where only the noise is left to learn.
//   Maximised over random points and perturbations of the best trials, then refined by a
//   pattern search.
// - Running trials: the kriging believer. They join the data with the posterior mean as their
//   value (hyperparameters unchanged), which removes the uncertainty there, so parallel
//   proposals spread out; they are never counted as observations.
#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <deque>

#include "search/numeric.h"
#include "search/sampler.h"

namespace drover::search {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr double kSqrt5 = 2.23606797749979;
constexpr double kMinNoise = 1e-6;

struct Hyper {
  VectorXd log_l;  // lengthscales
  double log_s2 = 0;
  double log_noise = std::log(0.01);
  VectorXd Pack() const {
    VectorXd p(log_l.size() + 2);
    p << log_l, log_s2, log_noise;
    return p;
  }
  static Hyper Unpack(const VectorXd& p) {
    Hyper h;
    const Eigen::Index d = p.size() - 2;
    h.log_l = p.head(d);
    h.log_s2 = p(d);
    h.log_noise = std::max(p(d + 1), std::log(kMinNoise));
    return h;
  }
};

// Matern 5/2 of the scaled distance r, and the factor of d k / d log l_i: (5/3)(1+sqrt5 r)e^-.
inline double Matern(double r) { return (1 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r); }

double Kernel(const double* a, const double* b, const VectorXd& inv_l, double s2) {
  double r2 = 0;
  for (Eigen::Index i = 0; i < inv_l.size(); ++i) {
    double t = (a[i] - b[i]) * inv_l(i);
    r2 += t * t;
  }
  return s2 * Matern(std::sqrt(r2));
}

// Row-major points: X(i, j).
using Points = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

MatrixXd Gram(const Points& X, const VectorXd& inv_l, double s2) {
  const Eigen::Index n = X.rows();
  MatrixXd K(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    K(i, i) = s2;
    for (Eigen::Index j = 0; j < i; ++j) K(i, j) = K(j, i) = Kernel(&X(i, 0), &X(j, 0), inv_l, s2);
  }
  return K;
}

// The negative log posterior of the hyperparameters and its gradient.
double Objective(const Points& X, const VectorXd& y, const VectorXd& p, VectorXd* grad) {
  const Hyper h = Hyper::Unpack(p);
  const Eigen::Index n = X.rows(), d = X.cols();
  const VectorXd inv_l = (-h.log_l.array()).exp();
  const double s2 = std::exp(h.log_s2), noise = std::exp(h.log_noise);
  MatrixXd K = Gram(X, inv_l, s2);
  K.diagonal().array() += noise;
  Eigen::LLT<MatrixXd> llt(K);
  if (llt.info() != Eigen::Success) return std::numeric_limits<double>::infinity();
  const VectorXd alpha = llt.solve(y);
  const MatrixXd& L = llt.matrixLLT();
  double lml = -0.5 * y.dot(alpha) - L.diagonal().array().log().sum() -
               0.5 * static_cast<double>(n) * std::log(2 * M_PI);
  double prior = 0;
  for (Eigen::Index i = 0; i < d; ++i) {
    double isl = std::exp(-2 * h.log_l(i));
    prior -= 0.1 / isl + 0.1 * isl;
  }
  prior += h.log_s2 - s2;               // Gamma(2, 1), in log s2
  prior += 0.1 * h.log_noise - 30 * noise;  // Gamma(1.1, 30)
  if (grad) {
    MatrixXd W = alpha * alpha.transpose() - llt.solve(MatrixXd::Identity(n, n));
    grad->setZero(p.size());
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) {
        double r2 = 0;
        for (Eigen::Index k = 0; k < d; ++k) {
          double t = (X(i, k) - X(j, k)) * inv_l(k);
          r2 += t * t;
        }
        const double r = std::sqrt(r2);
        const double e = std::exp(-kSqrt5 * r);
        const double kf = s2 * (1 + kSqrt5 * r + 5.0 / 3.0 * r2) * e;
        const double common = s2 * 5.0 / 3.0 * (1 + kSqrt5 * r) * e;
        const double w = W(i, j);  // symmetric: counted twice below (i<j and j<i)
        for (Eigen::Index k = 0; k < d; ++k) {
          double t = (X(i, k) - X(j, k)) * inv_l(k);
          (*grad)(k) += w * common * t * t;
        }
        (*grad)(d) += w * kf;
      }
      (*grad)(d) += 0.5 * W(i, i) * s2;
    }
    (*grad)(d + 1) = 0.5 * noise * W.trace();
    // Priors.
    for (Eigen::Index i = 0; i < d; ++i) {
      double isl = std::exp(-2 * h.log_l(i));
      (*grad)(i) += -(0.2 / isl - 0.2 * isl);
    }
    (*grad)(d) += 1 - s2;
    (*grad)(d + 1) += 0.1 - 30 * noise;
    if (p(d + 1) < std::log(kMinNoise)) (*grad)(d + 1) = 0;
    *grad = -*grad;
  }
  return -(lml + prior);
}

// L-BFGS with a backtracking line search: the minimum of Objective from `p`.
VectorXd Minimise(const Points& X, const VectorXd& y, VectorXd p) {
  constexpr int kMemory = 8, kIterations = 60;
  VectorXd g;
  double f = Objective(X, y, p, &g);
  if (!std::isfinite(f)) return p;
  std::deque<std::pair<VectorXd, VectorXd>> hist;  // (s, y) pairs
  for (int it = 0; it < kIterations; ++it) {
    if (g.lpNorm<Eigen::Infinity>() < 1e-5) break;
    VectorXd q = g;
    std::vector<double> a(hist.size());
    for (size_t i = hist.size(); i-- > 0;) {
      const auto& [s, yy] = hist[i];
      a[i] = s.dot(q) / yy.dot(s);
      q -= a[i] * yy;
    }
    if (!hist.empty()) {
      const auto& [s, yy] = hist.back();
      q *= s.dot(yy) / yy.dot(yy);
    }
    for (size_t i = 0; i < hist.size(); ++i) {
      const auto& [s, yy] = hist[i];
      double b = yy.dot(q) / yy.dot(s);
      q += s * (a[i] - b);
    }
    VectorXd dir = -q;
    if (dir.dot(g) >= 0) dir = -g;  // not a descent direction: steepest descent
    // Keep steps modest in log space.
    double mx = dir.lpNorm<Eigen::Infinity>();
    if (mx > 2) dir *= 2 / mx;
    double step = 1;
    VectorXd np, ng;
    double nf = f;
    bool moved = false;
    for (int k = 0; k < 20; ++k) {
      np = p + step * dir;
      nf = Objective(X, y, np, &ng);
      if (std::isfinite(nf) && nf <= f + 1e-4 * step * g.dot(dir)) {
        moved = true;
        break;
      }
      step *= 0.5;
    }
    if (!moved) break;
    VectorXd s = np - p, yy = ng - g;
    if (s.dot(yy) > 1e-12) {
      hist.emplace_back(s, yy);
      if (hist.size() > kMemory) hist.pop_front();
    }
    const double drop = f - nf;
    p = np;
    f = nf;
    g = ng;
    if (drop < 1e-9 * std::max(1.0, std::abs(f))) break;
  }
  return p;
}

// The posterior of the fitted process.
class Posterior {
 public:
  Posterior(const Points& X, const VectorXd& y, const Hyper& h)
      : X_(X), inv_l_((-h.log_l.array()).exp()), s2_(std::exp(h.log_s2)) {
    MatrixXd K = Gram(X, inv_l_, s2_);
    K.diagonal().array() += std::exp(h.log_noise) + 1e-10;
    llt_.compute(K);
    alpha_ = llt_.solve(y);
  }
  void At(const double* x, double& mean, double& var) const {
    const Eigen::Index n = X_.rows();
    VectorXd k(n);
    for (Eigen::Index i = 0; i < n; ++i) k(i) = Kernel(x, &X_(i, 0), inv_l_, s2_);
    mean = k.dot(alpha_);
    VectorXd v = llt_.matrixL().solve(k);
    var = std::max(s2_ - v.squaredNorm(), 1e-12);
  }

 private:
  Points X_;
  VectorXd inv_l_;
  double s2_;
  Eigen::LLT<MatrixXd> llt_;
  VectorXd alpha_;
};

// log(phi(z) + z Phi(z)), stable for very negative z.
double LogH(double z) {
  if (z > -3) return std::log(std::exp(numeric::LogPhi(z)) + z * numeric::Cdf(z));
  const double t = -z;
  double tail;  // 1 - t * Q(t) / phi(t)
  if (t < 25) {
    double ratio = std::exp(std::log(0.5 * std::erfc(t / numeric::kSqrt2)) - numeric::LogPhi(t));
    tail = 1 - t * ratio;
  } else {
    double t2 = t * t;
    tail = (1 - 3 / t2 + 15 / (t2 * t2)) / t2;
  }
  return numeric::LogPhi(z) + std::log(std::max(tail, 1e-300));
}

}  // namespace

Json ProposeGp(const SamplerOptions& options, const Space& space, const Json& context,
               const std::vector<Observation>& history, std::mt19937_64& rng) {
  std::vector<const Dimension*> dims;
  for (const Dimension& d : space.dims) dims.push_back(&d);
  const Eigen::Index D = static_cast<Eigen::Index>(dims.size());
  std::vector<double> lo, span;
  for (const Dimension* d : dims) {
    lo.push_back(d->InternalLow());
    span.push_back(d->InternalHigh() - d->InternalLow());
  }
  // Coordinates in [0, 1] of a trial; false when it lacks a parameter.
  auto unit = [&](const Json& params, std::vector<double>& row) {
    row.assign(dims.size(), 0);
    for (size_t j = 0; j < dims.size(); ++j) {
      auto it = params.find(dims[j]->name);
      if (it == params.end()) return false;
      std::optional<double> x = dims[j]->Internal(*it);
      if (!x) return false;
      row[j] = (*x - lo[j]) / span[j];
    }
    return true;
  };
  std::vector<std::vector<double>> rows, failed, pending;
  std::vector<double> losses;
  std::vector<double> row;
  for (const Observation& o : history) {
    if (!unit(o.params, row)) continue;
    if (o.state == TrialState::kComplete || o.state == TrialState::kPruned) {
      rows.push_back(row);
      losses.push_back(o.loss);
    } else if (o.state == TrialState::kFailed) {
      failed.push_back(row);
    } else {
      pending.push_back(row);
    }
  }
  if (rows.size() < 2) return ProposeRandom(space, context, rng);
  const double worst = *std::max_element(losses.begin(), losses.end());
  for (auto& f : failed) {
    rows.push_back(f);
    losses.push_back(worst);
  }
  const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
  Points X(n, D);
  VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < D; ++j) X(i, j) = rows[static_cast<size_t>(i)][static_cast<size_t>(j)];
    y(i) = losses[static_cast<size_t>(i)];
  }
  const double mean = y.mean();
  const double sd = std::sqrt((y.array() - mean).square().sum() / static_cast<double>(n));
  y = (y.array() - mean) / (sd > 0 ? sd : 1.0);

  // Two starts: the prior's centre and shorter lengthscales; the better posterior wins.
  VectorXd best_p;
  double best_f = std::numeric_limits<double>::infinity();
  for (double l0 : {1.0, 0.25}) {
    Hyper h0;
    h0.log_l = VectorXd::Constant(D, std::log(l0));
    VectorXd p = Minimise(X, y, h0.Pack());
    double f = Objective(X, y, p, nullptr);
    if (f < best_f || best_p.size() == 0) {
      best_f = f;
      best_p = p;
    }
  }
  const Hyper h = Hyper::Unpack(best_p);
  Posterior post(X, y, h);

  // The incumbent: the best posterior mean at a finished trial.
  double incumbent = std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; i < n; ++i) {
    double m, v;
    post.At(&X(i, 0), m, v);
    incumbent = std::min(incumbent, m);
  }
  // Kriging believer for running trials.
  Points Xa = X;
  VectorXd ya = y;
  if (!pending.empty()) {
    const Eigen::Index m = static_cast<Eigen::Index>(pending.size());
    Xa.conservativeResize(n + m, D);
    ya.conservativeResize(n + m);
    for (Eigen::Index i = 0; i < m; ++i) {
      for (Eigen::Index j = 0; j < D; ++j) Xa(n + i, j) = pending[static_cast<size_t>(i)][static_cast<size_t>(j)];
      double mu, v;
      post.At(&Xa(n + i, 0), mu, v);
      ya(n + i) = mu;
    }
  }
  Posterior acq_post(Xa, ya, h);
  const double noise = std::exp(h.log_noise);

  auto snap = [&](std::vector<double>& x) {
    for (size_t j = 0; j < dims.size(); ++j) {
      x[j] = std::clamp(x[j], 0.0, 1.0);
      if (dims[j]->integer()) {
        double internal = lo[j] + x[j] * span[j];
        double value = dims[j]->External(internal).get<double>();
        x[j] = (*dims[j]->Internal(Json(value)) - lo[j]) / span[j];
      }
    }
  };
  auto acquisition = [&](std::vector<double>& x) {
    snap(x);
    double mu, var;
    acq_post.At(x.data(), mu, var);
    double s = std::sqrt(var);
    // Augmented EI: where the noise is most of what is not known, sampling again teaches little.
    double penalty = std::log1p(-std::sqrt(noise / (var + noise)));
    return std::log(s) + LogH((incumbent - mu) / s) + penalty;
  };

  // Candidates: random points, and perturbations of the five best trials.
  std::vector<std::pair<double, std::vector<double>>> scored;
  auto consider = [&](std::vector<double> x) {
    double a = acquisition(x);
    scored.emplace_back(a, std::move(x));
  };
  const int random_points = 1024;
  for (int i = 0; i < random_points; ++i) {
    std::vector<double> x(dims.size());
    for (double& v : x) v = numeric::Uniform(rng, 0, 1);
    consider(std::move(x));
  }
  std::vector<Eigen::Index> order(static_cast<size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](Eigen::Index a, Eigen::Index b) { return y(a) < y(b); });
  for (size_t b = 0; b < std::min<size_t>(5, order.size()); ++b) {
    for (int i = 0; i < 64; ++i) {
      std::vector<double> x(dims.size());
      for (size_t j = 0; j < dims.size(); ++j) {
        x[j] = X(order[b], static_cast<Eigen::Index>(j)) + 0.05 * numeric::StandardNormal(rng);
      }
      consider(std::move(x));
    }
  }
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  // Pattern search from the three best.
  std::vector<double> best = scored.front().second;
  double best_a = scored.front().first;
  for (size_t s = 0; s < std::min<size_t>(3, scored.size()); ++s) {
    std::vector<double> x = scored[s].second;
    double a = scored[s].first;
    double step = 0.05;
    for (int round = 0; round < 40 && step > 1e-4; ++round) {
      bool improved = false;
      for (size_t j = 0; j < dims.size(); ++j) {
        double unit_step = dims[j]->integer() ? std::max(step, 1.0 / span[j]) : step;
        for (double sign : {1.0, -1.0}) {
          std::vector<double> t = x;
          t[j] += sign * unit_step;
          double ta = acquisition(t);
          if (ta > a + 1e-12) {
            x = std::move(t);
            a = ta;
            improved = true;
            break;
          }
        }
      }
      if (!improved) step *= 0.5;
    }
    if (a > best_a) {
      best_a = a;
      best = x;
    }
  }
  Json out = context;
  for (size_t j = 0; j < dims.size(); ++j) out[dims[j]->name] = dims[j]->External(lo[j] + best[j] * span[j]);
  (void)options;
  return out;
}

}  // namespace drover::search
