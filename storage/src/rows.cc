#include "rows.h"

#include <limits>
#include <utility>

namespace hyperpack::storage {
namespace {

Cell Of(const std::optional<double>& v) { return v ? Cell(*v) : Cell(); }
Cell Of(const std::optional<int>& v) { return v ? Cell(int64_t{*v}) : Cell(); }

}  // namespace

std::vector<Cell> TrialCells(const TrialRecord& t) {
  return {t.study_id,
          int64_t{t.number},
          std::string(TrialStateName(t.state)),
          EncodeParams(t.params),
          Of(t.value),
          Of(t.started),
          Of(t.ended),
          Of(t.exit_status),
          t.error,
          t.host,
          int64_t{t.attempt},
          Of(t.retry_of),
          t.log_path,
          EncodePlacement(t.placement),
          EncodeValues(t.values),
          Of(t.heartbeat)};
}

Result<TrialRecord> ReadTrialRow(const RowView& row, int64_t study_id) {
  TrialRecord t;
  t.study_id = study_id;
  t.number = static_cast<int>(row.IntAt(0).value_or(0));
  const std::string state = row.TextAt(1).value_or("");
  auto parsed = ParseTrialState(state);
  if (!parsed) return Status::Io("trial ", t.number, " has an unknown state '", state, "'");
  t.state = *parsed;
  t.params = DecodeParams(row.TextAt(2).value_or(""));
  t.value = row.DoubleAt(3);
  t.started = row.DoubleAt(4);
  t.ended = row.DoubleAt(5);
  if (auto e = row.IntAt(6)) t.exit_status = static_cast<int>(*e);
  t.error = row.TextAt(7).value_or("");
  t.host = row.TextAt(8).value_or("");
  t.attempt = static_cast<int>(row.IntAt(9).value_or(0));
  if (auto r = row.IntAt(10)) t.retry_of = static_cast<int>(*r);
  t.log_path = row.TextAt(11).value_or("");
  t.placement = DecodePlacement(row.TextAt(12).value_or(""));
  t.values = DecodeValues(row.TextAt(13).value_or(""));
  t.heartbeat = row.DoubleAt(14);
  return t;
}

StudyRecord ReadStudyRow(const RowView& row) {
  StudyRecord r;
  r.id = row.IntAt(0).value_or(0);
  r.name = row.TextAt(1).value_or("");
  r.spec_text = row.TextAt(2).value_or("");
  r.spec_path = row.TextAt(3).value_or("");
  // The column's CHECK admits only the two names.
  r.direction = ParseDirection(row.TextAt(4).value_or("")).value_or(Direction::kMinimize);
  r.metric = row.TextAt(5).value_or("");
  r.seed = static_cast<uint64_t>(row.IntAt(6).value_or(0));
  r.created = row.DoubleAt(7).value_or(0);
  r.runner_pid = row.IntAt(8);
  r.runner_host = row.TextAt(9).value_or("");
  return r;
}

EventRecord ReadEventRow(const RowView& row) {
  EventRecord e;
  if (auto t = row.IntAt(0)) e.trial = static_cast<int>(*t);
  e.time = row.DoubleAt(1).value_or(0);
  e.kind = row.TextAt(2).value_or("");
  e.message = row.TextAt(3).value_or("");
  return e;
}

Result<JournalEntry> ReadJournalRow(const RowView& row, int64_t study_id) {
  JournalEntry e;
  e.seq = row.IntAt(0).value_or(0);
  e.trial = static_cast<int>(row.IntAt(1).value_or(0));
  const std::string kind = row.TextAt(2).value_or("");
  auto parsed = ParseJournalKind(kind);
  if (!parsed)
    return Status::Io("study ", study_id, ": journal row ", e.seq, " has an unknown kind '", kind,
                      "'");
  e.kind = *parsed;
  e.time = row.DoubleAt(3).value_or(0);
  e.resource = row.DoubleAt(4).value_or(0.0);
  e.value = row.DoubleAt(5).value_or(std::numeric_limits<double>::quiet_NaN());
  e.completed = row.IntAt(6).value_or(0) != 0;
  e.values = DecodeNumbers(row.TextAt(7).value_or(""));
  return e;
}

Result<SubmissionRecord> ReadSubmissionRow(const RowView& row) {
  SubmissionRecord s;
  s.id = row.IntAt(0).value_or(0);
  s.study_name = row.TextAt(1).value_or("");
  s.spec_text = row.TextAt(2).value_or("");
  s.spec_path = row.TextAt(3).value_or("");
  if (auto v = row.IntAt(4)) s.max_trials = static_cast<int>(*v);
  if (auto v = row.IntAt(5)) s.max_parallel = static_cast<int>(*v);
  const std::string state = row.TextAt(6).value_or("");
  auto parsed = ParseSubmissionState(state);
  if (!parsed) return Status::Io("submission ", s.id, " has an unknown state '", state, "'");
  s.state = *parsed;
  s.exit_code = static_cast<int>(row.IntAt(7).value_or(0));
  s.message = row.TextAt(8).value_or("");
  s.submitted = row.DoubleAt(9).value_or(0);
  return s;
}

Result<ControlRecord> ReadControlRow(const RowView& row) {
  ControlRecord c;
  c.id = row.IntAt(0).value_or(0);
  const std::string kind = row.TextAt(1).value_or("");
  auto parsed = ParseControlKind(kind);
  if (!parsed) return Status::Io("control ", c.id, " has an unknown kind '", kind, "'");
  c.kind = *parsed;
  DecodeControlArgs(row.TextAt(2).value_or(""), &c);
  c.created = row.DoubleAt(3).value_or(0);
  c.applied = row.DoubleAt(4);
  c.refused = row.IntAt(5).value_or(0) != 0;
  c.outcome = row.TextAt(6).value_or("");
  return c;
}

}  // namespace hyperpack::storage
