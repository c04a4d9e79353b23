// The acquisition optimiser's pieces that the GP tuners share (gp_tuner.cc, mo_gp_tuner.cc):
// candidate configurations, global and around chosen trials, and the refinement of a candidate's
// continuous dimensions by L-BFGS-B. Every candidate is a real configuration encoded: integers
// and categoricals come from configurations, never from a relaxation.
// Thread-safety: pure functions; the random generator passed in is the caller's.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "hyperpack/tuner/encoding.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::tuner {

Eigen::VectorXd ToEigen(const std::vector<double>& v);

// A scrambled Sobol set over the whole space: min(2048, 384 + 48 d) points for d dimensions.
std::vector<Eigen::VectorXd> GlobalCandidates(const Encoder& encoder, uint64_t seed);

// 36 perturbations of each centre appended to *out, centre by centre: each parameter moved with
// probability 1/2, a number by a normal step of 0.02, 0.08 or 0.2 of its range (12 each), a
// categorical to any value.
void AddLocalCandidates(const Encoder& encoder, std::span<const Config> centres,
                        std::mt19937_64& rng, std::vector<Eigen::VectorXd>* out);

// An acquisition (larger is better) at an encoded point, and its gradient there when asked.
using AcquisitionFn = std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd* grad)>;

struct ScoredPoint {
  double acq = 0;
  Eigen::VectorXd x;
};

// Moves the dimensions of `start` that are `continuous` and active uphill on `acq` (L-BFGS-B in
// the unit box, 40 iterations), then snaps the point to a real configuration and scores that.
// `start` comes back unchanged when it has no such dimension.
ScoredPoint RefineContinuous(const Encoder& encoder, const std::vector<bool>& continuous,
                             const ScoredPoint& start, const AcquisitionFn& acq);

// Members of one batch (and pending trials) closer than this in the unit cube would measure the
// same thing twice.
inline constexpr double kMinBatchDistance = 0.025;

// Whether `c` (encoded `x`) is a pending configuration, or nearer one than kMinBatchDistance.
bool NearPending(const Config& c, const Eigen::VectorXd& x, const std::vector<Config>& pending,
                 const std::vector<Eigen::VectorXd>& pending_x);

// The first of `ranked` (best first) whose configuration `taken` does not reject, decoded, with its
// encoding; when every one is taken (a small discrete space nearly exhausted), one that
// `fallback` (a sampler) proposes apart from `pending`; nullopt when it has none either.
struct Chosen {
  Config config;
  Eigen::VectorXd x;
};
std::optional<Chosen> FirstUntaken(
    const Encoder& encoder, const std::vector<ScoredPoint>& ranked,
    const std::function<bool(const Config&, const Eigen::VectorXd&)>& taken, Tuner& fallback,
    std::span<const Config> pending);

}  // namespace hyperpack::tuner
