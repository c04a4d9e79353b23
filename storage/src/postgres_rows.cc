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

StudyRecord ReadStudy(const PGresult* res, int r) {
  StudyRecord s;
  s.id = Int(res, r, 0);
  s.name = Text(res, r, 1);
  s.spec_text = Text(res, r, 2);
  s.spec_path = Text(res, r, 3);
  s.direction = ParseDirection(Text(res, r, 4)).value_or(Direction::kMinimize);
  s.metric = Text(res, r, 5);
  s.seed = static_cast<uint64_t>(Int(res, r, 6));
  s.created = Double(res, r, 7);
  s.runner_pid = OptInt(res, r, 8);
  s.runner_host = Text(res, r, 9);
  return s;
}

Result<std::vector<EventRecord>> ReadEvents(const PGresult* res) {
  std::vector<EventRecord> out;
  for (int r = 0; r < PQntuples(res); ++r) {
    EventRecord e;
    if (auto t = OptInt(res, r, 0)) e.trial = static_cast<int>(*t);
    e.time = Double(res, r, 1);
    e.kind = Text(res, r, 2);
    e.message = Text(res, r, 3);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace hyperpack::storage::pg
