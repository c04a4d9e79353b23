// The vocabulary shared by every module: parameter values, a search space, a configuration.
//
// A SearchSpace is an ordered list of parameters; a parent named by a `when:` condition always
// comes before its children (the study-file parser guarantees this). A Config maps each *active*
// parameter's name to its value; inactive conditional parameters are absent from it.
// Thread-safety: plain values; const methods are safe to call from several threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack {

// A parameter's value: categorical values may be booleans, integers, floats or strings.
using Value = std::variant<bool, int64_t, double, std::string>;

// A configuration: active parameters only, by name.
using Config = std::map<std::string, Value>;

// "true", "42", "0.001" (shortest text that reads back to the same double), "adamw".
std::string FormatValue(const Value& value);
// For people: like FormatValue, but floats to 4 significant digits ("0.001898").
std::string DisplayValue(const Value& value);
// The value as a number (bools as 0/1); nullopt for strings.
std::optional<double> ValueAsNumber(const Value& value);
// Exact equality, except that an int and a double holding the same number are equal.
bool ValuesEqual(const Value& a, const Value& b);

enum class ParamType { kFloat, kInt, kCategorical, kFixed };
const char* ParamTypeName(ParamType type);

// `when: optimizer == sgd`, `when: optimizer != sgd`, `when: optimizer in [sgd, rmsprop]`.
struct Condition {
  enum class Op { kEq, kNe, kIn };
  std::string parent;
  Op op = Op::kEq;
  std::vector<Value> values;  // one for == and !=
  std::string text;           // as written, for messages and printing

  bool Holds(const Value& parent_value) const;
};

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kFloat;
  // kFloat and kInt: the closed range [low, high]; `log` samples uniformly in log space.
  double low = 0.0;
  double high = 0.0;
  bool log = false;
  int64_t step = 1;           // kInt only: values are low, low+step, ... <= high
  std::vector<Value> values;  // kCategorical only
  Value value;                // kFixed only
  // kCategorical and kFixed: each value is the JSON text of a list, a mapping or a scalar
  // (compact, keys sorted), handed to the program decoded (ConfigToJson), as other tools' values
  // may be (a Determined constant list, an NNI choice of mappings).
  bool structured = false;
  std::optional<Condition> when;

  // Number of distinct values for kInt (low..high by step), kCategorical, kFixed (1).
  int64_t Cardinality() const;
  // True when `v` is a value this parameter can take.
  bool Contains(const Value& v) const;
};

class SearchSpace {
 public:
  SearchSpace() = default;
  explicit SearchSpace(std::vector<ParamSpec> params) : params_(std::move(params)) {}

  const std::vector<ParamSpec>& params() const { return params_; }
  size_t size() const { return params_.size(); }
  const ParamSpec* Find(const std::string& name) const;

  // Whether `param` is active given the values chosen so far for its ancestors.
  bool IsActive(const ParamSpec& param, const Config& config) const;

  // OK when `config` holds exactly the active parameters, each with a value it can take.
  Status Validate(const Config& config) const;
  // A configuration someone typed (hyperpack enqueue, add-results) made one of this space: active
  // fixed parameters filled in, a whole number given for a float read as a float and a float that
  // is whole for an integer as an integer; then Validate's error, if any.
  Result<Config> Conform(Config config) const;

  // A canonical one-line-per-parameter description, used to decide whether a stored study and a
  // study file describe the same space, and by `hyperpack validate`.
  std::string Describe() const;

 private:
  std::vector<ParamSpec> params_;
};

}  // namespace hyperpack
