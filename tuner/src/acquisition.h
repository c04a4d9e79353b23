// Acquisition functions for minimisation, computed stably.
//
// Expected improvement underflows to exactly zero far from the incumbent, which leaves an
// optimiser nothing to follow. LogExpectedImprovement computes log EI directly (Ament et al.,
// "Unexpected Improvements to Expected Improvement for Bayesian Optimization", NeurIPS 2023),
// finite for every finite input, with its derivatives. Thread-safety: pure functions.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "hyperpack/tuner/pareto.h"

namespace hyperpack::tuner {

// exp(x^2) erfc(x), accurate for all x (no overflow for large x).
double Erfcx(double x);
// log Phi(z), the log of the standard normal CDF, accurate far into the lower tail.
double LogNormalCdf(double z);
// log h(z) with h(z) = z Phi(z) + phi(z), so that EI = sigma h((best - mean) / sigma).
double LogH(double z);
// d log h / dz = Phi(z) / h(z).
double DLogH(double z);

struct AcquisitionValue {
  double value = 0;   // the acquisition (log EI, or minus the lower confidence bound)
  double dmean = 0;   // its derivative with respect to the posterior mean
  double dsigma = 0;  // ... and to the posterior standard deviation
};

// log EI of improving on `best` for a Gaussian N(mean, sigma^2) (minimisation). sigma > 0.
AcquisitionValue LogExpectedImprovement(double mean, double sigma, double best);
// -(mean - beta sigma): larger is better, as for log EI.
AcquisitionValue UpperConfidenceBound(double mean, double sigma, double beta);

// Two minimised objectives predicted independently as N(mean[k], sigma[k]^2), sigma > 0.
struct TwoObjectiveAcquisition {
  double value = 0;  // log expected hypervolume improvement
  std::array<double, 2> dmean{};
  std::array<double, 2> dsigma{};
};

// log EHVI over `front` (points that `ref` does not bound, or that others dominate, are left
// out) within the box below `ref`: the exact 2-D form. The region the front leaves is cut into
// strips at the front's first coordinates; strip i spans [x_i, x_i+1) x (-inf, u_i), and the
// improvement a point y makes there is (x_i+1 - max(y1, x_i))^+ (u_i - y2)^+, whose expectation
// factors into [EI_1(x_i+1) - EI_1(x_i)] EI_2(u_i), with EI_k(t) = E[(t - y_k)^+] (Emmerich et
// al. 2016's decomposition). Sums in logs, as log EI, so that it stays finite and ordered where
// EHVI itself underflows.
TwoObjectiveAcquisition LogExpectedHypervolumeImprovement(std::array<double, 2> mean,
                                                          std::array<double, 2> sigma,
                                                          std::span<const ObjectiveVector> front,
                                                          std::array<double, 2> ref);

// The region below `ref` that no point of `front` dominates, cut into disjoint boxes, for EHVI in
// any number of objectives m: a grid on the front's coordinates in the first m - 1 objectives, and
// in each of its cells the last objective from -inf to the least value of the points that dominate
// the cell in the others (ref's where none does). (n + 1)^(m-1) boxes for n points: meant for 2
// and 3 objectives (the tuner uses 2: docs/BENCHMARKS.md). The boxes share their bounds, so EHVI
// evaluates each expected improvement once per bound, not once per box.
struct HyperBox {
  ObjectiveVector lower, upper;  // a lower bound may be -inf
};
struct BoxDecomposition {
  // Objectives 0..m-2: the grid's boundaries, -inf first and ref's last; cell i is [b_i, b_i+1).
  std::vector<std::vector<double>> grid;
  // The last objective's upper bounds that the boxes use, ascending.
  std::vector<double> tops;
  struct Box {
    std::vector<int> cell;  // per objective 0..m-2
    int top = 0;            // into tops
  };
  std::vector<Box> boxes;
  // The boxes as bounds, for tests.
  std::vector<HyperBox> Boxes() const;
};
BoxDecomposition NonDominatedBoxes(std::span<const ObjectiveVector> front,
                                   std::span<const double> ref);

// Several minimised objectives predicted independently as N(mean[k], sigma[k]^2), sigma > 0.
struct MultiObjectiveAcquisition {
  double value = 0;  // log expected hypervolume improvement
  std::vector<double> dmean, dsigma;
};

// log EHVI over the boxes of a decomposition: the improvement a point y makes in box [l, u) is the
// product over objectives of (u_k - max(y_k, l_k))^+, whose expectation is the product of
// EI_k(u_k) - EI_k(l_k), independent objectives being independent. Summed in logs over the boxes,
// as the two-objective form is. No boxes: -inf.
MultiObjectiveAcquisition LogExpectedHypervolumeImprovement(std::span<const double> mean,
                                                            std::span<const double> sigma,
                                                            const BoxDecomposition& boxes);

}  // namespace hyperpack::tuner
