#include "postgres_storage.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hyperpack/text.h"
#include "postgres_rows.h"
#include "schema.h"
#include "statements.h"
#include "transaction.h"

namespace hyperpack::storage {
namespace {

using pg::Double;
using pg::EventsOf;
using pg::Int;
using pg::Numbered;
using pg::OptDouble;
using pg::OptInt;
using pg::Params;
using pg::PgResult;
using pg::Text;

// The schema's steps (schema.h), in PostgreSQL's words.
const std::vector<Migration>& PostgresMigrations() { return SchemaMigrations(Dialect::kPostgres); }

// Serialises the schema's creation between processes (pg_advisory_xact_lock's key).
constexpr int64_t kMigrationLock = 0x6879706572706b;  // "hyperpk"
// PostgreSQL's SQLSTATE for a unique key already used.
constexpr std::string_view kUniqueViolation = "23505";
// The leader lease of `hyperpack serve` (TryLead): a session lock, released when the session ends.
constexpr int64_t kLeaderLock = 0x6879706c656164;  // "hyplead"
// LockStudy: (this, the study's id) in the two-key advisory lock space.
constexpr int kStudyLockClass = 0x6870;  // "hp"

class PostgresStorage final : public Storage {
 public:
  PostgresStorage(PGconn* conn, std::string url) : conn_(conn), url_(std::move(url)) {}
  ~PostgresStorage() override {
    // PQfinish only sends the goodbye: the server ends the session, and frees its locks, some time
    // later. Releasing a held lease first makes "free when the handle is closed" true on return.
    if (leading_) (void)Exec("SELECT pg_advisory_unlock_all()");
    PQfinish(conn_);
  }

  const std::string& path() const override { return url_; }
  int schema_version() const override { return schema_version_; }

  Status Transaction(const std::function<Status()>& body) override {
    return transaction_.Run(
        body, [this] { return Exec("BEGIN"); }, [this] { return Exec("COMMIT"); },
        [this] { (void)Exec("ROLLBACK"); });
  }

  Result<bool> TryLead() override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query("SELECT pg_try_advisory_lock($1)",
                                            Params().Add(kLeaderLock), "taking the leader lease"));
    const bool won = PQgetvalue(res.get(), 0, 0)[0] == 't';  // libpq's text form: t or f
    leading_ = leading_ || won;
    return won;
  }

  // Connects, then checks or creates the schema.
  Status Start(const Storage::Options& options) {
    if (options.read_only) HP_RETURN_IF_ERROR(Exec("SET default_transaction_read_only = on"));
    HP_RETURN_IF_ERROR(Exec("SET client_min_messages = warning"));
    const int latest = PostgresMigrations().back().version;
    if (options.read_only) {
      auto version = Query(sql::kSchemaVersion, {}, "reading the schema");
      if (!version.ok())
        return Status::NotFound("no hyperpack database at ", url_,
                                " (give --storage URL or set HYPERPACK_STORAGE)");
      schema_version_ = static_cast<int>(Int(version->get(), 0, 0));
      if (schema_version_ != latest)
        return Status::FailedPrecondition(
            url_, " has schema version ", schema_version_, " but this hyperpack reads version ",
            latest,
            schema_version_ < latest
                ? "; the next command that writes to it (hyperpack run, create, ask) upgrades it"
                : "");
      return Status::Ok();
    }
    return Transaction([&] { return Migrate(latest); });
  }

  Result<StudyRecord> CreateStudy(const StudyRecord& study) override {
    StudyRecord out = study;
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query(StudyTable().insert() + " RETURNING id", Params().AddAll(StudyTable().Cells(study)),
              "creating study '" + study.name + "'",
              StrCat("a study named '", study.name, "' already exists")));
    out.id = Int(res.get(), 0, 0);
    out.runner_pid.reset();
    out.runner_host.clear();
    return out;
  }

  Result<std::optional<StudyRecord>> FindStudy(const std::string& name) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res, Query(sql::FindStudy(), Params().Add(name), "reading study '" + name + "'"));
    if (PQntuples(res.get()) == 0) return std::optional<StudyRecord>();
    return std::optional<StudyRecord>(ReadStudyRow(pg::Row(res.get(), 0)));
  }

  Result<std::vector<StudyRecord>> ListStudies() override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::ListStudies(), {}, "listing studies"));
    std::vector<StudyRecord> out;
    for (int r = 0; r < PQntuples(res.get()); ++r)
      out.push_back(ReadStudyRow(pg::Row(res.get(), r)));
    return out;
  }

  Status SetRunner(int64_t study_id, std::optional<int64_t> pid, const std::string& host) override {
    return Query(sql::kSetRunner, Params().Add(pid).Add(host).Add(study_id),
                 "recording the study's runner")
        .status();
  }

  Status InsertTrial(const TrialRecord& t) override {
    return Query(TrialTable().insert(), Params().AddAll(TrialTable().Cells(t, t.study_id)),
                 StrCat("inserting trial ", t.number),
                 StrCat("trial ", t.number, " already exists"))
        .status();
  }

  Status FinishTrial(const TrialRecord& t) override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::kFinishTrial,
                                            Params()
                                                .Add(TrialStateName(t.state))
                                                .Add(t.value)
                                                .Add(t.ended)
                                                .Add(t.exit_status)
                                                .Add(t.error)
                                                .Add(EncodeValues(t.values))
                                                .Add(t.study_id)
                                                .Add(t.number),
                                            StrCat("finishing trial ", t.number)));
    if (Changed(res.get()) != 1) return Status::NotFound("no trial ", t.number, " to finish");
    return Status::Ok();
  }

  Status ResumeTrial(int64_t study_id, int number,
                     const std::vector<RankRecord>& placement) override {
    HP_ASSIGN_OR_RETURN(PgResult res,
                        Query(sql::kResumePaused,
                              Params().Add(EncodePlacement(placement)).Add(study_id).Add(number),
                              StrCat("resuming trial ", number)));
    if (Changed(res.get()) != 1) return Status::NotFound("no paused trial ", number);
    return Status::Ok();
  }

  Result<bool> Heartbeat(int64_t study_id, int number, double now) override {
    HP_ASSIGN_OR_RETURN(PgResult res,
                        Query(sql::kHeartbeat, Params().Add(now).Add(study_id).Add(number),
                              StrCat("recording trial ", number, "'s heartbeat")));
    return Changed(res.get()) == 1;
  }

  Result<std::vector<int>> InterruptUnfinished(int64_t study_id, double now,
                                               const std::string& reason) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query("UPDATE trials SET state = 'interrupted', ended = COALESCE(ended, $1), error = $2 "
              "WHERE study_id = $3 AND state IN ('running', 'pending') RETURNING number",
              Params().Add(now).Add(reason).Add(study_id), "marking trials interrupted"));
    std::vector<int> numbers;
    for (int r = 0; r < PQntuples(res.get()); ++r)
      numbers.push_back(static_cast<int>(Int(res.get(), r, 0)));
    std::sort(numbers.begin(), numbers.end());
    return numbers;
  }

  Result<std::vector<TrialRecord>> ListTrials(int64_t study_id) override {
    return SelectTrials("WHERE study_id = $1 ORDER BY number", Params().Add(study_id), study_id);
  }

  Result<std::vector<TrialRecord>> ListTrialsIn(int64_t study_id,
                                                std::span<const TrialState> states) override {
    std::vector<std::string> names;
    for (TrialState s : states) names.push_back(TrialStateName(s));
    // The names as one text[] parameter: `state = ANY($2)`.
    return SelectTrials("WHERE study_id = $1 AND state = ANY($2::text[]) ORDER BY number",
                        Params().Add(study_id).Add("{" + Join(names, ",") + "}"), study_id);
  }

  Result<std::vector<TrialRecord>> BestTrials(int64_t study_id, Direction direction,
                                              std::optional<double> bound, int limit) override {
    // PostgreSQL orders NaN above every number, and holds it equal to itself: "<> 'NaN'" drops it.
    const bool max = direction == Direction::kMaximize;
    return SelectTrials(
        StrCat("WHERE study_id = $1 AND state = 'completed' AND value IS NOT NULL AND value <> "
               "'NaN'::float8 AND ($2::float8 IS NULL OR value ",
               max ? ">=" : "<=", " $2::float8) ORDER BY value ", max ? "DESC" : "ASC",
               ", number LIMIT $3"),
        Params().Add(study_id).Add(bound).Add(limit < 0 ? std::optional<int64_t>()
                                                        : std::optional<int64_t>(limit)),
        study_id);
  }

  Status LockStudy(int64_t study_id) override {
    // A transaction-level advisory lock in the two-key space (the leader lease uses the one-key
    // space), released by COMMIT or ROLLBACK.
    return Query("SELECT pg_advisory_xact_lock($1, $2)",
                 Params().Add(kStudyLockClass).Add(static_cast<int>(study_id)), "locking the study")
        .status();
  }

  Result<TrialTally> TallyTrials(int64_t study_id) override {
    HP_ASSIGN_OR_RETURN(PgResult res,
                        Query(sql::kTally, Params().Add(study_id), "counting trials"));
    TrialTally tally;
    for (int r = 0; r < PQntuples(res.get()); ++r) {
      auto state = ParseTrialState(Text(res.get(), r, 0));
      if (!state) return Status::Io("a trial has an unknown state '", Text(res.get(), r, 0), "'");
      tally.counts[*state] = static_cast<int>(Int(res.get(), r, 1));
      tally.AddSpan(OptDouble(res.get(), r, 2), OptDouble(res.get(), r, 3),
                    static_cast<int>(Int(res.get(), r, 4)));
    }
    return tally;
  }

  Result<int> NextTrialNumber(int64_t study_id) override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::kNextTrialNumber, Params().Add(study_id),
                                            "reading the next trial number"));
    return static_cast<int>(Int(res.get(), 0, 0));
  }

  Result<std::string> TunerState(int64_t study_id) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res, Query(sql::kTunerState, Params().Add(study_id), "reading the tuner's state"));
    if (PQntuples(res.get()) == 0) return std::string();
    return Text(res.get(), 0, 0);
  }

  Status SetTunerState(int64_t study_id, const std::string& state) override {
    return Query(sql::kSaveTunerState, Params().Add(study_id).Add(state),
                 "keeping the tuner's state")
        .status();
  }

  Status AddMetrics(int64_t study_id, int trial_number,
                    std::span<const MetricPoint> points) override {
    return Transaction([&]() -> Status {
      HP_ASSIGN_OR_RETURN(
          PgResult found,
          Query(sql::kTrialId, Params().Add(study_id).Add(trial_number), "finding a trial"));
      if (PQntuples(found.get()) == 0)
        return Status::NotFound("no trial ", trial_number, " to add metrics to");
      const int64_t trial_id = Int(found.get(), 0, 0);
      for (const MetricPoint& p : points)
        HP_RETURN_IF_ERROR(
            Query(sql::kInsertMetric,
                  Params().Add(trial_id).Add(p.step).Add(p.name).Add(p.value).Add(p.time),
                  "adding metrics")
                .status());
      return Status::Ok();
    });
  }

  Result<std::vector<MetricPoint>> TrialMetrics(int64_t study_id, int trial_number) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query("SELECT m.step, m.name, m.value, m.time FROM metrics m JOIN trials t ON m.trial_id "
              "= t.id WHERE t.study_id = $1 AND t.number = $2 ORDER BY m.id",
              Params().Add(study_id).Add(trial_number), "reading metrics"));
    std::vector<MetricPoint> out;
    for (int r = 0; r < PQntuples(res.get()); ++r)
      out.push_back({Int(res.get(), r, 0), Text(res.get(), r, 1), Double(res.get(), r, 2),
                     Double(res.get(), r, 3)});
    return out;
  }

  Result<std::optional<MetricPoint>> LatestMetric(int64_t study_id, int trial_number,
                                                  const std::string& name) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query("SELECT m.step, m.name, m.value, m.time FROM metrics m JOIN trials t ON m.trial_id "
              "= t.id WHERE t.study_id = $1 AND t.number = $2 AND m.name = $3 ORDER BY m.id DESC "
              "LIMIT 1",
              Params().Add(study_id).Add(trial_number).Add(name), "reading the latest metric"));
    if (PQntuples(res.get()) == 0) return std::optional<MetricPoint>();
    return std::optional<MetricPoint>(MetricPoint{Int(res.get(), 0, 0), Text(res.get(), 0, 1),
                                                  Double(res.get(), 0, 2),
                                                  Double(res.get(), 0, 3)});
  }

  Status AddEvent(int64_t study_id, const EventRecord& e) override {
    return Query(EventTable().insert(), Params().AddAll(EventTable().Cells(e, study_id)),
                 "adding an event")
        .status();
  }

  Result<std::vector<EventRecord>> ListEvents(int64_t study_id, int limit) override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::NewestEvents(), Params().Add(study_id).Add(limit),
                                            "listing events"));
    return EventsOf(res.get());
  }

  Result<std::vector<EventRecord>> ListEventsOfKinds(int64_t study_id,
                                                     std::span<const EventKind> kinds) override {
    if (kinds.empty()) return std::vector<EventRecord>();
    Params params;
    params.Add(study_id);
    std::string marks;
    for (EventKind kind : kinds) {
      params.Add(EventKindName(kind));
      marks += marks.empty() ? "?" : ", ?";
    }
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::EventsOfKinds() + marks + ") ORDER BY id", params,
                                            "listing events"));
    return EventsOf(res.get());
  }

  Status AddJournal(int64_t study_id, std::span<const JournalEntry> entries) override {
    return Transaction([&]() -> Status {
      for (const JournalEntry& e : entries) {
        HP_RETURN_IF_ERROR(Query(JournalTable().insert(),
                                 Params().AddAll(JournalTable().Cells(e, study_id)),
                                 StrCat("adding to the journal of trial ", e.trial))
                               .status());
      }
      return Status::Ok();
    });
  }

  Result<std::vector<JournalEntry>> ListJournal(int64_t study_id) override {
    HP_ASSIGN_OR_RETURN(PgResult res,
                        Query(sql::ListJournal(), Params().Add(study_id), "reading the journal"));
    std::vector<JournalEntry> out;
    for (int r = 0; r < PQntuples(res.get()); ++r) {
      HP_ASSIGN_OR_RETURN(JournalEntry e, ReadJournalRow(pg::Row(res.get(), r), study_id));
      out.push_back(std::move(e));
    }
    return out;
  }

  Result<int64_t> AddSubmission(const SubmissionRecord& s) override {
    HP_ASSIGN_OR_RETURN(PgResult res,
                        Query(SubmissionTable().insert() + " RETURNING id",
                              Params().AddAll(SubmissionTable().Cells(s)), "storing a submission"));
    return Int(res.get(), 0, 0);
  }

  Status SetSubmissionState(int64_t id, SubmissionState state, int exit_code,
                            const std::string& message) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query(sql::kFinishSubmission,
              Params().Add(SubmissionStateName(state)).Add(exit_code).Add(message).Add(id),
              StrCat("updating submission ", id)));
    if (Changed(res.get()) == 0) return Status::NotFound("no submission ", id);
    return Status::Ok();
  }

  Result<std::vector<SubmissionRecord>> ListSubmissions(
      std::vector<SubmissionState> states) override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::ListSubmissions(), {}, "listing submissions"));
    std::vector<SubmissionRecord> out;
    for (int r = 0; r < PQntuples(res.get()); ++r) {
      HP_ASSIGN_OR_RETURN(SubmissionRecord s, ReadSubmissionRow(pg::Row(res.get(), r)));
      if (states.empty() || std::find(states.begin(), states.end(), s.state) != states.end())
        out.push_back(std::move(s));
    }
    return out;
  }

  Result<int64_t> AddControl(int64_t study_id, const ControlRecord& c) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query(sql::InsertControl() + " RETURNING id",
              Params().AddAll(ControlTable().ColumnCells(c)).Add(study_id), "storing a control"));
    if (PQntuples(res.get()) == 0) return Status::NotFound("no study ", study_id);
    return Int(res.get(), 0, 0);
  }

  Result<std::vector<ControlRecord>> ListControls(int64_t study_id, bool pending_only) override {
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::ListControls(pending_only), Params().Add(study_id),
                                            "listing controls"));
    std::vector<ControlRecord> out;
    for (int r = 0; r < PQntuples(res.get()); ++r) {
      HP_ASSIGN_OR_RETURN(ControlRecord c, ReadControlRow(pg::Row(res.get(), r)));
      out.push_back(std::move(c));
    }
    return out;
  }

  Status FinishControl(int64_t id, double applied, bool refused,
                       const std::string& outcome) override {
    HP_ASSIGN_OR_RETURN(
        PgResult res,
        Query(sql::kFinishControl, Params().Add(applied).Add(refused ? 1 : 0).Add(outcome).Add(id),
              StrCat("finishing control ", id)));
    if (Changed(res.get()) == 0) return Status::NotFound("no pending control ", id);
    return Status::Ok();
  }

  Status DeleteStudy(int64_t study_id) override {
    return Transaction([&]() -> Status {
      int64_t changed = 0;
      for (const char* statement : sql::kDeleteStudy) {
        HP_ASSIGN_OR_RETURN(PgResult res, Query(statement, Params().Add(study_id),
                                                StrCat("deleting study ", study_id)));
        changed = Changed(res.get());
      }
      if (changed == 0) return Status::NotFound("no study ", study_id);
      return Status::Ok();
    });
  }

 private:
  // Creates the schema a new database lacks, or checks an existing one's version.
  Status Migrate(int latest) {
    HP_RETURN_IF_ERROR(Query("SELECT pg_advisory_xact_lock($1)", Params().Add(kMigrationLock),
                             "locking the schema")
                           .status());
    HP_RETURN_IF_ERROR(
        Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
    HP_ASSIGN_OR_RETURN(PgResult res, Query(sql::kSchemaVersionOrZero, {}, "reading the schema"));
    schema_version_ = static_cast<int>(Int(res.get(), 0, 0));
    if (schema_version_ > latest)
      return Status::FailedPrecondition(url_, " has schema version ", schema_version_,
                                        " but this hyperpack knows versions up to ", latest,
                                        "; use a newer hyperpack");
    for (const Migration& m : PostgresMigrations()) {
      if (m.version <= schema_version_) continue;
      HP_RETURN_IF_ERROR(Exec(m.sql));
      HP_RETURN_IF_ERROR(Query("INSERT INTO schema_version(version) VALUES ($1)",
                               Params().Add(m.version), "recording the schema")
                             .status());
      schema_version_ = m.version;
    }
    return Status::Ok();
  }

  // The trials that `where` (its WHERE and ORDER BY clauses) selects.
  Result<std::vector<TrialRecord>> SelectTrials(const std::string& where, const Params& params,
                                                int64_t study_id) {
    HP_ASSIGN_OR_RETURN(PgResult res,
                        Query(TrialTable().select() + where, params, "listing trials"));
    std::vector<TrialRecord> out;
    for (int r = 0; r < PQntuples(res.get()); ++r) {
      HP_ASSIGN_OR_RETURN(TrialRecord t, ReadTrialRow(pg::Row(res.get(), r), study_id));
      out.push_back(std::move(t));
    }
    return out;
  }

  static int64_t Changed(const PGresult* res) {
    return std::strtoll(PQcmdTuples(const_cast<PGresult*>(res)), nullptr, 10);
  }

  // `sql` as one or more statements without parameters (a migration's script).
  Status Exec(const std::string& sql) {
    PgResult res(PQexec(conn_, sql.c_str()));
    const ExecStatusType status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return Status::Ok();
    return Failure(res.get(), "running " + sql.substr(0, sql.find_first_of("(\n")));
  }

  Status Failure(const PGresult* res, const std::string& what) const {
    std::string message = res ? PQresultErrorMessage(res) : PQerrorMessage(conn_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    return Status::Io(what, " (", url_, "): ", message);
  }

  // Runs `sql` with `params`; `what` names it in errors, and `taken` (when not empty) is the
  // kAlreadyExists message for a unique key already used.
  Result<PgResult> Query(const std::string& sql, const Params& params, const std::string& what,
                         const std::string& taken = "") {
    const std::vector<const char*> values = params.Pointers();
    const std::string numbered = Numbered(sql);
    PgResult res(PQexecParams(conn_, numbered.c_str(), params.size(), nullptr, values.data(),
                              nullptr, nullptr, 0));
    const ExecStatusType status = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return res;
    const char* state = res ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
    if (!taken.empty() && state && state == kUniqueViolation) return Status::AlreadyExists(taken);
    return Failure(res.get(), what);
  }

  PGconn* conn_;
  std::string url_;
  int schema_version_ = 0;
  bool leading_ = false;  // this session took the leader lease
  TransactionDepth transaction_;
};

}  // namespace

std::string RedactedUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme == std::string::npos || at == std::string::npos) return url;
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

Result<std::unique_ptr<Storage>> OpenPostgres(const std::string& url,
                                              const Storage::Options& options) {
  PGconn* conn = PQconnectdb(url.c_str());
  const std::string shown = RedactedUrl(url);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    return Status::Unavailable("cannot connect to ", shown, ": ", message);
  }
  auto storage = std::make_unique<PostgresStorage>(conn, shown);
  HP_RETURN_IF_ERROR(storage->Start(options));
  return std::unique_ptr<Storage>(std::move(storage));
}

}  // namespace hyperpack::storage
