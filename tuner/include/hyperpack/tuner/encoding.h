// The unit-hypercube view of a search space: what the samplers draw from and what the Gaussian
// process sees.
//
// Each float or int parameter is one dimension in [0, 1] (log-scaled parameters in log space; an
// int's values are the centres of equal cells, so a uniform draw gives every value the same
// chance); each categorical is one-hot over its values; fixed parameters take no dimension.
// Dimensions of a parameter that is inactive in a configuration are marked inactive (and hold 0.5)
// so that a kernel can ignore them.
// Thread-safety: immutable after construction; const methods are safe from several threads.
#pragma once

#include <span>
#include <vector>

#include "hyperpack/space.h"

namespace hyperpack::tuner {

class Encoder {
 public:
  explicit Encoder(SearchSpace space);

  const SearchSpace& space() const { return space_; }
  // Number of unit-cube dimensions.
  int dims() const { return static_cast<int>(dim_param_.size()); }
  // The parameter (index into space().params()) that owns dimension d.
  int param_of_dim(int d) const { return dim_param_[d]; }
  // First dimension of parameter p, and how many it has (0 for fixed, k for a k-way categorical).
  int first_dim(int p) const { return first_dim_[p]; }
  int num_dims(int p) const;

  struct Encoded {
    std::vector<double> x;
    std::vector<bool> active;
  };
  Encoded Encode(const Config& config) const;

  // The configuration nearest to `x`: floats clamped, ints snapped to their step, categoricals by
  // their largest coordinate, and parameters whose conditions fail left out.
  Config Decode(std::span<const double> x) const;

  // A configuration from one coordinate in [0, 1) per parameter (space().size() of them): how
  // the random and Sobol samplers map their draws. A categorical with k values takes value
  // floor(u * k).
  Config FromUnitPerParam(std::span<const double> u) const;

 private:
  // The value of numeric parameter p at unit coordinate u.
  Value NumericFromUnit(const ParamSpec& p, double u) const;
  double NumericToUnit(const ParamSpec& p, const Value& v) const;

  SearchSpace space_;
  std::vector<int> dim_param_;
  std::vector<int> first_dim_;
};

// True when both hold the same parameters with equal values.
bool SameConfig(const Config& a, const Config& b);

}  // namespace hyperpack::tuner
