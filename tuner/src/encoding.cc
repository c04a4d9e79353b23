#include "hyperpack/tuner/encoding.h"

#include <algorithm>
#include <cmath>

namespace hyperpack::tuner {
namespace {

// Bounds, in the unit's own coordinates, of a numeric parameter's interval: for ints each value
// owns a cell of equal width centred on it (equal width in log space when `log`).
struct Interval {
  double lo, hi;
};

Interval Bounds(const ParamSpec& p) {
  if (p.type == ParamType::kFloat) {
    return p.log ? Interval{std::log(p.low), std::log(p.high)} : Interval{p.low, p.high};
  }
  if (p.log) return {std::log(p.low - 0.5), std::log(p.high + 0.5)};
  double half = 0.5 * static_cast<double>(p.step);
  double top = p.low + static_cast<double>(p.Cardinality() - 1) * static_cast<double>(p.step);
  return {p.low - half, top + half};
}

}  // namespace

Encoder::Encoder(SearchSpace space) : space_(std::move(space)) {
  for (size_t i = 0; i < space_.params().size(); ++i) {
    const ParamSpec& p = space_.params()[i];
    first_dim_.push_back(static_cast<int>(dim_param_.size()));
    int n = p.type == ParamType::kCategorical ? static_cast<int>(p.values.size())
            : p.type == ParamType::kFixed     ? 0
                                              : 1;
    for (int k = 0; k < n; ++k) dim_param_.push_back(static_cast<int>(i));
  }
}

int Encoder::num_dims(int p) const {
  int next = p + 1 < static_cast<int>(first_dim_.size()) ? first_dim_[p + 1] : dims();
  return next - first_dim_[p];
}

double Encoder::NumericToUnit(const ParamSpec& p, const Value& v) const {
  double x = ValueAsNumber(v).value_or(p.low);
  if (p.type == ParamType::kInt && !p.log) {
    // The centre of the value's cell, so that Decode(Encode(v)) == v exactly.
    double n = static_cast<double>(p.Cardinality());
    double k = std::round((x - p.low) / static_cast<double>(p.step));
    return std::clamp((k + 0.5) / n, 0.0, 1.0);
  }
  Interval b = Bounds(p);
  double t = p.log ? std::log(x) : x;
  return std::clamp((t - b.lo) / (b.hi - b.lo), 0.0, 1.0);
}

Value Encoder::NumericFromUnit(const ParamSpec& p, double u) const {
  u = std::clamp(u, 0.0, 1.0);
  if (p.type == ParamType::kFloat) {
    Interval b = Bounds(p);
    double t = b.lo + u * (b.hi - b.lo);
    double x = p.log ? std::exp(t) : t;
    return std::clamp(x, p.low, p.high);
  }
  auto lo = static_cast<int64_t>(p.low);
  auto hi = static_cast<int64_t>(p.high);
  if (p.log) {
    Interval b = Bounds(p);
    auto v = static_cast<int64_t>(std::llround(std::exp(b.lo + u * (b.hi - b.lo))));
    return std::clamp(v, lo, hi);
  }
  int64_t n = p.Cardinality();
  auto k = static_cast<int64_t>(std::floor(u * static_cast<double>(n)));
  k = std::clamp<int64_t>(k, 0, n - 1);
  return lo + k * p.step;
}

Encoder::Encoded Encoder::Encode(const Config& config) const {
  Encoded out{std::vector<double>(dims(), 0.5), std::vector<bool>(dims(), false)};
  for (size_t i = 0; i < space_.params().size(); ++i) {
    const ParamSpec& p = space_.params()[i];
    int d0 = first_dim_[i];
    auto it = config.find(p.name);
    if (it == config.end()) continue;
    switch (p.type) {
      case ParamType::kFloat:
      case ParamType::kInt:
        out.x[d0] = NumericToUnit(p, it->second);
        out.active[d0] = true;
        break;
      case ParamType::kCategorical:
        for (size_t k = 0; k < p.values.size(); ++k) {
          bool match = p.values[k].index() == it->second.index() && p.values[k] == it->second;
          out.x[d0 + k] = match ? 1.0 : 0.0;
          out.active[d0 + k] = true;
        }
        break;
      case ParamType::kFixed:
        break;
    }
  }
  return out;
}

Config Encoder::Decode(std::span<const double> x) const {
  Config config;
  for (size_t i = 0; i < space_.params().size(); ++i) {
    const ParamSpec& p = space_.params()[i];
    if (!space_.IsActive(p, config)) continue;
    int d0 = first_dim_[i];
    switch (p.type) {
      case ParamType::kFloat:
      case ParamType::kInt:
        config[p.name] = NumericFromUnit(p, x[d0]);
        break;
      case ParamType::kCategorical: {
        size_t best = 0;
        for (size_t k = 1; k < p.values.size(); ++k)
          if (x[d0 + k] > x[d0 + best]) best = k;
        config[p.name] = p.values[best];
        break;
      }
      case ParamType::kFixed:
        config[p.name] = p.value;
        break;
    }
  }
  return config;
}

Config Encoder::FromUnitPerParam(std::span<const double> u) const {
  Config config;
  for (size_t i = 0; i < space_.params().size(); ++i) {
    const ParamSpec& p = space_.params()[i];
    if (!space_.IsActive(p, config)) continue;
    switch (p.type) {
      case ParamType::kFloat:
      case ParamType::kInt:
        config[p.name] = NumericFromUnit(p, u[i]);
        break;
      case ParamType::kCategorical: {
        auto k = static_cast<size_t>(std::floor(u[i] * static_cast<double>(p.values.size())));
        config[p.name] = p.values[std::min(k, p.values.size() - 1)];
        break;
      }
      case ParamType::kFixed:
        config[p.name] = p.value;
        break;
    }
  }
  return config;
}

bool SameConfig(const Config& a, const Config& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || !ValuesEqual(ia->second, ib->second)) return false;
  }
  return true;
}

}  // namespace hyperpack::tuner
