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

// log(EI(b) - EI(a)) from log EI(b) (`hi`) and log EI(a) (`lo`), a < b: log EI(b) + log(1 - r),
// r = EI(a) / EI(b) in (0, 1), with its derivatives (EI(b) d_b - EI(a) d_a) / (EI(b) - EI(a)) =
// (d_b - r d_a) / (1 - r).
AcquisitionValue LogWidth(const AcquisitionValue& hi, const AcquisitionValue& lo) {
  const double log_r = std::min(lo.value - hi.value, -1e-300);
  const double r = std::exp(log_r);
  const double one_minus_r = -std::expm1(log_r);  // not 1 - r: that is 0 when r rounds to 1
  AcquisitionValue w;
  w.value = hi.value + Log1mExp(log_r);
  w.dmean = (hi.dmean - r * lo.dmean) / one_minus_r;
  w.dsigma = (hi.dsigma - r * lo.dsigma) / one_minus_r;
  return w;
}

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
    const AcquisitionValue width =
        i == 0 ? hi : LogWidth(hi, LogExpectedImprovement(mean[0], sigma[0], steps[i - 1][0]));
    log_terms[i] = width.value + second.value;
    d_terms[i] = {width.dmean, width.dsigma, second.dmean, second.dsigma};
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

namespace {

// The grid's boundaries in objective k: -inf, the front's distinct coordinates below ref, ref.
std::vector<double> Boundaries(std::span<const ObjectiveVector> front, double ref, size_t k) {
  std::vector<double> b = {-std::numeric_limits<double>::infinity()};
  for (const ObjectiveVector& p : front) b.push_back(p[k]);
  std::sort(b.begin() + 1, b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  b.push_back(ref);
  return b;
}

}  // namespace

BoxDecomposition NonDominatedBoxes(std::span<const ObjectiveVector> front,
                                   std::span<const double> ref) {
  const size_t m = ref.size();
  std::vector<ObjectiveVector> below;
  for (const ObjectiveVector& p : front) {
    bool in = p.size() == m;
    for (size_t k = 0; in && k < m; ++k) in = p[k] < ref[k];
    if (in) below.push_back(p);
  }
  BoxDecomposition d;
  for (size_t k = 0; k + 1 < m; ++k) d.grid.push_back(Boundaries(below, ref[k], k));
  d.tops = {ref[m - 1]};
  for (const ObjectiveVector& p : below) d.tops.push_back(p[m - 1]);
  std::sort(d.tops.begin(), d.tops.end());
  d.tops.erase(std::unique(d.tops.begin(), d.tops.end()), d.tops.end());
  std::vector<int> cell(m - 1, 0);  // each cell of the grid, as an odometer
  while (true) {
    // The points that dominate the cell in the first m - 1 objectives bound it in the last.
    double top = ref[m - 1];
    for (const ObjectiveVector& p : below) {
      bool dominates = true;
      for (size_t k = 0; dominates && k + 1 < m; ++k) dominates = p[k] <= d.grid[k][cell[k]];
      if (dominates) top = std::min(top, p[m - 1]);
    }
    const int t =
        static_cast<int>(std::lower_bound(d.tops.begin(), d.tops.end(), top) - d.tops.begin());
    d.boxes.push_back({cell, t});
    size_t k = 0;
    while (k + 1 < m && ++cell[k] + 1 >= static_cast<int>(d.grid[k].size())) cell[k++] = 0;
    if (k + 1 >= m) break;
  }
  return d;
}

std::vector<HyperBox> BoxDecomposition::Boxes() const {
  std::vector<HyperBox> out;
  for (const Box& b : boxes) {
    HyperBox h;
    for (size_t k = 0; k < grid.size(); ++k) {
      h.lower.push_back(grid[k][b.cell[k]]);
      h.upper.push_back(grid[k][b.cell[k] + 1]);
    }
    h.lower.push_back(-std::numeric_limits<double>::infinity());
    h.upper.push_back(tops[b.top]);
    out.push_back(std::move(h));
  }
  return out;
}

namespace {

// log(EI(b_i+1) - EI(b_i)) for each cell i of a grid's boundaries b (b_0 = -inf: EI = 0).
std::vector<AcquisitionValue> CellWidths(double mean, double sigma,
                                         const std::vector<double>& bounds) {
  std::vector<AcquisitionValue> ei;
  for (size_t i = 1; i < bounds.size(); ++i)
    ei.push_back(LogExpectedImprovement(mean, sigma, bounds[i]));
  std::vector<AcquisitionValue> widths = {ei[0]};
  for (size_t i = 1; i < ei.size(); ++i) widths.push_back(LogWidth(ei[i], ei[i - 1]));
  return widths;
}

}  // namespace

MultiObjectiveAcquisition LogExpectedHypervolumeImprovement(std::span<const double> mean,
                                                            std::span<const double> sigma,
                                                            const BoxDecomposition& d) {
  const size_t m = mean.size();
  MultiObjectiveAcquisition a;
  a.dmean.assign(m, 0.0);
  a.dsigma.assign(m, 0.0);
  a.value = -std::numeric_limits<double>::infinity();
  if (d.boxes.empty()) return a;
  // Each bound's expected improvement once: the cells' widths, and EI at each top.
  std::vector<std::vector<AcquisitionValue>> widths;
  for (size_t k = 0; k + 1 < m; ++k) widths.push_back(CellWidths(mean[k], sigma[k], d.grid[k]));
  std::vector<AcquisitionValue> last;
  for (double top : d.tops) last.push_back(LogExpectedImprovement(mean[m - 1], sigma[m - 1], top));
  std::vector<double> log_terms(d.boxes.size());
  for (size_t j = 0; j < d.boxes.size(); ++j) {
    double t = last[d.boxes[j].top].value;
    for (size_t k = 0; k + 1 < m; ++k) t += widths[k][d.boxes[j].cell[k]].value;
    log_terms[j] = t;
  }
  const double top = *std::max_element(log_terms.begin(), log_terms.end());
  double sum = 0.0;
  for (double t : log_terms) sum += std::exp(t - top);
  a.value = top + std::log(sum);
  for (size_t j = 0; j < d.boxes.size(); ++j) {
    const double share = std::exp(log_terms[j] - a.value);  // this box's share of the whole
    for (size_t k = 0; k < m; ++k) {
      const AcquisitionValue& w = k + 1 < m ? widths[k][d.boxes[j].cell[k]] : last[d.boxes[j].top];
      a.dmean[k] += share * w.dmean;
      a.dsigma[k] += share * w.dsigma;
    }
  }
  return a;
}

}  // namespace hyperpack::tuner
