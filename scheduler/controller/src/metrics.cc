#include "hyperpack/scheduler/metrics.h"

#include <algorithm>
#include <boost/regex.hpp>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "hyperpack/text.h"

namespace hyperpack::scheduler {
namespace {

// Boost.Regex's own traits under a name of this file's, so that the bound below applies to the
// metric patterns' searches and to nothing else in the program.
struct PatternTraits : boost::regex_traits<char> {};
using Pattern = boost::basic_regex<char, PatternTraits>;
using PatternMatch = boost::match_results<const char*>;

// The most steps a search may take. Boost allows max(N*S^2, min(N^2, 1e8)) for a line of N
// characters and a pattern of S: a second for (a+)+b on a 60 KiB line of 'a's, about five for a
// 100-character pattern, without end for longer ones. Capped here at about 0.1 s, on the io thread;
// a pattern that does not backtrack badly takes a few steps a character, far below it.
constexpr std::ptrdiff_t kMaxSearchSteps = 10'000'000;

}  // namespace
}  // namespace hyperpack::scheduler

// Boost's estimate of a search's steps, replaced for the metric patterns' matcher alone (a member
// of a Boost detail class: a Boost that renames it fails to compile here rather than lose the
// bound). Boost's heuristic, capped; it throws boost::regex_error (error_complexity) past it.
template <>
void boost::BOOST_REGEX_DETAIL_NS::perl_matcher<const char*,
                                                std::allocator<boost::sub_match<const char*>>,
                                                hyperpack::scheduler::PatternTraits>::
    estimate_max_state_count(std::random_access_iterator_tag*) {
  using hyperpack::scheduler::kMaxSearchSteps;
  const std::ptrdiff_t n = std::max<std::ptrdiff_t>(1, last - base);
  const std::ptrdiff_t s = std::max<std::ptrdiff_t>(1, static_cast<std::ptrdiff_t>(re.size()));
  auto times = [](std::ptrdiff_t a, std::ptrdiff_t b) {  // saturating at the cap
    return a > kMaxSearchSteps / b ? kMaxSearchSteps : a * b;
  };
  max_state_count =
      std::min(kMaxSearchSteps, std::max(times(times(n, s), s), times(n, n)) + 100'000);
}

namespace hyperpack::scheduler {
namespace {

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

struct MetricPatterns::Compiled {
  std::string name;
  Pattern regex;
};

Result<MetricPatterns> MetricPatterns::Make(std::span<const study::MetricPattern> patterns) {
  auto compiled = std::make_shared<std::vector<Compiled>>();
  for (const study::MetricPattern& p : patterns) {
    try {
      Pattern regex(p.pattern, boost::regex::perl);
      if (regex.mark_count() != 1)
        return Status::Invalid("metric '", p.name, "': pattern '", p.pattern, "' has ",
                               regex.mark_count(), " capture groups; expected exactly one");
      compiled->push_back({p.name, std::move(regex)});
    } catch (const std::exception& e) {  // boost::regex_error; std::bad_alloc
      return Status::Invalid("metric '", p.name, "': '", p.pattern,
                             "' is not a regular expression: ", e.what());
    }
  }
  MetricPatterns out;
  out.compiled_ = std::move(compiled);
  return out;
}

bool MetricPatterns::empty() const { return !compiled_ || compiled_->empty(); }

std::vector<std::pair<std::string, double>> MetricPatterns::Match(std::string_view line) const {
  std::vector<std::pair<std::string, double>> found;
  if (empty()) return found;
  for (const Compiled& c : *compiled_) {
    PatternMatch m;
    try {
      if (!boost::regex_search(line.data(), line.data() + line.size(), m, c.regex)) continue;
    } catch (const std::exception&) {
      // Too complex a search (or out of its memory) on this line: it reports nothing here.
      continue;
    }
    if (!m[1].matched) continue;  // the group sits in an alternative that did not match
    std::optional<double> x = ParseDouble(std::string_view(m[1].first, m[1].length()));
    if (x && std::isfinite(*x)) found.emplace_back(c.name, *x);
  }
  return found;
}

std::optional<MetricLine> ParseMetricLine(std::string_view line, const MetricPatterns& patterns) {
  std::optional<MetricLine> parsed = ParseMetricLine(line);
  if (patterns.empty()) return parsed;
  std::vector<std::pair<std::string, double>> found = patterns.Match(line);
  if (found.empty()) return parsed;
  MetricLine m = parsed ? std::move(*parsed) : MetricLine{};
  // Where the line named no step, ParseMetricLine took the epoch for it: an epoch pattern's value
  // takes its place, unless a step pattern gave one.
  const bool step_was_epoch = !m.step || m.step == m.epoch;
  bool step_found = false;
  for (auto& [name, x] : found) {
    if (name == "step" || name == "epoch") {
      if (std::optional<int64_t> n = WholeNumber(x)) {
        (name == "step" ? m.step : m.epoch) = *n;
        step_found = step_found || name == "step";
      }
      continue;
    }
    // An init-capture: clang before 16 (the fuzzers' compiler) cannot capture a binding itself.
    std::erase_if(m.values, [&key = name](const auto& v) { return v.first == key; });
    m.values.emplace_back(std::move(name), x);
  }
  if (!step_found && step_was_epoch) m.step = m.epoch;
  if (m.values.empty()) return std::nullopt;
  return m;
}

std::optional<MetricLine> ParseMetricLine(std::string_view line) {
  std::string_view text = Trim(line);
  if (text.empty()) return std::nullopt;
  if (text.front() == '{' && text.back() == '}') return FromJson(text);
  if (text.find('=') == std::string_view::npos) return std::nullopt;
  return FromKeyValues(text);
}

}  // namespace hyperpack::scheduler
