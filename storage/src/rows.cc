#include "rows.h"

#include <cmath>
#include <limits>

#include "hyperpack/direction.h"

namespace hyperpack::storage {
namespace {

Direction DirectionOrMinimize(const std::string& name) {
  // The column's CHECK admits only the two names.
  return ParseDirection(name).value_or(Direction::kMinimize);
}

// A report's objective; NaN (a value the pruner could not read) is stored as NULL.
Column<JournalEntry> JournalValue() {
  return {"value", true,
          [](const JournalEntry& e) { return std::isnan(e.value) ? Cell() : Cell(e.value); },
          [](const RowView& row, int i, JournalEntry* e) -> std::optional<std::string> {
            e->value = row.DoubleAt(i).value_or(std::numeric_limits<double>::quiet_NaN());
            return std::nullopt;
          }};
}

// A control's arguments, as one JSON text (ControlArgs).
Column<ControlRecord> ControlArgsColumn() {
  return {"args", true, [](const ControlRecord& c) { return Cell(EncodeControlArgs(c)); },
          [](const RowView& row, int i, ControlRecord* c) -> std::optional<std::string> {
            DecodeControlArgs(row.TextAt(i).value_or(""), c);
            return std::nullopt;
          }};
}

}  // namespace

const Table<TrialRecord>& TrialTable() {
  using T = TrialRecord;
  static const auto* table = new Table<T>(
      "trials", "study_id",
      {Stored<&T::number>("number"), Named<&T::state, TrialStateName, ParseTrialState>("state"),
       Coded<&T::params, EncodeParams, DecodeParams>("params"), Stored<&T::value>("value"),
       Stored<&T::started>("started"), Stored<&T::ended>("ended"),
       Stored<&T::exit_status>("exit_status"), Stored<&T::error>("error"), Stored<&T::host>("host"),
       Stored<&T::attempt>("attempt"), Stored<&T::retry_of>("retry_of"),
       Stored<&T::log_path>("log_path"),
       Coded<&T::placement, EncodePlacement, DecodePlacement>("placement"),
       Coded<&T::values, EncodeValues, DecodeValues>("metric_values"),
       Stored<&T::heartbeat>("heartbeat")});
  return *table;
}

const Table<StudyRecord>& StudyTable() {
  using S = StudyRecord;
  static const auto* table = new Table<S>(
      "studies", "",
      {ReadOnly<&S::id>("id"), Stored<&S::name>("name"), Stored<&S::spec_text>("spec_text"),
       Stored<&S::spec_path>("spec_path"),
       Coded<&S::direction, DirectionName, DirectionOrMinimize>("direction"),
       Stored<&S::metric>("metric"), Stored<&S::seed>("seed"), Stored<&S::created>("created"),
       // Set by the runner that holds the study (sql::kSetRunner).
       ReadOnly<&S::runner_pid>("runner_pid"), ReadOnly<&S::runner_host>("runner_host")});
  return *table;
}

const Table<EventRecord>& EventTable() {
  using E = EventRecord;
  static const auto* table =
      new Table<E>("events", "study_id",
                   {Stored<&E::trial>("trial_number"), Stored<&E::time>("time"),
                    Stored<&E::kind>("kind"), Stored<&E::message>("message")});
  return *table;
}

const Table<JournalEntry>& JournalTable() {
  using J = JournalEntry;
  static const auto* table = new Table<J>(
      "journal", "study_id",
      {ReadOnly<&J::seq>("id"), Stored<&J::trial>("trial"),
       Named<&J::kind, JournalKindName, ParseJournalKind>("kind"), Stored<&J::time>("time"),
       Stored<&J::resource>("resource"), JournalValue(), Stored<&J::completed>("completed"),
       Coded<&J::values, EncodeNumbers, DecodeNumbers>("objective_values")});
  return *table;
}

const Table<SubmissionRecord>& SubmissionTable() {
  using S = SubmissionRecord;
  static const auto* table =
      new Table<S>("submissions", "",
                   {ReadOnly<&S::id>("id"), Stored<&S::study_name>("study_name"),
                    Stored<&S::spec_text>("spec_text"), Stored<&S::spec_path>("spec_path"),
                    Stored<&S::max_trials>("max_trials"), Stored<&S::max_parallel>("max_parallel"),
                    Named<&S::state, SubmissionStateName, ParseSubmissionState>("state"),
                    Stored<&S::exit_code>("exit_code"), Stored<&S::message>("message"),
                    Stored<&S::submitted>("submitted")});
  return *table;
}

const Table<ControlRecord>& ControlTable() {
  using C = ControlRecord;
  static const auto* table = new Table<C>(
      "controls", "study_id",
      {ReadOnly<&C::id>("id"), Named<&C::kind, ControlKindName, ParseControlKind>("kind"),
       ControlArgsColumn(), Stored<&C::created>("created"), ReadOnly<&C::applied>("applied"),
       ReadOnly<&C::refused>("refused"), ReadOnly<&C::outcome>("outcome")});
  return *table;
}

Result<TrialRecord> ReadTrialRow(const RowView& row, int64_t study_id) {
  TrialRecord t;
  t.study_id = study_id;
  if (Status s = TrialTable().Read(row, &t); !s.ok())
    return Status::Io("trial ", t.number, " has ", s.message());
  return t;
}

StudyRecord ReadStudyRow(const RowView& row) {
  StudyRecord r;
  (void)StudyTable().Read(row, &r);  // no column of a study can be unknown
  return r;
}

EventRecord ReadEventRow(const RowView& row) {
  EventRecord e;
  (void)EventTable().Read(row, &e);  // no column of an event can be unknown
  return e;
}

Result<JournalEntry> ReadJournalRow(const RowView& row, int64_t study_id) {
  JournalEntry e;
  if (Status s = JournalTable().Read(row, &e); !s.ok())
    return Status::Io("study ", study_id, ": journal row ", e.seq, " has ", s.message());
  return e;
}

Result<SubmissionRecord> ReadSubmissionRow(const RowView& row) {
  SubmissionRecord s;
  if (Status st = SubmissionTable().Read(row, &s); !st.ok())
    return Status::Io("submission ", s.id, " has ", st.message());
  return s;
}

Result<ControlRecord> ReadControlRow(const RowView& row) {
  ControlRecord c;
  if (Status s = ControlTable().Read(row, &c); !s.ok())
    return Status::Io("control ", c.id, " has ", s.message());
  return c;
}

}  // namespace hyperpack::storage
