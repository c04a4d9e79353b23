#include "sqlite_storage.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "schema.h"
#include "sqlite_connection.h"
#include "statements.h"

namespace hyperpack::storage {

using sqlite::OptDouble;
using sqlite::OptInt;
using sqlite::Statement;
using sqlite::Text;

namespace {

// The rows of a query of (trial_number, time, kind, message); false on an SQLite error.
bool StepEvents(Statement& stmt, std::vector<EventRecord>* out) {
  sqlite3_stmt* raw = stmt.get();
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) out->push_back(ReadEventRow(sqlite::Row(raw)));
  return rc == SQLITE_DONE;
}

}  // namespace

SqliteStorage::SqliteStorage(std::unique_ptr<Connection> db) : db_(std::move(db)) {}

SqliteStorage::~SqliteStorage() {
  if (lead_fd_ >= 0) close(lead_fd_);  // the lock goes with the descriptor
}

Result<bool> SqliteStorage::TryLead() {
  if (lead_fd_ >= 0) return true;
  const std::string lock = db_->path() + "-leader";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Io("cannot open ", lock, ": ", std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) return false;
    return Status::Io("cannot lock ", lock, ": ", std::strerror(err));
  }
  lead_fd_ = fd;
  return true;
}

const std::string& SqliteStorage::path() const { return db_->path(); }

int SqliteStorage::schema_version() const { return db_->schema_version(); }

Status SqliteStorage::Transaction(const std::function<Status()>& body) {
  return db_->Transaction(body);
}

Result<StudyRecord> SqliteStorage::CreateStudy(const StudyRecord& study) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(StudyTable().insert()));
  StudyRecord out = study;
  Status s = Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.BindAll(StudyTable().Cells(study));
    int rc = stmt.Step();
    if (rc == SQLITE_CONSTRAINT_UNIQUE)
      return Status::AlreadyExists("a study named '", study.name, "' already exists");
    if (rc != SQLITE_DONE) return db_->Error("creating study '" + study.name + "'");
    out.id = sqlite3_last_insert_rowid(db_->handle());
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::optional<StudyRecord>> SqliteStorage::FindStudy(const std::string& name) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::FindStudy()));
  Statement stmt(raw);
  stmt.Bind(name);
  int rc = stmt.Step();
  if (rc == SQLITE_DONE) return std::optional<StudyRecord>();
  if (rc != SQLITE_ROW) return db_->Error("reading study '" + name + "'");
  StudyRecord r = ReadStudyRow(sqlite::Row(raw));
  return std::optional<StudyRecord>(std::move(r));
}

Result<std::vector<StudyRecord>> SqliteStorage::ListStudies() {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::ListStudies()));
  Statement stmt(raw);
  std::vector<StudyRecord> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    StudyRecord r = ReadStudyRow(sqlite::Row(raw));
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return db_->Error("listing studies");
  return out;
}

Status SqliteStorage::SetRunner(int64_t study_id, std::optional<int64_t> pid,
                                const std::string& host) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kSetRunner));
  return Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.Bind(pid).Bind(host).Bind(study_id);
    if (stmt.Step() != SQLITE_DONE) return db_->Error("recording the study's runner");
    return Status::Ok();
  });
}

Status SqliteStorage::InsertTrial(const TrialRecord& t) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(TrialTable().insert()));
  return Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.BindAll(TrialTable().Cells(t, t.study_id));
    int rc = stmt.Step();
    if (rc == SQLITE_CONSTRAINT_UNIQUE)
      return Status::AlreadyExists("trial ", t.number, " already exists");
    if (rc != SQLITE_DONE) return db_->Error(StrCat("inserting trial ", t.number));
    return Status::Ok();
  });
}

Status SqliteStorage::FinishTrial(const TrialRecord& t) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kFinishTrial));
  return Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.Bind(std::string(TrialStateName(t.state))).Bind(t.value).Bind(t.ended);
    stmt.Bind(t.exit_status).Bind(t.error).Bind(EncodeValues(t.values));
    stmt.Bind(t.study_id).Bind(t.number);
    if (stmt.Step() != SQLITE_DONE) return db_->Error(StrCat("finishing trial ", t.number));
    if (sqlite3_changes(db_->handle()) != 1)
      return Status::NotFound("no trial ", t.number, " to finish");
    return Status::Ok();
  });
}

Status SqliteStorage::ResumeTrial(int64_t study_id, int number,
                                  const std::vector<RankRecord>& placement) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kResumePaused));
  return Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.Bind(EncodePlacement(placement)).Bind(study_id).Bind(number);
    if (stmt.Step() != SQLITE_DONE) return db_->Error(StrCat("resuming trial ", number));
    if (sqlite3_changes(db_->handle()) != 1) return Status::NotFound("no paused trial ", number);
    return Status::Ok();
  });
}

Result<bool> SqliteStorage::Heartbeat(int64_t study_id, int number, double now) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kHeartbeat));
  bool found = false;
  HP_RETURN_IF_ERROR(Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.Bind(now).Bind(study_id).Bind(number);
    if (stmt.Step() != SQLITE_DONE)
      return db_->Error(StrCat("recording trial ", number, "'s heartbeat"));
    found = sqlite3_changes(db_->handle()) == 1;
    return Status::Ok();
  }));
  return found;
}

Result<std::vector<int>> SqliteStorage::InterruptUnfinished(int64_t study_id, double now,
                                                            const std::string& reason) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * select,
                      db_->Prepare("SELECT number FROM trials WHERE study_id = ? AND state IN "
                                   "('running', 'pending') ORDER BY number"));
  HP_ASSIGN_OR_RETURN(
      sqlite3_stmt * update,
      db_->Prepare("UPDATE trials SET state = 'interrupted', ended = COALESCE(ended, ?), "
                   "error = ? WHERE study_id = ? AND state IN ('running', 'pending')"));
  std::vector<int> numbers;
  Status s = Transaction([&]() -> Status {
    {
      Statement stmt(select);
      stmt.Bind(study_id);
      int rc;
      while ((rc = stmt.Step()) == SQLITE_ROW) numbers.push_back(sqlite3_column_int(select, 0));
      if (rc != SQLITE_DONE) return db_->Error("finding unfinished trials");
    }
    Statement stmt(update);
    stmt.Bind(now).Bind(reason).Bind(study_id);
    if (stmt.Step() != SQLITE_DONE) return db_->Error("marking trials interrupted");
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return numbers;
}

namespace {
// The rows of a statement that selects TrialTable()'s columns, as records.
Result<std::vector<TrialRecord>> ReadTrials(Statement& stmt, sqlite3_stmt* raw, int64_t study_id) {
  std::vector<TrialRecord> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    HP_ASSIGN_OR_RETURN(TrialRecord t, ReadTrialRow(sqlite::Row(raw), study_id));
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE)
    return Status::Io("listing trials: ", sqlite3_errmsg(sqlite3_db_handle(raw)));
  return out;
}
}  // namespace

Result<std::vector<TrialRecord>> SqliteStorage::ListTrials(int64_t study_id) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw,
                      db_->Prepare(TrialTable().select() + "WHERE study_id = ? ORDER BY number"));
  Statement stmt(raw);
  stmt.Bind(study_id);
  return ReadTrials(stmt, raw, study_id);
}

Result<std::vector<TrialRecord>> SqliteStorage::ListTrialsIn(int64_t study_id,
                                                             std::span<const TrialState> states) {
  if (states.empty()) return std::vector<TrialRecord>();
  std::string marks(2 * states.size() - 1, ',');
  for (size_t i = 0; i < states.size(); ++i) marks[2 * i] = '?';
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw,
                      db_->Prepare(TrialTable().select() + "WHERE study_id = ? AND state IN (" +
                                   marks + ") ORDER BY number"));
  Statement stmt(raw);
  stmt.Bind(study_id);
  for (TrialState s : states) stmt.Bind(std::string(TrialStateName(s)));
  return ReadTrials(stmt, raw, study_id);
}

Result<std::vector<TrialRecord>> SqliteStorage::BestTrials(int64_t study_id, Direction direction,
                                                           std::optional<double> bound, int limit) {
  // SQLite keeps a NaN as NULL: "value IS NOT NULL" leaves NaN out too.
  const bool max = direction == Direction::kMaximize;
  HP_ASSIGN_OR_RETURN(
      sqlite3_stmt * raw,
      db_->Prepare(TrialTable().select() +
                   "WHERE study_id = ? AND state = 'completed' AND value IS NOT NULL AND "
                   "(? IS NULL OR value " +
                   (max ? ">=" : "<=") + " ?) ORDER BY value " + (max ? "DESC" : "ASC") +
                   ", number LIMIT ?"));
  Statement stmt(raw);
  stmt.Bind(study_id).Bind(bound).Bind(bound).Bind(limit);
  return ReadTrials(stmt, raw, study_id);
}

Result<TrialTally> SqliteStorage::TallyTrials(int64_t study_id) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kTally));
  Statement stmt(raw);
  stmt.Bind(study_id);
  TrialTally tally;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    auto state = ParseTrialState(Text(raw, 0));
    if (!state) return Status::Io("a trial has an unknown state '", Text(raw, 0), "'");
    tally.counts[*state] = sqlite3_column_int(raw, 1);
    tally.AddSpan(OptDouble(raw, 2), OptDouble(raw, 3), sqlite3_column_int(raw, 4));
  }
  if (rc != SQLITE_DONE) return db_->Error("counting trials");
  return tally;
}

Result<int> SqliteStorage::NextTrialNumber(int64_t study_id) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kNextTrialNumber));
  Statement stmt(raw);
  stmt.Bind(study_id);
  if (stmt.Step() != SQLITE_ROW) return db_->Error("reading the next trial number");
  return sqlite3_column_int(raw, 0);
}

Result<std::string> SqliteStorage::TunerState(int64_t study_id) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kTunerState));
  Statement stmt(raw);
  stmt.Bind(study_id);
  const int rc = stmt.Step();
  if (rc == SQLITE_DONE) return std::string();
  if (rc != SQLITE_ROW) return db_->Error("reading the tuner's state");
  return Text(raw, 0);
}

Status SqliteStorage::SetTunerState(int64_t study_id, const std::string& state) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kSaveTunerState));
  return Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.Bind(study_id).Bind(state);
    if (stmt.Step() != SQLITE_DONE) return db_->Error("keeping the tuner's state");
    return Status::Ok();
  });
}

Status SqliteStorage::AddMetrics(int64_t study_id, int trial_number,
                                 std::span<const MetricPoint> points) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * find, db_->Prepare(sql::kTrialId));
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * insert, db_->Prepare(sql::kInsertMetric));
  return Transaction([&]() -> Status {
    int64_t trial_id = 0;
    {
      Statement stmt(find);
      stmt.Bind(study_id).Bind(trial_number);
      if (stmt.Step() != SQLITE_ROW)
        return Status::NotFound("no trial ", trial_number, " to add metrics to");
      trial_id = sqlite3_column_int64(find, 0);
    }
    for (const MetricPoint& p : points) {
      Statement stmt(insert);
      stmt.Bind(trial_id).Bind(p.step).Bind(p.name).Bind(p.value).Bind(p.time);
      if (stmt.Step() != SQLITE_DONE) return db_->Error("adding metrics");
    }
    return Status::Ok();
  });
}

Result<std::vector<MetricPoint>> SqliteStorage::TrialMetrics(int64_t study_id, int trial_number) {
  HP_ASSIGN_OR_RETURN(
      sqlite3_stmt * raw,
      db_->Prepare("SELECT m.step, m.name, m.value, m.time FROM metrics m JOIN trials t ON "
                   "m.trial_id = t.id WHERE t.study_id = ? AND t.number = ? ORDER BY m.rowid"));
  Statement stmt(raw);
  stmt.Bind(study_id).Bind(trial_number);
  std::vector<MetricPoint> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    out.push_back({sqlite3_column_int64(raw, 0), Text(raw, 1), sqlite3_column_double(raw, 2),
                   sqlite3_column_double(raw, 3)});
  }
  if (rc != SQLITE_DONE) return db_->Error("reading metrics");
  return out;
}

Result<std::optional<MetricPoint>> SqliteStorage::LatestMetric(int64_t study_id, int trial_number,
                                                               const std::string& name) {
  HP_ASSIGN_OR_RETURN(
      sqlite3_stmt * raw,
      // The newest rowid from the (trial, name) index alone, then that one row: ordering the
      // trial's points by rowid instead sorts all of them.
      db_->Prepare("SELECT step, name, value, time FROM metrics WHERE rowid = (SELECT MAX(m.rowid) "
                   "FROM metrics m WHERE m.trial_id = (SELECT id FROM trials WHERE study_id = ? "
                   "AND number = ?) AND m.name = ?)"));
  Statement stmt(raw);
  stmt.Bind(study_id).Bind(trial_number).Bind(name);
  const int rc = stmt.Step();
  if (rc == SQLITE_DONE) return std::optional<MetricPoint>();
  if (rc != SQLITE_ROW) return db_->Error("reading the latest metric");
  return std::optional<MetricPoint>(MetricPoint{sqlite3_column_int64(raw, 0), Text(raw, 1),
                                                sqlite3_column_double(raw, 2),
                                                sqlite3_column_double(raw, 3)});
}

Status SqliteStorage::AddEvent(int64_t study_id, const EventRecord& e) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(EventTable().insert()));
  return Transaction([&]() -> Status {
    Statement stmt(raw);
    stmt.BindAll(EventTable().Cells(e, study_id));
    if (stmt.Step() != SQLITE_DONE) return db_->Error("adding an event");
    return Status::Ok();
  });
}

Result<std::vector<EventRecord>> SqliteStorage::ListEvents(int64_t study_id, int limit) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::NewestEvents()));
  Statement stmt(raw);
  stmt.Bind(study_id).Bind(limit);
  std::vector<EventRecord> out;
  if (!StepEvents(stmt, &out)) return db_->Error("listing events");
  return out;
}

Result<std::vector<EventRecord>> SqliteStorage::ListEventsOfKinds(
    int64_t study_id, std::span<const EventKind> kinds) {
  std::vector<EventRecord> out;
  if (kinds.empty()) return out;
  std::string marks = "?";
  for (size_t i = 1; i < kinds.size(); ++i) marks += ", ?";
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw,
                      db_->Prepare(sql::EventsOfKinds() + marks + ") ORDER BY id"));
  Statement stmt(raw);
  stmt.Bind(study_id);
  for (EventKind kind : kinds) stmt.Bind(std::string(EventKindName(kind)));
  if (!StepEvents(stmt, &out)) return db_->Error("listing events");
  return out;
}

Status SqliteStorage::AddJournal(int64_t study_id, std::span<const JournalEntry> entries) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * insert, db_->Prepare(JournalTable().insert()));
  return Transaction([&]() -> Status {
    for (const JournalEntry& e : entries) {
      Statement stmt(insert);
      stmt.BindAll(JournalTable().Cells(e, study_id));
      if (stmt.Step() != SQLITE_DONE)
        return db_->Error(StrCat("adding to the journal of trial ", e.trial));
    }
    return Status::Ok();
  });
}

Result<std::vector<JournalEntry>> SqliteStorage::ListJournal(int64_t study_id) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::ListJournal()));
  Statement stmt(raw);
  stmt.Bind(study_id);
  std::vector<JournalEntry> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    HP_ASSIGN_OR_RETURN(JournalEntry e, ReadJournalRow(sqlite::Row(raw), study_id));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return db_->Error("reading the journal");
  return out;
}

Result<int64_t> SqliteStorage::AddSubmission(const SubmissionRecord& r) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(SubmissionTable().insert()));
  Statement stmt(raw);
  stmt.BindAll(SubmissionTable().Cells(r));
  if (stmt.Step() != SQLITE_DONE) return db_->Error("storing a submission");
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_->handle()));
}

Status SqliteStorage::SetSubmissionState(int64_t id, SubmissionState state, int exit_code,
                                         const std::string& message) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kFinishSubmission));
  Statement stmt(raw);
  stmt.Bind(std::string(SubmissionStateName(state))).Bind(exit_code).Bind(message).Bind(id);
  if (stmt.Step() != SQLITE_DONE) return db_->Error(StrCat("updating submission ", id));
  if (sqlite3_changes(db_->handle()) == 0) return Status::NotFound("no submission ", id);
  return Status::Ok();
}

Result<std::vector<SubmissionRecord>> SqliteStorage::ListSubmissions(
    std::vector<SubmissionState> states) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::ListSubmissions()));
  Statement stmt(raw);
  std::vector<SubmissionRecord> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    HP_ASSIGN_OR_RETURN(SubmissionRecord r, ReadSubmissionRow(sqlite::Row(raw)));
    if (states.empty() || std::find(states.begin(), states.end(), r.state) != states.end())
      out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return db_->Error("listing submissions");
  return out;
}

Result<int64_t> SqliteStorage::AddControl(int64_t study_id, const ControlRecord& c) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::InsertControl()));
  Statement stmt(raw);
  stmt.BindAll(ControlTable().ColumnCells(c)).Bind(study_id);
  if (stmt.Step() != SQLITE_DONE) return db_->Error("storing a control");
  if (sqlite3_changes(db_->handle()) == 0) return Status::NotFound("no study ", study_id);
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_->handle()));
}

Result<std::vector<ControlRecord>> SqliteStorage::ListControls(int64_t study_id,
                                                               bool pending_only) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::ListControls(pending_only)));
  Statement stmt(raw);
  stmt.Bind(study_id);
  std::vector<ControlRecord> out;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    HP_ASSIGN_OR_RETURN(ControlRecord c, ReadControlRow(sqlite::Row(raw)));
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return db_->Error("listing controls");
  return out;
}

Status SqliteStorage::FinishControl(int64_t id, double applied, bool refused,
                                    const std::string& outcome) {
  HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(sql::kFinishControl));
  Statement stmt(raw);
  stmt.Bind(applied).Bind(refused ? 1 : 0).Bind(outcome).Bind(id);
  if (stmt.Step() != SQLITE_DONE) return db_->Error(StrCat("finishing control ", id));
  if (sqlite3_changes(db_->handle()) == 0) return Status::NotFound("no pending control ", id);
  return Status::Ok();
}

Status SqliteStorage::DeleteStudy(int64_t study_id) {
  return Transaction([&]() -> Status {
    for (const char* statement : sql::kDeleteStudy) {
      HP_ASSIGN_OR_RETURN(sqlite3_stmt * raw, db_->Prepare(statement));
      Statement stmt(raw);
      stmt.Bind(study_id);
      if (stmt.Step() != SQLITE_DONE) return db_->Error(StrCat("deleting study ", study_id));
    }
    if (sqlite3_changes(db_->handle()) == 0) return Status::NotFound("no study ", study_id);
    return Status::Ok();
  });
}

}  // namespace hyperpack::storage
