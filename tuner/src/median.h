// The median the tuner's parts share (the pruner's forecast, the GPs' stopped trials).
// Thread-safety: a pure function.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace hyperpack::tuner {

// The median of a non-empty list: its middle value, or the mean of its middle two.
inline double MedianOf(std::vector<double> v) {
  const auto h = static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2) return v[h];
  return 0.5 * (*std::max_element(v.begin(), v.begin() + h) + v[h]);
}

}  // namespace hyperpack::tuner
