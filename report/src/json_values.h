// Small conversions into JSON that several report files share, for nlohmann::json and
// nlohmann::ordered_json alike. Pure functions; thread-safe.
#pragma once

#include <cmath>
#include <optional>
#include <variant>

#include "hyperpack/space.h"

namespace hyperpack::report {

// A number, or null where it is missing or not finite: JSON has no NaN or infinity.
template <typename JsonT>
JsonT FiniteOrNull(std::optional<double> v) {
  return v && std::isfinite(*v) ? JsonT(*v) : JsonT(nullptr);
}

// A parameter's value as it was given: a bool, an integer, a number or a string.
template <typename JsonT>
JsonT ValueAsJson(const Value& v) {
  return std::visit([](const auto& x) { return JsonT(x); }, v);
}

}  // namespace hyperpack::report
