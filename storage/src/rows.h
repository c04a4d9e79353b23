// Rows as both SQL backends read and write them, written once: each record's stored columns are
// a Table (columns.h) here, from which come the statements that insert and select it, an
// insert's parameters and the reading of a row. A backend shows a result row as a RowView and
// binds Cells.
// Pure. Thread-safety: values, pure functions and immutable tables.
#pragma once

#include <cstdint>

#include "columns.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/records.h"

namespace hyperpack::storage {

// The tables. Trials, events and the journal are inserted under their study's id (the parent).
const Table<TrialRecord>& TrialTable();
const Table<StudyRecord>& StudyTable();
const Table<EventRecord>& EventTable();
const Table<JournalEntry>& JournalTable();
const Table<SubmissionRecord>& SubmissionTable();
// Controls are inserted by name of their study (the backends' own statement); read from here.
const Table<ControlRecord>& ControlTable();

// A row of TrialTable()'s columns, as the trial of study `study_id`; kIo for a state no hyperpack
// writes.
Result<TrialRecord> ReadTrialRow(const RowView& row, int64_t study_id);
// A row of StudyTable()'s columns.
StudyRecord ReadStudyRow(const RowView& row);
// A row of EventTable()'s columns.
EventRecord ReadEventRow(const RowView& row);
// A row of JournalTable()'s columns, of study `study_id` (named in errors); kIo for a kind no
// hyperpack writes.
Result<JournalEntry> ReadJournalRow(const RowView& row, int64_t study_id);
// A row of SubmissionTable()'s columns; kIo for an unknown state.
Result<SubmissionRecord> ReadSubmissionRow(const RowView& row);
// A row of ControlTable()'s columns; kIo for an unknown kind.
Result<ControlRecord> ReadControlRow(const RowView& row);

}  // namespace hyperpack::storage
