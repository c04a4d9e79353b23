// The SQL both backends run, written once (schema.h is the tables'): each statement with `?` for
// its parameters, as SQLite takes them; the PostgreSQL backend numbers them ($1, $2, ...) as it
// sends each. What only one engine says its own way stays in its backend: how a new row's key is
// read back (last_insert_rowid, RETURNING), the metrics table's order (rowid, id), advisory locks.
// Thread-safety: constants.
#pragma once

namespace hyperpack::storage::sql {

inline constexpr char kSchemaVersion[] = "SELECT MAX(version) FROM schema_version";
inline constexpr char kSchemaVersionOrZero[] =
    "SELECT COALESCE(MAX(version), 0) FROM schema_version";
inline constexpr char kFindStudy[] =
    "SELECT id, name, spec_text, spec_path, direction, metric, seed, created, runner_pid, "
    "runner_host FROM studies WHERE name = ?";
inline constexpr char kListStudies[] =
    "SELECT id, name, spec_text, spec_path, direction, metric, seed, created, runner_pid, "
    "runner_host FROM studies ORDER BY id";
inline constexpr char kSetRunner[] =
    "UPDATE studies SET runner_pid = ?, runner_host = ? WHERE id = ?";
inline constexpr char kInsertTrial[] =
    "INSERT INTO trials(study_id, number, state, params, value, started, ended, "
    "exit_status, error, host, attempt, retry_of, log_path, placement, metric_values, "
    "heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
inline constexpr char kFinishTrial[] =
    "UPDATE trials SET state = ?, value = ?, ended = ?, exit_status = ?, error = ?, "
    "metric_values = ? WHERE study_id = ? AND number = ?";
inline constexpr char kResumePaused[] =
    "UPDATE trials SET state = 'running', ended = NULL, exit_status = NULL, error = '', "
    "placement = ? WHERE study_id = ? AND number = ? AND state = 'paused'";
inline constexpr char kHeartbeat[] =
    "UPDATE trials SET heartbeat = ? WHERE study_id = ? AND number = ? AND state = "
    "'running'";
inline constexpr char kSelectTrials[] =
    "SELECT number, state, params, value, started, ended, exit_status, error, host, "
    "attempt, retry_of, log_path, placement, metric_values, heartbeat FROM trials ";
inline constexpr char kNextTrialNumber[] =
    "SELECT COALESCE(MAX(number) + 1, 0) FROM trials WHERE study_id = ?";
inline constexpr char kTunerState[] = "SELECT state FROM tuner_states WHERE study_id = ?";
inline constexpr char kTrialId[] = "SELECT id FROM trials WHERE study_id = ? AND number = ?";
inline constexpr char kInsertMetric[] =
    "INSERT INTO metrics(trial_id, step, name, value, time) VALUES (?, ?, ?, ?, ?)";
inline constexpr char kInsertEvent[] =
    "INSERT INTO events(study_id, trial_number, time, kind, message) VALUES (?, ?, ?, ?, ?)";
inline constexpr char kEventsOfKinds[] =
    "SELECT trial_number, time, kind, message FROM events WHERE study_id = ? AND kind IN (";
inline constexpr char kInsertJournal[] =
    "INSERT INTO journal(study_id, trial, kind, time, resource, value, completed, "
    "objective_values) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
inline constexpr char kListJournal[] =
    "SELECT id, trial, kind, time, resource, value, completed, objective_values FROM "
    "journal WHERE study_id = ? ORDER BY id";
inline constexpr char kFinishSubmission[] =
    "UPDATE submissions SET state = ?, exit_code = ?, message = ? WHERE id = ?";
inline constexpr char kListSubmissions[] =
    "SELECT id, study_name, spec_text, spec_path, max_trials, max_parallel, state, "
    "exit_code, message, submitted FROM submissions ORDER BY id";
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
inline constexpr char kNewestEvents[] =
    "SELECT trial_number, time, kind, message FROM (SELECT * FROM events WHERE study_id = ? ORDER "
    "BY id DESC LIMIT ?) newest ORDER BY id";
inline constexpr char kListControls[] =
    "SELECT id, kind, args, created, applied, refused, outcome FROM controls WHERE study_id = ? "
    "ORDER BY id";
inline constexpr char kListPendingControls[] =
    "SELECT id, kind, args, created, applied, refused, outcome FROM controls WHERE study_id = ? "
    "AND applied IS NULL ORDER BY id";
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
