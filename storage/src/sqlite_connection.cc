#include <filesystem>

#include "hyperpack/text.h"
#include "schema.h"
#include "sqlite_connection.h"
#include "statements.h"

namespace hyperpack::storage {

Status SqliteStorage::Connection::Error(const std::string& what) const {
  return Status::Io(what, " (", path_, "): ", sqlite3_errmsg(handle_));
}

Result<std::unique_ptr<Storage>> OpenSqlite(const std::string& path,
                                            const Storage::Options& options) {
  if (options.read_only && !std::filesystem::exists(path))
    return Status::NotFound("no hyperpack database at ", path,
                            " (give --storage PATH or set HYPERPACK_STORAGE)");
  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Status::Io("cannot open database ", path, ": ", msg);
  }
  std::unique_ptr<SqliteStorage> storage(
      new SqliteStorage(std::make_unique<SqliteStorage::Connection>(db, path)));
  SqliteStorage::Connection& connection = *storage->db_;
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  sqlite3_extended_result_codes(db, 1);
  if (!options.read_only) {
    // WAL lets readers in other processes run while we write; NORMAL sync is durable at each
    // checkpoint and never corrupts (a power cut can lose the last transactions, not the file).
    HP_RETURN_IF_ERROR(connection.Exec("PRAGMA journal_mode=WAL"));
    HP_RETURN_IF_ERROR(connection.Exec("PRAGMA synchronous=NORMAL"));
  }
  HP_RETURN_IF_ERROR(connection.Exec("PRAGMA foreign_keys=ON"));
  const auto& migrations = options.migrations ? *options.migrations : DefaultMigrations();
  if (options.read_only) {
    // A reader never changes the file; it only checks it can understand it.
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql::kSchemaVersion, -1, &stmt, nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return Status::Io(path, " is not a hyperpack database: ", sqlite3_errmsg(db));
    }
    if (sqlite3_step(stmt) == SQLITE_ROW)
      connection.set_schema_version(sqlite3_column_int(stmt, 0));
    sqlite3_finalize(stmt);
    int latest = migrations.empty() ? 0 : migrations.back().version;
    if (connection.schema_version() != latest)
      return Status::FailedPrecondition(
          path, " has schema version ", connection.schema_version(),
          " but this hyperpack reads version ", latest,
          connection.schema_version() < latest
              ? "; the next command that writes to it (hyperpack run, create, ask) upgrades it"
              : "");
    return std::unique_ptr<Storage>(std::move(storage));
  }
  HP_RETURN_IF_ERROR(connection.Migrate(migrations));
  return std::unique_ptr<Storage>(std::move(storage));
}

Status SqliteStorage::Connection::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(handle_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Io("database ", path_, ": ", msg);
  }
  return Status::Ok();
}

Status SqliteStorage::Connection::Migrate(const std::vector<Migration>& migrations) {
  return Transaction([&]() -> Status {
    HP_RETURN_IF_ERROR(
        Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(handle_, sql::kSchemaVersionOrZero, -1, &stmt, nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return Error("reading the schema version");
    }
    int version = 0;
    if (sqlite3_step(stmt) == SQLITE_ROW) version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    int latest = migrations.empty() ? 0 : migrations.back().version;
    if (version > latest)
      return Status::FailedPrecondition(path_, " was written by a newer hyperpack (schema ",
                                        version, "; this one knows up to ", latest,
                                        "); upgrade hyperpack to open it");
    for (const Migration& m : migrations) {
      if (m.version <= version) continue;
      HP_RETURN_IF_ERROR(Exec(m.sql).WithContext(StrCat("migrating to schema ", m.version)));
      HP_RETURN_IF_ERROR(
          Exec(StrCat("INSERT INTO schema_version(version) VALUES (", m.version, ")")));
      version = m.version;
    }
    schema_version_ = version;
    return Status::Ok();
  });
}

Status SqliteStorage::Connection::Transaction(const std::function<Status()>& body) {
  // IMMEDIATE takes the write lock up front, so a busy database waits (busy timeout) here rather
  // than failing half way through.
  return transaction_.Run(
      body, [this] { return Exec("BEGIN IMMEDIATE"); }, [this] { return Exec("COMMIT"); },
      [this] { (void)Exec("ROLLBACK"); });
}

Result<sqlite3_stmt*> SqliteStorage::Connection::Prepare(const std::string& sql) {
  for (auto& [text, stmt] : statements_)
    if (text == sql) return stmt;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(handle_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error("preparing '" + sql.substr(0, 40) + "...'");
  }
  statements_.emplace_back(sql, stmt);
  return stmt;
}

}  // namespace hyperpack::storage
