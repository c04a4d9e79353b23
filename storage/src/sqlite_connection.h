// The SQLite backend's connection (sqlite_storage.h's SqliteStorage::Connection) and the small
// pieces its queries share: a cached statement that binds and steps, and column readers. Private
// to storage/src: sqlite_storage.cc (the records) and sqlite_connection.cc (opening, the schema's
// migrations, transactions) include it.
// Thread-safety: a connection belongs to one thread, as Storage's handles do.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rows.h"
#include "sqlite_storage.h"
#include "transaction.h"

namespace hyperpack::storage {
namespace sqlite {

// Binds arguments and steps a cached statement; resets it when it goes out of scope so that the
// next user of the same SQL finds it clean.
class Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement& Bind(int64_t v) {
    sqlite3_bind_int64(stmt_, ++index_, v);
    return *this;
  }
  Statement& Bind(int v) { return Bind(static_cast<int64_t>(v)); }
  Statement& Bind(double v) {
    sqlite3_bind_double(stmt_, ++index_, v);
    return *this;
  }
  Statement& Bind(const std::string& v) {
    sqlite3_bind_text(stmt_, ++index_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  template <typename T>
  Statement& Bind(const std::optional<T>& v) {
    if (v) return Bind(*v);
    sqlite3_bind_null(stmt_, ++index_);
    return *this;
  }
  Statement& Bind(const Cell& v) {
    if (const auto* i = std::get_if<int64_t>(&v)) return Bind(*i);
    if (const auto* d = std::get_if<double>(&v)) return Bind(*d);
    if (const auto* t = std::get_if<std::string>(&v)) return Bind(*t);
    sqlite3_bind_null(stmt_, ++index_);
    return *this;
  }
  Statement& BindAll(const std::vector<Cell>& cells) {
    for (const Cell& cell : cells) Bind(cell);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_;
  int index_ = 0;
};

inline std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}
inline std::optional<double> OptDouble(sqlite3_stmt* s, int col) {
  if (sqlite3_column_type(s, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, col);
}
inline std::optional<int64_t> OptInt(sqlite3_stmt* s, int col) {
  if (sqlite3_column_type(s, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(s, col);
}

// The current row of a stepped statement, for the rows both backends read alike (rows.h).
class Row final : public RowView {
 public:
  explicit Row(sqlite3_stmt* stmt) : stmt_(stmt) {}
  std::optional<std::string> TextAt(int column) const override {
    if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
    return Text(stmt_, column);
  }
  std::optional<int64_t> IntAt(int column) const override { return OptInt(stmt_, column); }
  std::optional<double> DoubleAt(int column) const override { return OptDouble(stmt_, column); }

 private:
  sqlite3_stmt* stmt_;
};

}  // namespace sqlite

// The SQLite connection behind a Storage: the handle, its cached statements and the transaction
// in progress. Storage's methods are its only users.
class SqliteStorage::Connection {
 public:
  Connection(sqlite3* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~Connection() {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close_v2(handle_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* handle() const { return handle_; }
  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }
  void set_schema_version(int version) { schema_version_ = version; }

  Status Exec(const std::string& sql);
  // See Storage::Transaction.
  Status Transaction(const std::function<Status()>& body);
  Status Migrate(const std::vector<Migration>& migrations);
  // A prepared statement, compiled once per connection and reset for reuse.
  Result<sqlite3_stmt*> Prepare(const std::string& sql);
  Status Error(const std::string& what) const;

 private:
  sqlite3* handle_;
  std::string path_;
  int schema_version_ = 0;
  TransactionDepth transaction_;
  std::vector<std::pair<std::string, sqlite3_stmt*>> statements_;
};

}  // namespace hyperpack::storage
