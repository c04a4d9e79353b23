// What optuna.h's two sources share: Optuna's JSON as Python writes it. Internal to
// hyperpack::study.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace hyperpack::study::internal {

// Text as Python's json writes it, where a number may be NaN, Infinity or -Infinity, made strict
// JSON: those tokens (outside strings) become the strings "NaN", "Infinity" and "-Infinity".
std::string StrictJson(const std::string& python_json);
// A number, or one of StrictJson's strings, as a double; nullopt for anything else.
std::optional<double> Number(const nlohmann::json& value);

}  // namespace hyperpack::study::internal
