// The PostgreSQL backend's small pieces (postgres_storage.cc is the backend): a statement's
// parameters as libpq takes them, a result that clears itself, column readers, the rows two of its
// queries share (rows.h reads them), and the numbering of the shared statements' parameters.
// Private to storage/src. Thread-safety: values and pure functions.
#pragma once

#include <libpq-fe.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/storage/records.h"
#include "rows.h"

namespace hyperpack::storage::pg {

// `sql` with each `?` outside quotes numbered as PostgreSQL takes parameters ($1, $2, ...): the
// shared statements (statements.h) are written as SQLite takes them.
std::string Numbered(std::string_view sql);

// A statement's parameters as libpq takes them: text, or NULL.
class Params {
 public:
  Params& Add(std::optional<std::string> v) {
    values_.push_back(std::move(v));
    return *this;
  }
  Params& Add(const std::string& v) { return Add(std::optional<std::string>(v)); }
  Params& Add(const char* v) { return Add(std::optional<std::string>(v)); }
  Params& Add(int64_t v) { return Add(std::optional<std::string>(std::to_string(v))); }
  Params& Add(int v) { return Add(static_cast<int64_t>(v)); }
  Params& Add(double v) { return Add(std::optional<std::string>(DoubleText(v))); }
  Params& Add(const Cell& v) {
    if (const auto* i = std::get_if<int64_t>(&v)) return Add(*i);
    if (const auto* d = std::get_if<double>(&v)) return Add(*d);
    if (const auto* t = std::get_if<std::string>(&v)) return Add(*t);
    return Add(std::optional<std::string>());
  }
  Params& AddAll(const std::vector<Cell>& cells) {
    for (const Cell& cell : cells) Add(cell);
    return *this;
  }
  template <typename T>
  Params& Add(const std::optional<T>& v) {
    if (!v) return Add(std::optional<std::string>());
    return Add(*v);
  }
  std::vector<const char*> Pointers() const {
    std::vector<const char*> out;
    for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
    return out;
  }
  int size() const { return static_cast<int>(values_.size()); }

 private:
  // Exact: 17 significant digits read back as the same double; PostgreSQL's names for the rest.
  static std::string DoubleText(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
  }
  std::vector<std::optional<std::string>> values_;
};

// A result, cleared when it goes.
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// Column readers of row `r` of `res`: text as it is, numbers parsed, NULL as nullopt.
bool IsNull(const PGresult* res, int r, int c);
std::string Text(const PGresult* res, int r, int c);
int64_t Int(const PGresult* res, int r, int c);
double Double(const PGresult* res, int r, int c);
std::optional<double> OptDouble(const PGresult* res, int r, int c);
std::optional<int64_t> OptInt(const PGresult* res, int r, int c);

// The rows of a query of (trial_number, time, kind, message), as rows.h reads them.
std::vector<EventRecord> EventsOf(const PGresult* res);

// Row `r` of a result, for the rows both backends read alike (rows.h).
class Row final : public RowView {
 public:
  Row(const PGresult* res, int r) : res_(res), r_(r) {}
  std::optional<std::string> TextAt(int column) const override {
    if (IsNull(res_, r_, column)) return std::nullopt;
    return Text(res_, r_, column);
  }
  std::optional<int64_t> IntAt(int column) const override { return OptInt(res_, r_, column); }
  std::optional<double> DoubleAt(int column) const override { return OptDouble(res_, r_, column); }

 private:
  const PGresult* res_;
  int r_;
};

}  // namespace hyperpack::storage::pg
