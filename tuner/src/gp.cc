#include "gp.h"

#include <LBFGSB.h>

#include <cmath>
#include <limits>

namespace hyperpack::tuner {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;
constexpr double kLog2Pi = 1.83787706640934548356;

// Matern-5/2 as a function of the scaled distance r: k = s (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r).
inline double Matern(double r, double s) {
  return s * (1.0 + kSqrt5 * r + (5.0 / 3.0) * r * r) * std::exp(-kSqrt5 * r);
}
// -(dk/dr) / r = s * 5/3 (1 + sqrt5 r) exp(-sqrt5 r): finite at r = 0, so gradients need no
// special case for coincident points.
inline double MaternSlope(double r, double s) {
  return s * (5.0 / 3.0) * (1.0 + kSqrt5 * r) * std::exp(-kSqrt5 * r);
}

// Squared scaled distances between the rows of a and b (each column divided by its length scale).
Eigen::MatrixXd ScaledSquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                                       const Eigen::VectorXd& inv_ls) {
  Eigen::MatrixXd za = a * inv_ls.asDiagonal();
  Eigen::MatrixXd zb = b * inv_ls.asDiagonal();
  Eigen::MatrixXd d2 = (-2.0 * za * zb.transpose()).eval();
  d2.colwise() += za.rowwise().squaredNorm();
  d2.rowwise() += zb.rowwise().squaredNorm().transpose();
  return d2.cwiseMax(0.0);
}

// Factors `k` in place into its lower Cholesky factor, adding jitter until it succeeds.
// Returns the jitter used, or a negative number on failure.
double CholeskyWithJitter(const Eigen::MatrixXd& k, double scale, Eigen::MatrixXd* chol) {
  const Eigen::Index n = k.rows();
  double jitter = 0.0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    Eigen::LLT<Eigen::MatrixXd> llt;
    if (jitter == 0.0) {
      llt.compute(k);
    } else {
      llt.compute(k + jitter * Eigen::MatrixXd::Identity(n, n));
    }
    if (llt.info() == Eigen::Success) {
      *chol = llt.matrixL();
      return jitter;
    }
    jitter = jitter == 0.0 ? 1e-8 * scale : jitter * 10.0;
    if (jitter > 1e-2 * scale) break;
  }
  return -1.0;
}

// -log p(theta) up to a constant, and its gradient in *grad: independent normals on the log
// length scales, the log signal and noise variances and the mean.
double NegLogPrior(const GpPrior& prior, int d, const Eigen::VectorXd& theta,
                   Eigen::VectorXd* grad) {
  double neg_log_prior = 0.0;
  *grad = Eigen::VectorXd::Zero(theta.size());
  auto normal = [&](int i, double mu, double sigma) {
    double z = (theta(i) - mu) / sigma;
    neg_log_prior += 0.5 * z * z;
    (*grad)(i) = z / sigma;
  };
  for (int i = 0; i < d; ++i) normal(i, prior.log_lengthscale_mu, prior.log_lengthscale_sigma);
  normal(d, prior.log_signal_mu, prior.log_signal_sigma);
  normal(d + 1, prior.log_noise_mu, prior.log_noise_sigma);
  normal(d + 2, 0.0, prior.mean_sigma);
  return neg_log_prior;
}

}  // namespace

Eigen::VectorXd GpHyper::Pack() const {
  const auto d = log_lengthscale.size();
  Eigen::VectorXd theta(d + 3);
  theta.head(d) = log_lengthscale;
  theta(d) = log_signal_var;
  theta(d + 1) = log_noise_var;
  theta(d + 2) = mean;
  return theta;
}

GpHyper GpHyper::Unpack(const Eigen::VectorXd& theta, int dims) {
  GpHyper h;
  h.log_lengthscale = theta.head(dims);
  h.log_signal_var = theta(dims);
  h.log_noise_var = theta(dims + 1);
  h.mean = theta(dims + 2);
  return h;
}

GpPrior GpPrior::ForDims(int dims, LengthScaleLevel level) {
  GpPrior p;
  const double log_median = level == LengthScaleLevel::kLong ? std::sqrt(2.0) : std::log(0.2);
  p.log_lengthscale_mu = log_median + 0.5 * std::log(std::max(dims, 1));
  return p;
}

GpHyper GpPrior::Mode(int dims) const {
  GpHyper h;
  h.log_lengthscale = Eigen::VectorXd::Constant(dims, log_lengthscale_mu);
  h.log_signal_var = log_signal_mu;
  h.log_noise_var = log_noise_mu;
  h.mean = 0.0;
  return h;
}

GaussianProcess::GaussianProcess(int dims, GpPrior prior)
    : dims_(dims), prior_(prior), hyper_(prior.Mode(dims)), x_(0, dims) {}

double GaussianProcess::Kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const {
  double r2 = ((a - b).array() / hyper_.log_lengthscale.array().exp()).square().sum();
  return Matern(std::sqrt(r2), std::exp(hyper_.log_signal_var));
}

Status GaussianProcess::SetData(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  x_ = x;
  y_ = y;
  return Factor();
}

Status GaussianProcess::SetDataAndHyper(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                        const GpHyper& hyper) {
  x_ = x;
  y_ = y;
  hyper_ = hyper;
  return Factor();
}

Status GaussianProcess::SetHyper(const GpHyper& hyper) {
  hyper_ = hyper;
  return Factor();
}

Status GaussianProcess::Factor() {
  const Eigen::Index n = x_.rows();
  if (n == 0) {
    chol_.resize(0, 0);
    alpha_.resize(0);
    return Status::Ok();
  }
  const double s = std::exp(hyper_.log_signal_var);
  Eigen::VectorXd inv_ls = (-hyper_.log_lengthscale).array().exp();
  Eigen::MatrixXd k = ScaledSquaredDistances(x_, x_, inv_ls).cwiseSqrt().unaryExpr([s](double r) {
    return Matern(r, s);
  });
  k.diagonal().array() += std::exp(hyper_.log_noise_var);
  jitter_ = CholeskyWithJitter(k, s, &chol_);
  if (jitter_ < 0)
    return Status::Numeric("kernel matrix not positive definite (n=", n, ") even with jitter");
  SetTargets(y_);
  return Status::Ok();
}

void GaussianProcess::SetTargets(const Eigen::VectorXd& y) {
  y_ = y;
  if (y_.size() == 0) return;
  Eigen::VectorXd r = y_.array() - hyper_.mean;
  auto l = chol_.triangularView<Eigen::Lower>();
  alpha_ = l.transpose().solve(l.solve(r));
}

Status GaussianProcess::Append(const Eigen::VectorXd& x, double y) {
  const Eigen::Index n = x_.rows();
  const double s = std::exp(hyper_.log_signal_var);
  Eigen::VectorXd inv_ls = (-hyper_.log_lengthscale).array().exp();
  Eigen::VectorXd kx(n);
  if (n > 0) {
    kx = ScaledSquaredDistances(x_, x.transpose(), inv_ls)
             .col(0)
             .cwiseSqrt()
             .unaryExpr([s](double r) { return Matern(r, s); });
  }
  double kxx = s + std::exp(hyper_.log_noise_var) + jitter_;
  Eigen::VectorXd row =
      n > 0 ? chol_.triangularView<Eigen::Lower>().solve(kx).eval() : Eigen::VectorXd();
  double d2 = kxx - row.squaredNorm();
  // A point (almost) on top of an existing one leaves nothing to factor: the same jitter as a
  // full factorisation would add keeps the factor valid.
  if (!(d2 > 1e-10 * s)) d2 = 1e-8 * s + std::max(d2, 0.0);
  x_.conservativeResize(n + 1, Eigen::NoChange);
  x_.row(n) = x.transpose();
  y_.conservativeResize(n + 1);
  y_(n) = y;
  chol_.conservativeResize(n + 1, n + 1);
  chol_.row(n).head(n) = row.transpose();
  chol_.col(n).head(n).setZero();
  chol_(n, n) = std::sqrt(d2);
  SetTargets(y_);
  return Status::Ok();
}

double GaussianProcess::NegLogPosterior(const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const {
  const int d = dims_;
  const Eigen::Index n = x_.rows();
  GpHyper h = GpHyper::Unpack(theta, d);
  const double s = std::exp(h.log_signal_var);
  const double noise = std::exp(h.log_noise_var);
  Eigen::VectorXd inv_ls = (-h.log_lengthscale).array().exp();

  Eigen::VectorXd prior_grad;
  const double neg_log_prior = NegLogPrior(prior_, d, theta, &prior_grad);
  if (n == 0) {
    if (grad) *grad = prior_grad;
    return neg_log_prior;
  }

  Eigen::MatrixXd r = ScaledSquaredDistances(x_, x_, inv_ls).cwiseSqrt();
  Eigen::MatrixXd kf = r.unaryExpr([s](double v) { return Matern(v, s); });
  Eigen::MatrixXd k = kf;
  k.diagonal().array() += noise;
  Eigen::MatrixXd chol;
  double jitter = CholeskyWithJitter(k, s, &chol);
  if (jitter < 0) {
    if (grad) grad->setZero(theta.size());
    return std::numeric_limits<double>::infinity();
  }
  auto l = chol.triangularView<Eigen::Lower>();
  Eigen::VectorXd resid = y_.array() - h.mean;
  Eigen::VectorXd alpha = l.transpose().solve(l.solve(resid));
  double nlml = 0.5 * resid.dot(alpha) + chol.diagonal().array().log().sum() + 0.5 * n * kLog2Pi;
  if (!grad) return nlml + neg_log_prior;

  // d nlml / d theta_j = -1/2 tr((alpha alpha^T - K^-1) dK/dtheta_j). K^-1 is formed here only
  // for this trace.
  Eigen::MatrixXd kinv = Eigen::MatrixXd::Identity(n, n);
  l.solveInPlace(kinv);
  l.transpose().solveInPlace(kinv);
  Eigen::MatrixXd a = alpha * alpha.transpose() - kinv;

  grad->setZero(theta.size());
  // Length scales: dK_ij/dlog l_k = slope(r_ij) (x_ik - x_jk)^2 / l_k^2.
  Eigen::MatrixXd b = a.cwiseProduct(r.unaryExpr([s](double v) { return MaternSlope(v, s); }));
  Eigen::MatrixXd z = x_ * inv_ls.asDiagonal();
  Eigen::VectorXd b_rows = b.rowwise().sum();
  Eigen::MatrixXd bz = b * z;
  for (int k_dim = 0; k_dim < d; ++k_dim) {
    // sum_ij b_ij (z_ik - z_jk)^2 = 2 sum_i z_ik^2 (B1)_i - 2 z_k^T B z_k   (B symmetric)
    double sum = 2.0 * z.col(k_dim).array().square().matrix().dot(b_rows) -
                 2.0 * z.col(k_dim).dot(bz.col(k_dim));
    (*grad)(k_dim) = -0.5 * sum;
  }
  (*grad)(d) = -0.5 * a.cwiseProduct(kf).sum();
  (*grad)(d + 1) = -0.5 * noise * a.trace();
  (*grad)(d + 2) = -alpha.sum();
  *grad += prior_grad;
  return nlml + neg_log_prior;
}

Status GaussianProcess::Fit(const FitOptions& options, std::mt19937_64& rng) {
  const int d = dims_;
  const int p = GpHyper::Size(d);
  Eigen::VectorXd lb(p), ub(p);
  lb.head(d).setConstant(prior_.min_log_lengthscale);
  ub.head(d).setConstant(prior_.max_log_lengthscale);
  lb(d) = prior_.min_log_signal;
  ub(d) = prior_.max_log_signal;
  lb(d + 1) = prior_.min_log_noise;
  ub(d + 1) = prior_.max_log_noise;
  lb(d + 2) = -prior_.max_abs_mean;
  ub(d + 2) = prior_.max_abs_mean;

  std::vector<Eigen::VectorXd> starts = {hyper_.Pack(), prior_.Mode(d).Pack()};
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int i = 0; i < options.restarts; ++i) {
    Eigen::VectorXd t = prior_.Mode(d).Pack();
    for (int j = 0; j < d; ++j) t(j) += prior_.log_lengthscale_sigma * normal(rng);
    t(d) += 0.5 * normal(rng);
    starts.push_back(t);
  }

  LBFGSpp::LBFGSBParam<double> param;
  param.max_iterations = options.max_iterations;
  param.epsilon = 1e-5;
  param.epsilon_rel = 1e-5;
  param.max_linesearch = 30;
  LBFGSpp::LBFGSBSolver<double> solver(param);
  auto objective = [this](const Eigen::VectorXd& t, Eigen::VectorXd& g) {
    double f = NegLogPosterior(t, &g);
    if (!std::isfinite(f)) g.setZero();
    return std::isfinite(f) ? f : 1e300;
  };

  Eigen::VectorXd best = hyper_.Pack().cwiseMax(lb).cwiseMin(ub);
  double best_f = NegLogPosterior(best, nullptr);
  for (Eigen::VectorXd t : starts) {
    t = t.cwiseMax(lb).cwiseMin(ub);
    double f = 0;
    try {
      solver.minimize(objective, t, f, lb, ub);
    } catch (const std::exception&) {
      // A line search that cannot make progress still leaves a usable point in t.
      f = NegLogPosterior(t, nullptr);
    }
    if (std::isfinite(f) && (!std::isfinite(best_f) || f < best_f)) {
      best_f = f;
      best = t;
    }
  }
  if (!std::isfinite(best_f))
    return Status::Numeric("no hyperparameters give a positive definite kernel matrix (n=", size(),
                           ")");
  return SetHyper(GpHyper::Unpack(best, d));
}

void GaussianProcess::LeaveOneOut(Eigen::VectorXd* mean, Eigen::VectorXd* var) const {
  const Eigen::Index n = x_.rows();
  // Column i of L^-1 is L \ e_i; [K^-1]_ii = ||L^-1 e_i||^2 sums column i of (L^-1)^T L^-1.
  const Eigen::MatrixXd l_inv =
      chol_.triangularView<Eigen::Lower>().solve(Eigen::MatrixXd::Identity(n, n));
  const Eigen::VectorXd k_inv_diag = l_inv.colwise().squaredNorm().transpose();
  *var = k_inv_diag.cwiseInverse();
  *mean = y_.array() - alpha_.array() * var->array();
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean,
                              Eigen::VectorXd* var) const {
  const double s = std::exp(hyper_.log_signal_var);
  const Eigen::Index m = xs.rows();
  if (x_.rows() == 0) {
    *mean = Eigen::VectorXd::Constant(m, hyper_.mean);
    *var = Eigen::VectorXd::Constant(m, s);
    return;
  }
  Eigen::VectorXd inv_ls = (-hyper_.log_lengthscale).array().exp();
  Eigen::MatrixXd ks = ScaledSquaredDistances(x_, xs, inv_ls).cwiseSqrt().unaryExpr([s](double r) {
    return Matern(r, s);
  });  // n x m
  *mean = (ks.transpose() * alpha_).array() + hyper_.mean;
  ks = chol_.triangularView<Eigen::Lower>().solve(ks).eval();
  *var = (s - ks.colwise().squaredNorm().transpose().array()).cwiseMax(1e-12 * s);
}

void GaussianProcess::PredictWithGradient(const Eigen::VectorXd& x, double* mean, double* var,
                                          Eigen::VectorXd* dmean, Eigen::VectorXd* dvar) const {
  const double s = std::exp(hyper_.log_signal_var);
  const Eigen::Index n = x_.rows();
  Eigen::VectorXd inv_ls2 = (-2.0 * hyper_.log_lengthscale).array().exp();
  if (n == 0) {
    *mean = hyper_.mean;
    *var = s;
    dmean->setZero(dims_);
    dvar->setZero(dims_);
    return;
  }
  Eigen::MatrixXd diff = (-x_).rowwise() + x.transpose();  // x - x_i, n x d
  Eigen::VectorXd r = (diff * inv_ls2.asDiagonal()).cwiseProduct(diff).rowwise().sum().cwiseSqrt();
  Eigen::VectorXd k = r.unaryExpr([s](double v) { return Matern(v, s); });
  Eigen::VectorXd slope = r.unaryExpr([s](double v) { return MaternSlope(v, s); });
  // dk_i/dx = -slope_i (x - x_i) / l^2
  Eigen::MatrixXd dk = -(slope.asDiagonal() * diff) * inv_ls2.asDiagonal();  // n x d
  *mean = hyper_.mean + k.dot(alpha_);
  *dmean = dk.transpose() * alpha_;
  auto l = chol_.triangularView<Eigen::Lower>();
  Eigen::VectorXd v = l.solve(k);
  *var = s - v.squaredNorm();
  Eigen::VectorXd w = chol_.transpose().triangularView<Eigen::Upper>().solve(v);
  *dvar = -2.0 * dk.transpose() * w;
  if (*var < 1e-12 * s) {
    *var = 1e-12 * s;
    dvar->setZero();
  }
}

}  // namespace hyperpack::tuner
