#include "gp.h"

#include <LBFGSB.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace hyperpack::tuner {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;
constexpr double kLog2Pi = 1.83787706640934548356;
// Warped coordinates are first squeezed into [kWarpMargin, 1 - kWarpMargin]: at 0 or 1 the
// Kumaraswamy CDF's derivatives are infinite for a or b below 1.
constexpr double kWarpMargin = 1e-6;

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

// The Kumaraswamy CDF w = 1 - (1 - u^a)^b at u = the squeezed x, with its derivatives in x,
// log a and log b. Powers go through exp/expm1 of logs, so that u^a near 1 keeps its digits.
struct WarpedCoordinate {
  double w, dw_dx, dw_dlog_a, dw_dlog_b;
};
WarpedCoordinate Kumaraswamy(double x, double log_a, double log_b) {
  const double a = std::exp(log_a), b = std::exp(log_b);
  double u = kWarpMargin + (1.0 - 2.0 * kWarpMargin) * x;
  double du_dx = 1.0 - 2.0 * kWarpMargin;
  if (!(u > kWarpMargin) || !(u < 1.0 - kWarpMargin)) {
    u = std::clamp(u, kWarpMargin, 1.0 - kWarpMargin);  // outside the cube: flat
    du_dx = 0.0;
  }
  const double log_u = std::log(u);
  const double ua = std::exp(a * log_u);
  const double q = -std::expm1(a * log_u);  // 1 - u^a, in (0, 1)
  const double log_q = std::log(q);
  const double q_b1 = std::exp((b - 1.0) * log_q);
  WarpedCoordinate c;
  c.w = -std::expm1(b * log_q);
  c.dw_dx = a * b * ua / u * q_b1 * du_dx;
  c.dw_dlog_a = a * b * q_b1 * ua * log_u;
  c.dw_dlog_b = -b * q * q_b1 * log_q;
  return c;
}

// Rows of x with the dimensions in `dims` warped by h's parameters; with `d_log_a` and
// `d_log_b` (n x w), the derivatives of each warped coordinate in its parameters, and with
// `d_x` (n x d), in x itself (1 for a dimension not warped).
struct WarpDerivatives {
  Eigen::MatrixXd d_log_a, d_log_b, d_x;
};
Eigen::MatrixXd Warp(const Eigen::MatrixXd& x, const std::vector<int>& dims, const GpHyper& h,
                     WarpDerivatives* deriv) {
  Eigen::MatrixXd w = x;
  const Eigen::Index n = x.rows(), k = static_cast<Eigen::Index>(dims.size());
  if (deriv) {
    deriv->d_log_a.resize(n, k);
    deriv->d_log_b.resize(n, k);
    deriv->d_x = Eigen::MatrixXd::Ones(n, x.cols());
  }
  for (Eigen::Index j = 0; j < k; ++j) {
    const int dim = dims[j];
    for (Eigen::Index i = 0; i < n; ++i) {
      WarpedCoordinate c = Kumaraswamy(x(i, dim), h.log_warp_a(j), h.log_warp_b(j));
      w(i, dim) = c.w;
      if (!deriv) continue;
      deriv->d_log_a(i, j) = c.dw_dlog_a;
      deriv->d_log_b(i, j) = c.dw_dlog_b;
      deriv->d_x(i, dim) = c.dw_dx;
    }
  }
  return w;
}

// The negative log marginal likelihood's gradient in the log length scales (theta's first d
// entries) and the warp parameters (from d + 3), from B = (alpha alpha^T - K^-1) o slope(r) and
// the scaled warped inputs z = w / l. Both move K only through the distances:
// - length scale k: dK_ij/dlog l_k = slope_ij (z_ik - z_jk)^2, and with B symmetric
//   sum_ij B_ij (z_ik - z_jk)^2 = 2 sum_i z_ik^2 (B1)_i - 2 z_k^T B z_k;
// - a warp parameter of dimension k moves w_ik by w'_i: dK_ij = -slope_ij (w_ik - w_jk)
//   (w'_i - w'_j) / l_k^2, so d nlml = (1 / l_k) [sum_i z_ik w'_i (B1)_i - w'^T B z_k].
void AddInputGradients(const Eigen::MatrixXd& b, const Eigen::MatrixXd& z,
                       const Eigen::VectorXd& inv_ls, const std::vector<int>& warp_dims,
                       const WarpDerivatives& warp, Eigen::VectorXd* grad) {
  const Eigen::Index d = z.cols();
  const int nw = static_cast<int>(warp_dims.size());
  const Eigen::VectorXd b_rows = b.rowwise().sum();
  const Eigen::MatrixXd bz = b * z;
  for (Eigen::Index k = 0; k < d; ++k) {
    (*grad)(k) = -(z.col(k).array().square().matrix().dot(b_rows) - z.col(k).dot(bz.col(k)));
  }
  for (int j = 0; j < nw; ++j) {
    const int k = warp_dims[j];
    const Eigen::VectorXd zb = z.col(k).cwiseProduct(b_rows);
    for (const auto& [deriv, at] :
         {std::pair{&warp.d_log_a, d + 3 + j}, std::pair{&warp.d_log_b, d + 3 + nw + j}}) {
      (*grad)(at) = inv_ls(k) * (deriv->col(j).dot(zb) - deriv->col(j).dot(bz.col(k)));
    }
  }
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
// length scales, the log signal and noise variances, the mean and the log warp parameters.
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
  for (Eigen::Index i = d + 3; i < theta.size(); ++i) normal(i, 0.0, prior.log_warp_sigma);
  return neg_log_prior;
}

}  // namespace

Eigen::VectorXd GpHyper::Pack() const {
  const auto d = log_lengthscale.size();
  const auto w = log_warp_a.size();
  Eigen::VectorXd theta(d + 3 + 2 * w);
  theta.head(d) = log_lengthscale;
  theta(d) = log_signal_var;
  theta(d + 1) = log_noise_var;
  theta(d + 2) = mean;
  theta.segment(d + 3, w) = log_warp_a;
  theta.tail(w) = log_warp_b;
  return theta;
}

GpHyper GpHyper::Unpack(const Eigen::VectorXd& theta, int dims, int warped) {
  GpHyper h;
  h.log_lengthscale = theta.head(dims);
  h.log_signal_var = theta(dims);
  h.log_noise_var = theta(dims + 1);
  h.mean = theta(dims + 2);
  h.log_warp_a = theta.segment(dims + 3, warped);
  h.log_warp_b = theta.segment(dims + 3 + warped, warped);
  return h;
}

GpPrior GpPrior::ForDims(int dims, LengthScaleLevel level) {
  GpPrior p;
  double log_median = std::log(0.2);
  if (level == LengthScaleLevel::kLong) log_median = std::sqrt(2.0);
  if (level == LengthScaleLevel::kEarly) {
    log_median = 0.0;
    p.log_lengthscale_sigma = 0.5;
  }
  p.log_lengthscale_mu = log_median + 0.5 * std::log(std::max(dims, 1));
  return p;
}

GpHyper GpPrior::Mode(int dims) const {
  GpHyper h;
  h.log_lengthscale = Eigen::VectorXd::Constant(dims, log_lengthscale_mu);
  h.log_signal_var = log_signal_mu;
  h.log_noise_var = log_noise_mu;
  h.mean = 0.0;
  h.log_warp_a = h.log_warp_b = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(warp_dims.size()));
  return h;
}

GaussianProcess::GaussianProcess(int dims, GpPrior prior)
    : dims_(dims), prior_(std::move(prior)), hyper_(prior_.Mode(dims)), x_(0, dims) {}

double GaussianProcess::Kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const {
  Eigen::VectorXd wa = Warp(a.transpose(), prior_.warp_dims, hyper_, nullptr).row(0).transpose();
  Eigen::VectorXd wb = Warp(b.transpose(), prior_.warp_dims, hyper_, nullptr).row(0).transpose();
  double r2 = ((wa - wb).array() / hyper_.log_lengthscale.array().exp()).square().sum();
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
  // Hyperparameters from a model without warping leave the warped dimensions as they are.
  if (hyper_.log_warp_a.size() != warped()) {
    hyper_.log_warp_a = hyper_.log_warp_b = Eigen::VectorXd::Zero(warped());
  }
  wx_ = Warp(x_, prior_.warp_dims, hyper_, nullptr);
  if (n == 0) {
    chol_.resize(0, 0);
    alpha_.resize(0);
    return Status::Ok();
  }
  const double s = std::exp(hyper_.log_signal_var);
  Eigen::VectorXd inv_ls = (-hyper_.log_lengthscale).array().exp();
  Eigen::MatrixXd k = ScaledSquaredDistances(wx_, wx_, inv_ls).cwiseSqrt().unaryExpr([s](double r) {
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
  const Eigen::RowVectorXd wx = Warp(x.transpose(), prior_.warp_dims, hyper_, nullptr);
  Eigen::VectorXd kx(n);
  if (n > 0) {
    kx = ScaledSquaredDistances(wx_, wx, inv_ls).col(0).cwiseSqrt().unaryExpr([s](double r) {
      return Matern(r, s);
    });
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
  if (n == 0) wx_.resize(0, dims_);
  wx_.conservativeResize(n + 1, Eigen::NoChange);
  wx_.row(n) = wx;
  y_.conservativeResize(n + 1);
  y_(n) = y;
  chol_.conservativeResize(n + 1, n + 1);
  chol_.row(n).head(n) = row.transpose();
  chol_.col(n).head(n).setZero();
  chol_(n, n) = std::sqrt(d2);
  SetTargets(y_);
  return Status::Ok();
}

double GaussianProcess::LogJointDensity() const {
  // NegLogPosterior keeps the likelihood's constant but drops the prior's: log(sigma sqrt(2 pi))
  // for each hyperparameter, which differs between priors of different spreads or sizes.
  double normaliser = dims_ * std::log(prior_.log_lengthscale_sigma) +
                      std::log(prior_.log_signal_sigma) + std::log(prior_.log_noise_sigma) +
                      std::log(prior_.mean_sigma) + 2 * warped() * std::log(prior_.log_warp_sigma);
  normaliser += 0.5 * GpHyper::Size(dims_, warped()) * kLog2Pi;
  return -NegLogPosterior(hyper_.Pack(), nullptr) - normaliser;
}

double GaussianProcess::NegLogPosterior(const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const {
  const int d = dims_;
  const Eigen::Index n = x_.rows();
  const int nw = warped();
  GpHyper h = GpHyper::Unpack(theta, d, nw);
  const double s = std::exp(h.log_signal_var);
  const double noise = std::exp(h.log_noise_var);
  Eigen::VectorXd inv_ls = (-h.log_lengthscale).array().exp();

  Eigen::VectorXd prior_grad;
  const double neg_log_prior = NegLogPrior(prior_, d, theta, &prior_grad);
  if (n == 0) {
    if (grad) *grad = prior_grad;
    return neg_log_prior;
  }

  WarpDerivatives warp;
  const Eigen::MatrixXd wx = Warp(x_, prior_.warp_dims, h, grad ? &warp : nullptr);
  Eigen::MatrixXd r = ScaledSquaredDistances(wx, wx, inv_ls).cwiseSqrt();
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
  // B = A o slope(r), with slope = -(dk/dr) / r: every input-side derivative of K goes through it.
  Eigen::MatrixXd b = a.cwiseProduct(r.unaryExpr([s](double v) { return MaternSlope(v, s); }));
  AddInputGradients(b, wx * inv_ls.asDiagonal(), inv_ls, prior_.warp_dims, warp, grad);
  (*grad)(d) = -0.5 * a.cwiseProduct(kf).sum();
  (*grad)(d + 1) = -0.5 * noise * a.trace();
  (*grad)(d + 2) = -alpha.sum();
  *grad += prior_grad;
  return nlml + neg_log_prior;
}

Status GaussianProcess::Fit(const FitOptions& options, std::mt19937_64& rng) {
  const int d = dims_;
  const int nw = warped();
  const int p = GpHyper::Size(d, nw);
  Eigen::VectorXd lb(p), ub(p);
  lb.head(d).setConstant(prior_.min_log_lengthscale);
  ub.head(d).setConstant(prior_.max_log_lengthscale);
  lb(d) = prior_.min_log_signal;
  ub(d) = prior_.max_log_signal;
  lb(d + 1) = prior_.min_log_noise;
  ub(d + 1) = prior_.max_log_noise;
  lb(d + 2) = -prior_.max_abs_mean;
  ub(d + 2) = prior_.max_abs_mean;
  lb.tail(2 * nw).setConstant(-prior_.max_abs_log_warp);
  ub.tail(2 * nw).setConstant(prior_.max_abs_log_warp);

  std::vector<Eigen::VectorXd> starts = {hyper_.Pack()};
  if (options.from_mode) starts.push_back(prior_.Mode(d).Pack());
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int i = 0; i < options.restarts; ++i) {
    Eigen::VectorXd t = prior_.Mode(d).Pack();
    for (int j = 0; j < d; ++j) t(j) += prior_.log_lengthscale_sigma * normal(rng);
    t(d) += 0.5 * normal(rng);
    for (int j = d + 3; j < p; ++j) t(j) += 0.5 * prior_.log_warp_sigma * normal(rng);
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
  return SetHyper(GpHyper::Unpack(best, d, nw));
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
  const Eigen::MatrixXd wxs = Warp(xs, prior_.warp_dims, hyper_, nullptr);
  Eigen::MatrixXd ks =
      ScaledSquaredDistances(wx_, wxs, inv_ls).cwiseSqrt().unaryExpr([s](double r) {
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
  WarpDerivatives warp;
  const Eigen::RowVectorXd wx = Warp(x.transpose(), prior_.warp_dims, hyper_, &warp);
  Eigen::MatrixXd diff = (-wx_).rowwise() + wx;  // w(x) - w(x_i), n x d
  Eigen::VectorXd r = (diff * inv_ls2.asDiagonal()).cwiseProduct(diff).rowwise().sum().cwiseSqrt();
  Eigen::VectorXd k = r.unaryExpr([s](double v) { return Matern(v, s); });
  Eigen::VectorXd slope = r.unaryExpr([s](double v) { return MaternSlope(v, s); });
  // dk_i/dx = -slope_i (w(x) - w(x_i)) / l^2 w'(x)
  Eigen::VectorXd scale = inv_ls2.cwiseProduct(warp.d_x.row(0).transpose());
  Eigen::MatrixXd dk = -(slope.asDiagonal() * diff) * scale.asDiagonal();  // n x d
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
