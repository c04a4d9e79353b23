#include "hyperpack/scheduler/metrics.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>

#include "hyperpack/text.h"

namespace hyperpack::scheduler {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Python's json.dumps writes NaN, Infinity and -Infinity, which are not JSON. Outside strings,
// replace them with strings that FromJson turns back into numbers.
std::string QuoteNonFinite(std::string_view line) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size())
        out += line[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    auto starts = [&](std::string_view w) { return line.substr(i, w.size()) == w; };
    if (starts("-Infinity")) {
      out += "\"-inf\"";
      i += 8;
    } else if (starts("Infinity")) {
      out += "\"inf\"";
      i += 7;
    } else if (starts("NaN")) {
      out += "\"nan\"";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<double> NumberOf(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

std::optional<MetricLine> FromJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    if (text.find("NaN") == std::string_view::npos &&
        text.find("Infinity") == std::string_view::npos)
      return std::nullopt;
    j = nlohmann::json::parse(QuoteNonFinite(text), nullptr, false);
    if (j.is_discarded()) return std::nullopt;
  }
  if (!j.is_object()) return std::nullopt;
  MetricLine m;
  std::optional<int64_t>& epoch = m.epoch;
  for (const auto& [key, v] : j.items()) {
    if (key == "step" || key == "epoch") {
      if (v.is_number_integer() ||
          (v.is_number() && v.get<double>() == std::floor(v.get<double>()))) {
        (key == "step" ? m.step : epoch) = static_cast<int64_t>(v.get<double>());
      }
      continue;
    }
    if (v.is_boolean()) continue;
    if (auto x = NumberOf(v)) m.values.emplace_back(key, *x);
  }
  if (!m.step) m.step = epoch;
  if (m.values.empty()) return std::nullopt;
  return m;
}

std::optional<MetricLine> FromKeyValues(std::string_view text) {
  static const std::regex kToken(
      R"(([A-Za-z_][A-Za-z0-9_./-]*)\s*=\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf|NaN|Inf|Infinity))(?=[\s,;]|$))");
  MetricLine m;
  std::optional<int64_t>& epoch = m.epoch;
  std::string s(text);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kToken); it != std::sregex_iterator();
       ++it) {
    std::string name = (*it)[1];
    std::string number = (*it)[2];
    std::optional<double> x = ParseDouble(number);
    if (!x) {
      // The regex admits only numbers and the words nan / inf / Infinity here.
      std::string lower;
      for (char c : number) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.find("nan") != std::string::npos) {
        x = std::numeric_limits<double>::quiet_NaN();
      } else if (lower.find("inf") != std::string::npos) {
        x = lower.front() == '-' ? -std::numeric_limits<double>::infinity()
                                 : std::numeric_limits<double>::infinity();
      } else {
        continue;
      }
    }
    if (name == "step" || name == "epoch") {
      if (*x == std::floor(*x)) (name == "step" ? m.step : epoch) = static_cast<int64_t>(*x);
      continue;
    }
    m.values.emplace_back(name, *x);
  }
  if (!m.step) m.step = epoch;
  if (m.values.empty()) return std::nullopt;
  return m;
}

}  // namespace

std::optional<MetricLine> ParseMetricLine(std::string_view line) {
  std::string_view text = Trim(line);
  if (text.empty()) return std::nullopt;
  if (text.front() == '{' && text.back() == '}') return FromJson(text);
  if (text.find('=') == std::string_view::npos) return std::nullopt;
  return FromKeyValues(text);
}

}  // namespace hyperpack::scheduler
