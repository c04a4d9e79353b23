// Scrambled Sobol points in [0, 1)^d, addressable by index.
//
// Direction numbers are Joe and Kuo's (new-joe-kuo-6.21201, as tabulated in Boost.Random). The
// scramble is a random linear matrix scramble followed by a random digital shift (Matousek), drawn
// from the seed: every seed gives a different low-discrepancy sequence, and no point sits exactly
// on the cube's corner. Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace hyperpack::tuner {

class SobolSequence {
 public:
  static constexpr int kMaxDims = 3667;
  SobolSequence(int dims, uint64_t seed);
  int dims() const { return dims_; }
  // Point `index` (0, 1, 2, ...) of the sequence.
  std::vector<double> Point(uint64_t index) const;

 private:
  int dims_;
  // directions_[d * 32 + k]: direction number k of dimension d, as the top bits of a uint32.
  std::vector<uint32_t> directions_;
  std::vector<uint32_t> shift_;
};

// SplitMix64: a fast, well-mixed hash used to derive independent streams from (seed, index).
uint64_t Mix64(uint64_t x);

}  // namespace hyperpack::tuner
