// Which parameters matter: a Gaussian process (the tuner's own model: Matern-5/2 with one length
// scale per dimension) fitted to a study's scored trials, read through its length scales.
//
// A parameter's importance is the inverse of its length scale (for a categorical, the shortest of
// its one-hot dimensions'), normalised so that all of them sum to 1. A short length scale means the
// objective changes quickly along that parameter; a long one, that the model found it nearly flat.
// It is a sensitivity of the fitted model, not a variance decomposition: two parameters that only
// matter together both score high.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack::tuner {

struct ParamImportance {
  std::string param;
  double importance = 0;  // in [0, 1]; all of a study's sum to 1
};

struct ImportanceOptions {
  int min_trials = 5;  // fewer scored trials than this: FailedPrecondition
  uint64_t seed = 0;   // the hyperparameter fit's random restarts
};

// The importance of each parameter of `space` that takes a dimension (fixed ones do not), largest
// first, from `configs[i]` scoring `values[i]` (finite values; the direction does not matter).
// FailedPrecondition when there are too few trials or every value is the same.
Result<std::vector<ParamImportance>> ParameterImportance(const SearchSpace& space,
                                                         std::span<const Config> configs,
                                                         std::span<const double> values,
                                                         const ImportanceOptions& options = {});

}  // namespace hyperpack::tuner
