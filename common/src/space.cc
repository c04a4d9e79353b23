#include "hyperpack/space.h"

#include <cmath>
#include <sstream>

#include "hyperpack/text.h"

namespace hyperpack {

std::string FormatValue(const Value& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return FormatDouble(d); }
    std::string operator()(const std::string& s) const { return s; }
  };
  return std::visit(Visitor{}, value);
}

std::string DisplayValue(const Value& value) {
  if (auto* d = std::get_if<double>(&value)) return FormatShort(*d, 4);
  return FormatValue(value);
}

std::optional<double> ValueAsNumber(const Value& value) {
  if (auto* b = std::get_if<bool>(&value)) return *b ? 1.0 : 0.0;
  if (auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&value)) return *d;
  return std::nullopt;
}

bool ValuesEqual(const Value& a, const Value& b) {
  if (a.index() == b.index()) return a == b;
  bool a_num = std::holds_alternative<int64_t>(a) || std::holds_alternative<double>(a);
  bool b_num = std::holds_alternative<int64_t>(b) || std::holds_alternative<double>(b);
  if (a_num && b_num) return *ValueAsNumber(a) == *ValueAsNumber(b);
  return false;
}

const char* ParamTypeName(ParamType type) {
  switch (type) {
    case ParamType::kFloat:
      return "float";
    case ParamType::kInt:
      return "int";
    case ParamType::kCategorical:
      return "categorical";
    case ParamType::kFixed:
      return "fixed";
  }
  return "?";
}

bool Condition::Holds(const Value& parent_value) const {
  bool in = false;
  for (const Value& v : values) in = in || ValuesEqual(v, parent_value);
  return op == Op::kNe ? !in : in;
}

int64_t ParamSpec::Cardinality() const {
  switch (type) {
    case ParamType::kInt:
      return (static_cast<int64_t>(high) - static_cast<int64_t>(low)) / step + 1;
    case ParamType::kCategorical:
      return static_cast<int64_t>(values.size());
    case ParamType::kFixed:
      return 1;
    case ParamType::kFloat:
      return 0;
  }
  return 0;
}

bool ParamSpec::Contains(const Value& v) const {
  switch (type) {
    case ParamType::kFloat: {
      if (std::holds_alternative<bool>(v) || std::holds_alternative<std::string>(v)) return false;
      double x = *ValueAsNumber(v);
      return std::isfinite(x) && x >= low && x <= high;
    }
    case ParamType::kInt: {
      auto* i = std::get_if<int64_t>(&v);
      if (!i) return false;
      auto lo = static_cast<int64_t>(low);
      return *i >= lo && *i <= static_cast<int64_t>(high) && (*i - lo) % step == 0;
    }
    case ParamType::kCategorical:
      for (const Value& c : values)
        if (c.index() == v.index() && c == v) return true;
      return false;
    case ParamType::kFixed:
      return value.index() == v.index() && value == v;
  }
  return false;
}

const ParamSpec* SearchSpace::Find(const std::string& name) const {
  for (const ParamSpec& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

bool SearchSpace::IsActive(const ParamSpec& param, const Config& config) const {
  if (!param.when) return true;
  const ParamSpec* parent = Find(param.when->parent);
  if (parent == nullptr || !IsActive(*parent, config)) return false;
  auto it = config.find(parent->name);
  return it != config.end() && param.when->Holds(it->second);
}

Status SearchSpace::Validate(const Config& config) const {
  for (const ParamSpec& p : params_) {
    bool active = IsActive(p, config);
    auto it = config.find(p.name);
    if (active && it == config.end()) return Status::Invalid("parameter '", p.name, "' is missing");
    if (!active && it != config.end())
      return Status::Invalid("parameter '", p.name, "' is set but inactive (", p.when->text, ")");
    if (active && !p.Contains(it->second))
      return Status::Invalid("parameter '", p.name, "': ", FormatValue(it->second),
                             " is not a value it can take");
  }
  for (const auto& [name, value] : config)
    if (Find(name) == nullptr) return Status::Invalid("unknown parameter '", name, "'");
  return Status::Ok();
}

Result<Config> SearchSpace::Conform(Config config) const {
  for (const ParamSpec& p : params_) {
    if (!IsActive(p, config)) continue;
    auto it = config.find(p.name);
    if (it == config.end()) {
      if (p.type == ParamType::kFixed) config[p.name] = p.value;
      continue;
    }
    Value& v = it->second;
    if (p.type == ParamType::kFloat && std::holds_alternative<int64_t>(v))
      v = static_cast<double>(std::get<int64_t>(v));
    if (p.type == ParamType::kInt && std::holds_alternative<double>(v)) {
      const double d = std::get<double>(v);
      if (std::isfinite(d) && std::abs(d) < 9e15 && d == std::floor(d)) v = static_cast<int64_t>(d);
    }
  }
  HP_RETURN_IF_ERROR(Validate(config));
  return config;
}

std::string SearchSpace::Describe() const {
  std::ostringstream out;
  for (const ParamSpec& p : params_) {
    out << p.name << ": " << ParamTypeName(p.type);
    switch (p.type) {
      case ParamType::kFloat:
        out << " [" << FormatDouble(p.low) << ", " << FormatDouble(p.high) << "]";
        if (p.log) out << " log";
        break;
      case ParamType::kInt:
        out << " [" << static_cast<int64_t>(p.low) << ", " << static_cast<int64_t>(p.high) << "]";
        if (p.step != 1) out << " step " << p.step;
        if (p.log) out << " log";
        break;
      case ParamType::kCategorical: {
        std::vector<std::string> parts;
        for (const Value& v : p.values) parts.push_back(FormatValue(v));
        out << " {" << Join(parts, ", ") << "}";
        break;
      }
      case ParamType::kFixed:
        out << " = " << FormatValue(p.value);
        break;
    }
    if (p.when) out << " when " << p.when->text;
    out << "\n";
  }
  return out.str();
}

}  // namespace hyperpack
