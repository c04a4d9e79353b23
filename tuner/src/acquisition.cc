#include "acquisition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

namespace {

// The strips' corners: x_1..x_m and u_1..u_m of the front's non-dominated points below ref,
// ascending in the first objective.
std::vector<std::array<double, 2>> Staircase(std::span<const ObjectiveVector> front,
                                             std::array<double, 2> ref) {
  std::vector<ObjectiveVector> below;
  for (const ObjectiveVector& p : front)
    if (p.size() == 2 && p[0] < ref[0] && p[1] < ref[1]) below.push_back(p);
  std::vector<std::array<double, 2>> steps;
  std::vector<std::vector<int>> fronts = NonDominatedSort(below);
  if (fronts.empty()) return steps;
  for (int i : fronts[0]) steps.push_back({below[i][0], below[i][1]});
  std::sort(steps.begin(), steps.end());
  // Equal points are one corner.
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

}  // namespace

TwoObjectiveAcquisition LogExpectedHypervolumeImprovement(std::array<double, 2> mean,
                                                          std::array<double, 2> sigma,
                                                          std::span<const ObjectiveVector> front,
                                                          std::array<double, 2> ref) {
  const std::vector<std::array<double, 2>> steps = Staircase(front, ref);
  const size_t m = steps.size();
  // Strip i = 0..m: [x_i, x_i+1) x (-inf, u_i), x_0 = -inf, x_m+1 = ref_1, u_0 = ref_2.
  std::vector<double> log_terms(m + 1);
  std::vector<std::array<double, 4>> d_terms(m + 1);  // d log term / d (m1, s1, m2, s2)
  for (size_t i = 0; i <= m; ++i) {
    const double upper_x = i < m ? steps[i][0] : ref[0];
    const double u = i == 0 ? ref[1] : steps[i - 1][1];
    const AcquisitionValue hi = LogExpectedImprovement(mean[0], sigma[0], upper_x);
    const AcquisitionValue second = LogExpectedImprovement(mean[1], sigma[1], u);
    double log_width = hi.value, dm = hi.dmean, ds = hi.dsigma;
    if (i > 0) {
      // log(EI(b) - EI(a)) = log EI(b) + log(1 - r), r = EI(a) / EI(b) in (0, 1); its
      // derivative (EI(b) d_b - EI(a) d_a) / (EI(b) - EI(a)) = (d_b - r d_a) / (1 - r).
      const AcquisitionValue lo = LogExpectedImprovement(mean[0], sigma[0], steps[i - 1][0]);
      const double log_r = std::min(lo.value - hi.value, -1e-300);
      const double r = std::exp(log_r);
      const double one_minus_r = -std::expm1(log_r);  // not 1 - r: that is 0 when r rounds to 1
      log_width += Log1mExp(log_r);
      dm = (hi.dmean - r * lo.dmean) / one_minus_r;
      ds = (hi.dsigma - r * lo.dsigma) / one_minus_r;
    }
    log_terms[i] = log_width + second.value;
    d_terms[i] = {dm, ds, second.dmean, second.dsigma};
  }
  const double top = *std::max_element(log_terms.begin(), log_terms.end());
  double sum = 0.0;
  for (double t : log_terms) sum += std::exp(t - top);
  TwoObjectiveAcquisition a;
  a.value = top + std::log(sum);
  for (size_t i = 0; i <= m; ++i) {
    const double w = std::exp(log_terms[i] - a.value);  // this strip's share of the whole
    a.dmean[0] += w * d_terms[i][0];
    a.dsigma[0] += w * d_terms[i][1];
    a.dmean[1] += w * d_terms[i][2];
    a.dsigma[1] += w * d_terms[i][3];
  }
  return a;
}

}  // namespace hyperpack::tuner
