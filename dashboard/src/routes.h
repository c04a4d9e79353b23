// The dashboard's pure half: whether it may listen as asked, what a request's target asks for,
// whether it carries the token, and the studies' index page. No sockets, no storage.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "hyperpack/status.h"

namespace hyperpack::dashboard {

enum class Transport { kHttp, kHttps };

// What the operator gave, and where the dashboard is to listen.
struct Exposure {
  std::string listen;  // as given, for the messages
  bool loopback = true;
  bool token = false;
  bool certificate = false;  // --tls-cert and --tls-key
  bool insecure = false;     // --insecure
};

// HTTPS when a certificate is given. Plain HTTP on loopback, or beyond it only by choice
// (--insecure, with a warning the caller logs: `*warn` is set). Beyond loopback a token is
// required either way. kInvalidArgument saying what to give otherwise.
Result<Transport> ChooseTransport(const Exposure& exposure, bool* warn);

enum class RouteKind { kIndex, kStudyPage, kStudyJson, kStudiesJson, kNotFound, kBadRequest };

struct Route {
  RouteKind kind = RouteKind::kNotFound;
  std::string study;  // kStudyPage, kStudyJson: the name, percent-decoded
  std::string token;  // the `token` query parameter, decoded; empty when absent
};

// "/study/my%20study?token=abc" -> {kStudyPage, "my study", "abc"}. A malformed escape, or a name
// holding a NUL, is kBadRequest.
Route ParseTarget(std::string_view target);

// Whether a request may be answered: always when `expected` is empty (a loopback dashboard), else
// when the Authorization header is "Bearer <expected>" or the query's token is `expected`. The
// comparison takes the same time wherever the strings differ.
bool Authorized(const std::string& expected, std::string_view authorization,
                const std::string& query_token);

// `text` percent-encoded for a URL path segment or query value (unreserved characters stay).
std::string UrlEncode(std::string_view text);
// The inverse ('+' stays '+', as in a path); false on a malformed escape.
bool UrlDecode(std::string_view text, std::string* out);

// The index: the studies as ReportStudies's JSON lists them (`studies_json`), each linking to its
// page (with `?token=` when `token` is not empty). Malformed JSON gives a page saying so.
std::string IndexHtml(const std::string& studies_json, const std::string& token);

}  // namespace hyperpack::dashboard
