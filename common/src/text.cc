#include "hyperpack/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace hyperpack {

std::string FormatDouble(double x) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x);
  if (ec != std::errc()) return std::to_string(x);
  return std::string(buf, end);
}

std::string FormatShort(double x, int digits) {
  if (std::isnan(x)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, x);
  return buf;
}

std::optional<double> ParseDouble(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.front() == '+') text.remove_prefix(1);
  double x = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return x;
}

std::optional<int64_t> ParseInt(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.front() == '+') text.remove_prefix(1);
  int64_t x = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return x;
}

Result<double> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return Status::Invalid("'", std::string(text),
                           "' is not a duration; expected e.g. 45s, 10m, 1h30m, 2h or seconds");
  };
  if (text.empty()) return bad();
  if (auto plain = ParseDouble(text)) {
    if (*plain <= 0 || !std::isfinite(*plain)) return bad();
    return *plain;
  }
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.'))
      ++j;
    if (j == i || j == text.size()) return bad();
    auto number = ParseDouble(text.substr(i, j - i));
    if (!number) return bad();
    double unit = 0;
    switch (text[j]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return bad();
    }
    total += *number * unit;
    i = j + 1;
  }
  if (total <= 0) return bad();
  return total;
}

std::string FormatDuration(double seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 10) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1fs", seconds);
    return buf;
  }
  auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm%02llds", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> DidYouMean(std::string_view word,
                                      const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (!best || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // A typo changes a character or two; allow more for long words.
  size_t limit = std::max<size_t>(2, word.size() / 3);
  if (best && best_distance <= limit && best_distance < word.size()) return best;
  return std::nullopt;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool CharSet::Contains(char c) const {
  if (c != '\0' && others.find(c) != std::string_view::npos) return true;
  if (c >= '0' && c <= '9') return digits;
  return ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && letters;
}

bool IsToken(std::string_view s, const CharSet& first, const CharSet& rest) {
  if (s.empty() || !first.Contains(s.front())) return false;
  return std::all_of(s.begin() + 1, s.end(), [&](char c) { return rest.Contains(c); });
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Result<std::pair<std::string, int>> SplitHostPort(const std::string& text) {
  auto colon = text.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : ParseInt(text.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535 || colon == 0)
    return Status::Invalid("'", text, "' is not HOST:PORT");
  return std::make_pair(text.substr(0, colon), static_cast<int>(*port));
}

}  // namespace hyperpack
