// Rows as both SQL backends read and write them, written once: a backend shows a result row as a
// RowView (its columns by index: text, a whole number, a double, or NULL) and binds a statement's
// parameters from Cells; what each record's row holds, column by column, is here alone, in the
// order of its statement's columns (statements.h).
// Pure. Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/storage/records.h"

namespace hyperpack::storage {

// One parameter of a statement: NULL, a whole number, a double or text.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

// A result row, as a backend reads it. A column that is NULL reads as nullopt.
class RowView {
 public:
  virtual ~RowView() = default;
  virtual std::optional<std::string> TextAt(int column) const = 0;
  virtual std::optional<int64_t> IntAt(int column) const = 0;
  virtual std::optional<double> DoubleAt(int column) const = 0;
};

// sql::kInsertTrial's parameters for `t`.
std::vector<Cell> TrialCells(const TrialRecord& t);
// A row of sql::kSelectTrials' columns, as the trial of study `study_id`; kIo for a state no
// hyperpack writes.
Result<TrialRecord> ReadTrialRow(const RowView& row, int64_t study_id);

// A row of sql::kFindStudy's columns.
StudyRecord ReadStudyRow(const RowView& row);
// A row of (trial_number, time, kind, message): sql::kNewestEvents', sql::kEventsOfKinds'.
EventRecord ReadEventRow(const RowView& row);
// A row of sql::kListJournal's columns, of study `study_id` (named in errors); kIo for a kind no
// hyperpack writes.
Result<JournalEntry> ReadJournalRow(const RowView& row, int64_t study_id);
// A row of sql::kListSubmissions' columns; kIo for an unknown state.
Result<SubmissionRecord> ReadSubmissionRow(const RowView& row);
// A row of sql::kListControls' columns; kIo for an unknown kind.
Result<ControlRecord> ReadControlRow(const RowView& row);

}  // namespace hyperpack::storage
