// Small text utilities shared by the modules: numbers, durations, did-you-mean.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack {

// Shortest decimal text that parses back to exactly `x` ("0.1", "1e-05", "3").
std::string FormatDouble(double x);
// A number with `digits` significant digits, for tables ("0.8812").
std::string FormatShort(double x, int digits = 4);

// Whole-string numeric parses: no trailing characters, no empty input.
std::optional<double> ParseDouble(std::string_view text);
std::optional<int64_t> ParseInt(std::string_view text);

// "90m", "1h30m", "45s", "2h", "1d", "1.5h" or a plain number of seconds -> seconds.
Result<double> ParseDuration(std::string_view text);
// 4000 -> "1h06m40s", 75 -> "1m15s", 3.2 -> "3.2s".
std::string FormatDuration(double seconds);

// Levenshtein distance.
size_t EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a likely typo.
std::optional<std::string> DidYouMean(std::string_view word,
                                      const std::vector<std::string>& candidates);

// `s` without the white space at either end (a view into `s`).
std::string_view Trim(std::string_view s);

// A set of ASCII characters: the letters and the digits where asked, and the others listed.
// The study file's names are checked with these rather than std::regex, whose instantiation cost
// each file that used it seconds of compile time.
struct CharSet {
  bool letters = true;
  bool digits = true;
  std::string_view others;
  bool Contains(char c) const;
};
// Whether all of `s` is one character of `first` and then any number of `rest` (what the regular
// expression "[first][rest]*" matches).
bool IsToken(std::string_view s, const CharSet& first, const CharSet& rest);
// Whether `s` is one or more ASCII digits and nothing else.
bool IsDigits(std::string_view s);

// Joins with a separator: {"a","b"} -> "a, b".
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

// `text` with &, <, >, " and ' escaped, for an HTML text node or a quoted attribute.
std::string HtmlEscape(std::string_view text);

// "HOST:PORT" as (HOST, PORT), the port in [0, 65535]; HOST may be empty only before a colon that
// is not the first character ("[::1]:80" keeps its brackets).
Result<std::pair<std::string, int>> SplitHostPort(const std::string& text);

}  // namespace hyperpack
