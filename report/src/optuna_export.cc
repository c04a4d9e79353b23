// report.h's ExportOptunaSqlite.
// A study written as an Optuna database: a new SQLite file in the schema that the user's Optuna
// opens as it is (Optuna checks the alembic revision when it opens a database and refuses any
// other), so that `optuna.load_study`, `optuna best-trial` and optuna-dashboard open it:
//   Optuna 3.2 to 5.x   alembic revision v3.2.0.a (checked with 4.6.0 and 5.0.0rc1)
//   Optuna 3.0 and 3.1  v3.0.0.d (checked with Debian's 3.1.0)
// The two differ by one index (ix_trials_study_id); both are schema version 12.
//
// What maps onto what: parameters with Optuna's distributions (float and int ranges with their
// log and step, categoricals by index; a fixed parameter as a one-choice categorical), values,
// the objective's reports as intermediate values by step, and states (completed COMPLETE, pruned
// and paused PRUNED, running RUNNING, pending WAITING, every other end FAIL). Each trial's own
// state, error and attempt are kept as user attributes (`hyperpack_state`, ...). Times are UTC.
//
// Several objectives make a multi-objective study: a direction and a value per objective, in the
// study file's order, so that (constraints aside) `study.best_trials` is hyperpack's Pareto set.
// A completed trial missing an objective's value (or with a NaN one) is FAIL, as Optuna's own tell
// makes it. Constraints go as Optuna's samplers write them: the system attribute "constraints",
// each constraint's violation (<= 0 holds), on COMPLETE and PRUNED trials. Optuna 3.1's
// best_trials does not read it (only its NSGA-II, TPE and BoTorch samplers do), so there a
// non-dominated trial that breaks a constraint is among best_trials, and can push a feasible one
// off; later Optuna releases drop such trials from best_trials before taking the front, as
// hyperpack does.
#include <sqlite3.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "hyperpack/config_json.h"
#include "hyperpack/report/optuna.h"
#include "hyperpack/report/report.h"
#include "hyperpack/text.h"
#include "json_values.h"
#include "study_view.h"

namespace hyperpack::report {
namespace {

using storage::TrialRecord;
using storage::TrialState;
using Json = nlohmann::ordered_json;

// Optuna's tables as its SQLAlchemy models create them (schema version 12), the same from 3.0 to
// 5.0 but for kTrialsIndex, and the revision rows (VersionRows).
constexpr char kSchema[] = R"sql(
CREATE TABLE studies (
  study_id INTEGER NOT NULL, study_name VARCHAR(512) NOT NULL, PRIMARY KEY (study_id));
CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name);
CREATE TABLE version_info (
  version_info_id INTEGER NOT NULL, schema_version INTEGER, library_version VARCHAR(256),
  PRIMARY KEY (version_info_id), CHECK (version_info_id=1));
CREATE TABLE study_directions (
  study_direction_id INTEGER NOT NULL, direction VARCHAR(8) NOT NULL, study_id INTEGER NOT NULL,
  objective INTEGER NOT NULL, PRIMARY KEY (study_direction_id), UNIQUE (study_id, objective),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE study_user_attributes (
  study_user_attribute_id INTEGER NOT NULL, study_id INTEGER, "key" VARCHAR(512),
  value_json TEXT, PRIMARY KEY (study_user_attribute_id), UNIQUE (study_id, "key"),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE study_system_attributes (
  study_system_attribute_id INTEGER NOT NULL, study_id INTEGER, "key" VARCHAR(512),
  value_json TEXT, PRIMARY KEY (study_system_attribute_id), UNIQUE (study_id, "key"),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE trials (
  trial_id INTEGER NOT NULL, number INTEGER, study_id INTEGER, state VARCHAR(8) NOT NULL,
  datetime_start DATETIME, datetime_complete DATETIME, PRIMARY KEY (trial_id),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE trial_user_attributes (
  trial_user_attribute_id INTEGER NOT NULL, trial_id INTEGER, "key" VARCHAR(512),
  value_json TEXT, PRIMARY KEY (trial_user_attribute_id), UNIQUE (trial_id, "key"),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE trial_system_attributes (
  trial_system_attribute_id INTEGER NOT NULL, trial_id INTEGER, "key" VARCHAR(512),
  value_json TEXT, PRIMARY KEY (trial_system_attribute_id), UNIQUE (trial_id, "key"),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE trial_params (
  param_id INTEGER NOT NULL, trial_id INTEGER, param_name VARCHAR(512), param_value FLOAT,
  distribution_json TEXT, PRIMARY KEY (param_id), UNIQUE (trial_id, param_name),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE trial_values (
  trial_value_id INTEGER NOT NULL, trial_id INTEGER NOT NULL, objective INTEGER NOT NULL,
  value FLOAT, value_type VARCHAR(7) NOT NULL, PRIMARY KEY (trial_value_id),
  UNIQUE (trial_id, objective), FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE trial_intermediate_values (
  trial_intermediate_value_id INTEGER NOT NULL, trial_id INTEGER NOT NULL, step INTEGER NOT NULL,
  intermediate_value FLOAT, intermediate_value_type VARCHAR(7) NOT NULL,
  PRIMARY KEY (trial_intermediate_value_id), UNIQUE (trial_id, step),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE trial_heartbeats (
  trial_heartbeat_id INTEGER NOT NULL, trial_id INTEGER NOT NULL, heartbeat DATETIME NOT NULL,
  PRIMARY KEY (trial_heartbeat_id), UNIQUE (trial_id),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE alembic_version (
  version_num VARCHAR(32) NOT NULL, CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num));
)sql";

// What revision v3.2.0.a (Optuna 3.2) added.
constexpr char kTrialsIndex[] = "CREATE INDEX ix_trials_study_id ON trials (study_id);";

// The schema's revision, and the release that version_info says set it up (Optuna names it in
// its messages about the schema).
std::string VersionRows(OptunaSchema schema) {
  const bool old = schema == OptunaSchema::kOptuna30;
  return std::string("INSERT INTO version_info VALUES (1, 12, '") + (old ? "3.1.0" : "3.2.0") +
         "');\nINSERT INTO alembic_version VALUES ('" + (old ? "v3.0.0.d" : "v3.2.0.a") + "');";
}

enum class OptunaState { kComplete, kPruned, kRunning, kWaiting, kFail };

OptunaState ToOptuna(const TrialRecord& t, bool has_values) {
  switch (t.state) {
    case TrialState::kCompleted:
      // Optuna's COMPLETE always has every objective's value.
      return has_values ? OptunaState::kComplete : OptunaState::kFail;
    case TrialState::kPruned:
    case TrialState::kPaused:
      return OptunaState::kPruned;
    case TrialState::kRunning:
      return OptunaState::kRunning;
    case TrialState::kPending:
      return OptunaState::kWaiting;
    default:
      return OptunaState::kFail;
  }
}

// Optuna's TrialState names, as its trials table holds them.
const char* StateName(OptunaState s) {
  switch (s) {
    case OptunaState::kComplete:
      return "COMPLETE";
    case OptunaState::kPruned:
      return "PRUNED";
    case OptunaState::kRunning:
      return "RUNNING";
    case OptunaState::kWaiting:
      return "WAITING";
    case OptunaState::kFail:
      return "FAIL";
  }
  return "FAIL";
}

// A parameter's Optuna distribution and its value in Optuna's internal form (a categorical's
// index), or nullopt when the value is not one the space holds.
std::optional<std::pair<std::string, double>> Distribution(const ParamSpec& p, const Value& v) {
  Json d;
  double internal = ValueAsNumber(v).value_or(0);
  switch (p.type) {
    case ParamType::kFloat:
      d = Json{
          {"name", "FloatDistribution"},
          {"attributes", {{"step", nullptr}, {"low", p.low}, {"high", p.high}, {"log", p.log}}}};
      break;
    case ParamType::kInt:
      d = Json{{"name", "IntDistribution"},
               {"attributes",
                {{"log", p.log},
                 {"step", p.step},
                 {"low", static_cast<int64_t>(p.low)},
                 {"high", static_cast<int64_t>(p.high)}}}};
      break;
    case ParamType::kCategorical:
    case ParamType::kFixed: {
      const std::vector<Value> choices =
          p.type == ParamType::kFixed ? std::vector<Value>{p.value} : p.values;
      Json list = Json::array();
      std::optional<size_t> index;
      for (size_t i = 0; i < choices.size(); ++i) {
        list.push_back(ValueAsJson<Json>(choices[i]));
        if (!index && ValuesEqual(choices[i], v)) index = i;
      }
      if (!index) return std::nullopt;
      internal = static_cast<double>(*index);
      d = Json{{"name", "CategoricalDistribution"}, {"attributes", {{"choices", list}}}};
      break;
    }
  }
  return std::make_pair(d.dump(), internal);
}

// "2026-11-24 19:24:49.669821", as SQLAlchemy stores a DATETIME.
std::string DateTime(double epoch_seconds) {
  std::time_t whole = static_cast<std::time_t>(std::floor(epoch_seconds));
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &utc);
  int micros = static_cast<int>(std::lround((epoch_seconds - std::floor(epoch_seconds)) * 1e6));
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%06d", text, std::min(micros, 999999));
  return out;
}

// Optuna's value_type: FINITE, INF_POS or INF_NEG (with a NULL value), NAN (intermediate only).
const char* ValueType(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INF_POS" : "INF_NEG";
  return "FINITE";
}

// A trial's value of each objective, in the study file's order, as Optuna keeps them; nullopt
// when one is missing or NaN (Optuna holds all of a trial's values or none, and no NaN).
std::optional<std::vector<double>> OptunaValues(const study::StudySpec& spec,
                                                const TrialRecord& t) {
  if (!spec.MultiObjective()) {
    if (!t.value || std::isnan(*t.value)) return std::nullopt;
    return std::vector<double>{*t.value};
  }
  std::vector<double> out;
  for (const study::Objective& o : spec.objectives) {
    auto it = t.values.find(o.metric);
    if (it == t.values.end() || std::isnan(it->second)) return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

// Each constraint's violation as JSON, in Python's spelling: a missing metric's +inf must read
// back as a number (Infinity), where nlohmann would write null and Optuna's `<= 0` would raise.
std::string ViolationsJson(const study::StudySpec& spec, const TrialRecord& t) {
  tuner::TrialOutcome outcome;
  study::FillOutcomeValues(spec, t.values, &outcome);
  std::string out = "[";
  for (size_t j = 0; j < outcome.violations.size(); ++j) {
    const double v = outcome.violations[j];
    if (j > 0) out += ", ";
    if (std::isnan(v))
      out += "NaN";
    else if (std::isinf(v))
      out += v > 0 ? "Infinity" : "-Infinity";
    else
      out += Json(v).dump();
  }
  return out + "]";
}

// A thin owner of the file being written: statements with bound values, nothing else.
class Writer {
 public:
  ~Writer() {
    if (db_) sqlite3_close(db_);
  }
  Status Open(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK)
      return Error("opening " + path);
    return Exec("PRAGMA journal_mode=OFF; BEGIN;");
  }
  Status Exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK)
      return Status::Ok();
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return Status::Io("writing the Optuna database: ", text);
  }
  // Runs `sql` once with `args` bound in order: int64, double, text, or nullopt for NULL.
  using Arg = std::variant<std::nullopt_t, int64_t, double, std::string>;
  Status Insert(const char* sql, const std::vector<Arg>& args) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error(sql);
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owner(stmt, sqlite3_finalize);
    for (size_t i = 0; i < args.size(); ++i) {
      const int at = static_cast<int>(i) + 1;
      if (auto* n = std::get_if<int64_t>(&args[i])) sqlite3_bind_int64(stmt, at, *n);
      if (auto* d = std::get_if<double>(&args[i])) sqlite3_bind_double(stmt, at, *d);
      if (auto* t = std::get_if<std::string>(&args[i]))
        sqlite3_bind_text(stmt, at, t->c_str(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
      if (std::holds_alternative<std::nullopt_t>(args[i])) sqlite3_bind_null(stmt, at);
    }
    if (sqlite3_step(stmt) != SQLITE_DONE) return Error(sql);
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) {
    return Status::Io("writing the Optuna database (", what.substr(0, 60),
                      "): ", db_ ? sqlite3_errmsg(db_) : "cannot open");
  }
  sqlite3* db_ = nullptr;
};

constexpr char kUserAttr[] =
    "INSERT INTO trial_user_attributes (trial_id, key, value_json) VALUES (?, ?, ?)";

// The trial's values, one row an objective, and its constraints' violations. A FAIL has no value
// in Optuna; a pruned trial keeps its last ones, as Optuna's own do.
Status WriteOutcome(Writer& w, const study::StudySpec& spec, const TrialRecord& t, int64_t id,
                    OptunaState state, const std::optional<std::vector<double>>& values) {
  if (state == OptunaState::kFail || !values) return Status::Ok();
  for (size_t k = 0; k < values->size(); ++k) {
    const double v = (*values)[k];
    HP_RETURN_IF_ERROR(w.Insert(
        "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?, ?, ?, ?)",
        {id, static_cast<int64_t>(k), std::isfinite(v) ? Writer::Arg(v) : Writer::Arg(std::nullopt),
         std::string(ValueType(v))}));
  }
  // Where Optuna's samplers put a trial's constraints: COMPLETE and PRUNED trials only.
  if (spec.constraints.empty() ||
      (state != OptunaState::kComplete && state != OptunaState::kPruned))
    return Status::Ok();
  return w.Insert(
      "INSERT INTO trial_system_attributes (trial_id, key, value_json) VALUES (?, ?, ?)",
      {id, std::string("constraints"), ViolationsJson(spec, t)});
}

Status WriteTrial(Writer& w, storage::Storage& db, const StudyView& l, const TrialRecord& t) {
  const int64_t id = t.number + 1;
  const std::optional<std::vector<double>> values = OptunaValues(*l.spec, t);
  const OptunaState state = ToOptuna(t, values.has_value());
  HP_RETURN_IF_ERROR(w.Insert(
      "INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete) "
      "VALUES (?, ?, 1, ?, ?, ?)",
      {id, int64_t{t.number}, std::string(StateName(state)),
       t.started ? Writer::Arg(DateTime(*t.started)) : Writer::Arg(std::nullopt),
       t.ended ? Writer::Arg(DateTime(*t.ended)) : Writer::Arg(std::nullopt)}));
  HP_RETURN_IF_ERROR(WriteOutcome(w, *l.spec, t, id, state, values));
  const Config& config = t.params;
  for (const ParamSpec& p : l.spec->space.params()) {
    auto it = config.find(p.name);
    if (it == config.end()) continue;  // inactive here, as Optuna leaves it out too
    auto d = Distribution(p, it->second);
    if (!d)
      return Status::Invalid("trial ", t.number, ": ", p.name, " = ", FormatValue(it->second),
                             " is not in the study file's space");
    HP_RETURN_IF_ERROR(
        w.Insert("INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) "
                 "VALUES (?, ?, ?, ?)",
                 {id, p.name, d->second, d->first}));
  }
  // The objective's reports, the last at each step (Optuna holds one value a step).
  HP_ASSIGN_OR_RETURN(auto points, db.TrialMetrics(l.study.id, t.number));
  std::map<int64_t, double> by_step;
  for (const storage::MetricPoint& m : points)
    if (m.name == l.study.metric) by_step[m.step] = m.value;
  for (const auto& [step, v] : by_step)
    HP_RETURN_IF_ERROR(
        w.Insert("INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, "
                 "intermediate_value_type) VALUES (?, ?, ?, ?)",
                 {id, step, std::isfinite(v) ? Writer::Arg(v) : Writer::Arg(std::nullopt),
                  std::string(ValueType(v))}));
  HP_RETURN_IF_ERROR(w.Insert(kUserAttr, {id, std::string("hyperpack_state"),
                                          Json(storage::TrialStateName(t.state)).dump()}));
  HP_RETURN_IF_ERROR(
      w.Insert(kUserAttr, {id, std::string("hyperpack_attempt"), Json(t.attempt).dump()}));
  if (!t.error.empty())
    HP_RETURN_IF_ERROR(w.Insert(
        kUserAttr, {id, std::string("hyperpack_error"), Json(t.error.substr(0, 2000)).dump()}));
  return Status::Ok();
}

Status WriteStudy(Writer& w, storage::Storage& db, const StudyView& l, OptunaSchema schema) {
  HP_RETURN_IF_ERROR(w.Exec(kSchema));
  if (schema == OptunaSchema::kOptuna32) HP_RETURN_IF_ERROR(w.Exec(kTrialsIndex));
  HP_RETURN_IF_ERROR(w.Exec(VersionRows(schema)));
  HP_RETURN_IF_ERROR(
      w.Insert("INSERT INTO studies (study_id, study_name) VALUES (1, ?)", {l.study.name}));
  // Optuna's objective k is the study file's k-th objective.
  const std::vector<study::Objective>& objectives = l.spec->objectives;
  Json metrics = Json::array();
  for (size_t k = 0; k < objectives.size(); ++k) {
    const bool maximize = objectives[k].direction == Direction::kMaximize;
    HP_RETURN_IF_ERROR(
        w.Insert("INSERT INTO study_directions (direction, study_id, objective) VALUES (?, 1, ?)",
                 {std::string(maximize ? "MAXIMIZE" : "MINIMIZE"), static_cast<int64_t>(k)}));
    metrics.push_back(objectives[k].metric);
  }
  constexpr char kStudyAttr[] =
      "INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (1, ?, ?)";
  HP_RETURN_IF_ERROR(
      w.Insert(kStudyAttr, {std::string("hyperpack_metric"), Json(l.study.metric).dump()}));
  // Optuna 3.1 has no names for a study's values; this says which metric each one is.
  if (l.spec->MultiObjective())
    HP_RETURN_IF_ERROR(w.Insert(kStudyAttr, {std::string("hyperpack_metrics"), metrics.dump()}));
  for (const TrialRecord& t : l.trials) HP_RETURN_IF_ERROR(WriteTrial(w, db, l, t));
  return w.Exec("COMMIT;");
}

}  // namespace

Result<OptunaSchema> ParseOptunaRelease(const std::string& release) {
  // MAJOR[.MINOR[.PATCH]], each of one to three digits, maybe with a pre-release tail (a, b or rc
  // and digits): 3.1, 4.6.0, 5.0.0rc1.
  std::string_view rest = release;
  auto number = [&rest]() -> std::optional<int> {
    const size_t n = std::min(rest.find_first_not_of("0123456789"), rest.size());
    if (n == 0 || n > 3) return std::nullopt;
    const int value = std::stoi(std::string(rest.substr(0, n)));
    rest.remove_prefix(n);
    return value;
  };
  auto dot_number = [&]() -> std::optional<int> {
    if (!rest.starts_with('.')) return std::nullopt;
    rest.remove_prefix(1);
    auto value = number();
    return value ? value : std::optional<int>(-1);  // -1: a dot without a number
  };
  const std::optional<int> major = number();
  const std::optional<int> minor = major ? dot_number() : std::nullopt;
  const std::optional<int> patch = minor >= 0 ? dot_number() : std::nullopt;
  for (std::string_view tail : {"rc", "a", "b"}) {
    if (!rest.starts_with(tail)) continue;
    rest.remove_prefix(tail.size());
    break;
  }
  const bool tail_ok = rest.find_first_not_of("0123456789") == std::string_view::npos;
  if (!major || minor == -1 || patch == -1 || !tail_ok)
    return Status::Invalid("--optuna: '", release,
                           "' is not a release; give the Optuna release that will open the "
                           "database, e.g. 3.1, 4.6 or 5.0");
  if (*major < 3)
    return Status::Invalid("--optuna ", release,
                           ": Optuna before 3.0 has another schema; hyperpack writes databases "
                           "for Optuna 3.0 and later (upgrade Optuna, or give 3.1)");
  if (*major > 3) return OptunaSchema::kOptuna32;
  if (!minor)
    return Status::Invalid(
        "--optuna 3: Optuna 3.0 and 3.1 open one schema and 3.2 on another; "
        "give the minor release too (3.1 or 3.2)");
  return *minor < 2 ? OptunaSchema::kOptuna30 : OptunaSchema::kOptuna32;
}

const char* OptunaSchemaReleases(OptunaSchema schema) {
  return schema == OptunaSchema::kOptuna30 ? "Optuna 3.0 and 3.1" : "Optuna 3.2 and later";
}

Status ExportOptunaSqlite(storage::Storage& db, const std::string& name, const std::string& path,
                          OptunaSchema schema) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec))
    return Status::AlreadyExists(path,
                                 " exists; hyperpack writes an Optuna database only to a "
                                 "new file (remove it or choose another path)");
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudyView(db, name, ViewParts::kTrials));
  if (!l.spec)
    return Status::Invalid("study '", name,
                           "': its stored study file no longer parses, so the "
                           "parameters' distributions are unknown");
  const std::string tmp = path + ".tmp";
  fs::remove(tmp, ec);
  Status s;
  {
    Writer w;
    s = w.Open(tmp);
    if (s.ok()) s = WriteStudy(w, db, l, schema);
  }
  if (s.ok()) {
    fs::rename(tmp, path, ec);
    if (ec) s = Status::Io("cannot write ", path, ": ", ec.message());
  }
  if (!s.ok()) fs::remove(tmp, ec);
  return s;
}

}  // namespace hyperpack::report
