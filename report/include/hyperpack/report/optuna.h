// Optuna's storages, both ways: a hyperpack study written as an Optuna database that the user's
// Optuna release opens as it is (`hyperpack export --format optuna-sqlite`), and an Optuna
// storage read back (`hyperpack import`): an RDB SQLite file of Optuna 3.0 to 5.x's schema, or a
// JournalStorage file.
// Thread-safety: each call opens its own files; calls on different files may run side by side.
#pragma once

#include <string>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/optuna.h"

namespace hyperpack::report {

// Which Optuna releases an exported database opens in: each checks the schema's revision and
// refuses (or asks to upgrade) any other.
enum class OptunaSchema {
  kOptuna32,  // Optuna 3.2 and later, 4.x and 5.x among them (alembic revision v3.2.0.a)
  kOptuna30,  // Optuna 3.0 and 3.1, Debian bookworm's (v3.0.0.d)
};
// --optuna's value: the release that will open the database ("3.1", "4.6", "5.0.0", "5"). Errors
// say what a release looks like, and refuse those before 3.0.
Result<OptunaSchema> ParseOptunaRelease(const std::string& release);
const char* OptunaSchemaReleases(OptunaSchema schema);  // "Optuna 3.2 and later", ...

// Every trial of study `name` as a new Optuna SQLite database at `path` (which must not exist) in
// `schema`, for optuna.load_study, `optuna best-trial` and optuna-dashboard. See
// report/src/optuna_export.cc for what maps onto what.
Status ExportOptunaSqlite(storage::Storage& db, const std::string& name, const std::string& path,
                          OptunaSchema schema = OptunaSchema::kOptuna32);

// Every study an Optuna storage holds: `path` (or sqlite:///path) is an RDB SQLite database of
// Optuna 3.0 to 5.x's schema (alembic revision v3.0.0.d or v3.2.0.a; an older one is refused,
// saying how to upgrade it) or a JournalStorage file (study::ParseOptunaJournal). The file is
// only read. Errors: kNotFound (no such file), kInvalidArgument (neither, or damaged: what and
// where), kIo.
Result<std::vector<study::OptunaStudy>> ReadOptunaStorage(const std::string& path);

}  // namespace hyperpack::report
