// Which configuration to recommend when one training's value is a noisy draw: a Gaussian process
// (the tuner's Matern-5/2 with one length scale per dimension, its targets warped as the tuner's
// are) fitted to a study's completed runs with a noise term it learns, and the configuration whose
// posterior mean is best. Where each value is the error of one training (its seed, its data
// order), the best single value is often a lucky draw of a configuration no better than its
// neighbours; the model pools the neighbours' evidence (as Ax recommends by its model's
// predictions). Among the `top_k` configurations with the best single values only, so that a
// configuration the model smooths over but no run supports is never recommended.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack::tuner {

struct RecommendOptions {
  int min_runs = 8;  // fewer finite values than this: FailedPrecondition (no model to trust)
  int top_k = 5;     // candidates: the configurations with the best single values (0: all)
  // The model is fitted to this many runs at most, those nearest a candidate (a fit is cubic in
  // the runs; a candidate is judged by its neighbourhood): seconds at most, however long the study.
  int max_runs = 300;
  // The noise variance's prior (log-normal, of the warped and standardised targets): wide and
  // centred higher than the tuner's own (exp(-6)), which interpolates; here the noise is what
  // is being estimated.
  double log_noise_mu = -3.0;
  double log_noise_sigma = 2.0;
  // The shortest length scale (of the unit cube each parameter is encoded in): a smooth model. As
  // short as the tuner's own (5e-3), it recommended on a learning-curve table a configuration
  // whose trainings diverge four times in seven, tried at twelve nearby points, by a dip at the
  // runs that went well; 0.2 was chosen on the development tables (docs/BENCHMARKS.md, stop 97).
  double min_lengthscale = 0.2;
  uint64_t seed = 0;  // the hyperparameter fit's random restarts
};

struct Recommendation {
  size_t index = 0;  // into the runs given: the recommended configuration's best run
  // The share of the targets' variance the fitted model calls noise: noise / (signal + noise).
  double noise_share = 0;
  bool differs = false;  // not the configuration of the best single value
};

// From `configs[i]` scoring `values[i]` (lower is better; non-finite values are left out; a
// configuration may appear several times, as re-runs do). FailedPrecondition when fewer than
// min_runs values are finite or all are equal; an error when the model cannot be fitted, and the
// caller keeps the best single value.
Result<Recommendation> RecommendByModel(const SearchSpace& space, std::span<const Config> configs,
                                        std::span<const double> values,
                                        const RecommendOptions& options = {});

}  // namespace hyperpack::tuner
