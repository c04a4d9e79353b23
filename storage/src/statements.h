// The SQL both backends run, written once (schema.h is the tables', rows.h their columns): each
// statement with `?` for its parameters, as SQLite takes them; the PostgreSQL backend numbers them
// ($1, $2, ...) as it sends each. Those that read or insert whole records are made from the
// records' tables (rows.h), below. What only one engine says its own way stays in its backend: how
// a new row's key is read back (last_insert_rowid, RETURNING), the metrics table's order (rowid,
// id), advisory locks. Thread-safety: constants.
#pragma once

#include <string>

#include "rows.h"

namespace hyperpack::storage::sql {

inline constexpr char kSchemaVersion[] = "SELECT MAX(version) FROM schema_version";
inline constexpr char kSchemaVersionOrZero[] =
    "SELECT COALESCE(MAX(version), 0) FROM schema_version";
inline constexpr char kSetRunner[] =
    "UPDATE studies SET runner_pid = ?, runner_host = ? WHERE id = ?";
inline constexpr char kFinishTrial[] =
    "UPDATE trials SET state = ?, value = ?, ended = ?, exit_status = ?, error = ?, "
    "metric_values = ? WHERE study_id = ? AND number = ?";
inline constexpr char kResumePaused[] =
    "UPDATE trials SET state = 'running', ended = NULL, exit_status = NULL, error = '', "
    "placement = ? WHERE study_id = ? AND number = ? AND state = 'paused'";
inline constexpr char kHeartbeat[] =
    "UPDATE trials SET heartbeat = ? WHERE study_id = ? AND number = ? AND state = "
    "'running'";
inline constexpr char kNextTrialNumber[] =
    "SELECT COALESCE(MAX(number) + 1, 0) FROM trials WHERE study_id = ?";
inline constexpr char kTunerState[] = "SELECT state FROM tuner_states WHERE study_id = ?";
inline constexpr char kTrialId[] = "SELECT id FROM trials WHERE study_id = ? AND number = ?";
inline constexpr char kInsertMetric[] =
    "INSERT INTO metrics(trial_id, step, name, value, time) VALUES (?, ?, ?, ?, ?)";
inline constexpr char kFinishSubmission[] =
    "UPDATE submissions SET state = ?, exit_code = ?, message = ? WHERE id = ?";
inline constexpr char kFinishControl[] =
    "UPDATE controls SET applied = ?, refused = ?, outcome = ? WHERE id = ? AND applied IS "
    "NULL";
inline constexpr char kTally[] =
    "SELECT state, COUNT(*), MIN(started), MAX(CASE WHEN started IS NOT NULL THEN ended END), "
    "COUNT(*) FILTER (WHERE started IS NOT NULL AND ended IS NULL) FROM trials WHERE study_id = ? "
    "GROUP BY state";
inline constexpr char kSaveTunerState[] =
    "INSERT INTO tuner_states(study_id, state) VALUES (?, ?) ON CONFLICT (study_id) DO UPDATE SET "
    "state = excluded.state";
inline std::string FindStudy() { return StudyTable().select() + "WHERE name = ?"; }
inline std::string ListStudies() { return StudyTable().select() + "ORDER BY id"; }
// The study's events whose kind is one of those bound after it: `(?, ?, ...) ORDER BY id` follows.
inline std::string EventsOfKinds() {
  return EventTable().select() + "WHERE study_id = ? AND kind IN (";
}
inline std::string NewestEvents() {
  return "SELECT " + EventTable().names() +
         " FROM (SELECT * FROM events WHERE study_id = ? ORDER BY id DESC LIMIT ?) newest ORDER BY "
         "id";
}
inline std::string ListJournal() {
  return JournalTable().select() + "WHERE study_id = ? ORDER BY id";
}
// A control, only where its study is: ControlTable().ColumnCells(control), then the study's id.
inline std::string InsertControl() { return ControlTable().InsertUnder("studies"); }
inline std::string ListSubmissions() { return SubmissionTable().select() + "ORDER BY id"; }
inline std::string ListControls(bool pending_only) {
  return ControlTable().select() + "WHERE study_id = ? " +
         (pending_only ? "AND applied IS NULL " : "") + "ORDER BY id";
}

// A study and everything it stored, child rows first.
inline constexpr const char* kDeleteStudy[] = {
    "DELETE FROM metrics WHERE trial_id IN (SELECT id FROM trials WHERE study_id = ?)",
    "DELETE FROM trials WHERE study_id = ?",
    "DELETE FROM events WHERE study_id = ?",
    "DELETE FROM journal WHERE study_id = ?",
    "DELETE FROM controls WHERE study_id = ?",
    "DELETE FROM tuner_states WHERE study_id = ?",
    "DELETE FROM studies WHERE id = ?",
};

}  // namespace hyperpack::storage::sql
