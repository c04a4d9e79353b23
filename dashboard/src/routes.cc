#include "routes.h"

#include <nlohmann/json.hpp>

#include "hyperpack/host.h"
#include "hyperpack/text.h"

namespace hyperpack::dashboard {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

// The value of `key` in a query string ("a=1&token=x"), decoded; empty when absent or malformed.
std::string QueryValue(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != key) continue;
    std::string value;
    if (UrlDecode(pair.substr(eq + 1), &value)) return value;
  }
  return "";
}

}  // namespace

std::string UrlEncode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    if (Unreserved(c)) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

bool UrlDecode(std::string_view text, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      *out += text[i];
    } else {
      if (i + 2 >= text.size()) return false;
      const int hi = HexDigit(text[i + 1]), lo = HexDigit(text[i + 2]);
      if (hi < 0 || lo < 0) return false;
      *out += static_cast<char>(hi << 4 | lo);
      i += 2;
    }
  }
  return true;
}

Result<Transport> ChooseTransport(const Exposure& e, bool* warn) {
  *warn = false;
  if (e.insecure && e.certificate)
    return Status::Invalid("--insecure and --tls-cert contradict each other: choose one");
  if (e.loopback) return e.certificate ? Transport::kHttps : Transport::kHttp;
  if (!e.token)
    return Status::Invalid("--listen ", e.listen,
                           " is beyond loopback: give --token-file FILE, and the dashboard asks "
                           "every request for that token");
  if (e.certificate) return Transport::kHttps;
  if (!e.insecure)
    return Status::Invalid("--listen ", e.listen,
                           " is beyond loopback, where the dashboard serves HTTPS: give --tls-cert "
                           "and --tls-key (scripts/cluster-certs DIR HOST makes them), or "
                           "--insecure for plain HTTP on a network you trust");
  *warn = true;
  return Transport::kHttp;
}

Route ParseTarget(std::string_view target) {
  Route r;
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  if (q != std::string_view::npos) r.token = QueryValue(target.substr(q + 1), "token");
  auto named = [&](std::string_view prefix, RouteKind kind) {
    if (path.substr(0, prefix.size()) != prefix || path.size() == prefix.size()) return false;
    if (!UrlDecode(path.substr(prefix.size()), &r.study) ||
        r.study.find('\0') != std::string::npos) {
      r.kind = RouteKind::kBadRequest;
    } else {
      r.kind = kind;
    }
    return true;
  };
  if (path == "/" || path == "/index.html") {
    r.kind = RouteKind::kIndex;
  } else if (path == "/api/studies") {
    r.kind = RouteKind::kStudiesJson;
  } else if (!named("/study/", RouteKind::kStudyPage) &&
             !named("/api/study/", RouteKind::kStudyJson)) {
    r.kind = RouteKind::kNotFound;
  }
  return r;
}

bool Authorized(const std::string& expected, std::string_view authorization,
                const std::string& query_token) {
  if (expected.empty()) return true;
  auto same = [&](std::string_view given) {
    // Every byte is looked at whatever the first difference: the time says nothing about where.
    unsigned diff = given.size() == expected.size() ? 0u : 1u;
    for (size_t i = 0; i < expected.size(); ++i)
      diff |= static_cast<unsigned char>(expected[i]) ^
              static_cast<unsigned char>(i < given.size() ? given[i] : 0);
    return diff == 0;
  };
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) == kBearer &&
      same(authorization.substr(kBearer.size())))
    return true;
  return !query_token.empty() && same(query_token);
}

std::string IndexHtml(const std::string& studies_json, const std::string& token) {
  const nlohmann::json studies = nlohmann::json::parse(studies_json, nullptr, false);
  const std::string query = token.empty() ? "" : "?token=" + UrlEncode(token);
  std::string rows;
  if (studies.is_array()) {
    for (const nlohmann::json& s : studies) {
      if (!s.is_object() || !s.contains("study") || !s["study"].is_string()) continue;
      const std::string name = s["study"].get<std::string>();
      std::string counts;
      if (s.contains("trials") && s["trials"].is_object()) {
        for (const auto& [state, n] : s["trials"].items())
          counts += (counts.empty() ? "" : ", ") + n.dump() + " " + state;
      }
      auto text = [&](const char* key) {
        if (!s.contains(key) || s[key].is_null()) return std::string();
        return s[key].is_string() ? s[key].get<std::string>() : s[key].dump();
      };
      const double created = s.value("created", 0.0);
      rows += "<tr><td><a href=\"/study/" + UrlEncode(name) + query + "\">" + HtmlEscape(name) +
              "</a></td><td>" + HtmlEscape(text("state")) + "</td><td>" + HtmlEscape(counts) +
              "</td><td>" + HtmlEscape(text("best")) + "</td><td>" + HtmlEscape(text("metric")) +
              " (" + HtmlEscape(text("direction")) + ")</td><td>" +
              HtmlEscape(FormatTimestamp(created)) + "</td></tr>\n";
    }
  }
  if (rows.empty())
    rows = "<tr><td colspan=\"6\">no studies yet: start one with hyperpack run</td></tr>\n";
  return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
         "'unsafe-inline'\">\n<title>hyperpack "
         "dashboard</title>\n<style>body{font-family:system-ui,"
         "sans-serif;margin:2em;color:#1f2933}table{border-collapse:collapse}td,th{padding:.4em "
         ".8em;border-bottom:1px solid "
         "#d9e2ec;text-align:left}</style></head>\n<body><h1>hyperpack "
         "studies</h1>\n<table><thead><tr><th>study</th><th>state</th><th>trials</th><th>best</th>"
         "<th>metric</th><th>created</th></tr></thead><tbody>\n" +
         rows + "</tbody></table></body></html>\n";
}

}  // namespace hyperpack::dashboard
