// Gaussian-process Bayesian optimisation for spaces without conditions (docs/search.md, "gp").
//
// - Inputs: each number's internal coordinate (log for log scales) scaled to [0, 1]; integers
//   are rounded before the acquisition is evaluated, so it sees only values that can run. A
//   choice is the index of its value, at distance 0 from the same value and 1 from any other
//   (before its lengthscale), as in Optuna's GPSampler.
// - Outputs: the losses of finished trials, clipped to Tukey's far fences (RobustLosses: one
//   extreme value cannot squeeze the rest together) and standardised; failed trials count as the
//   worst loss. At most kGpMaxFitted trials (the best half and the newest) are fitted, and at
//   most kGpMaxPending running ones believed, so a proposal's cost is bounded (GpFitSet).
// - Kernel: Matern 5/2 with one lengthscale per parameter (automatic relevance), a signal
//   variance and a noise variance, fitted by maximum a posteriori with L-BFGS. The priors are
//   Optuna's GPSampler's: -(0.1/l^-2 + 0.1 l^-2) on each inverse squared lengthscale,
//   Gamma(2, 1) on the signal variance and Gamma(1.1, 30) on the noise variance.
// - Acquisition: log expected improvement over the best posterior mean at an observed point
//   (robust to noise), computed in log space so it keeps its order far from the optimum.
//   Augmented (Huang et al. 2006): multiplied by 1 - noise sd / sqrt(variance + noise), so that
//   a noisy objective does not keep sampling where only the noise is left to learn.
//   Maximised over random points and perturbations of the best trials (a choice kept, or drawn
//   again one time in five), then refined by a pattern search (a number moves by a step either
//   way, a choice tries each other value).
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

// Which coordinates are choices (their value the index of the choice). A choice's distance is 0
// between equal values and 1 between different ones, before its lengthscale (as Optuna's
// GPSampler has it); a number's is the difference of its coordinates in [0, 1].
struct Layout {
  std::vector<bool> choice;
  std::vector<int> levels;  // a choice's number of values
};

// The squared distance along coordinate i, before the lengthscale.
inline double Diff2(const Layout& lay, Eigen::Index i, double a, double b) {
  if (lay.choice[static_cast<size_t>(i)]) return a == b ? 0.0 : 1.0;
  return (a - b) * (a - b);
}

double Kernel(const double* a, const double* b, const VectorXd& inv_l, double s2,
              const Layout& lay) {
  double r2 = 0;
  for (Eigen::Index i = 0; i < inv_l.size(); ++i) r2 += Diff2(lay, i, a[i], b[i]) * inv_l(i) * inv_l(i);
  return s2 * Matern(std::sqrt(r2));
}

// Row-major points: X(i, j).
using Points = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

MatrixXd Gram(const Points& X, const VectorXd& inv_l, double s2, const Layout& lay) {
  const Eigen::Index n = X.rows();
  MatrixXd K(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    K(i, i) = s2;
    for (Eigen::Index j = 0; j < i; ++j) {
      K(i, j) = K(j, i) = Kernel(&X(i, 0), &X(j, 0), inv_l, s2, lay);
    }
  }
  return K;
}

// Points as features whose squared Euclidean distance is the kernel's r^2: numbers scaled by
// their inverse lengthscale, each choice one-hot with inv_l / sqrt(2) (two different one-hots
// are inv_l^2 apart).
MatrixXd Features(const Points& P, const VectorXd& inv_l, const Layout& lay) {
  Eigen::Index width = 0;
  for (size_t j = 0; j < lay.choice.size(); ++j) width += lay.choice[j] ? lay.levels[j] : 1;
  MatrixXd F = MatrixXd::Zero(P.rows(), width);
  Eigen::Index col = 0;
  for (Eigen::Index j = 0; j < P.cols(); ++j) {
    if (!lay.choice[static_cast<size_t>(j)]) {
      F.col(col++) = P.col(j) * inv_l(j);
      continue;
    }
    const int levels = lay.levels[static_cast<size_t>(j)];
    for (Eigen::Index i = 0; i < P.rows(); ++i) {
      const int v = std::clamp(static_cast<int>(std::lround(P(i, j))), 0, levels - 1);
      F(i, col + v) = inv_l(j) * M_SQRT1_2;
    }
    col += levels;
  }
  return F;
}

// What the fit needs of the data, computed once per fit: the standardised losses and, for each
// pair i > j (in the order of the loops below), the squared difference along each parameter.
// A lengthscale only rescales these, so every evaluation of the objective is a product of this
// matrix with the inverse squared lengthscales, then element-wise work that Eigen vectorises.
struct FitData {
  FitData(const Points& X, VectorXd y_in, const Layout& lay) : y(std::move(y_in)), n(X.rows()) {
    const Eigen::Index d = X.cols();
    diff2.resize(n * (n - 1) / 2, d);
    Eigen::Index row = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j, ++row) {
        for (Eigen::Index k = 0; k < d; ++k) {
          diff2(row, k) = Diff2(lay, k, X(i, k), X(j, k));
        }
      }
    }
  }
  VectorXd y;
  Eigen::Index n;
  MatrixXd diff2;  // pairs x parameters
};

// The negative log posterior of the hyperparameters and its gradient.
double Objective(const FitData& data, const VectorXd& p, VectorXd* grad) {
  const Hyper h = Hyper::Unpack(p);
  const Eigen::Index n = data.n, d = data.diff2.cols();
  const VectorXd& y = data.y;
  const VectorXd inv_l2 = (-2 * h.log_l.array()).exp();
  const double s2 = std::exp(h.log_s2), noise = std::exp(h.log_noise);
  const Eigen::ArrayXd r2 = (data.diff2 * inv_l2).array();
  const Eigen::ArrayXd r = r2.sqrt();
  const Eigen::ArrayXd e = (-kSqrt5 * r).exp();
  const Eigen::ArrayXd kv = s2 * (1 + kSqrt5 * r + 5.0 / 3.0 * r2) * e;
  MatrixXd K(n, n);
  Eigen::Index row = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < i; ++j, ++row) K(i, j) = kv(row);
    K(i, i) = s2 + noise;
  }
  Eigen::LLT<MatrixXd> llt(K);  // reads the lower triangle only
  if (llt.info() != Eigen::Success) return std::numeric_limits<double>::infinity();
  const VectorXd alpha = llt.solve(y);
  const MatrixXd& L = llt.matrixLLT();
  double lml = -0.5 * y.dot(alpha) - L.diagonal().array().log().sum() -
               0.5 * static_cast<double>(n) * std::log(2 * M_PI);
  double prior = 0;
  for (Eigen::Index i = 0; i < d; ++i) prior -= 0.1 / inv_l2(i) + 0.1 * inv_l2(i);
  prior += h.log_s2 - s2;                   // Gamma(2, 1), in log s2
  prior += 0.1 * h.log_noise - 30 * noise;  // Gamma(1.1, 30)
  if (grad) {
    // W = alpha alpha^T - K^-1, with K^-1 = L^-T L^-1 (lower triangle).
    MatrixXd Linv = MatrixXd::Identity(n, n);
    llt.matrixL().solveInPlace(Linv);
    MatrixXd Kinv = MatrixXd::Zero(n, n);
    Kinv.selfadjointView<Eigen::Lower>().rankUpdate(Linv.transpose());
    Eigen::ArrayXd w(r2.size());
    row = 0;
    double trace = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < i; ++j, ++row) w(row) = alpha(i) * alpha(j) - Kinv(i, j);
      trace += alpha(i) * alpha(i) - Kinv(i, i);
    }
    grad->setZero(p.size());
    // d K_ij / d log l_k = s2 (5/3)(1 + sqrt5 r) e^(-sqrt5 r) (x_ik - x_jk)^2 / l_k^2; each pair
    // stands for (i, j) and (j, i), the 1/2 of the trace formula cancelling the 2.
    const Eigen::ArrayXd common = s2 * 5.0 / 3.0 * (1 + kSqrt5 * r) * e;
    const VectorXd wc = (w * common).matrix();
    grad->head(d) = (data.diff2.transpose() * wc).cwiseProduct(inv_l2);
    (*grad)(d) = (w * kv).sum() + 0.5 * trace * s2;
    (*grad)(d + 1) = 0.5 * noise * trace;
    // Priors.
    for (Eigen::Index i = 0; i < d; ++i) (*grad)(i) += -(0.2 / inv_l2(i) - 0.2 * inv_l2(i));
    (*grad)(d) += 1 - s2;
    (*grad)(d + 1) += 0.1 - 30 * noise;
    if (p(d + 1) < std::log(kMinNoise)) (*grad)(d + 1) = 0;
    *grad = -*grad;
  }
  return -(lml + prior);
}

// L-BFGS with a backtracking line search: the minimum of Objective from `p`.
VectorXd Minimise(const FitData& data, VectorXd p) {
  constexpr int kMemory = 8, kIterations = 60;
  VectorXd g;
  double f = Objective(data, p, &g);
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
      nf = Objective(data, np, &ng);
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
  Posterior(const Points& X, const VectorXd& y, const Hyper& h, const Layout& lay)
      : X_(X), inv_l_((-h.log_l.array()).exp()), s2_(std::exp(h.log_s2)), lay_(lay) {
    MatrixXd K = Gram(X, inv_l_, s2_, lay_);
    K.diagonal().array() += std::exp(h.log_noise);
    // Repeated configs (frequent where every parameter is a choice) can leave K singular to
    // rounding: more jitter until it factorises.
    for (double jitter = 1e-10; jitter <= s2_; jitter *= 100) {
      K.diagonal().array() += jitter;
      llt_.compute(K);
      if (llt_.info() == Eigen::Success) break;
    }
    alpha_ = llt_.solve(y);
  }
  // Means and variances at the rows of C, together: the kernel from one product of the
  // scaled points, the variances from one triangular solve over all of them.
  void AtMany(const Points& C, VectorXd& mean, VectorXd& var) const {
    const Eigen::Index m = C.rows(), n = X_.rows();
    const MatrixXd Cs = Features(C, inv_l_, lay_);
    const MatrixXd Xs = Features(X_, inv_l_, lay_);
    const VectorXd cn = Cs.rowwise().squaredNorm(), xn = Xs.rowwise().squaredNorm();
    MatrixXd r2 = -2.0 * (Cs * Xs.transpose());  // m x n
    r2.colwise() += cn;
    r2.rowwise() += xn.transpose();
    const Eigen::ArrayXXd r2a = r2.array().max(0.0);
    const Eigen::ArrayXXd r = r2a.sqrt();
    const MatrixXd Ks = (s2_ * (1 + kSqrt5 * r + 5.0 / 3.0 * r2a) * (-kSqrt5 * r).exp()).matrix();
    mean = Ks * alpha_;
    MatrixXd V = Ks.transpose();  // n x m
    llt_.matrixL().solveInPlace(V);
    var = (s2_ - V.colwise().squaredNorm().transpose().array()).max(1e-12).matrix();
    (void)m;
    (void)n;
  }
  void At(const double* x, double& mean, double& var) const {
    const Eigen::Index n = X_.rows();
    VectorXd k(n);
    for (Eigen::Index i = 0; i < n; ++i) k(i) = Kernel(x, &X_(i, 0), inv_l_, s2_, lay_);
    mean = k.dot(alpha_);
    VectorXd v = llt_.matrixL().solve(k);
    var = std::max(s2_ - v.squaredNorm(), 1e-12);
  }

 private:
  Points X_;
  VectorXd inv_l_;
  double s2_;
  Layout lay_;
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

// The process fitted to a history's finished and failed trials: what every proposal made
// from that history shares, whatever the running trials.
class GpModel {
 public:
  GpModel(const Space& space, const std::vector<Observation>& history) {
    for (const Dimension& d : space.dims) {
      dims_.push_back(&d);
      lo_.push_back(d.InternalLow());
      span_.push_back(d.InternalHigh() - d.InternalLow());
      lay_.choice.push_back(!d.numeric());
      lay_.levels.push_back(d.numeric() ? 0 : static_cast<int>(d.choices.size()));
    }
    std::vector<std::vector<double>> rows, failed;
    std::vector<double> losses, row;
    // Bounded, so one proposal's cost is whatever the search was told (sampler.h, GpFitSet).
    for (size_t i : GpFitSet(history)) {
      const Observation& o = history[i];
      if (!Unit(o.params, row)) continue;
      if (o.state == TrialState::kComplete || o.state == TrialState::kPruned) {
        rows.push_back(row);
        losses.push_back(o.loss);
      } else if (o.state == TrialState::kFailed) {
        failed.push_back(row);
      }
    }
    if (rows.size() < 2) return;  // nothing to fit: proposals are random
    // One extreme value must not squeeze the others together (sampler.h, RobustLosses).
    losses = RobustLosses(std::move(losses));
    fitted_points_ = rows.size() + failed.size();
    const double worst = *std::max_element(losses.begin(), losses.end());
    for (auto& f : failed) {
      rows.push_back(f);
      losses.push_back(worst);
    }
    const Eigen::Index n = static_cast<Eigen::Index>(rows.size()), D = Dims();
    X_.resize(n, D);
    y_.resize(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < D; ++j) X_(i, j) = rows[static_cast<size_t>(i)][static_cast<size_t>(j)];
      y_(i) = losses[static_cast<size_t>(i)];
    }
    const double mean = y_.mean();
    const double sd = std::sqrt((y_.array() - mean).square().sum() / static_cast<double>(n));
    y_ = (y_.array() - mean) / (sd > 0 ? sd : 1.0);

    // Two starts: the prior's centre and shorter lengthscales; the better posterior wins.
    VectorXd best_p;
    double best_f = std::numeric_limits<double>::infinity();
    const FitData data(X_, y_, lay_);
    for (double l0 : {1.0, 0.25}) {
      Hyper h0;
      h0.log_l = VectorXd::Constant(D, std::log(l0));
      VectorXd p = Minimise(data, h0.Pack());
      double f = Objective(data, p, nullptr);
      if (f < best_f || best_p.size() == 0) {
        best_f = f;
        best_p = p;
      }
    }
    h_ = Hyper::Unpack(best_p);
    post_.emplace(X_, y_, h_, lay_);
    // The incumbent: the best posterior mean at a finished trial.
    VectorXd m, v;
    post_->AtMany(X_, m, v);
    incumbent_ = m.minCoeff();
    fitted_ = true;
  }

  bool fitted() const { return fitted_; }
  size_t fitted_points() const { return fitted_points_; }

  // Coordinates of a trial: in [0, 1] for numbers, the index for choices; false when it lacks a
  // parameter.
  bool Unit(const Json& params, std::vector<double>& row) const {
    row.assign(dims_.size(), 0);
    for (size_t j = 0; j < dims_.size(); ++j) {
      auto it = params.find(dims_[j]->name);
      if (it == params.end()) return false;
      std::optional<double> x = dims_[j]->Internal(*it);
      if (!x) return false;
      row[j] = lay_.choice[j] ? *x : (*x - lo_[j]) / span_[j];
    }
    return true;
  }

  // The next proposal given the running trials (unit coordinates).
  Json Acquire(const std::vector<std::vector<double>>& pending, const Json& context,
               std::mt19937_64& rng) const {
    const Eigen::Index n = X_.rows(), D = Dims();
    // Kriging believer for running trials.
    Points Xa = X_;
    VectorXd ya = y_;
    if (!pending.empty()) {
      const Eigen::Index m = static_cast<Eigen::Index>(pending.size());
      Points P(m, D);
      for (Eigen::Index i = 0; i < m; ++i) {
        for (Eigen::Index j = 0; j < D; ++j) P(i, j) = pending[static_cast<size_t>(i)][static_cast<size_t>(j)];
      }
      VectorXd mu, v;
      post_->AtMany(P, mu, v);
      Xa.conservativeResize(n + m, D);
      ya.conservativeResize(n + m);
      Xa.bottomRows(m) = P;
      ya.tail(m) = mu;
    }
    const Posterior acq_post(Xa, ya, h_, lay_);
    const double noise = std::exp(h_.log_noise);

    auto snap = [&](double* x) {
      for (size_t j = 0; j < dims_.size(); ++j) {
        if (lay_.choice[j]) {
          x[j] = std::clamp(std::round(x[j]), 0.0, static_cast<double>(lay_.levels[j] - 1));
          continue;
        }
        x[j] = std::clamp(x[j], 0.0, 1.0);
        if (dims_[j]->integer()) {
          double internal = lo_[j] + x[j] * span_[j];
          double value = dims_[j]->External(internal).get<double>();
          x[j] = (*dims_[j]->Internal(Json(value)) - lo_[j]) / span_[j];
        }
      }
    };
    // Log EI, augmented: where the noise is most of what is not known, sampling again teaches
    // little.
    auto score = [&](double mu, double var) {
      const double s = std::sqrt(var);
      const double penalty = std::log1p(-std::sqrt(noise / (var + noise)));
      const double a = std::log(s) + LogH((incumbent_ - mu) / s) + penalty;
      // Never NaN: the candidates are sorted by it.
      return std::isnan(a) ? -std::numeric_limits<double>::infinity() : a;
    };
    auto acquisition = [&](std::vector<double>& x) {
      snap(x.data());
      double mu, var;
      acq_post.At(x.data(), mu, var);
      return score(mu, var);
    };

    // Candidates: random points, and perturbations of the five best trials, scored together.
    constexpr int kRandomPoints = 1024, kBest = 5, kPerturbations = 64;
    const Eigen::Index best_count = std::min<Eigen::Index>(kBest, n);
    Points C(kRandomPoints + best_count * kPerturbations, D);
    auto random_coordinate = [&](Eigen::Index j) {
      if (!lay_.choice[static_cast<size_t>(j)]) return numeric::Uniform(rng, 0, 1);
      const int levels = lay_.levels[static_cast<size_t>(j)];
      return std::floor(numeric::Uniform(rng, 0, levels - 1e-9));
    };
    for (Eigen::Index i = 0; i < kRandomPoints; ++i) {
      for (Eigen::Index j = 0; j < D; ++j) C(i, j) = random_coordinate(j);
    }
    std::vector<Eigen::Index> order(static_cast<size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](Eigen::Index a, Eigen::Index b) { return y_(a) < y_(b); });
    Eigen::Index row = kRandomPoints;
    for (Eigen::Index b = 0; b < best_count; ++b) {
      for (int i = 0; i < kPerturbations; ++i, ++row) {
        for (Eigen::Index j = 0; j < D; ++j) {
          const double at = X_(order[static_cast<size_t>(b)], j);
          if (lay_.choice[static_cast<size_t>(j)]) {
            // A choice stays, or (one time in five) is drawn again.
            C(row, j) = numeric::Uniform(rng, 0, 1) < 0.2 ? random_coordinate(j) : at;
          } else {
            C(row, j) = at + 0.05 * numeric::StandardNormal(rng);
          }
        }
      }
    }
    for (Eigen::Index i = 0; i < C.rows(); ++i) snap(&C(i, 0));
    VectorXd mu, var;
    acq_post.AtMany(C, mu, var);
    std::vector<std::pair<double, Eigen::Index>> scored;
    scored.reserve(static_cast<size_t>(C.rows()));
    for (Eigen::Index i = 0; i < C.rows(); ++i) scored.emplace_back(score(mu(i), var(i)), i);
    std::sort(scored.begin(), scored.end(),
              [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    // Pattern search from the three best.
    auto row_of = [&](Eigen::Index i) { return std::vector<double>(&C(i, 0), &C(i, 0) + D); };
    std::vector<double> best = row_of(scored.front().second);
    double best_a = scored.front().first;
    for (size_t s = 0; s < std::min<size_t>(3, scored.size()); ++s) {
      std::vector<double> x = row_of(scored[s].second);
      double a = scored[s].first;
      double step = 0.05;
      for (int round = 0; round < 40 && step > 1e-4; ++round) {
        bool improved = false;
        for (size_t j = 0; j < dims_.size(); ++j) {
          // A number moves by the step either way; a choice tries each other value.
          std::vector<double> moves;
          if (lay_.choice[j]) {
            for (int v = 0; v < lay_.levels[j]; ++v) {
              if (v != static_cast<int>(x[j])) moves.push_back(v - x[j]);
            }
          } else {
            const double unit_step = dims_[j]->integer() ? std::max(step, 1.0 / span_[j]) : step;
            moves = {unit_step, -unit_step};
          }
          for (double move : moves) {
            std::vector<double> t = x;
            t[j] += move;
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
    for (size_t j = 0; j < dims_.size(); ++j) {
      out[dims_[j]->name] =
          dims_[j]->External(lay_.choice[j] ? best[j] : lo_[j] + best[j] * span_[j]);
    }
    return out;
  }

 private:
  Eigen::Index Dims() const { return static_cast<Eigen::Index>(dims_.size()); }

  std::vector<const Dimension*> dims_;
  std::vector<double> lo_, span_;
  Layout lay_;
  Points X_;
  VectorXd y_;
  Hyper h_;
  std::optional<Posterior> post_;
  double incumbent_ = 0;
  bool fitted_ = false;
  size_t fitted_points_ = 0;
};

// The newest kGpMaxPending running trials of a history (oldest first), in unit coordinates:
// each believed value makes the acquisition's process one point larger.
std::vector<std::vector<double>> Pending(const GpModel& model, const std::vector<Observation>& history) {
  std::vector<const Observation*> running;
  for (const Observation& o : history) {
    if (o.state == TrialState::kRunning) running.push_back(&o);
  }
  std::stable_sort(running.begin(), running.end(),
                   [](const Observation* a, const Observation* b) { return a->number < b->number; });
  if (running.size() > kGpMaxPending) running.erase(running.begin(), running.end() - kGpMaxPending);
  std::vector<std::vector<double>> pending;
  std::vector<double> row;
  for (const Observation* o : running) {
    if (model.Unit(o->params, row)) pending.push_back(row);
  }
  return pending;
}

// A batch's own proposals join the pending ones; the oldest give way beyond kGpMaxPending.
void AddPending(std::vector<std::vector<double>>& pending, const std::vector<double>& row) {
  pending.push_back(row);
  if (pending.size() > kGpMaxPending) pending.erase(pending.begin());
}

}  // namespace

size_t GpFittedPoints(const Space& space, const std::vector<Observation>& history) {
  return GpModel(space, history).fitted_points();
}

Json ProposeGp(const SamplerOptions& options, const Space& space, const Json& context,
               const std::vector<Observation>& history, std::mt19937_64& rng) {
  (void)options;
  const GpModel model(space, history);
  if (!model.fitted()) return ProposeRandom(space, context, rng);
  return model.Acquire(Pending(model, history), context, rng);
}

std::vector<Json> ProposeGpEach(const SamplerOptions& options, const Space& space,
                                const std::vector<Ask>& asks, std::vector<Observation> history) {
  (void)options;
  const GpModel model(space, history);
  std::vector<std::vector<double>> pending = Pending(model, history);
  std::vector<Json> out;
  std::vector<double> row;
  for (const Ask& ask : asks) {
    std::mt19937_64 rng(ask.seed);
    Json p = model.fitted() ? model.Acquire(pending, ask.context, rng)
                            : ProposeRandom(space, ask.context, rng);
    if (model.Unit(p, row)) AddPending(pending, row);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace drover::search
