// What a configuration will cost before it runs: a Gaussian process (the tuner's own model,
// Matern-5/2 with one length scale per dimension, over the same unit-cube encoding) fitted to the
// log of what the trials that ran cost.
//
// Log space, because costs are positive, span orders of magnitude (a data-parallel degree of 8 at
// bf16 against 1 at fp32) and vary by factors rather than by amounts. A prediction is therefore
// log-normal: its median exp(mu), and exp(sigma) as the factor of one standard deviation either
// side. What a cost is (GPU-seconds, core-seconds, per unit of resource) is the caller's.
// Thread-safety: Fit is a pure function; a fitted model's Predict may run on several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack::tuner {

struct CostPrediction {
  double median = 0;    // exp of the mean of log cost
  double log_sd = 0;    // the standard deviation of log cost: the model's and the runs' own noise
  double Low() const;   // median / exp(log_sd): one standard deviation below
  double High() const;  // median x exp(log_sd)
};

struct CostModelOptions {
  int min_trials = 3;  // fewer costs than this: FailedPrecondition
  uint64_t seed = 0;   // the hyperparameter fit's random restarts
};

class CostModel {
 public:
  // From `costs[i]`, what `configs[i]` cost (finite and positive). Errors: sizes that differ, a
  // cost that is not finite and positive (Invalid), too few trials or a space with no tuned
  // parameter (FailedPrecondition).
  static Result<CostModel> Fit(const SearchSpace& space, std::span<const Config> configs,
                               std::span<const double> costs, const CostModelOptions& options = {});
  CostModel(CostModel&&) noexcept;
  CostModel& operator=(CostModel&&) noexcept;
  ~CostModel();

  CostPrediction Predict(const Config& config) const;
  // Predict of each config, in order, in blocks of one matrix solve each: what a report of every
  // trial of a long study asks (one solve per config would be quadratic in the fitted points each).
  std::vector<CostPrediction> PredictMany(const std::vector<Config>& configs) const;
  // What the model, fitted without trial i (its hyperparameters kept), predicts for the i-th of
  // the configurations it was fitted on: an honest prediction for a trial that ran.
  std::vector<CostPrediction> LeaveOneOut() const;

 private:
  struct Impl;
  explicit CostModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hyperpack::tuner
