#include "feasibility.h"

#include <cmath>

#include "acquisition.h"

namespace hyperpack::tuner {
namespace {
// P(feasible) = Phi(m / sqrt(kLink + v)) for the classifier's mean m and variance v on labels
// +1/-1: a confident -1 means a probability of ~3e-7, an unexplored region about 1/2.
constexpr double kLink = 0.04;
}  // namespace

Status FeasibilityModel::Update(const Eigen::MatrixXd& x, const std::vector<bool>& ran) {
  const int d = static_cast<int>(x.cols());
  Eigen::VectorXd y(static_cast<Eigen::Index>(ran.size()));
  for (size_t i = 0; i < ran.size(); ++i) y(static_cast<Eigen::Index>(i)) = ran[i] ? 1.0 : -1.0;
  GpPrior prior = GpPrior::ForDims(d);
  GpHyper h = prior.Mode(d);
  h.log_signal_var = 0.0;
  h.log_noise_var = std::log(1e-2);
  h.mean = 0.0;
  if (!gp_) gp_ = std::make_unique<GaussianProcess>(d, prior);
  return gp_->SetDataAndHyper(x, y, h);
}

double FeasibilityModel::LogProbability(const Eigen::VectorXd& x, Eigen::VectorXd* grad) const {
  if (!gp_) return 0.0;
  double fm, fv;
  Eigen::VectorXd dfm, dfv;
  gp_->PredictWithGradient(x, &fm, &fv, &dfm, &dfv);
  const double scale = std::sqrt(kLink + fv);
  const double t = fm / scale;
  const double log_p = LogNormalCdf(t);
  if (grad) {
    const double dlogp_dt = std::exp(-0.5 * t * t - 0.91893853320467274178 - log_p);
    const Eigen::VectorXd dt = dfm / scale - 0.5 * fm / (scale * scale * scale) * dfv;
    *grad += dlogp_dt * dt;
  }
  return log_p;
}

Eigen::VectorXd FeasibilityModel::LogProbabilities(const Eigen::MatrixXd& xs) const {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(xs.rows());
  if (!gp_) return out;
  Eigen::VectorXd fm, fv;
  gp_->Predict(xs, &fm, &fv);
  for (Eigen::Index i = 0; i < xs.rows(); ++i)
    out(i) = LogNormalCdf(fm(i) / std::sqrt(kLink + fv(i)));
  return out;
}

}  // namespace hyperpack::tuner
