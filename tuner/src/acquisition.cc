#include "acquisition.h"

#include <cmath>
#include <limits>

namespace hyperpack::tuner {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kLogSqrt2Pi = 0.91893853320467274178;     // log(sqrt(2 pi))
constexpr double kLogSqrtHalfPi = 0.22579135264472743236;  // log(sqrt(pi / 2))

// log(1 - exp(x)) for x < 0, accurate on both sides of -log 2.
double Log1mExp(double x) {
  return x > -0.6931471805599453 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x));
}

}  // namespace

double Erfcx(double x) {
  if (x < 25.0) return std::exp(x * x) * std::erfc(x);
  // Asymptotic series in u = 1/(2x^2): sum (-1)^n (2n-1)!! u^n; at x >= 25 the first omitted
  // term is below 1e-16.
  double u = 0.5 / (x * x);
  double series =
      1.0 + u * (-1.0 + u * (3.0 + u * (-15.0 + u * (105.0 + u * (-945.0 + u * 10395.0)))));
  return series / (x * std::sqrt(M_PI));
}

double LogNormalCdf(double z) {
  if (z > -5.0) return std::log(0.5 * std::erfc(-z * kInvSqrt2));
  // Phi(z) = erfc(-z/sqrt2)/2 = erfcx(-z/sqrt2) exp(-z^2/2) / 2
  z = std::max(z, -1e100);
  return std::log(0.5 * Erfcx(-z * kInvSqrt2)) - 0.5 * z * z;
}

double LogH(double z) {
  if (z > -1.0) {
    double cdf = 0.5 * std::erfc(-z * kInvSqrt2);
    double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
    return std::log(z * cdf + pdf);
  }
  // h(z) = phi(z) (1 - |z| erfcx(|z|/sqrt2) sqrt(pi/2)) for z < 0.
  if (z > -35.0) {
    double t = std::log(Erfcx(-z * kInvSqrt2) * std::fabs(z)) + kLogSqrtHalfPi;
    return -0.5 * z * z - kLogSqrt2Pi + Log1mExp(t);
  }
  // Far in the tail the bracket cancels; its asymptotic series is exact to 1e-9 here:
  // h(z) / phi(z) = z^-2 (1 - 3 z^-2 + 15 z^-4 - 105 z^-6 + ...).
  z = std::max(z, -1e100);  // z^2 must stay finite
  double u = 1.0 / (z * z);
  return -0.5 * z * z - kLogSqrt2Pi + std::log(u) + std::log1p(u * (-3.0 + u * (15.0 - 105.0 * u)));
}

double DLogH(double z) {
  // Phi(z) / h(z); for z << 0 it tends to -z, computed in logs to avoid 0/0.
  if (z > -1.0) {
    double cdf = 0.5 * std::erfc(-z * kInvSqrt2);
    double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
    return cdf / (z * cdf + pdf);
  }
  z = std::max(z, -1e100);
  return std::exp(LogNormalCdf(z) - LogH(z));
}

AcquisitionValue LogExpectedImprovement(double mean, double sigma, double best) {
  double z = (best - mean) / sigma;
  double g = DLogH(z);
  AcquisitionValue a;
  a.value = std::log(sigma) + LogH(z);
  a.dmean = -g / sigma;
  a.dsigma = 1.0 / sigma - g * z / sigma;
  return a;
}

AcquisitionValue UpperConfidenceBound(double mean, double sigma, double beta) {
  AcquisitionValue a;
  a.value = -(mean - beta * sigma);
  a.dmean = -1.0;
  a.dsigma = beta;
  return a;
}

}  // namespace hyperpack::tuner
