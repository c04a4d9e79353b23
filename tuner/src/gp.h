// A Gaussian process over the unit cube: Matern-5/2 kernel with one length scale per dimension
// (ARD), a signal variance, a noise variance and a constant mean. Hyperparameters live in log
// space (except the mean) and are fitted by maximum a posteriori with analytic gradients and
// L-BFGS-B from several starts.
// Input warping (optional, per dimension): the kernel sees w = 1 - (1 - u^a)^b, the Kumaraswamy
// CDF of the coordinate u (squeezed into [kWarpMargin, 1 - kWarpMargin] so that the derivatives
// stay finite), with log a and log b learnt with the other hyperparameters (HEBO; Snoek et al.
// 2014). a < 1 stretches the low end of a dimension, b < 1 the high end: a log-like scale where
// the objective changes fast near a bound.
//
// Numerics: the kernel matrix is factored by Cholesky and every factorisation is checked; on
// failure jitter is added (1e-8 up to 1e-2 of the signal variance) and the failure is an error
// beyond that. No explicit inverse is ever used to solve; K^-1 itself is formed only for the trace
// in the likelihood's gradient (and its diagonal for leave-one-out predictions). A new observation
// extends the factor in O(n^2) when the hyperparameters are kept.
//
// Targets are expected standardised (mean 0, variance 1): the priors assume it.
// Thread-safety: not thread-safe; const methods may run concurrently with each other.
#pragma once

#include <Eigen/Dense>
#include <random>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::tuner {

// The hyperparameter vector theta = [log l_1 .. log l_d, log signal_var, log noise_var, mean,
// log a_1 .. log a_w, log b_1 .. log b_w] for the w warped dimensions (none: w = 0).
struct GpHyper {
  Eigen::VectorXd log_lengthscale;
  double log_signal_var = 0.0;
  double log_noise_var = -6.0;
  double mean = 0.0;
  Eigen::VectorXd log_warp_a;  // one per warped dimension, in GpPrior::warp_dims's order
  Eigen::VectorXd log_warp_b;

  static int Size(int dims, int warped = 0) { return dims + 3 + 2 * warped; }
  Eigen::VectorXd Pack() const;
  static GpHyper Unpack(const Eigen::VectorXd& theta, int dims, int warped = 0);
};

// Where the length-scale prior's median sits in the unit cube; both scale with sqrt(d), so that
// longer scales are expected in more dimensions (Hvarfner et al. 2024, "Vanilla Bayesian
// optimization performs great in high dimensions").
// The values are stored in a tuner's saved state: append, never renumber.
enum class LengthScaleLevel {
  kShort,  // 0.2 sqrt(d): chosen on bench/tuner_regret's continuous, many-basined functions
  kLong,   // exp(sqrt 2) sqrt(d): that paper's level (BoTorch's default), for objectives that
           // are flat in pieces, where a global trend between the pieces is what guides search
  kEarly,  // sqrt(d), and a narrow spread (sigma 0.5 against 1.732): for a model of few trials,
           // which cannot yet tell short scales from noise and, left wide, explains each point
           // locally (Bayesmark's development problems, docs/BENCHMARKS.md stops 68-69)
};

// Independent normal priors on the hyperparameters (in their log space), and their bounds.
struct GpPrior {
  // Length scales: log-normal around a median set by ForDims's level (and its spread at kEarly).
  double log_lengthscale_mu = 0.0;
  double log_lengthscale_sigma = 1.732;
  double log_signal_mu = 0.0;
  double log_signal_sigma = 1.0;
  double log_noise_mu = -6.0;  // noise variance ~0.0025 of the standardised targets
  double log_noise_sigma = 1.0;
  double mean_sigma = 1.0;
  // Bounds.
  double min_log_lengthscale = std::log(5e-3), max_log_lengthscale = std::log(2e2);
  double min_log_signal = std::log(5e-2), max_log_signal = std::log(2e1);
  double min_log_noise = std::log(1e-6), max_log_noise = std::log(1.0);
  double max_abs_mean = 4.0;
  // Input warping: the dimensions warped (ascending; empty for none), and a normal prior on each
  // log a and log b around 0 (the identity), bounded.
  std::vector<int> warp_dims;
  double log_warp_sigma = 0.75;
  double max_abs_log_warp = 2.0;

  static GpPrior ForDims(int dims, LengthScaleLevel level = LengthScaleLevel::kShort);
  // The most probable hyperparameters under the prior alone.
  GpHyper Mode(int dims) const;
};

class GaussianProcess {
 public:
  GaussianProcess(int dims, GpPrior prior);

  int dims() const { return dims_; }
  int size() const { return static_cast<int>(y_.size()); }
  const GpHyper& hyper() const { return hyper_; }
  const GpPrior& prior() const { return prior_; }
  const Eigen::MatrixXd& inputs() const { return x_; }  // n x d, as given (not warped)
  const Eigen::VectorXd& targets() const { return y_; }

  // Replaces the data (rows of x are points) and factors with the current hyperparameters.
  Status SetData(const Eigen::MatrixXd& x, const Eigen::VectorXd& y);
  // Sets the hyperparameters and refactors.
  Status SetHyper(const GpHyper& hyper);
  // Both at once, factoring once.
  Status SetDataAndHyper(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpHyper& hyper);
  // New targets for the same inputs (e.g. after re-standardising): O(n^2), no refactoring.
  void SetTargets(const Eigen::VectorXd& y);
  // Adds one observation, extending the Cholesky factor in O(n^2).
  Status Append(const Eigen::VectorXd& x, double y);

  struct FitOptions {
    int restarts = 2;  // random starts from the prior, besides the current hyperparameters
    int max_iterations = 60;
    bool from_mode = true;  // the prior's mode as a start too
  };
  // MAP hyperparameters from the current one (a warm start), the prior's mode (from_mode) and
  // `restarts` draws from the prior; keeps the best and refactors.
  Status Fit(const FitOptions& options, std::mt19937_64& rng);

  // Negative log posterior (negative log marginal likelihood minus log prior, up to a constant)
  // at `theta` for the current data; its gradient into *grad when grad is not null. +inf when the
  // kernel matrix cannot be factored.
  double NegLogPosterior(const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const;
  // log p(y, theta) at the current hyperparameters, every normalising constant kept: the
  // marginal likelihood times the prior's density. At each one's optimum it compares two priors
  // fitted to the same data (the maximum a posteriori approximation to their evidence), as the
  // tuner compares its length-scale levels. -inf when the kernel matrix cannot be factored.
  double LogJointDensity() const;

  // Posterior mean and variance of the latent function at the rows of `xs`.
  void Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean, Eigen::VectorXd* var) const;
  // At one point, with gradients with respect to the point.
  void PredictWithGradient(const Eigen::VectorXd& x, double* mean, double* var,
                           Eigen::VectorXd* dmean, Eigen::VectorXd* dvar) const;

  // For each observation i, the prediction of y_i by the same GP without it (hyperparameters
  // kept): mean and variance of the noisy target, in closed form from the factor (Rasmussen and
  // Williams, eq. 5.12): mean_i = y_i - alpha_i / [K^-1]_ii, var_i = 1 / [K^-1]_ii, where
  // [K^-1]_ii is the squared norm of column i of L^-1, found by triangular solves. O(n^3).
  void LeaveOneOut(Eigen::VectorXd* mean, Eigen::VectorXd* var) const;
  // The kernel between two points (signal variance included, no noise).
  double Kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) const;

 private:
  Status Factor();
  int warped() const { return static_cast<int>(prior_.warp_dims.size()); }

  int dims_;
  GpPrior prior_;
  GpHyper hyper_;
  Eigen::MatrixXd x_;   // n x d
  Eigen::MatrixXd wx_;  // x_ warped by hyper_ (x_ itself when no dimension is warped)
  Eigen::VectorXd y_;
  Eigen::MatrixXd chol_;   // lower factor of K + (noise + jitter) I
  Eigen::VectorXd alpha_;  // K^-1 (y - mean)
  double jitter_ = 0.0;
};

}  // namespace hyperpack::tuner
