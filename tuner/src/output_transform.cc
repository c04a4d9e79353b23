#include "output_transform.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hyperpack::tuner {
namespace {

void Standardise(const Eigen::VectorXd& y, double* mean, double* scale) {
  *mean = y.mean();
  double var = y.size() > 1 ? (y.array() - *mean).square().sum() / (y.size() - 1) : 0.0;
  *scale = var > 1e-24 ? std::sqrt(var) : 1.0;
}

}  // namespace

double OutputTransform::YeoJohnson(double y, double lambda) {
  if (y >= 0) {
    return std::fabs(lambda) < 1e-8 ? std::log1p(y) : (std::pow(y + 1.0, lambda) - 1.0) / lambda;
  }
  return std::fabs(lambda - 2.0) < 1e-8 ? -std::log1p(-y)
                                        : -(std::pow(1.0 - y, 2.0 - lambda) - 1.0) / (2.0 - lambda);
}

double OutputTransform::LogLikelihood(const Eigen::VectorXd& z, double lambda) {
  const double n = static_cast<double>(z.size());
  Eigen::VectorXd t = z.unaryExpr([lambda](double v) { return YeoJohnson(v, lambda); });
  double var = (t.array() - t.mean()).square().mean();
  if (!(var > 0) || !std::isfinite(var)) return -std::numeric_limits<double>::infinity();
  double jacobian = 0;
  for (double v : z) jacobian += std::copysign(1.0, v) * std::log1p(std::fabs(v));
  return -0.5 * n * std::log(var) + (lambda - 1.0) * jacobian;
}

void OutputTransform::Fit(const Eigen::VectorXd& y, bool warp) {
  Standardise(y, &mean1_, &scale1_);
  lambda_ = 1.0;
  Eigen::VectorXd z = (y.array() - mean1_) / scale1_;
  if (warp && y.size() >= 4) {
    // Golden-section search for the most likely exponent on [-2, 4].
    double a = -2.0, b = 4.0;
    const double g = 0.6180339887498949;
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = LogLikelihood(z, c), fd = LogLikelihood(z, d);
    for (int i = 0; i < 40; ++i) {
      if (fc > fd) {
        b = d;
        d = c;
        fd = fc;
        c = b - g * (b - a);
        fc = LogLikelihood(z, c);
      } else {
        a = c;
        c = d;
        fc = fd;
        d = a + g * (b - a);
        fd = LogLikelihood(z, d);
      }
    }
    double best = 0.5 * (a + b);
    // Keep the identity unless warping is clearly more likely (a likelihood-ratio margin).
    if (LogLikelihood(z, best) > LogLikelihood(z, 1.0) + 1.0) lambda_ = best;
  }
  Eigen::VectorXd t = z.unaryExpr([this](double v) { return YeoJohnson(v, lambda_); });
  Standardise(t, &mean2_, &scale2_);
}

double OutputTransform::Apply(double y) const {
  return (YeoJohnson((y - mean1_) / scale1_, lambda_) - mean2_) / scale2_;
}

Eigen::VectorXd OutputTransform::Apply(const Eigen::VectorXd& y) const {
  return y.unaryExpr([this](double v) { return Apply(v); });
}

namespace {
// Values equal up to rounding.
bool SameValue(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(a));
}
}  // namespace

bool IncumbentShared(const std::vector<double>& sorted) {
  return sorted.size() > 1 && SameValue(sorted[0], sorted[1]) &&
         !SameValue(sorted.front(), sorted.back());
}

double PlateauMargin(const std::vector<double>& sorted) {
  if (!IncumbentShared(sorted)) return 0.0;
  double step = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < sorted.size(); ++i)
    if (!SameValue(sorted[i], sorted[i - 1])) step = std::min(step, sorted[i] - sorted[i - 1]);
  return std::isfinite(step) ? step : 0.0;
}

}  // namespace hyperpack::tuner
