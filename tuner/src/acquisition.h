// Acquisition functions for minimisation, computed stably.
//
// Expected improvement underflows to exactly zero far from the incumbent, which leaves an
// optimiser nothing to follow. LogExpectedImprovement computes log EI directly (Ament et al.,
// "Unexpected Improvements to Expected Improvement for Bayesian Optimization", NeurIPS 2023),
// finite for every finite input, with its derivatives. Thread-safety: pure functions.
#pragma once

#include <array>
#include <span>

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

}  // namespace hyperpack::tuner
