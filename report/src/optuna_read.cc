// optuna.h's ReadOptunaStorage: an Optuna storage read back, its RDB SQLite database table by table
// (the tables of schema version 12, the same from Optuna 3.0 to 5.x), or its journal handed to
// study::ParseOptunaJournal. The database is opened read-only: a study being imported may still
// be Optuna's.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "hyperpack/report/optuna.h"
#include "hyperpack/text.h"

namespace hyperpack::report {
namespace {

using study::OptunaStudy;
using study::OptunaTrial;

// The alembic revisions hyperpack reads, and what the older ones were written by.
constexpr const char* kReadable[] = {"v3.0.0.d", "v3.2.0.a"};
constexpr const char* kOlder[] = {"v0.9.0.a", "v1.2.0.a", "v1.3.0.a", "v2.4.0.a",
                                  "v2.6.0.a", "v3.0.0.a", "v3.0.0.b", "v3.0.0.c"};
// Optuna's own upgrade assets (tests/storages_tests/rdb_tests/test_upgrade_assets in its
// repository) hold one of each; 0.9.0's has no alembic_version table at all.

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}
  ~Reader() {
    if (db_) sqlite3_close(db_);
  }

  Status Open() {
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      return Status::Io("cannot open ", path_, ": ", db_ ? sqlite3_errmsg(db_) : "out of memory");
    return Status::Ok();
  }

  using Row = std::function<Status(sqlite3_stmt*)>;
  // Runs `sql` and hands each row to `row`.
  Status Each(const char* sql, const Row& row) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK)
      return Status::Invalid(path_, " is not an Optuna database of Optuna 3.0 to 5.x's schema (",
                             sqlite3_errmsg(db_), ")");
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owner(stmt, sqlite3_finalize);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) HP_RETURN_IF_ERROR(row(stmt));
    if (rc != SQLITE_DONE) return Status::Io("reading ", path_, ": ", sqlite3_errmsg(db_));
    return Status::Ok();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

std::string Text(sqlite3_stmt* s, int column) {
  const unsigned char* text = sqlite3_column_text(s, column);
  return text ? reinterpret_cast<const char*>(text) : "";
}

// A stored value with its value_type: FINITE, INF_POS, INF_NEG or NAN (a NULL value then).
double Stored(sqlite3_stmt* s, int value, int type) {
  const std::string t = Text(s, type);
  if (t == "INF_POS") return HUGE_VAL;
  if (t == "INF_NEG") return -HUGE_VAL;
  if (t == "NAN" || sqlite3_column_type(s, value) == SQLITE_NULL) return std::nan("");
  return sqlite3_column_double(s, value);
}

std::optional<double> Time(sqlite3_stmt* s, int column) {
  if (sqlite3_column_type(s, column) == SQLITE_NULL) return std::nullopt;
  return study::ParseOptunaTime(Text(s, column));
}

// A database an older Optuna set up: which, and how to make it one hyperpack reads.
Status TooOld(Reader& r, const std::string& by) {
  return Status::Invalid(r.path(), " was set up by ", by,
                         "; upgrade it first with Optuna 3.0 or "
                         "later: optuna storage upgrade --storage sqlite:///",
                         r.path());
}

Status CheckRevision(Reader& r) {
  std::string revision, library;
  Status s = r.Each("SELECT version_num FROM alembic_version", [&](sqlite3_stmt* st) {
    revision = Text(st, 0);
    return Status::Ok();
  });
  if (!s.ok()) {  // Optuna 0.9 kept only version_info, before its alembic revisions began
    Status v = r.Each("SELECT library_version FROM version_info", [&](sqlite3_stmt* st) {
      library = Text(st, 0);
      return Status::Ok();
    });
    if (v.ok() && !library.empty()) return TooOld(r, "Optuna " + library + " (no schema revision)");
    return Status::Invalid(r.path(),
                           " is an SQLite database but not Optuna's (it has no alembic_version "
                           "table); give an Optuna RDB storage or a JournalStorage file");
  }
  for (const char* ok : kReadable)
    if (revision == ok) return Status::Ok();
  for (const char* old : kOlder)
    if (revision == old)
      return TooOld(r, StrCat(revision.rfind("v3.0.0", 0) == 0 ? "a pre-release of Optuna 3.0"
                                                               : "an Optuna before 3.0",
                              " (schema revision ", revision, ")"));
  return Status::Invalid(r.path(), " has schema revision '", revision,
                         "', which hyperpack does not know; it reads Optuna 3.0 to 5.x's "
                         "(v3.0.0.d, v3.2.0.a)");
}

// The studies, their directions and attributes, by study_id.
Status ReadStudies(Reader& r, std::map<int64_t, OptunaStudy>* studies) {
  HP_RETURN_IF_ERROR(r.Each("SELECT study_id, study_name FROM studies", [&](sqlite3_stmt* s) {
    (*studies)[sqlite3_column_int64(s, 0)].name = Text(s, 1);
    return Status::Ok();
  }));
  HP_RETURN_IF_ERROR(
      r.Each("SELECT study_id, direction FROM study_directions ORDER BY study_id, objective",
             [&](sqlite3_stmt* s) {
               auto it = studies->find(sqlite3_column_int64(s, 0));
               if (it != studies->end())
                 it->second.directions.push_back(Text(s, 1) == "MAXIMIZE" ? Direction::kMaximize
                                                                          : Direction::kMinimize);
               return Status::Ok();
             }));
  return r.Each("SELECT study_id, key, value_json FROM study_system_attributes",
                [&](sqlite3_stmt* s) {
                  auto it = studies->find(sqlite3_column_int64(s, 0));
                  if (it == studies->end()) return Status::Ok();
                  Status added = study::AddOptunaStudyAttr(Text(s, 1), Text(s, 2), &it->second);
                  return added.ok() ? added
                                    : Status::Invalid(r.path(), ": study '", it->second.name,
                                                      "': ", added.message());
                });
}

// Each trial's own rows: parameters, values, intermediate values, system attributes.
Status ReadTrialRows(Reader& r, std::map<int64_t, OptunaTrial*>& trials) {
  auto of = [&](sqlite3_stmt* s) {
    auto it = trials.find(sqlite3_column_int64(s, 0));
    return it == trials.end() ? nullptr : it->second;
  };
  HP_RETURN_IF_ERROR(
      r.Each("SELECT trial_id, param_name, param_value, distribution_json FROM trial_params "
             "ORDER BY param_id",
             [&](sqlite3_stmt* s) {
               if (OptunaTrial* t = of(s))
                 t->params.push_back({Text(s, 1), Text(s, 3), sqlite3_column_double(s, 2)});
               return Status::Ok();
             }));
  HP_RETURN_IF_ERROR(
      r.Each("SELECT trial_id, value, value_type FROM trial_values ORDER BY trial_id, objective",
             [&](sqlite3_stmt* s) {
               if (OptunaTrial* t = of(s)) t->values.push_back(Stored(s, 1, 2));
               return Status::Ok();
             }));
  HP_RETURN_IF_ERROR(
      r.Each("SELECT trial_id, step, intermediate_value, intermediate_value_type FROM "
             "trial_intermediate_values",
             [&](sqlite3_stmt* s) {
               if (OptunaTrial* t = of(s))
                 t->intermediate[sqlite3_column_int64(s, 1)] = Stored(s, 2, 3);
               return Status::Ok();
             }));
  return r.Each("SELECT trial_id, key, value_json FROM trial_system_attributes",
                [&](sqlite3_stmt* s) {
                  OptunaTrial* t = of(s);
                  if (!t) return Status::Ok();
                  Status added = study::AddOptunaTrialAttr(Text(s, 1), Text(s, 2), t);
                  return added.ok() ? added : Status::Invalid(r.path(), ": ", added.message());
                });
}

Status ReadTrials(Reader& r, std::map<int64_t, OptunaStudy>* studies) {
  std::map<int64_t, std::pair<int64_t, OptunaTrial>> rows;  // trial_id: (study_id, trial)
  HP_RETURN_IF_ERROR(r.Each(
      "SELECT trial_id, number, study_id, state, datetime_start, datetime_complete FROM trials",
      [&](sqlite3_stmt* s) {
        OptunaTrial t;
        t.number = sqlite3_column_int(s, 1);
        const std::optional<study::OptunaState> state = study::ParseOptunaState(Text(s, 3));
        if (!state)
          return Status::Invalid(r.path(), ": trial ", t.number, " has state '", Text(s, 3),
                                 "', which is not Optuna's");
        t.state = *state;
        t.started = Time(s, 4);
        t.ended = Time(s, 5);
        rows[sqlite3_column_int64(s, 0)] = {sqlite3_column_int64(s, 2), std::move(t)};
        return Status::Ok();
      }));
  std::map<int64_t, OptunaTrial*> by_id;
  for (auto& [id, row] : rows) by_id[id] = &row.second;
  HP_RETURN_IF_ERROR(ReadTrialRows(r, by_id));
  for (auto& [id, row] : rows) {
    auto study = studies->find(row.first);
    if (study != studies->end()) study->second.trials.push_back(std::move(row.second));
  }
  for (auto& [id, study] : *studies)
    std::sort(study.trials.begin(), study.trials.end(),
              [](const OptunaTrial& a, const OptunaTrial& b) { return a.number < b.number; });
  return Status::Ok();
}

Result<std::vector<OptunaStudy>> ReadSqlite(const std::string& path) {
  Reader r(path);
  HP_RETURN_IF_ERROR(r.Open());
  HP_RETURN_IF_ERROR(CheckRevision(r));
  std::map<int64_t, OptunaStudy> studies;
  HP_RETURN_IF_ERROR(ReadStudies(r, &studies));
  HP_RETURN_IF_ERROR(ReadTrials(r, &studies));
  std::vector<OptunaStudy> out;
  for (auto& [id, study] : studies) out.push_back(std::move(study));
  return out;
}

}  // namespace

Result<std::vector<OptunaStudy>> ReadOptunaStorage(const std::string& given) {
  constexpr std::string_view kUrl = "sqlite:///";
  const std::string path = given.rfind(kUrl, 0) == 0 ? given.substr(kUrl.size()) : given;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read ", path, ": no such file");
  char head[16] = {};
  in.read(head, sizeof(head));
  if (in.gcount() == 16 && std::string(head, 16) == std::string("SQLite format 3\0", 16))
    return ReadSqlite(path);
  in.clear();
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  return study::ParseOptunaJournal(text.str(), path);
}

}  // namespace hyperpack::report
