#include "sobol.h"

#include <boost/random/detail/sobol_table.hpp>
#include <cassert>
#include <random>

namespace hyperpack::tuner {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

SobolSequence::SobolSequence(int dims, uint64_t seed)
    : dims_(dims), directions_(static_cast<size_t>(dims) * 32), shift_(dims) {
  assert(dims >= 0 && dims <= kMaxDims);
  using Table = boost::random::detail::qrng_tables::sobol;
  std::mt19937_64 rng(Mix64(seed ^ 0x50b01u));
  for (int d = 0; d < dims; ++d) {
    uint32_t m[32];
    if (d == 0) {
      for (int k = 0; k < 32; ++k) m[k] = 1;
    } else {
      // m_k from the primitive polynomial's recurrence (Bratley and Fox).
      const unsigned poly = Table::polynomial(d - 1);
      int degree = 0;
      while ((poly >> (degree + 1)) != 0) ++degree;
      for (int k = 0; k < degree && k < 32; ++k) m[k] = Table::minit(d - 1, k);
      for (int k = degree; k < 32; ++k) {
        uint32_t value = m[k - degree] ^ (m[k - degree] << degree);
        for (int i = 1; i < degree; ++i) {
          if ((poly >> (degree - i)) & 1u) value ^= m[k - i] << i;
        }
        m[k] = value;
      }
    }
    // v_k = m_k / 2^(k+1) as a 32-bit fraction.
    uint32_t v[32];
    for (int k = 0; k < 32; ++k) v[k] = m[k] << (31 - k);
    // Linear matrix scramble: multiply each direction number by a random lower-triangular
    // binary matrix with a unit diagonal (bit 31 is the most significant digit).
    uint32_t rows[32];
    for (int r = 0; r < 32; ++r) {
      uint32_t below = r == 0 ? 0u : static_cast<uint32_t>(rng()) & ~((~0u) >> r);
      rows[r] = below | (1u << (31 - r));
    }
    for (int k = 0; k < 32; ++k) {
      uint32_t out = 0;
      for (int r = 0; r < 32; ++r) {
        // Digit r of the scrambled number is the parity of row r AND the original digits.
        if (__builtin_parity(rows[r] & v[k])) out |= 1u << (31 - r);
      }
      directions_[static_cast<size_t>(d) * 32 + k] = out;
    }
    shift_[d] = static_cast<uint32_t>(rng());
  }
}

std::vector<double> SobolSequence::Point(uint64_t index) const {
  std::vector<double> x(dims_);
  for (int d = 0; d < dims_; ++d) {
    uint32_t acc = shift_[d];
    uint64_t n = index;
    for (int k = 0; n != 0 && k < 32; ++k, n >>= 1) {
      if (n & 1) acc ^= directions_[static_cast<size_t>(d) * 32 + k];
    }
    // 32 bits of the point plus half a unit of the last place: strictly inside (0, 1).
    x[d] = (static_cast<double>(acc) + 0.5) / 4294967296.0;
  }
  return x;
}

}  // namespace hyperpack::tuner
