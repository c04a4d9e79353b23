// What optuna.h's two sources share: Optuna's JSON as Python writes it. Internal to
// hyperpack::study.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace hyperpack::study::internal {

// Text as Python's json writes it, where a number may be NaN, Infinity or -Infinity, made strict
// JSON: those tokens (outside strings) become the strings "NaN", "Infinity" and "-Infinity".
std::string StrictJson(const std::string& python_json);
// A number, or one of StrictJson's strings, as a double; nullopt for anything else.
std::optional<double> Number(const nlohmann::json& value);

// Fields of the file's JSON, read with no exception let out: a field missing, or of a type other
// than asked for, gives the fallback. (find on a value that is not an object finds nothing.)
// j[key], or null.
inline nlohmann::json At(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nlohmann::json() : *it;
}
// j[key] where it is a string, else empty.
inline std::string StringAt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
// j[key] where it is an integer, else `otherwise` (a float is not read as one: no conversion of
// a number out of range).
inline int64_t IntAt(const nlohmann::json& j, const char* key, int64_t otherwise) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : otherwise;
}
// j[key] where it is an object, else an empty one (a reference that outlives a loop over it).
inline const nlohmann::json& ObjectAt(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

}  // namespace hyperpack::study::internal
