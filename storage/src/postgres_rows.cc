#include "postgres_rows.h"

#include <cstdlib>

namespace hyperpack::storage::pg {

std::string Numbered(std::string_view sql) {
  std::string out;
  int n = 0;
  bool quoted = false;
  for (const char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out += "$" + std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

bool IsNull(const PGresult* res, int r, int c) { return PQgetisnull(res, r, c) != 0; }
std::string Text(const PGresult* res, int r, int c) { return PQgetvalue(res, r, c); }
int64_t Int(const PGresult* res, int r, int c) {
  return std::strtoll(PQgetvalue(res, r, c), nullptr, 10);
}
double Double(const PGresult* res, int r, int c) {
  return std::strtod(PQgetvalue(res, r, c), nullptr);
}
std::optional<double> OptDouble(const PGresult* res, int r, int c) {
  if (IsNull(res, r, c)) return std::nullopt;
  return Double(res, r, c);
}
std::optional<int64_t> OptInt(const PGresult* res, int r, int c) {
  if (IsNull(res, r, c)) return std::nullopt;
  return Int(res, r, c);
}

std::vector<EventRecord> EventsOf(const PGresult* res) {
  std::vector<EventRecord> out;
  for (int r = 0; r < PQntuples(res); ++r) out.push_back(ReadEventRow(Row(res, r)));
  return out;
}

}  // namespace hyperpack::storage::pg
