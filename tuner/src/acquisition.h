// Acquisition functions for minimisation, computed stably.
//
// Expected improvement underflows to exactly zero far from the incumbent, which leaves an
// optimiser nothing to follow. LogExpectedImprovement computes log EI directly (Ament et al.,
// "Unexpected Improvements to Expected Improvement for Bayesian Optimization", NeurIPS 2023),
// finite for every finite input, with its derivatives. Thread-safety: pure functions.
#pragma once

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

}  // namespace hyperpack::tuner
