#include "rows.h"

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

}  // namespace hyperpack::storage
