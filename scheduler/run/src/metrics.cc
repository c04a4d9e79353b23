#include "hyperpack/scheduler/metrics.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

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

// `x` as a step or epoch: a whole number that fits in int64_t, else nullopt (casting a double
// outside that range, as a line like {"step": 1e300} would have us do, is undefined behaviour).
std::optional<int64_t> WholeNumber(double x) {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63, exact as a double
  if (!(x >= -kLimit && x < kLimit) || x != std::floor(x)) return std::nullopt;
  return static_cast<int64_t>(x);
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
      if (!v.is_number()) continue;
      if (auto n = WholeNumber(v.get<double>())) (key == "step" ? m.step : epoch) = *n;
      continue;
    }
    if (v.is_boolean()) continue;
    if (auto x = NumberOf(v)) m.values.emplace_back(key, *x);
  }
  if (!m.step) m.step = epoch;
  if (m.values.empty()) return std::nullopt;
  return m;
}

bool IsAsciiLetter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return IsAsciiLetter(c) || c == '_'; }
bool IsNameChar(char c) {
  return IsAsciiLetter(c) || IsAsciiDigit(c) || c == '_' || c == '.' || c == '/' || c == '-';
}
bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool IsDelimiter(char c) { return IsSpace(c) || c == ',' || c == ';'; }

// Whether `v` is, whole, a number as a name=value token may give it:
// [-+]? (DIGITS [.] DIGITS? | .DIGITS) ([eE] [-+]? DIGITS)?, or [-+]? nan|inf|NaN|Inf|Infinity.
bool IsNumberToken(std::string_view v) {
  size_t i = 0;
  if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
  const std::string_view word = v.substr(i);
  if (word == "nan" || word == "inf" || word == "NaN" || word == "Inf" || word == "Infinity")
    return true;
  auto digits = [&] {
    const size_t from = i;
    while (i < v.size() && IsAsciiDigit(v[i])) ++i;
    return i - from;
  };
  if (digits() > 0) {
    if (i < v.size() && v[i] == '.') {
      ++i;
      digits();
    }
  } else {
    // No digits before the point: ".5", which needs some after it.
    if (i == v.size() || v[i] != '.') return false;
    ++i;
    if (digits() == 0) return false;
  }
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == v.size();
}

// Calls on_token(name, number) for each `name = number` in `text` that is followed by a space,
// ',', ';' or the end, in order. A scan in linear time rather than a std::regex: libstdc++'s
// regex recurses once per character matched, and a long enough token (a trial's line may be 64 KiB)
// overflowed the stack.
template <typename OnToken>
void ForEachToken(std::string_view text, OnToken on_token) {
  auto skip_spaces = [&](size_t i) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    return i;
  };
  size_t i = 0;
  while (i < text.size()) {
    if (!IsNameStart(text[i])) {
      ++i;
      continue;
    }
    size_t name_end = i;
    while (name_end < text.size() && IsNameChar(text[name_end])) ++name_end;
    // Whether a token starts here depends only on what follows the name, so on failure no later
    // start inside the same name can succeed either.
    size_t value = skip_spaces(name_end);
    if (value == text.size() || text[value] != '=') {
      i = name_end;
      continue;
    }
    value = skip_spaces(value + 1);
    size_t value_end = value;
    while (value_end < text.size() && !IsDelimiter(text[value_end])) ++value_end;
    const std::string_view number = text.substr(value, value_end - value);
    if (!IsNumberToken(number)) {
      i = name_end;
      continue;
    }
    on_token(text.substr(i, name_end - i), number);
    i = value_end;
  }
}

std::optional<MetricLine> FromKeyValues(std::string_view text) {
  MetricLine m;
  std::optional<int64_t>& epoch = m.epoch;
  ForEachToken(text, [&](std::string_view name, std::string_view number) {
    std::optional<double> x = ParseDouble(number);
    if (!x) {
      // ForEachToken admits only numbers and the words nan / inf / Infinity here.
      std::string lower;
      for (char c : number) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.find("nan") != std::string::npos) {
        x = std::numeric_limits<double>::quiet_NaN();
      } else if (lower.find("inf") != std::string::npos) {
        x = lower.front() == '-' ? -std::numeric_limits<double>::infinity()
                                 : std::numeric_limits<double>::infinity();
      } else {
        return;
      }
    }
    if (name == "step" || name == "epoch") {
      if (auto n = WholeNumber(*x)) (name == "step" ? m.step : epoch) = *n;
      return;
    }
    m.values.emplace_back(std::string(name), *x);
  });
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
